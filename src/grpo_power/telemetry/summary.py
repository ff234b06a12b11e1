"""Per-GPU summaries of a trace: energy, mean and peak power, duration.

Energy comes from the cumulative counter (``energy_j``) where the trace has one, else from
trapezoid integration of ``power_w``; either way a gap longer than two sample periods is not
bridged (docs/design.md section 7: gaps split the series and are never interpolated), so the
mean power is over the time with readings: the pause between a resumed run's attempts, or an
hour a logger was down, is not time at the power the counter's step across it implies.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from grpo_power.telemetry.checks import check_power, gpu_period_s
from grpo_power.telemetry.store import Trace


def trapezoid_cumulative_j(t_s: np.ndarray, power_w: np.ndarray, max_gap_s: float) -> np.ndarray:
    """Energy of a sampled power series since its first sample, at each sample, J, by the
    trapezoid rule; intervals longer than ``max_gap_s`` count zero."""
    if len(t_s) < 2:
        return np.zeros(len(t_s))
    dt_s = np.diff(t_s)
    area = np.where(dt_s <= max_gap_s, 0.5 * (power_w[1:] + power_w[:-1]) * dt_s, 0.0)
    return np.concatenate([[0.0], np.cumsum(area)])


def trapezoid_energy_j(t_s: np.ndarray, power_w: np.ndarray, max_gap_s: float) -> float:
    """Energy of a sampled power series, J; intervals longer than ``max_gap_s`` count zero."""
    return float(trapezoid_cumulative_j(t_s, power_w, max_gap_s)[-1]) if len(t_s) >= 2 else 0.0


def sample_weights_s(t_s: np.ndarray, max_gap_s: float) -> np.ndarray:
    """The time each sample of a series (times ``t_s``, ascending) stands for, s: half of each
    interval beside it not longer than ``max_gap_s``. A reading taken between the scheduled
    ones (a measurement window's edge) stands for the little time around it, not for a whole
    period, so shares and percentiles of time do not depend on how many edges fall inside."""
    if len(t_s) < 2:
        return np.ones(len(t_s))
    dt_s = np.diff(t_s)
    half_s = np.where(dt_s <= max_gap_s, 0.5 * dt_s, 0.0)
    return np.concatenate([[0.0], half_s]) + np.concatenate([half_s, [0.0]])


def covered_seconds(t_s: np.ndarray, max_gap_s: float) -> float:
    """Time covered by samples, s: the sum of intervals not longer than ``max_gap_s``."""
    dt_s = np.diff(t_s)
    return float(dt_s[dt_s <= max_gap_s].sum())


def counter_energy_j(t_s: np.ndarray, counter_j: np.ndarray, max_gap_s: float) -> float:
    """Energy of a cumulative counter read at ``t_s``, J: its increments over intervals not
    longer than ``max_gap_s`` (a gap's step is left out, as integration leaves out a gap)."""
    within = np.diff(t_s) <= max_gap_s
    return float(np.diff(counter_j)[within].sum())


@dataclass(frozen=True)
class GpuSummary:
    """Summary of one GPU's samples in a trace."""

    gpu: int
    samples: int
    duration_s: float  # first to last sample
    energy_j: float
    energy_source: str  # "counter" | "integrated"
    energy_span_s: float  # the time the energy covers: the sampled time, gaps left out
    mean_power_w: float  # energy_j / energy_span_s
    peak_power_w: float


def summarize_trace(trace: Trace) -> list[GpuSummary]:
    """One :class:`GpuSummary` per GPU of ``trace``.

    Raises:
        ValueError: NaN, negative or implausible power (see :mod:`grpo_power.telemetry.checks`).
    """
    summaries = []
    for gpu, samples in trace.frame.sort_values("t").groupby("gpu", sort=True):
        t_s = samples["t"].to_numpy(dtype=float)
        max_gap_s = 2.0 * gpu_period_s(t_s, trace.metadata.sample_period_s)
        power_w = samples["power_w"].to_numpy(dtype=float)
        check_power(int(gpu), t_s, power_w, str(trace.path), trace.metadata.nameplate_w)
        counter = samples["energy_j"].to_numpy(dtype=float)
        duration_s = float(t_s[-1] - t_s[0]) if len(t_s) else 0.0
        if len(counter) >= 2 and not np.isnan(counter).any():
            energy_j, energy_source = counter_energy_j(t_s, counter, max_gap_s), "counter"
        else:
            energy_j, energy_source = trapezoid_energy_j(t_s, power_w, max_gap_s), "integrated"
        energy_span_s = covered_seconds(t_s, max_gap_s)
        summaries.append(
            GpuSummary(
                gpu=int(gpu),
                samples=len(samples),
                duration_s=duration_s,
                energy_j=energy_j,
                energy_source=energy_source,
                energy_span_s=energy_span_s,
                mean_power_w=(
                    energy_j / energy_span_s if energy_span_s > 0 else float(np.mean(power_w))
                ),
                peak_power_w=float(power_w.max()),
            )
        )
    return summaries


def summed_peak_w(trace: Trace) -> float:
    """The peak of the GPUs' summed power, W, over the times every GPU has a reading: each
    GPU's power at every GPU's sample times in the span they share (linear between samples, none
    within a gap of over two of its sample periods); NaN where they share none."""
    series = [
        (g["t"].to_numpy(dtype=float), g["power_w"].to_numpy(dtype=float))
        for _, g in trace.frame.sort_values("t").groupby("gpu", sort=True)
    ]
    start_s, end_s = max(t[0] for t, _ in series), min(t[-1] for t, _ in series)
    grid_s = np.unique(np.concatenate([t[(t >= start_s) & (t <= end_s)] for t, _ in series]))
    total_w, read = np.zeros(len(grid_s)), np.ones(len(grid_s), dtype=bool)
    for t_s, power_w in series:
        at = np.searchsorted(t_s, grid_s)  # the first sample at or after each grid time
        on_sample = t_s[np.minimum(at, len(t_s) - 1)] == grid_s
        after = np.clip(at, 1, len(t_s) - 1)
        max_gap_s = 2.0 * gpu_period_s(t_s, trace.metadata.sample_period_s)
        read &= on_sample | (t_s[after] - t_s[after - 1] <= max_gap_s)
        total_w += np.interp(grid_s, t_s, power_w)
    return float(total_w[read].max()) if read.any() else float("nan")


def summary_table(trace: Trace) -> pd.DataFrame:
    """``trace``'s GPUs summarised (:func:`summarize_trace`) as a table with a total row: energy
    summed, each GPU's mean summed (a GPU's mean over its own readings: a gap is no time at zero
    power), and the peak of the summed power (:func:`summed_peak_w`)."""
    table = pd.DataFrame([asdict(s) for s in summarize_trace(trace)])
    if len(table) > 1:
        total = {
            "gpu": "all",
            "samples": table["samples"].sum(),
            "duration_s": table["duration_s"].max(),
            "energy_j": table["energy_j"].sum(),
            "energy_source": ",".join(sorted(set(table["energy_source"]))),
            "energy_span_s": table["energy_span_s"].max(),
            "mean_power_w": table["mean_power_w"].sum(),
            "peak_power_w": summed_peak_w(trace),
        }
        table = pd.concat([table, pd.DataFrame([total])], ignore_index=True)
    return table


@dataclass(frozen=True)
class EnergyCheck:
    """Energy of one GPU from the hardware counter and from integrating sampled power, J."""

    gpu: int
    counter_j: float
    integrated_j: float

    @property
    def difference_pct(self) -> float:
        """(integrated - counter) / counter, percent."""
        return 100.0 * (self.integrated_j - self.counter_j) / self.counter_j


def check_energy(trace: Trace) -> list[EnergyCheck]:
    """Counter vs integrated energy per GPU, over the same sampled time (gaps left out of
    both); GPUs without a counter are left out."""
    checks = []
    for gpu, samples in trace.frame.sort_values("t").groupby("gpu", sort=True):
        counter = samples["energy_j"].to_numpy(dtype=float)
        if len(counter) < 2 or np.isnan(counter).any():
            continue
        t_s = samples["t"].to_numpy(dtype=float)
        max_gap_s = 2.0 * gpu_period_s(t_s, trace.metadata.sample_period_s)
        power_w = samples["power_w"].to_numpy(dtype=float)
        counter_j = counter_energy_j(t_s, counter, max_gap_s)
        checks.append(EnergyCheck(int(gpu), counter_j, trapezoid_energy_j(t_s, power_w, max_gap_s)))
    return checks
