"""Occupancy-driven power model of one GPU (the part a parameter set of `gpu.name`).

The model encodes the occupancy-versus-volume principle (docs/design.md section 2): power
follows how much of the chip is busy at once (the batch of sequences decoded together, the training
micro-batch), not how long a phase lasts. Steady-state power of a phase is::

    power_w = idle_w + (nameplate_w - idle_w) * min(max_frac, base + slope * log2(batch))

Generation's occupancy is *tokens processed at once*: a decode step processes one token per
sequence of the chunk (``batch`` = sequences), a chunk's prefill processes all their prompt
tokens (``batch`` = tokens). Both curves start at the decode's value at one token; the
memory-bound decode rises by ``decode_slope_per_doubling`` (the measured steady line), the
compute-bound prefill by ``prefill_slope_per_doubling``, so a prefill draws more than the decode
after it, up to ``1 + transient_peak_frac`` of nameplate (docs/calibration.md 'prefill' and
'measured decode, Qwen3-8B on vLLM': readings to 1.28 x nameplate). Samples carry Gaussian
measurement noise of ``noise_w`` where the GPU works, shrinking to none at idle
(:func:`noise_sd_w`).
Defaults and their sources are in :class:`grpo_power.config.SimulatedPowerConfig`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from grpo_power.config import GpuSpec, SimulatedPowerConfig


def noise_sd_w(true_w: np.ndarray | float, idle_w: float, noise_w: float) -> np.ndarray:
    """The readings' noise (standard deviation, W) at a window's true power ``true_w``:
    ``noise_w`` where it lies ``noise_w`` or more above idle, shrinking in proportion to none
    at idle. The public traces' idle readings spread by 0.1-0.9 W, not the 6.4 W of decode; and
    readings are clipped at idle, so full noise there read an idle GPU about 0.4 x noise_w
    high (62.4 W for 60 W)."""
    above_w = np.asarray(true_w, dtype=float) - idle_w
    if noise_w <= 0:
        return np.zeros_like(above_w)
    return noise_w * np.clip(above_w / noise_w, 0.0, 1.0)


Phase = Literal["idle", "prefill", "generate", "score", "train"]
PHASES: tuple[Phase, ...] = ("idle", "prefill", "generate", "score", "train")


@dataclass(frozen=True)
class GpuActivity:
    """What the workload is doing on the GPU right now.

    Attributes:
        phase: one of :data:`PHASES`.
        batch: work processed at once: sequences of a decode chunk, tokens of a prefill,
            sequences of a training micro-batch; >= 1.
    """

    phase: Phase = "idle"
    batch: int = 1


class GpuPowerModel:
    """Power, utilisation, clock and temperature of a simulated GPU for a given activity."""

    def __init__(self, gpu: GpuSpec, params: SimulatedPowerConfig) -> None:
        self.gpu = gpu
        self.params = params

    @property
    def peak_w(self) -> float:
        """Highest power the model can report: nameplate plus the prefill overshoot, W."""
        return self.gpu.nameplate_w * (1.0 + self.params.transient_peak_frac)

    def busy_fraction(self, phase: Phase, batch: int) -> float:
        """Steady-state share of the (nameplate - idle) range the phase draws.

        At most ``max_frac``, except the prefill (its power is capped at :attr:`peak_w`).
        """
        p = self.params
        doublings = math.log2(max(1, batch))
        if phase == "prefill":  # may exceed max_frac: the power is capped at peak_w instead
            return p.decode_base_frac + p.prefill_slope_per_doubling * doublings
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
        return min(self.peak_w, self.gpu.idle_w + span_w * self.busy_fraction(phase, batch))

    def power_w(self, activity: GpuActivity, rng: np.random.Generator) -> float:
        """One noisy power sample of a steady activity, W, in [idle, peak]."""
        return self.sensed_power_w([(activity, 1.0)], rng)

    def sensed_power_w(
        self, mix: Sequence[tuple[GpuActivity, float]], rng: np.random.Generator
    ) -> float:
        """One noisy reading of the sensor window, W, in [idle, peak].

        Args:
            mix: the activities within the sensor window and how long each lasted there (s, or
                any weights); a phase shorter than the window counts in proportion.
        """
        total = sum(weight for _, weight in mix)
        power = sum(self.steady_power_w(a.phase, a.batch) * w for a, w in mix) / total
        sd_w = float(noise_sd_w(power, self.gpu.idle_w, self.params.noise_w))
        power += rng.normal(0.0, sd_w) if self.params.noise_w > 0 else 0.0
        return float(min(self.peak_w, max(self.gpu.idle_w, power)))

    def sm_util_pct(self, activity: GpuActivity) -> float:
        """SM utilisation NVML would report, percent (busy phases read near 100 %)."""
        if activity.phase in ("prefill", "generate", "train"):
            return 100.0 * min(1.0, 0.6 + 0.4 * self.busy_fraction(activity.phase, activity.batch))
        return 0.0

    def sm_clock_mhz(self, power_w: float) -> float:
        """SM clock: at the part's maximum boost until power nears the limit, then throttled,
        MHz (NaN for a part whose boost clock the config does not know)."""
        headroom = (self.gpu.nameplate_w - power_w) / self.gpu.nameplate_w
        throttle = 1.0 if headroom > 0.02 else max(0.75, 1.0 + 2.0 * (headroom - 0.02))
        clock_mhz = self.gpu.sm_clock_max_mhz
        return clock_mhz * throttle if clock_mhz is not None else math.nan

    def next_temp_c(self, temp_c: float, power_w: float, dt_s: float) -> float:
        """First-order thermal response: temperature after ``dt_s`` seconds at ``power_w``."""
        p = self.params
        target_c = p.temp_ambient_c + p.temp_c_per_w * (power_w - self.gpu.idle_w)
        alpha = 1.0 - math.exp(-max(0.0, dt_s) / p.temp_tau_s)
        return temp_c + (target_c - temp_c) * alpha
