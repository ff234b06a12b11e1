"""TRL's GRPOTrainer with a live generation-concurrency actuator and phase accounting.

TRL has no concurrency knob: :class:`PowerAwareGRPOTrainer` overrides the private
``_generate_single_turn`` (hence TRL is pinned in pyproject.toml) to generate each step's
sequences in chunks of :attr:`concurrency`, read on every call. It also announces each phase to
the workload signal (so the simulated GPU follows the real run), times the phases and counts
prompt and completion tokens exactly from the token ids.

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


@dataclass
class StepStats:
    """What one GRPO step did: phase times (s), generate calls, tokens and mean reward."""

    generate_s: float = 0.0
    score_s: float = 0.0
    train_s: float = 0.0
    generate_calls: int = 0
    sequences: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    max_completion_tokens: int = 0
    reward_mean: float = float("nan")


class PowerAwareGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose generation runs in chunks of ``concurrency`` sequences.

    Args:
        signal: where phases are announced (drives the simulated GPU).
        concurrency: initial generation concurrency, sequences per generate call.
        *args, **kwargs: passed to :class:`trl.GRPOTrainer`.
    """

    def __init__(self, *args: Any, signal: WorkloadSignal, concurrency: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.use_vllm:
            raise ValueError(
                "the concurrency actuator drives the transformers generation path; "
                "vLLM's max_num_seqs is a later step"
            )
        self.signal = signal
        self.concurrency = concurrency
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
            self.signal.set("train", self.args.per_device_train_batch_size)  # the micro-batch
            self._train_started_s = time.perf_counter()
        return inputs

    def training_step(
        self, model: Any, inputs: Any, num_items_in_batch: Any = None
    ) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self._train_started_s is not None:
            self.step_stats.train_s += time.perf_counter() - self._train_started_s
            self._train_started_s = None
        self.signal.set("idle")
        return loss
