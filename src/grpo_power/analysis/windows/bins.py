"""Energy in absolute wall-clock bins (what the fleet stage sums across runs), and windows
counted over bins by a streaming accumulator (a run's summed power, a fleet's)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_power.analysis.windows.kernel import WindowCounts
from grpo_power.analysis.windows.series import TOL, GpuSeries, cap_energy_j, energy_at_grid


def energy_bins(
    series: GpuSeries, start_unix_s: float, bin_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Energy of one GPU in absolute wall-clock bins fully inside its segments.

    Returns ``(bin_index, energy_j)``: ``bin_index`` = floor(unix time / bin_s) of each bin's
    start (int64), increasing; bins that a gap or the trace ends cut are left out.
    """
    phase_s = math.fmod(start_unix_s, bin_s)
    base = round((start_unix_s - phase_s) / bin_s)
    first_t = series.t_s[series.seg_first] + phase_s
    last_t = series.t_s[series.seg_last] + phase_s
    first_edge = np.ceil(first_t / bin_s - TOL).astype(np.int64)
    last_edge = np.floor(last_t / bin_s + TOL).astype(np.int64)
    points = np.maximum(last_edge - first_edge + 1, 0)
    points = np.where(points >= 2, points, 0)
    if points.sum() == 0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    origin_s = np.maximum(first_edge * bin_s - phase_s, series.t_s[series.seg_first])
    edge_j = energy_at_grid(series, origin_s, points, bin_s)
    offsets = np.concatenate([[0], np.cumsum(points)])
    is_first = np.zeros(len(edge_j), dtype=bool)
    is_first[offsets[:-1][points > 0]] = True
    keep = ~is_first[1:]
    energy = np.diff(edge_j)[keep]
    seg_of_point = np.repeat(np.arange(len(points)), points)
    local = np.arange(len(edge_j)) - offsets[seg_of_point]
    index = (base + first_edge[seg_of_point] + local)[:-1][keep]
    return index.astype(np.int64), energy


class WindowAccumulator:
    """Window sums over a stream of equal-width bins, chunk by chunk.

    Feed consecutive chunks of per-bin energy (J) and validity; a window counts when all its bins
    are valid. Keeps only the last ``max(window) - 1`` bins between chunks, so memory is bounded
    by the chunk size whatever the length of the stream.

    Args:
        window_bins: window lengths in bins.
        bin_s: bin width, s.
        cap_w: the cap the window mean is compared with, W (a fleet's total cap for fleets).
    """

    def __init__(self, window_bins: Sequence[int], bin_s: float, cap_w: float) -> None:
        self.window_bins = [int(w) for w in window_bins]
        if min(self.window_bins) < 1:
            raise ValueError(f"window lengths in bins must be >= 1, got {self.window_bins}")
        self.bin_s = bin_s
        self.cap_w = cap_w
        self.windows = np.zeros(len(self.window_bins), dtype=np.int64)
        self.over = np.zeros(len(self.window_bins), dtype=np.int64)
        self.peak_j = np.full(len(self.window_bins), -np.inf)
        self._keep = max(self.window_bins) - 1
        self._tail_j = np.empty(0)
        self._tail_ok = np.empty(0, dtype=bool)

    def update(self, energy_j: np.ndarray, valid: np.ndarray | None = None) -> None:
        """Add the next chunk of bins (``valid`` None: all valid)."""
        if len(energy_j) == 0:
            return
        if valid is None:
            valid = np.ones(len(energy_j), dtype=bool)
        chunk_j = np.where(valid, energy_j, 0.0) if not valid.all() else energy_j
        e = np.concatenate([self._tail_j, chunk_j])
        ok = np.concatenate([self._tail_ok, valid])
        fresh = len(self._tail_j)
        n = len(e)
        csum = np.empty(n + 1)
        csum[0] = 0.0
        np.cumsum(e, out=csum[1:])
        scale_j = float(np.abs(csum).max())
        bad = None
        if not ok.all():
            bad = np.concatenate([[0], np.cumsum(~ok)])
        for i, w in enumerate(self.window_bins):
            first = max(fresh, w - 1)  # first window end (bin index) not counted before
            if first >= n:
                continue
            sums = csum[first + 1 :] - csum[first + 1 - w : n + 1 - w]
            threshold = cap_energy_j(self.cap_w, w * self.bin_s, scale_j)
            if bad is None:
                self.windows[i] += len(sums)
                self.over[i] += int(np.count_nonzero(sums > threshold))
                self.peak_j[i] = max(self.peak_j[i], float(sums.max()))
            else:
                good = (bad[first + 1 :] - bad[first + 1 - w : n + 1 - w]) == 0
                count = int(np.count_nonzero(good))
                if count:
                    self.windows[i] += count
                    self.over[i] += int(np.count_nonzero((sums > threshold) & good))
                    peak = float(np.max(sums, where=good, initial=-np.inf))
                    self.peak_j[i] = max(self.peak_j[i], peak)
        if self._keep:
            self._tail_j = e[-self._keep :]
            self._tail_ok = ok[-self._keep :]

    def results(self) -> list[WindowCounts]:
        """Counts and peak mean power (W) per window."""
        out = []
        for i, w in enumerate(self.window_bins):
            window_s = w * self.bin_s
            peak_w = self.peak_j[i] / window_s if self.windows[i] else float("nan")
            out.append(WindowCounts(window_s, int(self.windows[i]), int(self.over[i]), peak_w))
        return out


def window_bins_of(windows_s: Sequence[float], bin_s: float) -> list[int]:
    """Window lengths in whole bins; raises if a window is not a whole number of bins."""
    out = []
    for window_s in windows_s:
        ratio = window_s / bin_s
        if round(ratio) < 1 or abs(ratio - round(ratio)) > TOL * max(1.0, ratio):
            raise ValueError(
                f"window {window_s} s is not a whole number of {bin_s} s bins "
                "(windows.windows_s and windows.bin_s in the config)"
            )
        out.append(round(ratio))
    return out


def run_total_counts(
    bins: pd.DataFrame, n_gpus: int, windows_s: Sequence[float], bin_s: float, cap_w: float
) -> list[WindowCounts]:
    """Window counts of the summed power of ``n_gpus`` GPUs given as (bin, gpu, energy_j) rows."""
    acc = WindowAccumulator(window_bins_of(windows_s, bin_s), bin_s, cap_w)
    if len(bins):
        index = bins["bin"].to_numpy()
        lo = int(index.min())
        rel = index - lo
        size = int(rel.max()) + 1
        energy = np.bincount(rel, weights=bins["energy_j"].to_numpy(), minlength=size)
        present = np.bincount(rel, minlength=size)
        acc.update(energy, present == n_gpus)
    return acc.results()
