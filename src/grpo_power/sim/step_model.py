"""One GRPO step of a simulated deployment: its phases, their durations and their power.

One GRPO step on each GPU (all GPUs of a deployment act alike, data parallel) is a sequence of
phases, each with a duration and a steady power:

0. a pause of ``pause_s`` seconds at idle power, when the controller asks for one (no tokens);
1. generation, in chunks of ``concurrency`` sequences: per chunk a host-side setup
   (``gen_call_s``), a prefill of all the chunk's prompt tokens at once, and ``max_new_tokens``
   decode steps of the whole chunk, or fewer when completions end earlier. Completions end at
   lengths spread about ``completion_tokens`` (the median end-of-sequence length, a calibrated
   parameter: lognormal with ``sim.completion_tokens_sigma``, truncated at max new tokens;
   random-weight models never end and run to the limit, docs/design.md section 8). The chunk's
   lengths are the expected order statistics of ``concurrency`` draws, so its decode runs until
   the longest ends, with fewer sequences in the batch as the shorter ones finish. A decode step
   takes ``decode_base_ms + decode_ms_per_seq * batch``;
2. scoring on the CPU (GPU near idle);
3. training in chunks of ``train_micro_batch`` sequences (an online actuator: the real trainer
   accumulates gradients over the chunks inside the step, so the gradient does not depend on
   it; the last chunk holds the remainder when the size does not divide the step's sequences),
   time proportional to tokens;
4. the optimizer step.

Power follows occupancy (:class:`~grpo_power.sim.power_model.GpuPowerModel`: the decode batch,
the prefill's tokens at once, the training micro-batch), never volume: group size and max new
tokens change how long phases last and how many there are, not their power. On a ZeRO-3
deployment every forward first all-gathers the weights the GPU does not hold (``gather_ms``); the
share ``gather_overlap`` of compute time hides prefetched gathers, the rest is exposed and the
GPU draws the communication power ``comm_frac`` meanwhile. A phase's power is the time-weighted
mix ``s * busy + (1 - s) * comm`` with ``s`` its compute share, so when gathers dominate (72B
decode), occupancy moves power much less. Nothing here states an actuator's authority: it follows
from these phase times.

A hardware power limit (the ``hwcap`` arm) holds a phase whose demand exceeds it just under the
limit and slows it by ``(demand / limit) ** exponent`` above idle (memory-bound decode barely
slows, compute-bound phases slow more).

:func:`expected_rates` gives a plan's long-run power, throughput and violation rate in closed
form. Everything this module produces is simulated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_power.config import (
    Config,
    GpuSpec,
    WorkloadConfig,
)
from grpo_power.config.gpu_models import NVML_AVERAGE_WINDOW_S
from grpo_power.config.workload import ONLINE_ACTUATORS as WORKLOAD_ONLINE_ACTUATORS
from grpo_power.sim.calibration import Calibration
from grpo_power.sim.defaults import draw
from grpo_power.sim.power_model import GpuPowerModel
from grpo_power.stats import normal_ppf, normal_sf

KINDS = ("host", "prefill", "decode", "score", "train", "optimizer", "pause")
HOST, PREFILL, DECODE, SCORE, TRAIN, OPTIMIZER, PAUSE = range(len(KINDS))
# Changeable between steps of a run (each has a default and ``<name>_bounds`` in the workload).
ONLINE_ACTUATORS = WORKLOAD_ONLINE_ACTUATORS
ACTUATORS = (*ONLINE_ACTUATORS, "num_generations")  # what the authority stage sweeps


@dataclass(frozen=True)
class Physics:
    """Resolved parameter values of one deployment (the calibration's values, or a draw).

    Attributes:
        name: deployment name.
        gpus: GPUs of the deployment (all act alike).
        power: GPU-level power parameters (``POWER_PARAMETERS``; fractions of nameplate - idle).
        times: phase-time parameters (``DEPLOYMENT_PARAMETERS``; ms, s as named).
        model: the occupancy power curve of one GPU.
        sensor_window_s: each reading averages the true power over this window, s: the
            configured sensor window (25 ms, the A100's instantaneous reading), or 1 s on parts
            whose NVML reports a 1 s average (`gpu.nvml_power: average_1s`, H100 and newer).
        completion_sigma: lognormal spread of completion lengths about the end-of-sequence
            length (``sim.completion_tokens_sigma``; 0: all end at the same length).
    """

    name: str
    gpus: int
    power: dict[str, float]
    times: dict[str, float]
    model: GpuPowerModel
    sensor_window_s: float
    completion_sigma: float = 0.0

    @property
    def idle_w(self) -> float:
        return self.model.gpu.idle_w

    @property
    def span_w(self) -> float:
        """Nameplate minus idle power, W (the unit of authority)."""
        return self.model.gpu.nameplate_w - self.model.gpu.idle_w


def physics_for(
    calibration: Calibration,
    deployment: str,
    config: Config,
    rng: np.random.Generator | None = None,
) -> Physics:
    """The physics of ``deployment``: nominal values, or a draw from the ranges (``rng``)."""
    times = draw(calibration.deployment_parameters(deployment), rng)
    power = draw(calibration.power, rng)
    gpu = GpuSpec(
        name=str(calibration.gpu.get("name", config.gpu.name)),
        nameplate_w=float(calibration.gpu["nameplate_w"]),
        idle_w=float(calibration.gpu["idle_w"]),
        nvml_power=calibration.gpu.get("nvml_power", config.gpu.nvml_power),
    )
    params = config.telemetry.simulated.model_copy(
        update={
            k: power[k]
            for k in (
                "decode_base_frac",
                "decode_slope_per_doubling",
                "train_base_frac",
                "train_slope_per_doubling",
                "score_frac",
                "noise_w",
            )
        }
    )
    return Physics(
        name=deployment,
        gpus=int(calibration.deployments[deployment]["gpus"]),
        power=power,
        times=times,
        model=GpuPowerModel(gpu, params),
        sensor_window_s=(
            NVML_AVERAGE_WINDOW_S
            if gpu.nvml_power == "average_1s"
            else config.telemetry.simulated.sensor_window_s
        ),
        completion_sigma=config.sim.completion_tokens_sigma,
    )


def expected_completion_lengths(
    batch: int, max_new_tokens: float, eos: float, sigma: float
) -> np.ndarray:
    """Expected lengths of ``batch`` completions, ascending, tokens (not rounded): the expected
    order statistics (Blom's plotting positions) of lognormal lengths with median ``eos`` and
    spread ``sigma``, each within [1, ``max_new_tokens``]. The simulator's completion-length
    model (:meth:`StepModel.completion_lengths`) and identify's fit of it (``sim/fit.py``)."""
    ranks = (np.arange(1, batch + 1) - 0.375) / (batch + 0.25)
    return np.clip(eos * np.exp(sigma * normal_ppf(ranks)), 1.0, max_new_tokens)


@dataclass(frozen=True)
class StepPlan:
    """The noise-free phases of one GRPO step on one GPU.

    Attributes:
        duration_s: duration of each phase segment, s.
        power_w: steady per-GPU power of each segment, W.
        kind: index into :data:`KINDS` of each segment.
        tokens: completion tokens of the step on all GPUs together.
        sequences: completions per GPU.
    """

    duration_s: np.ndarray
    power_w: np.ndarray
    kind: np.ndarray
    tokens: int
    sequences: int

    @property
    def step_s(self) -> float:
        return float(self.duration_s.sum())

    @property
    def energy_j(self) -> float:
        """Energy of one GPU over the step, J."""
        return float(self.duration_s @ self.power_w)


class StepModel:
    """Phase plans of GRPO steps on one deployment (cached: plans are deterministic).

    Args:
        physics: the deployment's parameter values.
        workload: step shape (prompts per step, group size, micro-batch).
        prompt_tokens: prompt length, tokens.
        power_limit_w: hardware power limit per GPU (hwcap), or None.
    """

    def __init__(
        self,
        physics: Physics,
        workload: WorkloadConfig,
        prompt_tokens: int,
        power_limit_w: float | None = None,
    ) -> None:
        self.physics = physics
        self.workload = workload
        self.prompt_tokens = prompt_tokens
        self.power_limit_w = power_limit_w
        # key: concurrency, max new tokens, end-of-sequence length (0: none), group size,
        # training chunk, pause
        self._cache: dict[tuple[int, ...], StepPlan] = {}

    def _mix(self, compute_s: float, gather_s: float, busy_frac: float) -> tuple[float, float]:
        """Duration (s) and power fraction of a phase with ``compute_s`` of compute and
        ``gather_s`` of parameter gathers, part of which compute hides."""
        exposed_s = max(0.0, gather_s - self.physics.times["gather_overlap"] * compute_s)
        duration_s = compute_s + exposed_s
        if duration_s <= 0:
            return 0.0, busy_frac
        share = compute_s / duration_s
        return duration_s, share * busy_frac + (1.0 - share) * self.physics.power["comm_frac"]

    def _power_w(self, frac: float) -> float:
        model = self.physics.model
        return min(model.peak_w, self.physics.idle_w + self.physics.span_w * frac)

    def completion_lengths(self, batch: int, max_new_tokens: int, eos: int | None) -> np.ndarray:
        """Expected lengths of the ``batch`` completions of one generate call, ascending, tokens:
        all ``max_new_tokens`` without an end-of-sequence length (``eos`` None), else the
        expected order statistics (Blom's plotting positions) of lognormal lengths with median
        ``eos`` and spread ``physics.completion_sigma``, each at most ``max_new_tokens``."""
        if eos is None:
            return np.full(batch, int(max_new_tokens))
        lengths = expected_completion_lengths(
            batch, max_new_tokens, eos, self.physics.completion_sigma
        )
        return np.rint(lengths).astype(int)

    def _chunk(self, lengths: np.ndarray) -> list[tuple[int, float, float]]:
        """(kind, duration s, power W) of one generation chunk whose completions end at
        ``lengths`` (ascending): a decode segment per length, the batch one smaller after each."""
        t = self.physics.times
        gather_s = t["gather_ms"] * 1e-3
        score_w = self._power_w(self.physics.power["score_frac"])
        batch = len(lengths)
        tokens = batch * self.prompt_tokens
        prefill_s, prefill_frac = self._mix(
            t["prefill_ms_per_token"] * 1e-3 * tokens,
            gather_s,
            self.physics.model.busy_fraction("prefill", tokens),
        )
        segments = [
            (HOST, t["gen_call_s"], score_w),
            (PREFILL, prefill_s, self._power_w(prefill_frac)),
        ]
        done = 0
        for index, length in enumerate(lengths):
            active = batch - index
            if length <= done:
                continue
            decode_s, decode_frac = self._mix(
                (t["decode_base_ms"] + t["decode_ms_per_seq"] * active) * 1e-3,
                gather_s,
                self.physics.model.busy_fraction("generate", active),
            )
            segments.append((DECODE, decode_s * (length - done), self._power_w(decode_frac)))
            done = int(length)
        return segments

    def _train(self, micro: int, length: float, chunks: int) -> tuple[int, float, float]:
        """(kind, duration s, power W) of ``chunks`` training chunks of ``micro`` sequences of
        completions ``length`` tokens long on average."""
        t = self.physics.times
        micro_s, train_frac = self._mix(
            t["train_ms_per_token"] * 1e-3 * micro * (self.prompt_tokens + length),
            3.0 * t["gather_ms"] * 1e-3,  # forward and backward gathers, gradient reduce-scatter
            self.physics.model.busy_fraction("train", micro),
        )
        return (TRAIN, micro_s * chunks, self._power_w(train_frac))

    def plan(
        self,
        concurrency: int,
        max_new_tokens: int,
        num_generations: int,
        completion_tokens: int | None = None,
        train_micro_batch: int | None = None,
        pause_s: int = 0,
    ) -> StepPlan:
        """The phases of one step at these actuator values (cached); completions end about
        ``completion_tokens`` (:meth:`completion_lengths`; None: at ``max_new_tokens``);
        ``train_micro_batch`` None: the workload's default."""
        eos = None if completion_tokens is None else max(1, int(completion_tokens))
        micro_default = self.workload.train_micro_batch
        key = (
            int(concurrency),
            int(max_new_tokens),
            0 if eos is None else eos,
            int(num_generations),
            int(micro_default if train_micro_batch is None else train_micro_batch),
            int(pause_s),
        )
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        t, p, w = self.physics.times, self.physics.power, self.workload
        sequences = w.prompts_per_step * key[3]
        segments = [(PAUSE, float(key[5]), self.physics.idle_w)] if key[5] > 0 else []
        batch = max(1, min(key[0], sequences))
        full, rest = divmod(sequences, batch)
        lengths = self.completion_lengths(batch, key[1], eos)
        segments += self._chunk(lengths) * full  # the full chunks are alike
        tokens = full * int(lengths.sum())
        if rest:
            lengths = self.completion_lengths(rest, key[1], eos)
            segments += self._chunk(lengths)
            tokens += int(lengths.sum())
        segments.append(
            (
                SCORE,
                t["score_base_s"] + t["score_ms_per_seq"] * 1e-3 * sequences,
                self._power_w(p["score_frac"]),
            )
        )
        micro = max(1, min(key[4], sequences))
        full, rest = divmod(sequences, micro)
        mean_length = tokens / sequences
        segments.append(self._train(micro, mean_length, full))
        if rest:
            segments.append(self._train(rest, mean_length, 1))
        segments.append((OPTIMIZER, t["optimizer_s"], self._power_w(p["optimizer_frac"])))
        kind = np.array([s[0] for s in segments], dtype=np.int8)
        duration_s = np.array([s[1] for s in segments], dtype=float)
        power_w = np.array([s[2] for s in segments], dtype=float)
        if self.power_limit_w is not None:
            duration_s, power_w = self._limit(kind, duration_s, power_w)
        plan = StepPlan(
            duration_s=duration_s,
            power_w=power_w,
            kind=kind,
            tokens=tokens * self.physics.gpus,
            sequences=sequences,
        )
        self._cache[key] = plan
        return plan

    def _limit(
        self, kind: np.ndarray, duration_s: np.ndarray, power_w: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Phases under a hardware power limit: held under it, and slowed."""
        p = self.physics.power
        limit_w = float(self.power_limit_w)  # type: ignore[arg-type]
        held_w = max(self.physics.idle_w + 1.0, limit_w * (1.0 - p["hwcap_margin_frac"]))
        over = power_w > held_w
        if not over.any():
            return duration_s, power_w
        exponent = np.where(kind == DECODE, p["hwcap_exponent_memory"], p["hwcap_exponent_compute"])
        idle_w = self.physics.idle_w
        ratio = (power_w - idle_w) / (held_w - idle_w)
        slow = np.where(over, np.power(np.maximum(ratio, 1.0), exponent), 1.0)
        return duration_s * slow, np.where(over, held_w, power_w)


@dataclass(frozen=True)
class ExpectedRates:
    """Long-run rates of a static setting from the noise-free plan (no simulation).

    Attributes:
        tokens_per_s: completion tokens per second, all GPUs.
        power_w: mean per-GPU power, W.
        violation_rate: expected share of per-GPU samples above the cap.
        step_s: duration of one step, s.
    """

    tokens_per_s: float
    power_w: float
    violation_rate: float
    step_s: float


def expected_rates(plan: StepPlan, cap_w: float, noise_w: float) -> ExpectedRates:
    """Expected throughput, power and violation rate of repeating ``plan`` (readings are the
    segment's power plus Gaussian noise of ``noise_w``)."""
    step_s = plan.step_s
    if noise_w > 0:
        over = normal_sf((cap_w - plan.power_w) / noise_w)
    else:
        over = (plan.power_w > cap_w).astype(float)
    return ExpectedRates(
        tokens_per_s=plan.tokens / step_s,
        power_w=plan.energy_j / step_s,
        violation_rate=float(plan.duration_s @ over / step_s),
        step_s=step_s,
    )
