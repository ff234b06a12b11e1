"""Runs of simulated GRPO steps (:mod:`.step_model`) on A100 deployments, with telemetry sampled
like NVML, and the actuator sweeps of the authority stage.

Telemetry: every ``period_s`` each GPU reports the mean true power over the last
``sensor_window_s`` (A100 NVML: instantaneous, a 25 ms window) plus Gaussian noise, shrinking to
none at idle (:func:`~grpo_power.sim.power_model.noise_sd_w`). Everything this module produces
is simulated.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grpo_power.config import (
    ActuatorBounds,
    Config,
    WorkloadConfig,
)
from grpo_power.sim.calibration import Calibration
from grpo_power.sim.power_model import noise_sd_w
from grpo_power.sim.schedule import Conditions, Schedule
from grpo_power.sim.step_model import (
    ACTUATORS,
    ONLINE_ACTUATORS,
    StepModel,
    physics_for,
)


@dataclass
class StepRecord:
    """One simulated step: settings, output, energy and its telemetry samples.

    Attributes:
        start_s, end_s: step boundaries, s since run start.
        concurrency, max_new_tokens, num_generations, train_micro_batch, pause_s: the
            actuator values it ran with.
        tokens: completion tokens, all GPUs.
        energy_j: true energy of all GPUs over the step, J.
        sample_index: indices ``k`` of the samples taken during the step (time ``k * period_s``).
        power_w: readings, shape (samples, gpus), W.
        cap_w: the cap when the step began (what the controller decided under), W.
        sample_cap_w: the cap in force at each sample's time, shape (samples,), W: a schedule
            that lowers the cap within a step lowers it from then on, for every reading after.
    """

    start_s: float
    end_s: float
    concurrency: int
    max_new_tokens: int
    num_generations: int
    tokens: int
    energy_j: float
    sample_index: np.ndarray
    power_w: np.ndarray
    cap_w: float
    sample_cap_w: np.ndarray
    train_micro_batch: int = 0
    pause_s: int = 0

    def over_cap(self) -> int:
        """Per-GPU samples of this step above the cap at their time."""
        return int(np.count_nonzero(self.power_w > self.sample_cap_w[:, None]))


def clamp(value: int, bounds: ActuatorBounds) -> int:
    """``value`` clamped to an actuator's inclusive bounds."""
    return min(bounds.max, max(bounds.min, int(value)))


@dataclass
class SimRun:
    """A GRPO run in the simulator: actuator state, clock, telemetry and the controller's view.

    Args:
        model: phase plans of the deployment (with or without a power limit).
        workload: actuator defaults and bounds.
        period_s: telemetry sample period, s.
        window_s: what an observation covers, s (``arms.observation_window_s``).
        cap_w: the power cap, W (the deployment's: a schedule scales it per segment).
        seed: seed of noise and phase-time jitter.
        jitter: relative standard deviation of each phase's duration per step.
        num_generations: group size of the run (fixed for a run, as in TRL).
        record: keep every step (for evaluation) or only the recent window (training).
        schedule: conditions changing over the run (cap, completion length, derating); None =
            constant, completions running to max new tokens.
    """

    model: StepModel
    workload: WorkloadConfig
    period_s: float
    window_s: float
    cap_w: float
    seed: int
    jitter: float = 0.0
    num_generations: int | None = None
    record: bool = False
    schedule: Schedule | None = None
    t_s: float = 0.0
    steps: list[StepRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.base_cap_w = self.cap_w
        self.concurrency = self.workload.concurrency
        self.max_new_tokens = self.workload.max_new_tokens
        self.train_micro_batch = self.workload.train_micro_batch
        self.pause_s = self.workload.pause_s
        if self.num_generations is None:
            self.num_generations = self.workload.num_generations
        self.step_count = 0
        self.samples_run = 0  # per-GPU samples since the run began
        self.samples_over_run = 0  # of them, those above the cap they were taken under
        self.last_tokens_per_s = 0.0  # completion tokens per second of the last step
        self.last_power_w = self.model.physics.idle_w
        self._recent: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self._next_sample = 0

    def recent_power_w(self) -> np.ndarray:
        """Per-GPU readings of the last ``window_s`` seconds, pooled over GPUs, W."""
        since = self.t_s - self.window_s
        while self._recent and self._recent[0][0][-1] * self.period_s < since:
            self._recent.popleft()
        if not self._recent:
            return np.empty(0)
        index = np.concatenate([r[0] for r in self._recent])
        power = np.concatenate([r[1] for r in self._recent])
        return power[index * self.period_s >= since].ravel()

    def apply(
        self,
        concurrency: int | None = None,
        max_new_tokens: int | None = None,
        train_micro_batch: int | None = None,
        pause_s: int | None = None,
    ) -> None:
        """Set the actuators given (None: unchanged), clamped to their bounds."""
        requested = {
            "concurrency": concurrency,
            "max_new_tokens": max_new_tokens,
            "train_micro_batch": train_micro_batch,
            "pause_s": pause_s,
        }
        for name in ONLINE_ACTUATORS:
            if requested[name] is not None:
                bounds = getattr(self.workload, f"{name}_bounds")
                setattr(self, name, clamp(requested[name], bounds))

    def step(
        self,
        concurrency: int | None = None,
        max_new_tokens: int | None = None,
        train_micro_batch: int | None = None,
        pause_s: int | None = None,
    ) -> StepRecord:
        """Set the actuators given (None: unchanged) and run one GRPO step."""
        self.apply(concurrency, max_new_tokens, train_micro_batch, pause_s)
        conditions = self.conditions()
        plan = self.model.plan(
            self.concurrency,
            self.max_new_tokens,
            int(self.num_generations),
            conditions.completion_tokens,
            self.train_micro_batch,
            self.pause_s,
        )
        duration_s, power_w = plan.duration_s, plan.power_w
        if conditions.slowdown != 1.0:
            idle_w = self.model.physics.idle_w
            duration_s = duration_s * conditions.slowdown
            power_w = idle_w + (power_w - idle_w) / conditions.slowdown
        if self.jitter > 0:
            duration_s = duration_s * np.clip(
                self.rng.normal(1.0, self.jitter, len(duration_s)), 0.5, 1.5
            )
        start_s = self.t_s
        bounds = start_s + np.cumsum(duration_s)
        end_s = float(bounds[-1])
        first = self._next_sample
        last = max(first, math.ceil(end_s / self.period_s - 1e-9))
        index = np.arange(first, last)
        power = self._readings(index * self.period_s, start_s, bounds, power_w)
        record = StepRecord(
            start_s=start_s,
            end_s=end_s,
            concurrency=self.concurrency,
            max_new_tokens=self.max_new_tokens,
            num_generations=int(self.num_generations),
            tokens=plan.tokens,
            energy_j=float(duration_s @ power_w) * self.model.physics.gpus,
            sample_index=index,
            power_w=power,
            cap_w=self.cap_w,
            sample_cap_w=self._caps_at(index * self.period_s),
            train_micro_batch=self.train_micro_batch,
            pause_s=self.pause_s,
        )
        self.t_s, self._next_sample = end_s, last
        self.step_count += 1
        self.samples_run += record.power_w.size
        self.samples_over_run += record.over_cap()
        self.last_tokens_per_s = plan.tokens / (end_s - start_s)
        self.last_power_w = float(power_w[-1])
        if len(index):
            self._recent.append((index, power))
        if self.record:
            self.steps.append(record)
        return record

    def _caps_at(self, t_s: np.ndarray) -> np.ndarray:
        """The cap in force at each of the times ``t_s``, W."""
        if self.schedule is None:
            return np.full(len(t_s), self.cap_w)
        return self.base_cap_w * self.schedule.cap_fracs(t_s)

    def conditions(self) -> Conditions:
        """The schedule's conditions now (also sets the cap the next step runs under)."""
        if self.schedule is None:
            return _CONSTANT
        conditions = self.schedule.at(self.t_s)
        self.cap_w = self.base_cap_w * conditions.cap_frac
        return conditions

    def _readings(
        self, t_s: np.ndarray, start_s: float, bounds: np.ndarray, power_w: np.ndarray
    ) -> np.ndarray:
        """Noisy sensor readings at ``t_s`` of every GPU, shape (len(t_s), gpus), W."""
        physics = self.model.physics
        gpus = physics.gpus
        if len(t_s) == 0:
            return np.empty((0, gpus), dtype=np.float32)
        # Segments with one before the step at the previous step's last power.
        seg_start = np.concatenate([[start_s - 1e6], [start_s], bounds[:-1]])
        seg_power = np.concatenate([[self.last_power_w], power_w])
        window_s = physics.sensor_window_s
        if window_s > 0:
            seg_energy = np.concatenate([[0.0], np.cumsum(np.diff(seg_start) * seg_power[:-1])])

            def energy(at: np.ndarray) -> np.ndarray:
                i = np.searchsorted(seg_start, at, side="right") - 1
                return seg_energy[i] + seg_power[i] * (at - seg_start[i])

            true_w = (energy(t_s) - energy(t_s - window_s)) / window_s
        else:
            true_w = seg_power[np.searchsorted(seg_start, t_s, side="right") - 1]
        readings = self.rng.standard_normal((len(t_s), gpus), dtype=np.float32)
        sd_w = noise_sd_w(true_w, physics.idle_w, physics.model.params.noise_w)
        readings *= sd_w.astype(np.float32)[:, None]
        readings += true_w.astype(np.float32)[:, None]
        np.clip(readings, physics.idle_w, physics.model.peak_w, out=readings)
        return readings


_CONSTANT = Conditions()


def sweep_deployment(
    calibration: Calibration, deployment: str, config: Config, seed: int
) -> list[dict[str, Any]]:
    """Run each actuator of one deployment at each of its levels, the others at their defaults.

    Each level runs ``sim.sweep_s`` simulated seconds (and ``sim.sweep_min_steps`` steps at
    least) with telemetry. Rows: deployment,
    actuator, level, mean per-GPU power (W, over every sample), throughput, violation rate,
    and whether the level is the actuator's default (all simulated).
    """
    physics = physics_for(calibration, deployment, config)
    w = config.workload
    levels = {name: getattr(w, f"{name}_bounds").levels() for name in ONLINE_ACTUATORS}
    levels["num_generations"] = sorted(set(config.sim.group_sizes))
    defaults = {name: getattr(w, name) for name in ACTUATORS}
    model = StepModel(physics, w, config.sim.prompt_tokens)
    rows = []
    for actuator in ACTUATORS:
        for level in levels[actuator]:
            settings = {**defaults, actuator: level}
            run = SimRun(
                model,
                w,
                config.telemetry.period_s,
                config.arms.observation_window_s,
                config.cap_w,
                seed=seed,
                jitter=config.sim.step_jitter,
                num_generations=settings["num_generations"],
                record=True,
            )
            run.apply(**{name: settings[name] for name in ONLINE_ACTUATORS})
            while run.t_s < config.sim.sweep_s or run.step_count < config.sim.sweep_min_steps:
                run.step()
            power = np.concatenate([s.power_w for s in run.steps])
            tokens = sum(s.tokens for s in run.steps)
            rows.append(
                {
                    "deployment": deployment,
                    "gpus": physics.gpus,
                    "actuator": actuator,
                    "level": level,
                    "default": level == defaults[actuator],
                    "mean_power_w": float(power.mean()),
                    "tokens_per_s": tokens / run.t_s,
                    "violation_rate": float((power > config.cap_w).mean()),
                    "steps": len(run.steps),
                    "nameplate_w": physics.model.gpu.nameplate_w,
                    "idle_w": physics.idle_w,
                    "data": "simulated",
                }
            )
    return rows
