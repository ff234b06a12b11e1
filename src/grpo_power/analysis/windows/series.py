"""One GPU's samples made into a series: checked (time, power), its cumulative energy from
the counter or the trapezoid, its contiguous segments, and its energy at any time (the
constant-rate interpolation every window uses)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_power.telemetry.checks import check_power, gpu_period_s, rows_by_gpu

TOL = 1e-9  # relative tolerance of grid arithmetic, in units of the step
# A window whose mean is within a microwatt of the cap is at the cap, not above it: meters resolve
# milliwatts, and a window's energy, a difference of cumulative sums, carries their rounding
CAP_RESOLUTION_W = 1e-6


def cap_energy_j(cap_w: float, window_s: float, cumulative_scale_j: float) -> float:
    """The energy a window of ``window_s`` seconds must exceed to be above ``cap_w``, J: the
    cap's energy plus the rounding a difference of cumulative energies as large as
    ``cumulative_scale_j`` (their largest magnitude) can carry, and a microwatt over the window.
    Power exactly at the cap is never above it however long the trace."""
    rounding_j = 64 * float(np.finfo(np.float64).eps) * cumulative_scale_j
    return (cap_w + CAP_RESOLUTION_W) * window_s + rounding_j


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
    gap_periods: float,
    period_s: float,
    where: str = "<trace>",
    nameplate_w: float | None = None,
) -> list[GpuSeries]:
    """Split a trace frame into checked per-GPU series (rows keep their recorded order).

    An interval longer than ``gap_periods`` of a GPU's own sample period is a gap: the trace's
    ``period_s``, or the GPU's median spacing where that is longer
    (:func:`grpo_power.telemetry.checks.gpu_period_s`). ``nameplate_w`` (the trace metadata's)
    bounds plausible power, see :func:`prepare_series`.
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
                gap_periods * gpu_period_s(t_cols[k], period_s),
                where,
                nameplate_w,
            )
            for k, g in enumerate(ids)
        ]
    order = rows_by_gpu(gpu)
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
                gap_periods * gpu_period_s(t_s[rows], period_s),
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
    rel -= TOL
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
