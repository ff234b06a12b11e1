"""Exceedance by averaging window, per GPU and per run (stage 5, DESIGN.md sections 5 and 7).

Power caps, breakers and utility contracts act on power averaged over a window. For a window of
``window_s`` seconds ending at time ``g`` the mean power is ``(E(g) - E(g - window_s)) /
window_s``, where ``E`` is the GPU's cumulative energy:

- at each sample, ``E`` comes from the energy counter (``energy_j``) where the trace has one,
  else from trapezoid integration of ``power_w``; an interval whose counter is missing or goes
  backwards (a reset, or a wrap of a narrower counter) falls back to the trapezoid, and is
  counted in the result (``counter_resets``, ``energy_source`` = ``mixed``);
- between two samples energy accrues at a constant rate (the interval's mean power), so a window
  that starts or ends between samples takes the matching share of that interval's energy;
- an interval longer than ``gap_periods`` sample periods is a gap: it splits the series into
  contiguous segments, no window ever spans it, and nothing is interpolated across it.

Window ends lie on a regular grid of ``step_s`` (default: the trace's sample period) starting at
each segment's first sample, so irregular or jittered timestamps weigh every moment of the run
equally. ``exceedance(W)`` is the share of window ends whose mean is strictly above the cap.
Exceedance is not monotone in the window length (a square wave between 1.5x and 0.6x the cap with
a 1 s period is over the cap in every 1 s window but in only some 0.5 s windows); nothing here
assumes it is.

Documented results for awkward input: a window longer than every segment gives ``windows = 0``
and ``exceedance = NaN`` (with a note), never 0. An empty trace, NaN, negative or implausibly
high power (above 3x the metadata's nameplate: milliwatts, see :mod:`grpo_power.telemetry.checks`)
and duplicated or decreasing timestamps are errors that name the file, the GPU and the row.

The per-run energy in wall-clock bins of ``bin_s`` (``bins.parquet``) is what the fleet stage
sums across runs: bins lie on an absolute grid (``bin = floor(unix time / bin_s)``), so runs that
were concurrent line up exactly, and only bins fully inside a segment are kept.

Everything is vectorised over samples with cumulative sums and histograms (no per-sample loops).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.config import Config
from grpo_power.telemetry.checks import check_power
from grpo_power.telemetry.store import Trace, TraceDefaults, read_trace

BINS_METADATA_KEY = b"grpo_power_bins"
_TOL = 1e-9  # relative tolerance of grid arithmetic, in units of the step


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's samples, checked, with cumulative energy and contiguous segments.

    ``rate_w[i]`` is the mean power from sample ``i`` to ``i + 1`` (0 across a gap and after the
    last sample); ``energy_j`` is 0 at the first sample.
    """

    gpu: int
    t_s: np.ndarray
    power_w: np.ndarray
    energy_j: np.ndarray
    rate_w: np.ndarray
    seg_first: np.ndarray
    seg_last: np.ndarray
    energy_source: str  # "counter" | "integrated" | "mixed"
    counter_resets: int
    fallback_intervals: int

    @property
    def segments(self) -> int:
        return len(self.seg_first)

    @property
    def seg_span_s(self) -> np.ndarray:
        """Duration of each contiguous segment, s."""
        return self.t_s[self.seg_last] - self.t_s[self.seg_first]


def prepare_series(
    gpu: int,
    t_s: np.ndarray,
    power_w: np.ndarray,
    counter_j: np.ndarray | None,
    max_gap_s: float,
    where: str = "<trace>",
    nameplate_w: float | None = None,
) -> GpuSeries:
    """Check one GPU's samples and build its cumulative energy.

    Args:
        gpu: GPU index (for messages and results).
        t_s: sample times, s, in recording order; must increase strictly.
        power_w: instantaneous power, W; finite, >= 0 and plausible for ``nameplate_w``.
        counter_j: cumulative energy counter, J (NaN where absent), or None.
        max_gap_s: an interval longer than this is a gap, s.
        where: the file name used in error messages.
        nameplate_w: the GPU's nameplate, W, for the plausibility bound of
            :func:`grpo_power.telemetry.checks.check_power` (None: no upper bound).

    Raises:
        ValueError: NaN, negative or implausibly high power (milliwatts), or duplicated or
            decreasing timestamps (the message says which).
    """
    t_s = np.ascontiguousarray(t_s, dtype=np.float64)
    power_w = np.ascontiguousarray(power_w, dtype=np.float64)
    n = len(t_s)
    if n == 0:
        raise ValueError(f"{where}: gpu {gpu}: no samples")
    check_power(gpu, t_s, power_w, where, nameplate_w)
    dt_s = np.diff(t_s)
    if not (np.isfinite(t_s[0]) and np.isfinite(t_s[-1]) and (dt_s > 0).all()):
        _diagnose_time(gpu, t_s, dt_s, where)
    gap = dt_s > max_gap_s
    any_gap = bool(gap.any())
    interval_j = np.add(power_w[1:], power_w[:-1])
    interval_j *= dt_s
    interval_j *= 0.5  # trapezoid energy of each interval, J
    resets = fallback = 0
    source = "integrated"
    if counter_j is not None and n > 1:
        counter_j = np.asarray(counter_j, dtype=np.float64)
        d_counter = np.diff(counter_j)
        use = d_counter >= 0  # False for NaN (missing) and for resets / wraps
        back = d_counter < 0
        if any_gap:  # intervals across gaps are never used, whatever their counter says
            use_in, back = use & ~gap, back & ~gap
        else:
            use_in = use
        used = int(np.count_nonzero(use_in))
        fallback = n - 1 - int(np.count_nonzero(gap)) - used
        resets = int(np.count_nonzero(back))
        np.copyto(interval_j, d_counter, where=use)
        source = "integrated" if used == 0 else ("counter" if fallback == 0 else "mixed")
        if source == "integrated":
            fallback = 0
    if any_gap:
        interval_j[gap] = 0.0
    energy_j = np.empty(n)
    energy_j[0] = 0.0
    np.cumsum(interval_j, out=energy_j[1:])
    rate_w = np.zeros(n)
    np.divide(interval_j, dt_s, out=rate_w[:-1])
    breaks = np.flatnonzero(gap) if any_gap else np.empty(0, dtype=np.int64)
    seg_first = np.concatenate([[0], breaks + 1]).astype(np.int64)
    seg_last = np.concatenate([breaks, [n - 1]]).astype(np.int64)
    return GpuSeries(
        gpu=int(gpu),
        t_s=t_s,
        power_w=power_w,
        energy_j=energy_j,
        rate_w=rate_w,
        seg_first=seg_first,
        seg_last=seg_last,
        energy_source=source,
        counter_resets=resets,
        fallback_intervals=fallback,
    )


def _diagnose_time(gpu: int, t_s: np.ndarray, dt_s: np.ndarray, where: str) -> None:
    """Raise the error that names the first bad timestamp."""
    bad_t = ~np.isfinite(t_s)
    if bad_t.any():
        i = int(np.argmax(bad_t))
        raise ValueError(f"{where}: gpu {gpu}: t is not a finite number at sample {i}")
    i = int(np.argmax(dt_s <= 0))
    kind = "duplicated" if dt_s[i] == 0 else "decreasing"
    count = int((dt_s == 0).sum()) if kind == "duplicated" else int((dt_s < 0).sum())
    raise ValueError(
        f"{where}: gpu {gpu}: {kind} timestamp(s) ({count} in all): t goes from "
        f"{t_s[i]:.9g} s to {t_s[i + 1]:.9g} s at sample {i + 1}; t must increase strictly "
        "within a GPU (were two recordings concatenated?)"
    )


def series_from_frame(
    frame: pd.DataFrame,
    max_gap_s: float,
    where: str = "<trace>",
    nameplate_w: float | None = None,
) -> list[GpuSeries]:
    """Split a trace frame into checked per-GPU series (rows keep their recorded order).

    ``nameplate_w`` (the trace metadata's) bounds plausible power, see :func:`prepare_series`.
    """
    if frame.empty:
        raise ValueError(f"{where}: the trace has no samples; expected at least one to window")
    for name in ("t", "gpu", "power_w"):
        if name not in frame.columns:
            raise ValueError(f"{where}: missing column '{name}' (expected a grpo-power trace)")
    gpu = frame["gpu"].to_numpy()
    if pd.isna(gpu).any():
        raise ValueError(f"{where}: the gpu column has missing values")
    gpu = gpu.astype(np.int64)
    t_s = _float_column(frame["t"])
    power_w = _float_column(frame["power_w"])
    counter = _float_column(frame["energy_j"]) if "energy_j" in frame.columns else None
    if counter is not None and not np.isfinite(counter).any():
        counter = None
    columns = _interleaved_columns(gpu, t_s, power_w, counter)
    if columns is not None:
        ids, t_cols, p_cols, c_cols = columns
        return [
            prepare_series(
                int(g),
                t_cols[k],
                p_cols[k],
                None if c_cols is None else c_cols[k],
                max_gap_s,
                where,
                nameplate_w,
            )
            for k, g in enumerate(ids)
        ]
    lo, hi = int(gpu.min()), int(gpu.max())
    # A narrow key lets numpy use its linear-time radix sort.
    key = (gpu - lo).astype(np.uint16) if hi - lo < 65_536 else gpu
    order = np.argsort(key, kind="stable")
    sorted_gpu = gpu[order]
    cuts = np.flatnonzero(np.diff(sorted_gpu)) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(order)]])
    out = []
    for a, b in zip(starts, ends, strict=True):
        rows = order[a:b]
        out.append(
            prepare_series(
                int(sorted_gpu[a]),
                t_s[rows],
                power_w[rows],
                None if counter is None else counter[rows],
                max_gap_s,
                where,
                nameplate_w,
            )
        )
    return out


def _float_column(column: pd.Series) -> np.ndarray:
    """A column as float64 with NaN for missing values (no copy for a plain float column)."""
    if isinstance(column.dtype, np.dtype) and column.dtype == np.float64:
        return column.to_numpy()
    return column.to_numpy(dtype=np.float64, na_value=np.nan)


def _interleaved_columns(
    gpu: np.ndarray, t_s: np.ndarray, power_w: np.ndarray, counter: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None] | None:
    """Per-GPU columns when rows cycle through the same GPUs in the same order (the sampler's
    layout: one row per GPU per sample); None otherwise. A transpose instead of a sort."""
    repeat = np.flatnonzero(gpu[:65_536] == gpu[0])
    if len(repeat) < 2:
        return None
    n_gpus = int(repeat[1])
    if len(gpu) % n_gpus:
        return None
    block = gpu.reshape(-1, n_gpus)
    if len(np.unique(block[0])) != n_gpus or not (block == block[0]).all():
        return None

    def cols(values: np.ndarray) -> np.ndarray:
        rows = values.reshape(-1, n_gpus)
        out = np.empty((n_gpus, len(rows)))
        for start in range(0, len(rows), 8192):  # cache-sized blocks: faster than one copy
            out[:, start : start + 8192] = rows[start : start + 8192].T
        return out

    return block[0], cols(t_s), cols(power_w), None if counter is None else cols(counter)


def energy_at_grid(
    series: GpuSeries, origin_s: np.ndarray, points: np.ndarray, step_s: float
) -> np.ndarray:
    """Cumulative energy at regular grid points inside each segment, J.

    Segment ``b`` gets ``points[b]`` grid points ``origin_s[b] + k * step_s`` (k = 0, 1, ...),
    which must lie within the segment. The results of all segments are concatenated.
    Vectorised: each sample is put in the cell of the first grid point at or after it, and a
    cumulative histogram gives the last sample before every grid point.
    """
    points = np.asarray(points, dtype=np.int64)
    total = int(points.sum())
    if total == 0:
        return np.empty(0)
    t_s = series.t_s
    offsets = np.concatenate([[0], np.cumsum(points)])
    if series.segments == 1:
        rel = np.subtract(t_s, origin_s[0])
        cell_max: np.ndarray | int = int(points[0])
    else:
        counts = series.seg_last - series.seg_first + 1
        seg_of_sample = np.repeat(np.arange(series.segments), counts)
        rel = np.subtract(t_s, origin_s[seg_of_sample])
        cell_max = points[seg_of_sample]
    rel *= 1.0 / step_s
    rel -= _TOL
    np.ceil(rel, out=rel)  # index of the first grid point at or after each sample
    np.maximum(rel, 0.0, out=rel)
    cell = rel.astype(np.int64)
    np.minimum(cell, cell_max, out=cell)
    if series.segments == 1:
        g_s = np.arange(total, dtype=np.float64)
        g_s *= step_s
        g_s += origin_s[0]
    else:
        cell += offsets[seg_of_sample]
        seg_of_point = np.repeat(np.arange(series.segments), points)
        g_s = (np.arange(total) - offsets[seg_of_point]).astype(np.float64)
        g_s *= step_s
        g_s += origin_s[seg_of_point]
    j = np.cumsum(np.bincount(cell, minlength=total + 1)[:total])
    j -= 1  # the last sample at or before each grid point
    g_s -= np.take(t_s, j)
    g_s *= np.take(series.rate_w, j)
    g_s += np.take(series.energy_j, j)
    return g_s


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
    points = np.floor(span_s / step_s + _TOL).astype(np.int64) + 1
    origin_s = series.t_s[series.seg_first]
    grid_j = energy_at_grid(series, origin_s, points, step_s)
    offsets = np.concatenate([[0], np.cumsum(points)])
    local = None
    if series.segments > 1:
        local = np.arange(len(grid_j)) - np.repeat(offsets[:-1], points)
    results = []
    diff_buf = np.empty(len(grid_j))  # reused by every window (no fresh pages per window)
    mask_buf = np.empty(len(grid_j), dtype=bool)
    for window_s in windows_s:
        ratio = window_s / step_s
        m = round(ratio)
        on_grid = m >= 1 and abs(ratio - m) <= _TOL * max(1.0, ratio)
        k0 = m if on_grid else math.ceil(ratio - _TOL)
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
        over_mask = np.greater(diff_j, cap_w * window_s, out=mask_buf[: len(diff_j)])
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
    points = np.floor(series.seg_span_s / step_s + _TOL).astype(np.int64) + 1
    origin_s = series.t_s[series.seg_first]
    k0 = math.ceil(window_s / step_s - _TOL)
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
    first_edge = np.ceil(first_t / bin_s - _TOL).astype(np.int64)
    last_edge = np.floor(last_t / bin_s + _TOL).astype(np.int64)
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
        bad = None
        if not ok.all():
            bad = np.concatenate([[0], np.cumsum(~ok)])
        for i, w in enumerate(self.window_bins):
            first = max(fresh, w - 1)  # first window end (bin index) not counted before
            if first >= n:
                continue
            sums = csum[first + 1 :] - csum[first + 1 - w : n + 1 - w]
            threshold = self.cap_w * w * self.bin_s
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
        if round(ratio) < 1 or abs(ratio - round(ratio)) > _TOL * max(1.0, ratio):
            raise ValueError(
                f"window {window_s} s is not a whole number of {bin_s} s bins "
                "(windows.windows_s and windows.bin_s in the config)"
            )
        out.append(round(ratio))
    return out


@dataclass
class WindowsResult:
    """Everything the windows stage computes for one trace."""

    exceedance: pd.DataFrame
    gaps: pd.DataFrame
    bins: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def _data_label(simulated: bool) -> str:
    return "simulated" if simulated else "measured"


def model_size_of(metadata: Any) -> str | None:
    """The model size a trace's metadata names (``model_size`` or ``size``), if any."""
    extra = getattr(metadata, "model_extra", None) or {}
    for key in ("model_size", "size"):
        if extra.get(key) is not None:
            return str(extra[key])
    return None


def _gap_rows(
    run_id: str, series: GpuSeries, windows_s: Sequence[float], step_s: float
) -> list[dict[str, Any]]:
    rows = []
    span_s = series.seg_span_s
    counts = series.seg_last - series.seg_first + 1
    for b in range(1, series.segments):
        start_s = float(series.t_s[series.seg_last[b - 1]])
        end_s = float(series.t_s[series.seg_first[b]])
        for window_s in windows_s:
            short = span_s[b] < window_s - _TOL * step_s
            rows.append(
                {
                    "run_id": run_id,
                    "gpu": series.gpu,
                    "gap": b,
                    "start_s": start_s,
                    "end_s": end_s,
                    "gap_s": end_s - start_s,
                    "window_s": window_s,
                    # No window can end in the gap nor in the first window_s after it.
                    "removed_s": end_s - start_s + min(window_s, float(span_s[b])),
                    "lost_window_ends": int(
                        min(math.ceil(window_s / step_s - _TOL), span_s[b] / step_s + 1)
                    ),
                    "samples_unused": int(counts[b]) if short else 0,
                }
            )
    return rows


def analyze_trace(trace: Trace, config: Config) -> WindowsResult:
    """Exceedance per GPU and per run at every configured window, gaps, and energy bins.

    Rows of ``exceedance`` (one per scope and window):
    - ``scope = gpu``: one GPU;
    - ``scope = run_pooled``: all the run's GPU windows pooled (the study's per-run share);
    - ``scope = run_total``: the run's summed power against ``n_gpus x cap_w``, on the bin grid
      (windows where every GPU has data).
    """
    cfg = config.windows
    meta = trace.metadata
    where = str(trace.path)
    period_s = meta.sample_period_s
    step_s = cfg.step_s or period_s
    max_gap_s = cfg.gap_periods * period_s
    cap_w = config.cap_w
    windows_s = list(cfg.windows_s)
    all_series = series_from_frame(trace.frame, max_gap_s, where, meta.nameplate_w)
    label = _data_label(meta.simulated or meta.source == "simulated")
    common = {"run_id": meta.run_id, "cap_w": cap_w, "data": label}

    rows: list[dict[str, Any]] = []
    gap_rows: list[dict[str, Any]] = []
    pooled = {w: [0, 0, -np.inf] for w in windows_s}
    bin_frames = []
    for series in all_series:
        counts = gpu_window_counts(series, windows_s, cap_w, step_s)
        span_s = series.seg_span_s
        seg_counts = series.seg_last - series.seg_first + 1
        gap_s = float((series.t_s[series.seg_first[1:]] - series.t_s[series.seg_last[:-1]]).sum())
        over_samples = int(np.count_nonzero(series.power_w > cap_w))
        for c in counts:
            unused = int(seg_counts[span_s < c.window_s - _TOL * step_s].sum())
            note = ""
            if c.windows == 0:
                note = (
                    f"no full window: the longest contiguous segment is {span_s.max():.6g} s, "
                    f"shorter than {c.window_s:g} s"
                )
            rows.append(
                {
                    **common,
                    "scope": "gpu",
                    "gpu": series.gpu,
                    "window_s": c.window_s,
                    "windows": c.windows,
                    "windows_over": c.over,
                    "exceedance": c.exceedance,
                    "peak_mean_w": c.peak_mean_w,
                    "peak_share_nameplate": c.peak_mean_w / meta.nameplate_w,
                    "nameplate_w": meta.nameplate_w,
                    "samples": len(series.t_s),
                    "samples_over_cap": over_samples,
                    "segments": series.segments,
                    "gap_s": gap_s,
                    "samples_unused": unused,
                    "energy_source": series.energy_source,
                    "counter_resets": series.counter_resets,
                    "note": note,
                }
            )
            acc = pooled[c.window_s]
            acc[0] += c.windows
            acc[1] += c.over
            if c.windows:
                acc[2] = max(acc[2], c.peak_mean_w)
        gap_rows.extend(_gap_rows(meta.run_id, series, windows_s, step_s))
        index, energy = energy_bins(series, meta.start_unix_s, cfg.bin_s)
        bin_frames.append(
            pd.DataFrame(
                {"bin": index, "gpu": np.full(len(index), series.gpu, np.int32), "energy_j": energy}
            )
        )
    n_gpus = len(all_series)
    n_samples = sum(len(s.t_s) for s in all_series)
    sources = sorted({s.energy_source for s in all_series})
    first_rows = [r for r in rows if r["window_s"] == windows_s[0]]
    run_common = {
        **common,
        "gpu": -1,
        "nameplate_w": meta.nameplate_w * n_gpus,
        "samples": n_samples,
        "samples_over_cap": sum(r["samples_over_cap"] for r in first_rows),
        "segments": sum(s.segments for s in all_series),
        "gap_s": sum(r["gap_s"] for r in first_rows),
        "energy_source": sources[0] if len(sources) == 1 else "mixed",
        "counter_resets": sum(s.counter_resets for s in all_series),
    }
    for window_s in windows_s:
        windows, over, peak = pooled[window_s]
        peak = peak if windows else float("nan")
        rows.append(
            {
                **run_common,
                "scope": "run_pooled",
                "window_s": window_s,
                "windows": windows,
                "windows_over": over,
                "exceedance": over / windows if windows else float("nan"),
                "peak_mean_w": peak,
                "peak_share_nameplate": peak / meta.nameplate_w,
                "samples_unused": sum(
                    r["samples_unused"]
                    for r in rows
                    if r["scope"] == "gpu" and r["window_s"] == window_s
                ),
                "note": "" if windows else "no full window on any GPU",
            }
        )
    bins = pd.concat(bin_frames, ignore_index=True)
    bins = bins.iloc[np.lexsort((bins["gpu"].to_numpy(), bins["bin"].to_numpy()))]
    bins = bins.reset_index(drop=True)
    for c in run_total_counts(bins, n_gpus, windows_s, cfg.bin_s, cap_w * n_gpus):
        rows.append(
            {
                **run_common,
                "scope": "run_total",
                "window_s": c.window_s,
                "windows": c.windows,
                "windows_over": c.over,
                "exceedance": c.exceedance,
                "peak_mean_w": c.peak_mean_w,
                "peak_share_nameplate": c.peak_mean_w / (meta.nameplate_w * n_gpus),
                "cap_w": cap_w * n_gpus,
                "samples_unused": 0,
                "note": "summed power of all GPUs vs n_gpus x cap_w, windows on the "
                f"{cfg.bin_s:g} s wall-clock bin grid"
                + ("" if c.windows else "; no full window where every GPU has data"),
            }
        )
    exceedance = pd.DataFrame(rows)
    gaps = pd.DataFrame(
        gap_rows,
        columns=[
            "run_id",
            "gpu",
            "gap",
            "start_s",
            "end_s",
            "gap_s",
            "window_s",
            "removed_s",
            "lost_window_ends",
            "samples_unused",
        ],
    )
    summary = {
        "trace": where,
        "run_id": meta.run_id,
        "source": meta.source,
        "simulated": label == "simulated",
        "data": label,
        "model_size": model_size_of(meta),
        "gpu_name": meta.gpu_name,
        "gpus": [s.gpu for s in all_series],
        "n_gpus": n_gpus,
        "nameplate_w": meta.nameplate_w,
        "cap_w": cap_w,
        "sample_period_s": period_s,
        "step_s": step_s,
        "max_gap_s": max_gap_s,
        "bin_s": cfg.bin_s,
        "windows_s": windows_s,
        "start_unix_s": meta.start_unix_s,
        "samples": n_samples,
        "gaps": int(sum(s.segments - 1 for s in all_series)),
        "gap_s": float(run_common["gap_s"]),
        "energy_source": run_common["energy_source"],
        "counter_resets": int(run_common["counter_resets"]),
        "trace_complete": trace.complete,
        "bins": len(bins),
        "bin_range": [int(bins["bin"].min()), int(bins["bin"].max())] if len(bins) else None,
    }
    return WindowsResult(exceedance=exceedance, gaps=gaps, bins=bins, summary=summary)


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


def bins_metadata(result: WindowsResult) -> dict[bytes, bytes]:
    """Schema metadata of ``bins.parquet``: what the fleet stage needs to know about the run."""
    keys = (
        "run_id",
        "source",
        "simulated",
        "data",
        "model_size",
        "gpu_name",
        "gpus",
        "n_gpus",
        "nameplate_w",
        "cap_w",
        "bin_s",
        "start_unix_s",
        "bin_range",
        "trace",
    )
    info = {k: result.summary[k] for k in keys}
    return {BINS_METADATA_KEY: json.dumps(info).encode()}


def write_windows(result: WindowsResult, out_dir: Path | str) -> list[Path]:
    """Write a trace's windows outputs into ``out_dir`` (each file atomically).

    Files: ``exceedance.csv``/``.parquet``, ``gaps.csv``, ``bins.parquet`` (per-GPU energy per
    wall-clock bin, sorted by bin, for the fleet stage) and ``summary.json``.
    """
    from grpo_power.atomic import (
        write_csv_atomic,
        write_json_atomic,
        write_parquet_atomic,
    )

    out = Path(out_dir)
    paths = [
        write_csv_atomic(out / "exceedance.csv", result.exceedance),
        write_parquet_atomic(out / "exceedance.parquet", result.exceedance),
        write_csv_atomic(out / "gaps.csv", result.gaps),
        write_parquet_atomic(out / "bins.parquet", result.bins, metadata=bins_metadata(result)),
        write_json_atomic(out / "summary.json", result.summary),
    ]
    return paths


def run_windows(
    trace_path: Path | str,
    out_dir: Path | str,
    config: Config,
    split_on_clock_jumps: bool = False,
) -> WindowsResult:
    """The windows stage for one trace file: read, analyse, write; returns the result.

    The trace is read by :func:`grpo_power.telemetry.store.read_trace` (the one trace check):
    metadata it lacks comes from ``config``, and what was inferred is listed in the summary's
    ``notes``.
    """
    trace = read_trace(trace_path, TraceDefaults.from_config(config), split_on_clock_jumps)
    result = analyze_trace(trace, config)
    result.summary["notes"] = list(trace.notes)
    write_windows(result, out_dir)
    return result
