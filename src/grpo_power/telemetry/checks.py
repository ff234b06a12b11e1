"""Checks shared by every reader of a trace or a log (import, summary, windows, identify,
economics, report): power samples, the unit of t, clock jumps and restarts of the energy counter.

Power in a trace is instantaneous board power in watts (docs/design.md section 7). A sample is
refused when it is NaN or infinite, negative, or implausibly high: above
:data:`MAX_NAMEPLATE_MULTIPLE` times the GPU's nameplate (board) power. Sourced readings stay near
nameplate (prefill peaks about 1.09x, docs/calibration.md 'prefill'), so 3x leaves ample room for
millisecond excursions while catching a log in the wrong unit: milliwatts (NVML's raw unit, which
some exporters pass through) are 1000x too large, and the message says so.

Every error names the file, the column, the GPU and the time of the first bad sample, and what
was expected, in the form ``<file>: <column>: expected ..., got ...``.

Time (:func:`time_unit`, :func:`check_clock`, :func:`split_clock_jumps`): t is in seconds and
increases strictly within each GPU in recorded order. Milliseconds are recognised by size
(wall-clock values) or by the spacing of samples against the declared or typical period, and an
ambiguous spacing is refused. A t that repeats or steps back (a clock stepped back by NTP or a
reboot, two logs concatenated) is refused with its rows, or split into segments on request;
samples are never sorted into an order they were not recorded in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.listing import named_few

MAX_NAMEPLATE_MULTIPLE = 3.0  # power above this many times nameplate is not a real reading


def power_limit_w(nameplate_w: float) -> float:
    """The highest plausible power reading of a GPU with this nameplate, W."""
    return MAX_NAMEPLATE_MULTIPLE * nameplate_w


def check_power(
    gpu: int,
    t_s: np.ndarray,
    power_w: np.ndarray,
    where: str,
    nameplate_w: float | None = None,
    column: str = "power_w",
    lines: np.ndarray | None = None,
) -> None:
    """Raise if any power sample of one GPU is NaN, infinite, negative or implausibly high.

    Args:
        gpu: GPU index (for the message).
        t_s: sample times, s (for the message), same length as ``power_w``.
        power_w: power samples, W.
        where: the file name used in messages.
        nameplate_w: the GPU's nameplate power, W; None skips the upper bound.
        column: the column the samples came from (for the message).
        lines: each sample's line in the file it was read from, for the message; None: the
            samples are not a file's lines.

    Raises:
        ValueError: naming the file, the column, the GPU, the first bad sample's time and value,
            and what was expected.
    """
    power_w = np.asarray(power_w, dtype=np.float64)
    if len(power_w) == 0:
        return
    # Two cheap whole-array reductions; the slow diagnosis runs only when one fails.
    low, high = float(power_w.min()), float(power_w.max())  # NaN propagates to both
    limit_w = np.inf if nameplate_w is None else power_limit_w(nameplate_w)
    if low >= 0 and high <= limit_w and np.isfinite(high):
        return
    t_s = np.asarray(t_s, dtype=np.float64)

    def at(i: int) -> str:
        """Where sample ``i`` is: its time, and its line in the file where known."""
        line = f", line {int(lines[i])}" if lines is not None else ""
        return f"t = {t_s[i]:.6g} s{line}"

    bad = ~np.isfinite(power_w)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"{where}: {column}: expected finite watts, got {int(bad.sum())} sample(s) with NaN "
            f"or infinite power on gpu {gpu} (first at {at(i)}); drop or repair those rows"
        )
    if low < 0:
        i = int(np.argmax(power_w < 0))
        raise ValueError(
            f"{where}: {column}: expected watts >= 0, got negative power {power_w[i]:.6g} W on "
            f"gpu {gpu} at {at(i)}"
        )
    assert nameplate_w is not None  # only an upper bound is left
    over = power_w > limit_w
    i = int(np.argmax(over))
    drawing = power_w[power_w > 0]  # a GPU that draws anything draws over 3x nameplate in mW
    if (drawing > limit_w).all() and high / 1000.0 <= limit_w:  # the log's unit, not a reading
        hint = "it looks like milliwatts: convert the column to watts (divide by 1000)"
    elif over.mean() >= 0.5:
        hint = "check the column's unit and the nameplate"
    else:  # most readings are plausible: these are spikes no board of this nameplate draws
        hint = "drop or repair those rows (a corrupt reading), or check the nameplate"
    raise ValueError(
        f"{where}: {column}: expected watts at most {MAX_NAMEPLATE_MULTIPLE:g} x the nameplate "
        f"{nameplate_w:g} W = {limit_w:g} W, got {power_w[i]:.6g} on gpu {gpu} at {at(i)} "
        f"({int(over.sum())} such sample(s) of {len(power_w)}); {hint}"
    )


def check_frame_power(
    frame: pd.DataFrame,
    where: str,
    nameplate_w: float | None,
    column: str = "power_w",
    lines: np.ndarray | None = None,
) -> None:
    """:func:`check_power` on every GPU of a trace frame (columns ``gpu``, ``t``, ``power_w``);
    ``column`` is the name messages give the power (an imported log's own column name),
    ``lines`` each row's line in the log it was read from (None: not known)."""
    power_w = frame["power_w"].to_numpy(dtype=np.float64, na_value=np.nan)
    if len(power_w) == 0:
        return
    low, high = float(power_w.min()), float(power_w.max())  # NaN propagates to both
    limit_w = np.inf if nameplate_w is None else power_limit_w(nameplate_w)
    if low >= 0 and high <= limit_w and np.isfinite(high):
        return  # the common case: one pass, no per-GPU split
    positions = np.arange(len(frame))
    for gpu, rows in pd.Series(positions).groupby(frame["gpu"].to_numpy(), sort=True):
        at = rows.to_numpy()
        check_power(
            int(gpu),
            frame["t"].to_numpy()[at],
            power_w[at],
            where,
            nameplate_w,
            column,
            None if lines is None else np.asarray(lines)[at],
        )


# --------------------------------------------------------------------------------------------
# time: the unit of t, and clock jumps (one check for every reader of a trace or a log)

TYPICAL_PERIOD_S = (0.01, 60.0)  # sample periods of power telemetry: 10 ms to 1 min
EPOCH_S_MIN = 1e8  # t at or above this is wall-clock time (1973 or later in seconds)
EPOCH_MS_MIN = 1e11  # ... and at or above this, wall-clock time in milliseconds
MAX_SEGMENTS = 100  # --split-on-clock-jumps: more pieces than this is not a log with a few jumps


def rows_by_gpu(gpu: np.ndarray) -> np.ndarray:
    """The row numbers in GPU order, each GPU's rows in recorded order (a stable sort; numpy's
    linear-time radix sort where the GPU numbers span fewer than 65,536)."""
    if not len(gpu):
        return np.empty(0, dtype=np.int64)
    lo, hi = int(gpu.min()), int(gpu.max())
    key = (gpu - lo).astype(np.uint16) if hi - lo < 65_536 else gpu
    return np.argsort(key, kind="stable")


def segment_gap_s(period_s: float) -> float:
    """The gap that ends a stretch of one GPU's samples, s: ``max(60 s, 100 sample periods)``
    (the clock-jump split lays segments this far apart; a log that holds a GPU over a longer
    gap does not hold it in between)."""
    return max(60.0, 100.0 * period_s)


def median_spacing(gpu: np.ndarray, t: np.ndarray, limit: int = 1_000_000) -> float | None:
    """Median interval between consecutive samples of the same GPU (first ``limit`` rows), in
    t's own unit; None when no GPU has two samples."""
    gpu, t = np.asarray(gpu[:limit]), np.asarray(t[:limit], dtype=np.float64)
    if len(t) < 2:
        return None
    if gpu.min() == gpu.max():
        dt = np.diff(t)
    else:
        order = rows_by_gpu(gpu)
        dt = np.diff(t[order])[np.diff(gpu[order]) == 0]
    dt = dt[np.isfinite(dt) & (dt > 0)]
    return float(np.median(dt)) if len(dt) else None


def gpu_period_s(t_s: np.ndarray, period_s: float) -> float:
    """One GPU's sample period, s, from its sample times ``t_s``: the trace's ``period_s`` (its
    GPUs' pooled median spacing), or the GPU's own median spacing where that is longer. A log
    whose hosts are scraped at different intervals has one trace period, that of its most
    sampled GPUs, under which every interval of a slower GPU would be a gap (no energy)."""
    spacing = median_spacing(np.zeros(len(t_s), dtype=np.int64), np.asarray(t_s))
    return max(period_s, spacing) if spacing is not None else period_s


def time_unit(
    t: np.ndarray,
    spacing: float | None,
    where: str,
    column: str = "t",
    declared_period_s: float | None = None,
    declared_from: str = "",
    declared_by_trace: bool = True,
) -> tuple[float, str | None]:
    """The factor that turns ``t`` into seconds (1 or 0.001) and a note when it is not 1.

    Wall-clock values tell their unit by size (unix seconds ~1.7e9, milliseconds ~1.7e12).
    Relative times tell it by the spacing of samples: against the declared period when there is
    one (spacing about 1x the period: seconds; about 1000x: milliseconds), else against the
    typical periods of power telemetry (:data:`TYPICAL_PERIOD_S`). A period the trace does not
    declare itself (``declared_by_trace`` False: the config's, for a trace without metadata)
    reads a spacing as seconds where it matches, but never reads as milliseconds a spacing that
    is a typical period in seconds too (60 apart: a minute's log, not 60 ms).

    Raises:
        ValueError: the spacing fits a typical period both in seconds and in milliseconds and
            nothing declared decides (the message says what was found and how to settle it).
    """
    finite = t[np.isfinite(t)] if len(t) else t
    if len(finite) == 0:
        return 1.0, None
    first = float(np.abs(finite[0]))
    if first >= EPOCH_MS_MIN:
        return 1e-3, (
            f"{where}: {column}: read as unix time in milliseconds ({finite[0]:.13g}; in seconds "
            "it would lie after the year 5000)"
        )
    if first >= EPOCH_S_MIN or spacing is None:
        return 1.0, None
    if declared_period_s:
        ratio = spacing / declared_period_s
        if 0.5 <= ratio <= 2.0:
            return 1.0, None
        typical_s = TYPICAL_PERIOD_S[0] <= spacing <= TYPICAL_PERIOD_S[1]
        if 500.0 <= ratio <= 2000.0 and (declared_by_trace or not typical_s):
            return 1e-3, (
                f"{where}: {column}: read as milliseconds (samples {spacing:.6g} apart; "
                f"{declared_from} period {declared_period_s:g} s)"
            )
    low, high = TYPICAL_PERIOD_S
    as_s = low <= spacing <= high
    as_ms = low <= spacing / 1000.0 <= high
    if as_ms and not as_s:
        return 1e-3, (
            f"{where}: {column}: read as milliseconds (samples {spacing:.6g} apart: a "
            f"{spacing / 1000.0:.6g} s period; {spacing:.6g} s would be longer than any power "
            "log's)"
        )
    if as_s and as_ms:
        declared = ""
        if declared_period_s:
            thousandfold = 500.0 <= spacing / declared_period_s <= 2000.0
            fits = "does not decide" if thousandfold else "fits neither"
            declared = f", and {declared_from} period {declared_period_s:g} s {fits}"
        raise ValueError(
            f"{where}: {column}: cannot tell the time unit: samples are {spacing:.6g} apart, a "
            f"{spacing:.6g} s or a {spacing:.6g} ms period{declared}; expected t in seconds "
            "with a declared period that matches (the trace metadata's sample_period_s, or for a "
            "trace without metadata the config's telemetry.period_s)"
        )
    return 1.0, None


def time_steps_back(gpu: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Rows (in recorded order) whose t is not above the previous t of the same GPU."""
    n = len(t)
    if n < 2:
        return np.empty(0, dtype=np.int64)
    if gpu.min() == gpu.max():
        return np.flatnonzero(~(np.diff(t) > 0)) + 1
    order = rows_by_gpu(gpu)
    same = np.diff(gpu[order]) == 0
    bad = same & ~(np.diff(t[order]) > 0)
    return np.sort(order[1:][bad])


def counter_restarts(
    gpu: np.ndarray,
    t: np.ndarray,
    power_w: np.ndarray,
    energy_j: np.ndarray,
    where: str,
    rows: np.ndarray | None = None,
    row_word: str = "row",
) -> tuple[np.ndarray, list[str]]:
    """The energy counter continued across its restarts, and a note naming the GPUs whose
    counter restarted (one note for them all: a driver reload restarts every GPU's).

    A cumulative counter (NVML's, DCGM's total energy) only grows; one that steps back was
    restarted (a driver reload, a GPU reset, an exporter restarted). Taken as it is, a
    restart gives a GPU negative energy. Here the interval over which it stepped back counts
    the energy its two samples' power gives (trapezoid), and the counter goes on from there.
    Rows are in recorded order, t increasing within each GPU; a GPU with a missing counter
    reading is left as it is (its energy is integrated power). Returns ``energy_j`` itself
    where no counter steps back. ``rows`` numbers the rows for the notes (default: from 1).
    """
    if len(energy_j) < 2 or not np.isfinite(energy_j).any():
        return energy_j, []
    order = rows_by_gpu(gpu)
    counter = energy_j[order]
    back = (np.diff(gpu[order]) == 0) & (np.diff(counter) < 0)
    if not back.any():
        return energy_j, []
    shown = rows if rows is not None else np.arange(1, len(t) + 1)
    out = energy_j.astype(np.float64, copy=True)
    restarted = []  # per GPU: "gpu G: N time(s), first at row R"
    for g in np.unique(gpu[order][1:][back]):
        mine = order[gpu[order] == g]
        if not np.isfinite(energy_j[mine]).all():
            continue
        step = np.diff(energy_j[mine])
        restarts = np.flatnonzero(step < 0)
        bridged = 0.5 * (power_w[mine][1:] + power_w[mine][:-1]) * np.diff(t[mine])
        step[restarts] = bridged[restarts]
        out[mine] = energy_j[mine][0] + np.concatenate([[0.0], np.cumsum(step)])
        first = int(shown[mine[restarts[0] + 1]])
        restarted.append(f"gpu {int(g)}: {len(restarts)} time(s), first at {row_word} {first}")
    if not restarted:
        return out, []
    return out, [
        f"{where}: the energy counter steps back ({named_few(restarted, sep='; ')}; restarted: "
        "a driver reload, a GPU reset or an exporter restarted): counted on across each "
        "restart, its interval by integrated power"
    ]


def _previous_row(gpu: np.ndarray, row: int) -> int:
    earlier = np.flatnonzero(gpu[:row] == gpu[row])
    return int(earlier[-1])


def clock_jump_error(
    gpu: np.ndarray,
    t: np.ndarray,
    bad: np.ndarray,
    where: str,
    rows: np.ndarray | None = None,
    row_word: str = "row",
    unit: str = "s",
) -> ValueError:
    """The error naming the rows where t repeats or steps back (``bad`` from
    :func:`time_steps_back`); ``rows`` numbers the rows for the message (default: from 1)."""
    shown = rows if rows is not None else np.arange(1, len(t) + 1)
    first = int(bad[0])
    before = _previous_row(gpu, first)
    kind = "duplicated" if t[first] == t[before] else "decreasing"
    listed = ", ".join(str(int(shown[i])) for i in bad[:5]) + (", ..." if len(bad) > 5 else "")
    return ValueError(
        f"{where}: gpu {int(gpu[first])}: {kind} timestamp at {row_word} {int(shown[first])}: t "
        f"goes from {t[before]:.9g} {unit} ({row_word} {int(shown[before])}) to {t[first]:.9g} "
        f"{unit}; {len(bad)} such {row_word}(s) ({listed}); t must increase strictly within a "
        "GPU (a clock that stepped back, or two recordings concatenated?): give "
        "--split-on-clock-jumps to split it into segments there"
    )


def check_clock(
    gpu: np.ndarray,
    t: np.ndarray,
    where: str,
    rows: np.ndarray | None = None,
    row_word: str = "row",
) -> None:
    """Raise unless t is finite and increases strictly within every GPU (recorded order)."""
    bad_t = ~np.isfinite(t)
    if bad_t.any():
        i = int(np.argmax(bad_t))
        shown = int(rows[i]) if rows is not None else i + 1
        raise ValueError(f"{where}: t is not a finite number at {row_word} {shown}")
    bad = time_steps_back(gpu, t)
    if len(bad):
        raise clock_jump_error(gpu, t, bad, where, rows, row_word)


@dataclass(frozen=True)
class ClockSplit:
    """How :func:`split_clock_jumps` reordered and shifted rows: ``order`` (new row -> old row),
    ``t`` (the new times, s) and one record per jump for the trace metadata."""

    order: np.ndarray
    t: np.ndarray
    jumps: list[dict[str, Any]]
    note: str


def split_clock_jumps(
    gpu: np.ndarray,
    t: np.ndarray,
    where: str,
    rows: np.ndarray | None = None,
    row_word: str = "row",
) -> ClockSplit | None:
    """Split a series at every row where t repeats or steps back (``--split-on-clock-jumps``).

    Each piece is a run of rows in recorded order in which every GPU's t increases. Pieces
    whose time ranges do not overlap (recordings concatenated out of order) are put in time
    order and keep their times. Overlapping pieces (a clock stepped back) are laid end to end:
    each starts a gap of ``max(60 s, 100 sample periods)`` after the previous one ends, so no
    window and no energy integral spans a jump, and their wall-clock time is then approximate.
    Returns None when there is no jump.

    Raises:
        ValueError: a t that is not finite, or more than :data:`MAX_SEGMENTS` pieces.
    """
    if not np.isfinite(t).all():
        check_clock(gpu, t, where, rows, row_word)
    starts = [0]
    while True:
        start = starts[-1]
        bad = time_steps_back(gpu[start:], t[start:])
        if not len(bad):
            break
        starts.append(start + int(bad[0]))
        if len(starts) > MAX_SEGMENTS:
            raise ValueError(
                f"{where}: more than {MAX_SEGMENTS} clock jumps (t repeats or steps back at "
                f"{row_word}s {', '.join(str(s + 1) for s in starts[1:6])}, ...): not a log "
                "with a few jumps; expected t to increase within each GPU"
            )
    if len(starts) == 1:
        return None
    shown = rows if rows is not None else np.arange(1, len(t) + 1)
    bounds = [*starts, len(t)]
    pieces = [(bounds[k], bounds[k + 1]) for k in range(len(starts))]
    ranges = [(float(t[a:b].min()), float(t[a:b].max())) for a, b in pieces]
    by_time = sorted(range(len(pieces)), key=lambda k: ranges[k][0])
    disjoint = all(
        ranges[by_time[k]][1] < ranges[by_time[k + 1]][0] for k in range(len(by_time) - 1)
    )
    spacing = median_spacing(gpu, t) or 1.0
    jumps = [
        {"row": int(shown[s]), "from_s": float(t[_previous_row(gpu, s)]), "to_s": float(t[s])}
        for s in starts[1:]
    ]
    listed = ", ".join(str(j["row"]) for j in jumps[:5]) + (", ..." if len(jumps) > 5 else "")
    if disjoint:
        order = np.concatenate([np.arange(*pieces[k]) for k in by_time])
        note = (
            f"{where}: {len(pieces)} recordings concatenated out of order (t steps back at "
            f"{row_word}(s) {listed}): put in time order, each keeps its own times"
        )
        return ClockSplit(order, t[order].astype(np.float64), jumps, note)
    gap_s = segment_gap_s(spacing)
    new_t = t.astype(np.float64).copy()
    end = ranges[0][1]
    for k, (a, b) in enumerate(pieces[1:], 1):
        shift = end + gap_s - ranges[k][0]
        new_t[a:b] += shift
        jumps[k - 1]["shift_s"] = shift
        end = ranges[k][1] + shift
    note = (
        f"{where}: split at {len(jumps)} clock jump(s) ({row_word}(s) {listed}) into "
        f"{len(pieces)} segments laid end to end {gap_s:g} s apart (no window spans a jump; "
        "wall-clock times after a jump are approximate)"
    )
    return ClockSplit(np.arange(len(t)), new_t, jumps, note)
