"""The tokens a trainer's step produces, counted as the simulator counts them.

A controller trained in the simulator (:mod:`grpo_power.control.ppo`) observes tokens per second
as the completion tokens a GRPO step generates over its wall time. The stock ``trl.GRPOTrainer``
counts ``num_input_tokens_seen`` as prompt and completion tokens together, so
:class:`GeneratedTokens` counts the completion tokens themselves: it wraps the trainer's
``_generate_and_score_completions`` (TRL's GRPO trainers, the project's
:class:`~grpo_power.workload.trainer.PowerAwareGRPOTrainer` included) and adds up the completion
mask of each batch generated for training, on this process. A trainer without it (a plain HF
``Trainer``, ``SFTTrainer``) generates nothing: its tokens are the input tokens it counts.
``PowerCapCallback`` (:mod:`grpo_power.callbacks.cap`) takes the count at every step.

A GRPO trainer need not generate at every step: TRL generates a batch every
``steps_per_generation x num_iterations`` micro-steps and trains on it until then, so with
``num_iterations=2`` (or a ``generation_batch_size`` of several steps' batches) every other step
generates nothing. :func:`generation_cycle_steps` says how many optimizer steps one generation
serves, the span over which ``PowerCapCallback`` counts tokens per second.
"""

from __future__ import annotations

import math
from typing import Any

GENERATE = "_generate_and_score_completions"  # TRL's GRPO trainers generate a batch here


def generation_cycle_steps(trainer: Any) -> int:
    """The optimizer steps one generation of ``trainer`` serves: TRL's GRPO trainers generate
    every ``args.steps_per_generation x num_iterations`` micro-steps, an optimizer step being
    ``args.gradient_accumulation_steps`` of them (rounded up where they do not divide, so that
    the span holds a generation); 1 for a trainer that lacks these (one that does not generate,
    or generates at every step)."""
    args = getattr(trainer, "args", None)
    micro_steps = getattr(args, "steps_per_generation", None)
    if not isinstance(micro_steps, int) or micro_steps < 1:
        return 1
    iterations = getattr(trainer, "num_iterations", 1)
    accumulation = getattr(args, "gradient_accumulation_steps", 1)
    return max(1, math.ceil(micro_steps * max(1, int(iterations)) / max(1, int(accumulation))))


def generated_tokens(batch: dict[str, Any], trainer: Any) -> int:
    """The completion tokens a GRPO trainer's generated ``batch`` holds: its completion mask's
    (1 up to and with each completion's end of sequence), and where the trainer masks out
    truncated completions (TRL's ``mask_truncated_completions``: their mask is all 0, though
    they were generated, to max new tokens) the tokens of those rows that are not padding."""
    mask = batch["completion_mask"]
    count = int(mask.sum())
    ids = batch.get("completion_ids")
    if not getattr(trainer, "mask_truncated_completions", False) or ids is None:
        return count
    masked = mask.sum(dim=1) == 0
    if not bool(masked.any()):
        return count
    tokenizer = getattr(trainer, "_tokenizer", None) or getattr(trainer, "processing_class", None)
    pad = getattr(tokenizer, "pad_token_id", None)
    rows = ids[masked]
    return count + int(rows.numel() if pad is None else (rows != pad).sum())


class GeneratedTokens:
    """Counts the completion tokens ``trainer`` generates for training on this process (where
    it is a GRPO trainer: :attr:`available`), until :meth:`remove`."""

    def __init__(self, trainer: Any) -> None:
        self._trainer = trainer
        self.count = 0
        generate = getattr(trainer, GENERATE, None)
        self.available = callable(generate)
        if not self.available:
            return

        def counted(*args: Any, **kwargs: Any) -> Any:
            batch = generate(*args, **kwargs)
            mask = batch.get("completion_mask") if isinstance(batch, dict) else None
            if mask is not None and trainer.model.training:  # not an evaluation's batch
                self.count += generated_tokens(batch, trainer)
            return batch

        setattr(trainer, GENERATE, counted)  # an instance attribute, deleted by remove()

    def take(self) -> int:
        """The tokens counted since the last call."""
        count, self.count = self.count, 0
        return count

    def remove(self) -> None:
        """Give the trainer its own method back."""
        if self.available and GENERATE in vars(self._trainer):
            delattr(self._trainer, GENERATE)
