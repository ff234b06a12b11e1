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
"""

from __future__ import annotations

from typing import Any

GENERATE = "_generate_and_score_completions"  # TRL's GRPO trainers generate a batch here


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
                self.count += int(mask.sum())
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
