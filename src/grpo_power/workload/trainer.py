"""TRL's GRPOTrainer with live generation-concurrency and training-chunk actuators, and phase
accounting.

TRL has no concurrency knob: :class:`PowerAwareGRPOTrainer` overrides the private
``_generate_single_turn`` (hence TRL is pinned in pyproject.toml) to generate each step's
sequences in chunks of :attr:`concurrency`, read on every call. It also announces each phase to
the workload signal (so the simulated GPU follows the real run), times the phases and counts
prompt and completion tokens exactly from the token ids.

Training occupancy: TRL fixes its micro-batch (``per_device_train_batch_size``) when it builds
the dataloader, so the runner hands the whole step's sequences to one ``training_step``
(gradient accumulation 1) and :meth:`compute_loss` trains them in chunks of
:attr:`train_micro_batch`, read on every step: each chunk is a forward and a backward (gradients
accumulate in the parameters, synchronised across processes on the last one only), its loss
weighted by its share of the step's normaliser (:data:`CHUNK_WEIGHT`), so the step's gradient is
the unchunked one whatever the chunk size; the last chunk holds the remainder when the size
does not divide the step's sequences.

A chunk is announced as decode at the chunk's occupancy (sequences) from start to end, its
prefill included: on the CPU the prefill's share of a chunk depends on the machine's load (from a
few percent to half under contention) and says nothing about an A100's, so prefill power is left
to the simulator stage, which models it with GPU timings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from trl import GRPOTrainer

from grpo_power.telemetry.signals import WorkloadSignal

# How a chunk's loss (TRL's ``_compute_loss`` on the chunk alone) is weighted so that the chunks'
# sum is the whole batch's loss, per TRL loss type: "one" when TRL already normalises by the
# whole generation batch's tokens (``num_items_in_batch``), "sequences" for a mean over
# sequences, "tokens" for a mean over completion tokens.
CHUNK_WEIGHT = {
    "dapo": "one",
    "cispo": "one",
    "vespo": "one",
    "grpo": "sequences",
    "sapo": "sequences",
    "dr_grpo": "sequences",
    "luspo": "sequences",
    "bnpo": "tokens",
}


@dataclass
class StepStats:
    """What one GRPO step did: phase times (s), generate calls, tokens and mean reward."""

    generate_s: float = 0.0
    score_s: float = 0.0
    train_s: float = 0.0
    generate_calls: int = 0
    train_chunks: int = 0  # forward/backward chunks of the training pass
    sequences: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    max_completion_tokens: int = 0
    reward_mean: float = float("nan")


class PowerAwareGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose generation runs in chunks of ``concurrency`` sequences and whose
    training pass runs in chunks of ``train_micro_batch`` sequences.

    Args:
        signal: where phases are announced (drives the simulated GPU).
        concurrency: initial generation concurrency, sequences per generate call.
        train_micro_batch: initial training chunk, sequences per forward/backward (None: each
            batch TRL hands to ``training_step`` is trained whole, and the chunk is no actuator).
        *args, **kwargs: passed to :class:`trl.GRPOTrainer`.

    Raises:
        ValueError: vLLM generation; with a training chunk, a loss type or a setting whose loss
            is not a sum over chunks (top-entropy masking, the entropy bonus).
    """

    def __init__(
        self,
        *args: Any,
        signal: WorkloadSignal,
        concurrency: int,
        train_micro_batch: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if self.use_vllm:
            raise ValueError(
                "the concurrency actuator drives the transformers generation path; "
                "vLLM's max_num_seqs is a later step"
            )
        chunked = train_micro_batch is not None
        if chunked and self.loss_type not in CHUNK_WEIGHT:
            raise ValueError(
                f"loss_type {self.loss_type!r}: the training-chunk actuator knows how to split "
                f"{sorted(CHUNK_WEIGHT)}"
            )
        if chunked and (self.top_entropy_quantile < 1.0 or self._entropy_bonus_enabled):
            raise ValueError(
                "top_entropy_quantile < 1 and entropy_coef are per-chunk statistics: the "
                "training-chunk actuator would change the gradient; leave them at their defaults"
            )
        self.signal = signal
        self.concurrency = concurrency
        self.train_micro_batch = train_micro_batch
        self.step_stats = StepStats()
        self._train_started_s: float | None = None

    def _generate_single_turn(
        self,
        prompt_ids: list[list[int]],
        images: Any,
        multimodal_fields: dict,
        num_generations: int,
        has_tool_images: bool = False,
    ) -> tuple[list[list[int]], Any]:
        if images is not None or multimodal_fields:
            raise ValueError("multimodal prompts are not supported by the concurrency actuator")
        started_s = time.perf_counter()
        chunk_size = max(1, int(self.concurrency))  # read on every call: a controller may change it
        completion_ids: list[list[int]] = []
        for first in range(0, len(prompt_ids), chunk_size):
            chunk = prompt_ids[first : first + chunk_size]
            self.signal.set("generate", len(chunk))
            ids, _ = super()._generate_single_turn(
                chunk, None, {}, num_generations, has_tool_images
            )
            completion_ids.extend(ids)
            self.step_stats.generate_calls += 1
        self.signal.set("score")
        stats = self.step_stats
        stats.generate_s += time.perf_counter() - started_s
        stats.sequences += len(completion_ids)
        stats.prompt_tokens += sum(len(p) for p in prompt_ids)
        stats.completion_tokens += sum(len(c) for c in completion_ids)
        stats.max_completion_tokens = max([stats.max_completion_tokens, *map(len, completion_ids)])
        return completion_ids, None

    def _calculate_rewards(
        self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
    ) -> torch.Tensor:
        started_s = time.perf_counter()
        self.signal.set("score")
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        self.step_stats.score_s += time.perf_counter() - started_s
        self.step_stats.reward_mean = float(torch.nansum(rewards_per_func, dim=1).mean())
        return rewards_per_func

    def _prepare_inputs(self, generation_batch: Any) -> Any:
        inputs = super()._prepare_inputs(generation_batch)  # generation and scoring happen here
        if self.model.training:
            self._train_started_s = time.perf_counter()
        return inputs

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> torch.Tensor:
        """The batch's loss, trained in chunks of :attr:`train_micro_batch` (see the module
        docstring): every chunk but the last is backpropagated here, the last one's loss is
        returned (plus the others' values, detached) for the trainer's own backward."""
        if not model.training:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        size = int(inputs["completion_ids"].size(0))
        wanted = size if self.train_micro_batch is None else int(self.train_micro_batch)
        chunk = max(1, min(wanted, size))  # read on every step
        spans = [(first, min(size, first + chunk)) for first in range(0, size, chunk)]
        done: torch.Tensor | float = 0.0
        for first, last in spans[:-1]:
            with self.accelerator.no_sync(model):
                loss = self._chunk_loss(model, inputs, first, last, num_items_in_batch)
                self.accelerator.backward(loss)
            done = done + loss.detach()
        return self._chunk_loss(model, inputs, *spans[-1], num_items_in_batch) + done

    def _chunk_loss(
        self, model: Any, inputs: dict[str, Any], first: int, last: int, num_items_in_batch: Any
    ) -> torch.Tensor:
        """TRL's loss of rows ``first:last`` of the batch, weighted by their share of the
        batch's normaliser (:data:`CHUNK_WEIGHT`)."""
        size = int(inputs["completion_ids"].size(0))
        self.signal.set("train", last - first)  # the training occupancy, sequences
        self.step_stats.train_chunks += 1
        part = _rows(inputs, first, last, size)
        loss = super().compute_loss(model, part, False, num_items_in_batch)
        weight_of = CHUNK_WEIGHT.get(self.loss_type, "one")  # one chunk: any loss type
        if weight_of == "sequences":
            return loss * ((last - first) / size)
        if weight_of == "tokens":
            mask = inputs["completion_mask"]
            if "tool_mask" in inputs:
                mask = mask * inputs["tool_mask"]
            return loss * (mask[first:last].sum().clamp(min=1.0) / mask.sum().clamp(min=1.0))
        return loss

    def training_step(
        self, model: Any, inputs: Any, num_items_in_batch: Any = None
    ) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self._train_started_s is not None:
            self.step_stats.train_s += time.perf_counter() - self._train_started_s
            self._train_started_s = None
        self.signal.set("idle")
        return loss


def _rows(inputs: dict[str, Any], first: int, last: int, size: int) -> dict[str, Any]:
    """Rows ``first:last`` of every per-sequence entry of a TRL batch (tensors and lists whose
    first dimension is the batch); scalars and other entries are shared."""
    part: dict[str, Any] = {}
    for key, value in inputs.items():
        per_row = (isinstance(value, torch.Tensor) and value.ndim > 0) or isinstance(value, list)
        part[key] = value[first:last] if per_row and len(value) == size else value
    return part
