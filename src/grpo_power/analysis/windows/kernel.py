"""The window kernel: mean power of every window on the grid of one GPU's series, and how
many lie above the cap (vectorised over window ends)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grpo_power.analysis.windows.series import TOL, GpuSeries, cap_energy_j, energy_at_grid


@dataclass
class WindowCounts:
    """Window statistics of one GPU (or one aggregate) at one window length."""

    window_s: float
    windows: int
    over: int
    peak_mean_w: float  # NaN when no window fits

    @property
    def exceedance(self) -> float:
        return self.over / self.windows if self.windows else float("nan")


def gpu_window_counts(
    series: GpuSeries, windows_s: Sequence[float], cap_w: float, step_s: float
) -> list[WindowCounts]:
    """Exceedance counts and peak window mean of one GPU at each window.

    Window ends lie on a grid of ``step_s`` from each segment's first sample; a window counts
    only if it lies inside one segment.
    """
    span_s = series.seg_span_s
    points = np.floor(span_s / step_s + TOL).astype(np.int64) + 1
    origin_s = series.t_s[series.seg_first]
    grid_j = energy_at_grid(series, origin_s, points, step_s)
    offsets = np.concatenate([[0], np.cumsum(points)])
    local = None
    if series.segments > 1:
        local = np.arange(len(grid_j)) - np.repeat(offsets[:-1], points)
    scale_j = float(np.abs(grid_j).max()) if len(grid_j) else 0.0
    results = []
    diff_buf = np.empty(len(grid_j))  # reused by every window (no fresh pages per window)
    mask_buf = np.empty(len(grid_j), dtype=bool)
    for window_s in windows_s:
        ratio = window_s / step_s
        m = round(ratio)
        on_grid = m >= 1 and abs(ratio - m) <= TOL * max(1.0, ratio)
        k0 = m if on_grid else math.ceil(ratio - TOL)
        n_windows = int(np.maximum(points - k0, 0).sum())
        if n_windows == 0:
            results.append(WindowCounts(window_s, 0, 0, float("nan")))
            continue
        if on_grid:
            diff_j = np.subtract(grid_j[m:], grid_j[:-m], out=diff_buf[: len(grid_j) - m])
            valid = None if local is None else local[m:] >= m
        else:
            ends = np.ones(len(grid_j), dtype=bool) if local is None else local >= k0
            if local is None:
                ends[:k0] = False
            shifted = energy_at_grid(
                series, origin_s + k0 * step_s - window_s, np.maximum(points - k0, 0), step_s
            )
            diff_j = grid_j[ends] - shifted
            valid = None
        over_mask = np.greater(
            diff_j, cap_energy_j(cap_w, window_s, scale_j), out=mask_buf[: len(diff_j)]
        )
        if valid is None:
            over = int(np.count_nonzero(over_mask))
            peak_j = float(diff_j.max())
        else:
            over = int(np.count_nonzero(over_mask & valid))
            peak_j = float(np.max(diff_j, where=valid, initial=-np.inf))
        results.append(WindowCounts(window_s, n_windows, over, peak_j / window_s))
    return results


def window_means(
    series: GpuSeries, window_s: float, step_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Every window of one GPU: ``(end_s, mean_w)``, window ends in time order.

    The same windows that :func:`gpu_window_counts` counts, materialised (for figures, tests).
    """
    points = np.floor(series.seg_span_s / step_s + TOL).astype(np.int64) + 1
    origin_s = series.t_s[series.seg_first]
    k0 = math.ceil(window_s / step_s - TOL)
    ends_per_seg = np.maximum(points - k0, 0)
    if ends_per_seg.sum() == 0:
        return np.empty(0), np.empty(0)
    seg = np.repeat(np.arange(series.segments), ends_per_seg)
    first = np.repeat(np.cumsum(ends_per_seg) - ends_per_seg, ends_per_seg)
    k = np.arange(len(seg)) - first + k0
    end_s = origin_s[seg] + k * step_s
    end_j = energy_at_grid(series, origin_s + k0 * step_s, ends_per_seg, step_s)
    start_j = energy_at_grid(series, origin_s + k0 * step_s - window_s, ends_per_seg, step_s)
    return end_s, (end_j - start_j) / window_s
