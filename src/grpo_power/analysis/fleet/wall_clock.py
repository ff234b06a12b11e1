"""Wall-clock fleets: runs that ran concurrently summed bin by bin, one partition of bins at
a time; and the choice between wall-clock alignment and Monte Carlo."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.analysis.fleet.inputs import RunBins, read_bins
from grpo_power.analysis.windows import (
    WindowAccumulator,
    WindowCounts,
    window_bins_of,
)
from grpo_power.config import Config
from grpo_power.listing import named_few


def wall_clock_fleet(
    runs: Sequence[RunBins],
    windows_s: Sequence[float],
    bin_s: float,
    cap_w: float,
    partition_bins: int,
) -> tuple[list[WindowCounts], dict[str, Any]]:
    """The input runs summed bin by bin in real time, one time partition at a time.

    Returns per-window counts against ``cap_w`` (the fleet's total cap) and a summary of the
    common time range (``common_start_unix_s`` to ``common_end_unix_s``, set by the run that
    starts last, ``starts_last``, and the one that ends first, ``ends_first``). Only bins
    where every GPU of every run has data count: the summary says
    how many (``complete_bins`` of ``common_bins``) and, per run, in how many of the common bins
    one of its GPUs has none (``bins_without_a_reading``: a gap, a logger restarted, a GPU lost).
    """
    window_bins = window_bins_of(windows_s, bin_s)
    n_gpus = sum(r.n_gpus for r in runs)
    ranges = [r.bin_range for r in runs]
    acc = WindowAccumulator(window_bins, bin_s, cap_w)
    info: dict[str, Any] = {"common_bins": 0, "complete_bins": 0, "partitions": 0}
    without = dict.fromkeys((r.run_id for r in runs), 0)
    if any(r is None for r in ranges):
        return acc.results(), info
    lo = max(r[0] for r in ranges)  # type: ignore[index]
    hi = min(r[1] for r in ranges)  # type: ignore[index]
    info["common_bins"] = max(0, hi - lo + 1)
    info["common_start_unix_s"], info["common_end_unix_s"] = lo * bin_s, (hi + 1) * bin_s
    info["starts_last"] = max(runs, key=lambda r: r.bin_range[0]).run_id  # type: ignore[index]
    info["ends_first"] = min(runs, key=lambda r: r.bin_range[1]).run_id  # type: ignore[index]
    for start in range(lo, hi + 1, partition_bins):
        stop = min(start + partition_bins, hi + 1)
        size = stop - start
        energy = np.zeros(size)
        present = np.zeros(size, dtype=np.int64)
        for run in runs:
            rows = read_bins(run, ("bin", "energy_j"), [("bin", ">=", start), ("bin", "<", stop)])
            rel = rows["bin"] - start
            energy += np.bincount(rel, weights=rows["energy_j"], minlength=size)
            readings = np.bincount(rel, minlength=size)
            present += readings
            without[run.run_id] += int(np.count_nonzero(readings < run.n_gpus))
        valid = present == n_gpus
        info["complete_bins"] += int(np.count_nonzero(valid))
        info["partitions"] += 1
        acc.update(energy, valid)
    info["bins_without_a_reading"] = {run: n for run, n in without.items() if n}
    return acc.results(), info


NOTED_LOSS = 0.01  # a wall-clock fleet that leaves out this share of its bins says so
SHARED_GAP = 0.9  # every trace missing at least this share of the most any misses: a shared gap


def span_note(summary: dict[str, Any]) -> str | None:
    """The time a wall-clock fleet of several runs (its ``summary.json``) is the fleet of: the
    span every run covers, from the start of the last to start to the end of the first to end,
    where its peak and factor come from (the energy of each run counts its whole span); None for
    a fleet of one run, or one drawn by Monte Carlo."""
    if summary.get("alignment") != "wall_clock" or len(summary.get("run_ids", [])) < 2:
        return None
    start_s, end_s = summary.get("common_start_unix_s"), summary.get("common_end_unix_s")
    if start_s is None or end_s is None or end_s <= start_s:
        return None
    start, end = (pd.Timestamp(x, unit="s", tz="UTC") for x in (start_s, end_s))
    shown_end = end.strftime("%H:%M:%S" if end.date() == start.date() else "%Y-%m-%d %H:%M:%S")
    return (
        f"the wall-clock fleet is the time every trace covers: {start:%Y-%m-%d %H:%M:%S} to "
        f"{shown_end} UTC ({(end_s - start_s) / 3600:.2f} h), from the start of "
        f"{summary['starts_last']} (the last to start) to the end of {summary['ends_first']} "
        "(the first to end); its peaks and factor are of that time, the energy and cost of each "
        "trace's whole span"
    )


def coverage_note(summary: dict[str, Any]) -> str | None:
    """A note where a wall-clock fleet (its ``summary.json``) leaves out at least
    :data:`NOTED_LOSS` of the bins its runs share, naming the runs that cost most; None where it
    leaves out less (the seconds between two logs of a day each are no news), or is Monte Carlo.
    """
    common, complete = summary.get("common_bins", 0), summary.get("complete_bins", 0)
    wall_clock = summary.get("alignment") == "wall_clock" and common > 0
    if not wall_clock or common - complete < NOTED_LOSS * common:
        return None
    costly = sorted(summary["bins_without_a_reading"].items(), key=lambda item: -item[1])
    bins = f"{common:,} {summary['bin_s']:g} s bins"
    counted = (
        f"the wall-clock fleet counts {complete:,} of the {bins} its traces share "
        f"({100 * complete / common:.1f} %): a bin counts only where every GPU has a reading; "
    )
    runs = len(summary.get("run_ids", []))
    if runs > 1 and len(costly) == runs and costly[-1][1] >= SHARED_GAP * costly[0][1]:
        # every trace misses (nearly) the same bins: a gap they share, which no trace left out
        # would fill (every logger stopped at once, a nightly export window)
        return (
            f"{counted}every trace has no reading in {costly[-1][1]:,} to {costly[0][1]:,} of "
            "them, a gap they share (their logs stop at the same times), which leaving a trace "
            "out would not fill; set fleet.alignment: monte_carlo for a fleet of more of the time"
        )
    named = named_few([f"{run} ({n:,})" for run, n in costly])
    return (
        f"{counted}bins where a GPU of a trace has none (a gap, a logger restarted, a GPU lost): "
        f"{named}; leave out a trace that costs many, or set fleet.alignment: "
        "monte_carlo, for a fleet of more of the time"
    )


def no_sizing_window(
    counts: Sequence[WindowCounts], info: dict[str, Any], bin_s: float, window_s: float
) -> str | None:
    """Why a wall-clock fleet (its per-window ``counts`` and :func:`wall_clock_fleet`'s summary
    ``info``) cannot size the fleet: the bins where every GPU has a reading hold no whole sizing
    window, ``window_s`` (a GPU lost early, a row inventing a GPU), so its peak and factor would
    be NaN; None where they hold one."""
    sizing = next(c for c in counts if np.isclose(c.window_s, window_s))
    if sizing.windows:
        return None
    return (
        f"the bins where every GPU has a reading ({info['complete_bins']:,} of the "
        f"{info['common_bins']:,} {bin_s:g} s bins the runs share) hold no whole "
        f"{window_s:g} s sizing window"
    )


def choose_alignment(runs: Sequence[RunBins], config: Config) -> tuple[str, str | None]:
    """``wall_clock`` or ``monte_carlo``, and why ``fleet.alignment = auto`` drew the fleet by
    Monte Carlo (None where the config chose, or the clocks align): the fleet is not the runs'
    GPUs, a run has no complete bin, the runs' clocks do not overlap, a run spans less than the
    longest window (one run alone, too), or their clocks overlap by less than it."""
    if config.fleet.alignment != "auto":
        return config.fleet.alignment, None
    held = sum(r.n_gpus for r in runs)
    if held != config.fleet.n_gpus:
        return "monte_carlo", f"the fleet is {config.fleet.n_gpus} GPUs, its runs hold {held}"
    empty = next((r for r in runs if r.bin_range is None), None)
    if empty is not None:
        return "monte_carlo", f"{empty.run_id} has no complete energy bin"
    ranges = [r.bin_range for r in runs if r.bin_range is not None]
    overlap = min(r[1] for r in ranges) - max(r[0] for r in ranges) + 1
    bin_s = config.windows.bin_s
    longest = max(window_bins_of(config.windows.windows_s, bin_s))
    if overlap >= longest:
        return "wall_clock", None
    if overlap <= 0:
        return "monte_carlo", f"the runs' clocks do not overlap: {_apart(runs, bin_s)}"
    spans = [hi - lo + 1 for lo, hi in ranges]  # every run has a range here
    short = int(np.argmin(spans))
    if spans[short] < longest:
        return "monte_carlo", (
            f"{runs[short].run_id} spans {spans[short] * bin_s:g} s from its first complete "
            f"{bin_s:g} s energy bin to its last, less than the longest window "
            f"({max(config.windows.windows_s):g} s)"
        )
    return "monte_carlo", (
        f"the runs' clocks overlap by {overlap * bin_s:g} s, less than the longest window "
        f"({max(config.windows.windows_s):g} s)"
    )


APART_NAMED = 3  # runs apart from the others that the note of clocks that do not overlap names


def _duration(seconds: float) -> str:
    """``seconds`` for a note: in s, and in h (a time zone's whole hours) from an hour on."""
    hours = f" = {seconds / 3600:.3g} h" if seconds >= 3600 else ""
    return f"{seconds:,.0f} s{hours}"


def _apart(runs: Sequence[RunBins], bin_s: float) -> str:
    """Which of ``runs`` (each with a bin range of ``bin_s`` s bins) lie apart in time: those
    outside the time most of them share (the bin the most ranges hold, the earliest of a tie),
    each with how far its start lies from the earliest start of the others (a whole hour: a log
    read in another time zone than the rest, or a clock set apart)."""
    ranges = [r.bin_range for r in runs if r.bin_range is not None]
    busiest = max((lo for lo, _ in ranges), key=lambda b: (sum(a <= b <= z for a, z in ranges), -b))
    held = [i for i, (lo, hi) in enumerate(ranges) if lo <= busiest <= hi]
    start = min(ranges[i][0] for i in held)
    others = runs[held[0]].run_id if len(held) == 1 else "the others"
    apart = [
        f"{run.run_id} starts {_duration(abs(lo - start) * bin_s)} "
        f"{'before' if lo < start else 'after'} {others}"
        for i, (run, (lo, _)) in enumerate(zip(runs, ranges, strict=True))
        if i not in held
    ]
    shown = named_few(apart, APART_NAMED, "; ")
    return f"{shown} (logs of other times, or a clock or time zone set apart)"
