"""The controller hook: before each step, observe, decide, actuate; after it, log the step.

Actuating includes the pause actuator: the GPUs idle for the step's ``pause_s`` (whole seconds)
at its start, inside the step's wall time (as the simulator counts it), before generation.

It also stops the run at the end of a step when a stop signal arrived (after a checkpoint) and,
after each checkpoint, writes the run's resume point (:mod:`grpo_power.workload.resume`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import torch
from accelerate.utils import broadcast_object_list
from tqdm import tqdm
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from grpo_power.control.contract import Action, Observation, RunViolations
from grpo_power.control.controllers import Controller, StatefulController
from grpo_power.telemetry.steplog import StepLogWriter
from grpo_power.workload.actuators import Actuators
from grpo_power.workload.resume import ResumePoint, RunPaths
from grpo_power.workload.trainer import PowerAwareGRPOTrainer, StepStats

PowerWindow = Callable[[float], np.ndarray]


class ControllerCallback(TrainerCallback):
    """Runs the controller between GRPO steps and writes the step log.

    Token and sequence counts in the log are summed over all processes of a multi-GPU run;
    generate calls and phase times are those of the main process (every rank acts alike).

    Args:
        trainer: the trainer whose actuators are driven.
        controller: decides the next step's actuator values (main process only).
        actuators: applies them, within bounds, on every process alike.
        recent_power_w: returns the per-GPU power samples of the last N seconds (None: no
            telemetry on this process).
        telemetry_age_s: returns the age of the newest sample, s (None: no telemetry here).
        staleness_s: telemetry older than this bypasses the controller for ``failsafe``.
        failsafe: the setting held while telemetry is stale (the fixed-safe one).
        cap_w: the power cap, W.
        window_s: how much recent telemetry an observation covers, s.
        step_log: where rows go (None on processes that do not write it).
        origin_s: ``time.monotonic()`` of the run's t = 0 (shared with the trace).
        show_progress: draw a progress bar (steps, tokens/s, mean power vs cap).
        stop_requested: returns the name of a stop signal received, or None (main process).
        paths: the run folder, where the resume point is written (None: no resume point).
    """

    def __init__(
        self,
        trainer: PowerAwareGRPOTrainer,
        controller: Controller,
        actuators: Actuators,
        recent_power_w: PowerWindow | None,
        telemetry_age_s: Callable[[], float] | None,
        staleness_s: float,
        failsafe: Action,
        cap_w: float,
        window_s: float,
        step_log: StepLogWriter | None,
        origin_s: float,
        show_progress: bool,
        stop_requested: Callable[[], str | None] = lambda: None,
        paths: RunPaths | None = None,
    ) -> None:
        self.trainer = trainer
        self.controller = controller
        self.actuators = actuators
        self.recent_power_w = recent_power_w
        self.telemetry_age_s = telemetry_age_s
        self.staleness_s = staleness_s
        self.failsafe = failsafe
        self.failsafe_steps = 0
        self.cap_w = cap_w
        self.window_s = window_s
        self.step_log = step_log
        self.origin_s = origin_s
        self.is_main = trainer.accelerator.is_main_process
        self.last_tokens_per_s = 0.0
        self.completion_tokens = 0
        self.violations = RunViolations()  # the run's samples, and those above the cap
        self.stop_requested = stop_requested
        self.stopped_by: str | None = None  # the signal the run stopped for
        self.paths = paths
        self._row: dict[str, Any] = {}
        self._bar = tqdm(
            total=trainer.args.max_steps,
            desc="GRPO steps",
            unit="step",
            disable=not (show_progress and self.is_main),
        )

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs to continue as if never stopped (JSON-like)."""
        controller = self.controller
        return {
            "completion_tokens": self.completion_tokens,
            "failsafe_steps": self.failsafe_steps,
            "last_tokens_per_s": self.last_tokens_per_s,
            "violations": asdict(self.violations),
            "actuators": self.actuators.values(),
            "controller": (
                controller.state_dict() if isinstance(controller, StatefulController) else {}
            ),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` of an earlier attempt."""
        self.completion_tokens = int(state["completion_tokens"])
        self.failsafe_steps = int(state["failsafe_steps"])
        self.last_tokens_per_s = float(state["last_tokens_per_s"])
        self.violations = RunViolations(**state.get("violations", {}))  # absent: older version
        self.actuators.apply(Action(**state["actuators"]))
        if isinstance(self.controller, StatefulController):
            self.controller.load_state_dict(state["controller"])

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._bar.update(state.global_step)  # a resumed run starts part-way

    def observe(self) -> Observation:
        """The observation the controller gets now."""
        # before this attempt's first step, no samples: they would be of loading, not of the
        # run, and the simulator a controller is trained in has none there either
        stepped = self.recent_power_w is not None and bool(self._row)  # a step has begun
        power_w = self.recent_power_w(self.window_s) if stepped else np.empty(0)
        values = self.actuators.values()
        return Observation.from_power(
            power_w,
            self.cap_w,
            values["concurrency"],
            values["max_new_tokens"],
            self.last_tokens_per_s,
            train_micro_batch=values.get("train_micro_batch", 0),
            pause_s=values.get("pause_s", 0),
            run=self.violations,
        )

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        start_s = time.monotonic() - self.origin_s  # before the decision: it is part of the step
        observation = self.observe()
        decided: list[Any] = [None, False, 0.0]  # action, fail-safe, telemetry age (s)
        if self.is_main:
            age_s = self.telemetry_age_s() if self.telemetry_age_s else 0.0
            stale = age_s > self.staleness_s  # a stale view must never push the GPU past its cap
            action = self.failsafe if stale else self.controller.decide(observation)
            decided = [action, stale, age_s]
        if self.trainer.accelerator.num_processes > 1:
            broadcast_object_list(decided, from_process=0)  # every rank acts alike
        action, stale, age_s = decided
        applied = self.actuators.apply(action or Action())
        self.failsafe_steps += int(stale)
        self.trainer.step_stats = StepStats()
        self._row = {
            "step": state.global_step + 1,
            "failsafe": stale,
            "telemetry_age_s": age_s,
            "start_s": start_s,
            "num_generations": self.trainer.num_generations,
            **applied.to_dict(),
            **observation.to_dict(),
        }
        pause_s = applied.applied["pause_s"] or 0
        if pause_s > 0:
            self.trainer.signal.set("idle")
            time.sleep(pause_s)

    def _global_stats(self) -> StepStats:
        """This step's stats with sequences and tokens summed over all processes."""
        stats = self.trainer.step_stats
        accelerator = self.trainer.accelerator
        if accelerator.num_processes == 1:
            return stats
        summed = ("sequences", "prompt_tokens", "completion_tokens")
        local = torch.tensor([getattr(stats, k) for k in summed], device=accelerator.device)
        totals = accelerator.reduce(local, reduction="sum").tolist()
        return replace(stats, **{k: int(v) for k, v in zip(summed, totals, strict=True)})

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        end_s = time.monotonic() - self.origin_s
        stats = self._global_stats()
        wall_s = max(1e-9, end_s - self._row["start_s"])
        self.last_tokens_per_s = stats.completion_tokens / wall_s
        # the step's samples, for the run's violation share (a step longer than the sampler's
        # history, 300 s by default, counts its last 300 s)
        if self.recent_power_w:
            self.violations.add(self.recent_power_w(wall_s), self.cap_w)
        self.completion_tokens += stats.completion_tokens
        row = {
            **self._row,
            "end_s": end_s,
            "tokens_per_s": self.last_tokens_per_s,
            **{k: getattr(stats, k) for k in StepStats.__dataclass_fields__},
        }
        if self.step_log is not None:
            self.step_log.write([row])
        if state.global_step >= state.max_steps:
            control.should_save = False  # a completed run deletes its checkpoints: skip the last
        else:
            self._stop_if_requested(control)
        power_w = self.recent_power_w(self.window_s) if self.recent_power_w else np.empty(0)
        self._bar.update(1)
        self._bar.set_postfix(
            tok_s=f"{self.last_tokens_per_s:.0f}",
            power=f"{power_w.mean():.0f}/{self.cap_w:.0f} W" if len(power_w) else "n/a",
        )

    def _stop_if_requested(self, control: Any) -> None:
        """After a stop signal, save a checkpoint now and end training (every rank alike)."""
        request = [self.stop_requested() if self.is_main else None]
        if self.trainer.accelerator.num_processes > 1:
            broadcast_object_list(request, from_process=0)
        if request[0] is not None:
            self.stopped_by = request[0]
            control.should_save = True
            control.should_training_stop = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The checkpoint of this step is complete: make it the run's resume point."""
        if self.is_main and self.paths is not None:
            ResumePoint(
                step=state.global_step,
                checkpoint=f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}",
                hook=self.state_dict(),
            ).save(self.paths)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._bar.close()
