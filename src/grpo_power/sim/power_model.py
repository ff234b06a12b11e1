"""Occupancy-driven power model of one A100 SXM GPU.

The model encodes the occupancy-versus-volume principle (DESIGN.md section 2): power follows how
much of the chip is busy at once (the batch of sequences decoded together, the training
micro-batch), not how long a phase lasts. Steady-state power of a phase is::

    power_w = idle_w + (nameplate_w - idle_w) * min(max_frac, base + slope * log2(batch))

with a prefill overshoot at the start of each generation phase and Gaussian measurement noise.
Defaults and their sources are in :class:`grpo_power.config.SimulatedPowerConfig`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from grpo_power.config import GpuSpec, SimulatedPowerConfig

Phase = Literal["idle", "generate", "score", "train"]
PHASES: tuple[Phase, ...] = ("idle", "generate", "score", "train")


@dataclass(frozen=True)
class GpuActivity:
    """What the workload is doing on the GPU right now.

    Attributes:
        phase: one of :data:`PHASES`.
        batch: sequences processed at once (decode chunk, or training micro-batch); >= 1.
        since_s: ``time.monotonic()`` at which the phase started, s.
    """

    phase: Phase = "idle"
    batch: int = 1
    since_s: float = 0.0


class A100PowerModel:
    """Power, utilisation, clock and temperature of a simulated A100 for a given activity."""

    def __init__(self, gpu: GpuSpec, params: SimulatedPowerConfig) -> None:
        self.gpu = gpu
        self.params = params

    @property
    def peak_w(self) -> float:
        """Highest power the model can report: nameplate plus the prefill overshoot, W."""
        return self.gpu.nameplate_w * (1.0 + self.params.transient_peak_frac)

    def busy_fraction(self, phase: Phase, batch: int) -> float:
        """Steady-state share of the (nameplate - idle) range the phase draws, in [0, max_frac]."""
        p = self.params
        doublings = math.log2(max(1, batch))
        if phase == "generate":
            frac = p.decode_base_frac + p.decode_slope_per_doubling * doublings
        elif phase == "train":
            frac = p.train_base_frac + p.train_slope_per_doubling * doublings
        elif phase == "score":
            frac = p.score_frac
        else:
            frac = 0.0
        return min(p.max_frac, frac)

    def steady_power_w(self, phase: Phase, batch: int) -> float:
        """Steady-state power of a phase at a batch size, without noise or transients, W."""
        span_w = self.gpu.nameplate_w - self.gpu.idle_w
        return self.gpu.idle_w + span_w * self.busy_fraction(phase, batch)

    def power_w(self, activity: GpuActivity, now_s: float, rng: np.random.Generator) -> float:
        """One noisy instantaneous power sample at monotonic time ``now_s``, W, in [idle, peak]."""
        power = self.steady_power_w(activity.phase, activity.batch)
        elapsed_s = now_s - activity.since_s
        if activity.phase == "generate" and 0.0 <= elapsed_s < self.params.transient_s:
            # Prefill: a short overshoot to about 1.09 TDP that decays linearly into decode.
            remaining = 1.0 - elapsed_s / self.params.transient_s
            power += (self.peak_w - power) * remaining
        power += rng.normal(0.0, self.params.noise_w) if self.params.noise_w > 0 else 0.0
        return float(min(self.peak_w, max(self.gpu.idle_w, power)))

    def sm_util_pct(self, activity: GpuActivity) -> float:
        """SM utilisation NVML would report, percent (busy phases read near 100 %)."""
        if activity.phase in ("generate", "train"):
            return 100.0 * min(1.0, 0.6 + 0.4 * self.busy_fraction(activity.phase, activity.batch))
        return 0.0

    def sm_clock_mhz(self, power_w: float) -> float:
        """SM clock: at maximum boost until power nears the limit, then throttled, MHz."""
        headroom = (self.gpu.nameplate_w - power_w) / self.gpu.nameplate_w
        throttle = 1.0 if headroom > 0.02 else max(0.75, 1.0 + 2.0 * (headroom - 0.02))
        return self.params.sm_clock_max_mhz * throttle

    def next_temp_c(self, temp_c: float, power_w: float, dt_s: float) -> float:
        """First-order thermal response: temperature after ``dt_s`` seconds at ``power_w``."""
        p = self.params
        target_c = p.temp_ambient_c + p.temp_c_per_w * (power_w - self.gpu.idle_w)
        alpha = 1.0 - math.exp(-max(0.0, dt_s) / p.temp_tau_s)
        return temp_c + (target_c - temp_c) * alpha
