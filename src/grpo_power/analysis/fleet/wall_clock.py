"""Wall-clock fleets: runs that ran concurrently summed bin by bin, one partition of bins at
a time; and the choice between wall-clock alignment and Monte Carlo."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grpo_power.analysis.fleet.inputs import RunBins, read_bins
from grpo_power.analysis.windows import (
    WindowAccumulator,
    WindowCounts,
    window_bins_of,
)
from grpo_power.config import Config


def wall_clock_fleet(
    runs: Sequence[RunBins],
    windows_s: Sequence[float],
    bin_s: float,
    cap_w: float,
    partition_bins: int,
) -> tuple[list[WindowCounts], dict[str, Any]]:
    """The input runs summed bin by bin in real time, one time partition at a time.

    Returns per-window counts against ``cap_w`` (the fleet's total cap) and a summary of the
    common time range. Only bins where every GPU of every run has data count.
    """
    window_bins = window_bins_of(windows_s, bin_s)
    n_gpus = sum(r.n_gpus for r in runs)
    ranges = [r.bin_range for r in runs]
    acc = WindowAccumulator(window_bins, bin_s, cap_w)
    info: dict[str, Any] = {"common_bins": 0, "complete_bins": 0, "partitions": 0}
    if any(r is None for r in ranges):
        return acc.results(), info
    lo = max(r[0] for r in ranges)  # type: ignore[index]
    hi = min(r[1] for r in ranges)  # type: ignore[index]
    info["common_bins"] = max(0, hi - lo + 1)
    for start in range(lo, hi + 1, partition_bins):
        stop = min(start + partition_bins, hi + 1)
        size = stop - start
        energy = np.zeros(size)
        present = np.zeros(size, dtype=np.int64)
        for run in runs:
            rows = read_bins(run, ("bin", "energy_j"), [("bin", ">=", start), ("bin", "<", stop)])
            rel = rows["bin"] - start
            energy += np.bincount(rel, weights=rows["energy_j"], minlength=size)
            present += np.bincount(rel, minlength=size)
        valid = present == n_gpus
        info["complete_bins"] += int(np.count_nonzero(valid))
        info["partitions"] += 1
        acc.update(energy, valid)
    return acc.results(), info


def choose_alignment(runs: Sequence[RunBins], config: Config) -> str:
    """``wall_clock`` or ``monte_carlo`` for ``fleet.alignment = auto`` (see the config)."""
    if config.fleet.alignment != "auto":
        return config.fleet.alignment
    if sum(r.n_gpus for r in runs) != config.fleet.n_gpus:
        return "monte_carlo"
    ranges = [r.bin_range for r in runs]
    if any(r is None for r in ranges):
        return "monte_carlo"
    overlap = min(r[1] for r in ranges) - max(r[0] for r in ranges) + 1  # type: ignore[index]
    longest = max(window_bins_of(config.windows.windows_s, config.windows.bin_s))
    return "wall_clock" if overlap >= longest else "monte_carlo"
