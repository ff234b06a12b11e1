"""The fleet made of the planner's traces: the fleet stage with one GPU per traced GPU.

:func:`grpo_power.analysis.fleet.analyze_fleet` on the traces' windows outputs, with
``fleet.n_gpus`` set to the GPUs the traces hold, each GPU once however many traces hold it
(:mod:`grpo_power.analysis.fleet.same_gpus`: traces of one set of GPUs, by UUID, at different times
are one run of the fleet; one GPU in two traces at once is refused): the fleet is wall-clock
aligned when the traces' clocks overlap by at least the longest window (``fleet.alignment: auto``)
and the bins where every GPU has a reading hold a whole sizing window, else drawn by Monte Carlo
over start offsets; the scaling study to larger fleets is Monte Carlo either way. A fleet drawn by
Monte Carlo is each trace (each set of GPUs) once per draw, at a random start offset, as the traced
GPUs are the fleet; the scaling study draws them with replacement. Where every trace is shorter
than the sizing window (``fleet.window_s``), the fleet's figures at that window repeat the traces
end to end: the summary's ``sizing_note`` says so (an assumption, not a measurement). A trace
without one complete energy bin (shorter than ``windows.bin_s``, or cut by gaps everywhere) cannot
be part of a fleet: it is left out, named in the summary's ``left_out`` with the log it was
imported from and its samples (and in :func:`fleet_notes`); with no trace left, the error
names those logs. Beside the fleet stage's files, ``trace_peaks.csv``
(:func:`trace_peaks`) gives each summed trace's peaks at the sizing window. A fleet drawn by Monte
Carlo because the clocks do not overlap says so (the summary's ``gpu_notes``), naming the measured
traces whose GPUs have no UUID: the same GPUs in logs of different times (a log a day) then count
as more GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from grpo_power.analysis.fleet import FleetResult, analyze_fleet, read_run_bins, write_fleet
from grpo_power.analysis.fleet.inputs import RunBins
from grpo_power.analysis.fleet.same_gpus import gpu_set, join_same_gpus
from grpo_power.analysis.fleet.wall_clock import coverage_note, span_note
from grpo_power.atomic import write_csv_atomic
from grpo_power.config import Config
from grpo_power.layout import FLEET, PLANNER_FLEET, WINDOWS
from grpo_power.listing import named_few
from grpo_power.planner.discover import INDEX, INDEX_FILE
from grpo_power.stage_files import read_csv, read_json
from grpo_power.telemetry.schema import TraceMetadata

FLEET_FILE = "the planner's fleet summary.json, written by `grpo-power planner fleet`"
CAP = "planner.cap_w (--cap-w)"  # what sets the cap the planner judges by, in its messages


def window_folders(paths: Sequence[Path | str]) -> list[Path]:
    """The windows outputs ``paths`` name: a ``bins.parquet``, or a folder holding one, as
    given; a folder without one stands for every folder beneath it that holds one (a trace's
    key may be a path, ``OUT/windows/<folder>/<name>``, so the shell's ``OUT/windows/*`` gives
    their parents). A folder with none beneath it is kept, for the fleet stage's error."""
    found: list[Path] = []
    for path in map(Path, paths):
        inner: list[Path] = []
        if path.is_dir() and not (path / "bins.parquet").exists():
            inner = sorted(p.parent for p in path.rglob("bins.parquet"))
        found += inner or [path]
    return found


def fleet_of_traces(
    window_outputs: Sequence[Path | str],
    out: Path | str,
    config: Config,
    sources: Mapping[str, str] | None = None,
) -> FleetResult:
    """Run the fleet stage on ``window_outputs`` (windows folders or their ``bins.parquet``)
    as the fleet they make; write ``out``. ``sources`` names the file each trace was read from,
    by run id (the planner index's ``source_path``), for the traces left out (default: the log
    a trace was imported from, else the trace).

    Raises:
        ValueError: no trace has a complete energy bin, or ``fleet.alignment: wall_clock`` and
            the bins where every GPU has a reading hold no whole sizing window.
    """
    runs = [(path, read_run_bins(path)) for path in window_outputs]
    usable = [(path, run) for path, run in runs if _summable(run)]
    left_out = [_left_out(run, sources or {}) for _, run in runs if not _summable(run)]
    if not usable:
        named = named_few(
            [f"{entry['source']}: {entry['reason']}" for entry in left_out], JOINED_NAMED, "; "
        )
        raise ValueError(
            f"{named or 'planner'}; expected a trace with a "
            f"complete {config.windows.bin_s:g} s energy bin (windows.bin_s): a log of more than "
            "one sample per GPU over at least a bin"
        )
    same = join_same_gpus([run for _, run in usable])
    fleet = config.fleet.model_copy(update={"n_gpus": sum(run.n_gpus for run in same.runs)})
    cap_w = config.cap_w if config.planner.cap_w is None else config.planner.cap_w
    result = analyze_fleet(
        same.runs, config.model_copy(update={"fleet": fleet, "cap_w": cap_w}), each_run_once=True
    )
    summary = result.summary
    if summary["no_sizing_window"]:
        # fleet.alignment: auto draws such a fleet by Monte Carlo; asked for by name, it has
        # no peak to size by, and a factor of NaN would price nothing
        raise ValueError(
            f"fleet.alignment: wall_clock: {summary['no_sizing_window']}; expected "
            "fleet.alignment: auto (drawn by Monte Carlo then), or traces whose GPUs all have "
            "readings over a sizing window"
        )
    result.summary["joined"] = same.joined
    drawn = _drawn_note(same.runs, result.summary)
    result.summary["gpu_notes"] = same.notes + ([drawn] if drawn else [])
    result.summary["sizing_note"] = _sizing_note(result.summary)
    result.summary["cap_note"] = _cap_note([run for _, run in usable], config)
    result.summary["left_out"] = left_out
    write_fleet(result, out)
    peaks = trace_peaks([run for _, run in usable], float(summary["window_s"]))
    write_csv_atomic(Path(out) / PLANNER_FLEET.trace_peaks_csv, peaks)
    return result


PEAK_SCOPES = {"run_pooled": "gpu", "run_total": "total"}  # exceedance.csv scope: column prefix


def trace_peaks(runs: Sequence[RunBins], window_s: float) -> pd.DataFrame:
    """Each trace's peaks at the fleet's sizing window, from its windows stage's
    ``exceedance.csv`` beside its ``bins.parquet`` (``runs``: the traces the fleet summed):
    ``gpu_peak_w`` the highest ``window_s`` mean of any one of its GPUs, ``gpu_peak_share`` that
    of the nameplate, ``gpu_exceedance`` the share of its GPUs' windows above the cap; the
    ``total_*`` columns the same of the sum of its GPUs against their nameplates and caps. One
    row per trace, a trace's windows without ``window_s`` NaN.

    Raises:
        ValueError: an ``exceedance.csv`` missing or without its columns, naming it.
    """
    rows = []
    for run in runs:
        folder = run.path if run.path.is_dir() else run.path.parent
        exceedance = read_csv(
            folder / WINDOWS.exceedance_csv,
            "the windows stage's exceedance.csv, written by `grpo-power windows`",
            ("scope", "window_s", "peak_mean_w", "peak_share_nameplate", "exceedance", "cap_w"),
        )
        row: dict[str, Any] = {
            "run_id": run.run_id,
            "data": run.info.get("data", ""),
            "gpus": run.n_gpus,
            "window_s": window_s,
        }
        for scope, prefix in PEAK_SCOPES.items():
            at = exceedance[
                (exceedance["scope"] == scope)
                & np.isclose(exceedance["window_s"].astype(float), window_s)
            ]
            first = at.iloc[0] if len(at) else None
            for column, name in (
                ("peak_mean_w", "peak_w"),
                ("peak_share_nameplate", "peak_share"),
                ("exceedance", "exceedance"),
                ("cap_w", "cap_w"),
            ):
                row[f"{prefix}_{name}"] = math.nan if first is None else float(first[column])
        rows.append(row)
    return pd.DataFrame(rows)


def _summable(run: RunBins) -> bool:
    """Whether a fleet can sum ``run``: it has a complete energy bin, and one where every one of
    its GPUs has a reading (a log of several hosts logged one after another has none)."""
    return run.bin_range is not None and run.complete_bins != 0


def _left_out(run: RunBins, sources: Mapping[str, str]) -> dict[str, str]:
    """A run without a complete energy bin, or without one where all its GPUs have a reading,
    as the fleet summary's ``left_out`` names it: its ``run_id``, the ``source`` it was read from
    (``sources``' entry for it, else the log its trace was imported from, else the trace) and
    the ``reason``: how many samples over how long its trace holds."""
    trace = Path(str(run.info.get("trace", run.path)))
    source, held = str(trace), ""
    try:
        raw = TraceMetadata.raw_from_schema(pq.read_schema(trace), str(trace)) or {}
        t = pq.read_table(trace, columns=["gpu", "t"]).to_pandas()
    except (OSError, ValueError, pa.ArrowException):
        pass  # a trace moved or unreadable: named by its path, its samples not counted
    else:
        source = str(raw.get("imported_from") or source)
        span_s = float(t["t"].max() - t["t"].min()) if len(t) else 0.0
        held = f": {len(t):,} sample(s) of {t['gpu'].nunique()} GPU(s) over {span_s:g} s"
    reason = f"no complete {run.bin_s:g} s energy bin{held} (too short, or cut by gaps)"
    if run.bin_range is not None:
        reason = (
            f"no {run.bin_s:g} s energy bin where all of its GPUs have a reading"
            f"{held} (its GPUs logged at different times: split the log by host or GPU)"
        )
    return {"run_id": run.run_id, "source": sources.get(run.run_id, source), "reason": reason}


def _drawn_note(runs: Sequence[RunBins], summary: dict[str, Any]) -> str | None:
    """Why the fleet of ``runs`` (its ``summary``) was drawn by Monte Carlo where
    ``fleet.alignment: auto`` left it to the traces (the summary's ``alignment_reason``),
    naming the measured runs whose GPUs have no UUID; None for a wall-clock fleet or one the
    config asked to draw."""
    reason = summary.get("alignment_reason")
    if not reason:
        return None
    gpus = int(summary["n_gpus"])
    note = (
        f"{reason}, so the fleet of {gpus:,} GPU{'' if gpus == 1 else 's'} is drawn by Monte "
        "Carlo over start offsets"
    )
    unnamed = [run.run_id for run in runs if not run.simulated and gpu_set(run) is None]
    if not unnamed:
        return note
    return (
        f"{note}; {len(unnamed)} trace(s) name no GPU UUID ({named_few(unnamed)}): "
        "each counts as GPUs of its own, so logs of the same GPUs at different times (a log a "
        "day) count as more GPUs unless they name them (nvidia-smi's uuid field, DCGM's UUID "
        "label)"
    )


def _sizing_note(summary: dict[str, Any]) -> str | None:
    """What a fleet (its ``summary``) whose traces are all shorter than the sizing window
    sizes it from: the traces repeated end to end; None where a trace is long enough."""
    if not summary["runs_shorter_than_window"]:
        return None
    window_s = summary["window_s"]
    return (
        f"every trace is shorter than the {window_s:g} s sizing window (the longest has "
        f"{max(summary['source_lengths_s']):g} s of complete bins), so the fleet's {window_s:g} s "
        f"peak and oversubscription factor repeat the traces end to end over a "
        f"{summary['horizon_s']:g} s timeline: an assumption (each trace periodic), not a "
        f"measurement; record traces of at least {window_s:g} s"
    )


def _cap_note(runs: Sequence[RunBins], config: Config) -> str | None:
    """What judging ``runs`` by the config's ``cap_w`` means where ``planner.cap_w`` does not
    set the planner's own cap and a run's GPUs are of another nameplate than the config's
    ``gpu``: a cap set for another part (an A100's 320 W under an H100's 700 W is exceeded in
    every window); None where ``planner.cap_w`` is set, or every run is of the config's part."""
    if config.planner.cap_w is not None:
        return None
    other = [
        f"{run.run_id} ({run.info.get('gpu_name', 'unknown')}, {run.nameplate_w:g} W)"
        for run in runs
        if not math.isclose(run.nameplate_w, config.gpu.nameplate_w)
    ]
    if not other:
        return None
    return (
        f"the traces are judged by the config's cap_w, {config.cap_w:g} W per GPU, set for its "
        f"{config.gpu.name} ({config.gpu.nameplate_w:g} W), and traces of another nameplate, "
        f"{named_few(other)}, are judged by it too (exceedance, the cap drawn); {CAP} gives the "
        "cap to judge them by"
    )


JOINED_NAMED = 3  # sets of GPUs whose joined logs a note names; the rest are counted


def fleet_notes(summary: dict[str, Any]) -> list[str]:
    """What ``planner run``, ``planner fleet`` and the report say of a planner fleet (its
    ``summary.json``): the traces it left out and why, the logs of one set of GPUs it joined
    (and those of them that hold only some of its GPUs), the logs that share some GPUs but not
    all, the time a wall-clock fleet leaves out, traces shorter than the sizing window, and
    traces judged by a cap set for another part."""
    left_out = [
        f"left out of the fleet: {entry['run_id']} ({entry.get('source', entry['run_id'])}: "
        f"{entry['reason']})"
        for entry in summary.get("left_out", [])
    ]
    entries = summary.get("joined", [])  # none in a fleet written before joins
    joined = [
        f"logs of one set of {entry['gpus']} GPU(s), named by UUID, counted once: "
        + " + ".join(entry["logs"])
        for entry in entries[:JOINED_NAMED]
    ]
    if len(entries) > JOINED_NAMED:  # a node's logs of every day: hundreds of lines otherwise
        joined.append(
            f"and {len(entries) - JOINED_NAMED} more sets of GPUs whose logs were joined "
            "(the fleet's summary.json, joined, lists every one)"
        )
    extra = [
        note
        for note in (
            span_note(summary),
            coverage_note(summary),
            summary.get("sizing_note"),
            summary.get("cap_note"),
        )
        if note
    ]
    return left_out + joined + summary.get("gpu_notes", []) + extra


def fleet_traces(summary: dict[str, Any]) -> set[str]:
    """The traces a planner fleet (its ``summary.json``) was made of: its runs, the logs of each
    joined run, and the traces it left out."""
    logs = {entry["run_id"]: entry["logs"] for entry in summary.get("joined", [])}
    made = {log for run in summary["run_ids"] for log in logs.get(run, [run])}
    return made | {entry["run_id"] for entry in summary.get("left_out", [])}


def refuse_other_fleet(traces_dir: Path | str, fleet_dir: Path | str) -> None:
    """Refuse a fleet (``fleet_dir``) that is not the fleet of the traces ``traces_dir``'s
    ``index.csv`` imported: one made of other traces (an earlier run's windows) or of some of
    them, which the economics and the report would price and show as these traces' fleet.

    Raises:
        ValueError: one line naming both folders and the traces in one but not the other.
    """
    traces_dir, fleet_dir = Path(traces_dir), Path(fleet_dir)
    index = read_csv(traces_dir / INDEX, INDEX_FILE, ("key", "status"))
    imported = set(index.loc[index["status"] == "imported", "key"])
    made = fleet_traces(read_json(fleet_dir / FLEET.summary, FLEET_FILE, ("run_ids",)))
    if made == imported:
        return
    differ = [
        f"{what}: {', '.join(sorted(keys))}"
        for what, keys in (
            (f"in the fleet, not in {traces_dir / INDEX}", made - imported),
            (f"in {traces_dir / INDEX}, not in the fleet", imported - made),
        )
        if keys
    ]
    raise ValueError(
        f"{fleet_dir}: run_ids: not the fleet of the traces in {traces_dir} "
        f"({'; '.join(differ)}); expected the fleet of those traces: rerun `grpo-power planner "
        f"fleet` on their windows, or `grpo-power planner run`"
    )
