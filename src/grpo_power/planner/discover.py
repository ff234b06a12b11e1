"""Find the power traces in a folder, tell their formats apart, and import them into one folder.

A ``.parquet`` file is a trace (a run folder's ``steps.parquet`` is its step log, whose tokens
the economics use); any other file's format is told from its name and first line by
:func:`grpo_power.telemetry.formats.log_format` (nvidia-smi CSV or dmon, DCGM CSV, a Prometheus
result, a trace CSV), and a file that is none of them (a vLLM ``engine.csv``, a
``manifest.json``) is listed as skipped, with the reason. Logs are imported by
:func:`grpo_power.telemetry.importers.import_log` and traces read by
:func:`grpo_power.telemetry.store.read_trace`: the same checks as every other stage. Each trace
is named by its path in the folder (without the suffix; with it where two files would share a
name, ``x.csv`` and ``x.log``), which is also its ``run_id``. A log
compressed by log rotation (``node1.csv.gz``, ``.bz2``, ``.xz``, ``.zst``) is read as the log
beneath, and the parts of a rotated log (``node1.csv``, ``node1.csv.1``, ``node1.csv.2.gz``;
logrotate's ``dateext`` names too) as one log named by its name
(:mod:`grpo_power.telemetry.rotation`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from grpo_power.analysis.fleet.same_gpus import GpuSpan, busy_spans, refuse_twice_logged
from grpo_power.atomic import replace_folder_atomic, write_csv_atomic
from grpo_power.config import Config
from grpo_power.layout import PLANNER_TRACES, RUN
from grpo_power.listing import named_few
from grpo_power.telemetry.checks import gpu_period_s, segment_gap_s
from grpo_power.telemetry.engine import add_engine_columns, generated_tokens, read_engine_log
from grpo_power.telemetry.formats import engine_format, log_format
from grpo_power.telemetry.importers import import_log
from grpo_power.telemetry.logrows import ImportError_, NoSamples, log_stem, log_suffix
from grpo_power.telemetry.rotation import (
    RotatedLog,
    is_rotated,
    rotated_format,
    rotation_groups,
)
from grpo_power.telemetry.schema import TraceMetadata
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import TraceDefaults, read_trace, write_trace

STEP_LOG = RUN.steps
INDEX = PLANNER_TRACES.index
NOTE_SEPARATOR = " | "  # between a trace's notes in the index's notes column
INDEX_FILE = "the planner's index.csv, written by `grpo-power planner import TRACES --out DIR`"
EXPECTED = (
    "a folder of power traces: nvidia-smi or DCGM CSV logs, nvidia-smi dmon logs, Prometheus "
    "query results of DCGM power (JSON) or Grafana CSV downloads of it, grpo-power Parquet traces "
    "or trace CSVs (t, gpu, power_w)"
)


SKIPPED_NAMED = 2  # skipped files whose reasons the error of a folder without traces names


@dataclass(frozen=True)
class FoundFile:
    """A file of the folder (a rotated log's newest part): its name in the planner (``key``),
    format, or why it is skipped; a rotated log's ``parts``, oldest first."""

    path: Path
    key: str
    kind: str | None  # an ImportFormat, or "trace"; None: not a trace
    reason: str = ""
    parts: tuple[Path, ...] = ()

    @property
    def log(self) -> Path | RotatedLog:
        """What the importer reads: the file, or the rotated log its parts are."""
        return RotatedLog(self.parts) if self.parts else self.path


def _key(path: Path, folder: Path) -> str:
    """A log's name in the planner: its path in ``folder`` without suffixes and rotation tag."""
    return (path.relative_to(folder).parent / log_stem(path)).as_posix()


def classify(path: Path, folder: Path) -> FoundFile:
    """What ``path`` (a file under ``folder``) is to the planner."""
    key = _key(path, folder)
    suffix = log_suffix(path)
    if path.name == STEP_LOG:
        kind, reason = None, "a step log (its tokens go with the trace beside it)"
    elif suffix == ".parquet":
        kind, reason = "trace", ""
    else:
        try:
            kind, reason = log_format(path)
        except ValueError:
            if suffix in (".csv", ".json", ".jsonl"):
                raise
            # another file, unreadable: not the planner's to refuse
            kind, reason = None, "not a .csv, .json or .parquet file, and cannot be read"
    return FoundFile(path, key, kind, reason)


def classify_rotated(parts: tuple[Path, ...], folder: Path) -> FoundFile:
    """What a rotated log's ``parts`` (oldest first; :func:`rotation_groups`) are to the
    planner: one log (:func:`rotated_format`), named by its log's name.

    Raises:
        ValueError: a part cannot be read, or its parts are logs of different formats.
    """
    kind, reason = rotated_format(parts)
    return FoundFile(parts[-1], _key(parts[-1], folder), kind, reason, parts)


def _noted(metadata: TraceMetadata, note: str) -> TraceMetadata:
    """``metadata`` with ``note`` added to its notes."""
    notes = [*(metadata.model_extra or {}).get("notes", []), note]
    return type(metadata).model_validate({**metadata.model_dump(), "notes": notes})


def find_traces(
    folder: Path | str, leave_out: Sequence[Path | str] = ()
) -> tuple[list[FoundFile], list[FoundFile]]:
    """The power traces under ``folder`` (recursively, in path order) and the skipped files.

    The folders ``leave_out`` that lie under ``folder`` (the planner's own outputs) are not
    searched. A grpo-power trace imported from a log that is itself under ``folder`` (an earlier
    ``planner import DIR --out DIR/traces``) is skipped, with the reason: it would count the
    log's power twice.

    Raises:
        ValueError: ``folder`` is not a folder, or holds no power trace.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(
            f"{folder}: expected {EXPECTED}, got {'a file' if folder.exists() else 'nothing'}"
        )
    outputs = [Path(path).resolve() for path in leave_out]
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
        and not any(p.resolve().is_relative_to(path) for path in outputs)
    )
    found = [
        classify_rotated(parts, folder) if is_rotated(parts) else classify(parts[0], folder)
        for parts in rotation_groups(files)
    ]
    logs = {
        part.resolve()
        for f in found
        if f.kind not in (None, "trace")
        for part in (f.parts or (f.path,))
    }
    found = [_unless_imported_here(f, logs) for f in found]
    traces = [f for f in found if f.kind is not None]
    if not traces:
        skipped = [f"{f.path.relative_to(folder)}: {f.reason}" for f in found]
        why = named_few(skipped, SKIPPED_NAMED, sep="; ", more="more skipped")
        raise ValueError(
            f"{folder}: no power trace found ({why or 'no file'}); expected {EXPECTED}"
        )
    traces = _with_suffixes_where_shared(traces, folder)
    seen: dict[str, Path] = {}
    for f in traces:
        if f.key in seen:
            raise ValueError(
                f"{f.path}: the same trace name as {seen[f.key]} ({f.key!r}); expected one "
                "trace per name: rename or move one of them"
            )
        seen[f.key] = f.path
    return traces, [f for f in found if f.kind is None]


def _with_suffixes_where_shared(traces: list[FoundFile], folder: Path) -> list[FoundFile]:
    """``traces`` where two or more would share a name (``x.csv`` and ``x.log``, ``x.csv`` and
    ``x.parquet``) named by their paths in ``folder`` with their suffixes, so each keeps a name
    of its own; the others as they are."""
    count = Counter(f.key for f in traces)
    return [
        replace(f, key=f.path.relative_to(folder).as_posix()) if count[f.key] > 1 else f
        for f in traces
    ]


def _unless_imported_here(found: FoundFile, logs: set[Path]) -> FoundFile:
    """``found``, or, for a grpo-power trace imported from one of ``logs`` (the logs of the
    folder searched, resolved; its metadata's ``imported_from``), that trace skipped with the
    reason. A trace whose metadata cannot be read is kept, for the import's error."""
    if found.kind != "trace":
        return found
    try:
        raw = TraceMetadata.raw_from_schema(pq.read_schema(found.path), str(found.path))
    except (OSError, ValueError, pa.ArrowException):
        return found  # read_trace names what is wrong with it
    source = (raw or {}).get("imported_from")
    if not isinstance(source, str) or Path(source).resolve() not in logs:
        return found
    return FoundFile(
        found.path,
        found.key,
        None,
        f"a grpo-power trace imported from {source}, a log in this folder, which is read "
        "itself: not counted twice",
    )


def engines_beside(
    traces: list[FoundFile], skipped: list[FoundFile]
) -> dict[str, tuple[FoundFile, str]]:
    """The inference engine's metrics log (and its engine) beside each power log it can be
    paired with: a folder holding exactly one log to import (not a grpo-power trace) and
    exactly one engine metrics log, as a measured serving run keeps them (``power.csv``,
    ``engine.csv``). Keyed by the power log's key."""
    engines: dict[Path, list[tuple[FoundFile, str]]] = {}
    for found in skipped:
        engine = engine_format(found.path)
        if engine is not None:
            engines.setdefault(found.path.parent, []).append((found, engine))
    logs: dict[Path, list[FoundFile]] = {}
    for found in traces:
        logs.setdefault(found.path.parent, []).append(found)
    return {
        here[0].key: engines[parent][0]
        for parent, here in logs.items()
        if len(here) == 1 and here[0].kind != "trace" and len(engines.get(parent, [])) == 1
    }


def _with_engine(
    frame: pd.DataFrame, metadata: TraceMetadata, engine_log: Path, engine: str
) -> tuple[pd.DataFrame, TraceMetadata, float]:
    """An imported log with the engine's concurrency and token rate at every sample
    (:func:`~grpo_power.telemetry.engine.add_engine_columns`) and the tokens the engine
    generated over the log's span.

    Raises:
        ImportError_: the engine log cannot be read, or its clock not aligned with the power's.
    """
    log = read_engine_log(engine_log, engine)  # type: ignore[arg-type]
    frame, metadata = add_engine_columns(frame, metadata, log)
    start_unix_s = metadata.start_unix_s + float(frame["t"].min())
    end_unix_s = metadata.start_unix_s + float(frame["t"].max())
    return frame, metadata, generated_tokens(log, start_unix_s, end_unix_s)


Imported = tuple[pd.DataFrame, TraceMetadata, float | None, str]


def _import_planner_log(
    found: FoundFile, engine: tuple[FoundFile, str] | None, config: Config
) -> Imported:
    """A log imported (frame, metadata, tokens, where the tokens come from), with the engine
    metrics beside it aligned where there are some; an engine log that cannot be aligned is
    noted and the log kept without it."""
    frame, metadata = import_log(
        found.log,
        found.kind,  # type: ignore[arg-type]
        run_id=found.key,
        timezone=config.planner.timezone,
        timezone_from="planner.timezone",
        split_on_clock_jumps=config.planner.split_on_clock_jumps,
        fallback_nameplate_w=config.gpu.nameplate_w,
        fallback_gpu_name=config.gpu.name,
    )
    if engine is None:
        return frame, metadata, None, ""
    engine_found, name = engine
    try:
        frame, metadata, tokens = _with_engine(frame, metadata, engine_found.path, name)
    except ImportError_ as error:
        return frame, _noted(metadata, f"engine metrics not aligned: {error}"), None, ""
    return frame, metadata, tokens, f"engine metrics ({name}, {engine_found.key})"


def _read_planner_trace(
    found: FoundFile, defaults: TraceDefaults, split_on_clock_jumps: bool
) -> tuple[pd.DataFrame, TraceMetadata, list[str], float | None, str]:
    """A grpo-power trace read (frame, metadata, notes, tokens, where they come from), split
    into segments where its clock repeats or steps back with ``split_on_clock_jumps``: its
    tokens from the step log beside it, where there is one."""
    trace = read_trace(found.path, defaults, split_on_clock_jumps)
    metadata = trace.metadata.model_copy(update={"run_id": found.key})
    steps = found.path.with_name(STEP_LOG)
    if not steps.exists():
        return trace.frame, metadata, trace.notes, None, ""
    tokens = float(read_step_log(steps)["completion_tokens"].sum())
    return trace.frame, metadata, trace.notes, tokens, STEP_LOG


def import_traces(
    folder: Path | str,
    out: Path | str,
    config: Config,
    show_progress: bool = False,
    leave_out: Sequence[Path | str] | None = None,
) -> pd.DataFrame:
    """Import every trace under ``folder`` into ``out/<key>.parquet`` and write ``out/index.csv``
    (one row per file: key, source, format, status, GPUs, samples, span from the first sample
    to the last, sample period, tokens and where they come from, reason, notes).

    The folder is searched as :func:`find_traces` searches it, leaving out the folders
    ``leave_out`` (default: ``out``; ``planner run``: its output folders) where they lie under
    ``folder``. nvidia-smi timestamps are read in ``config.planner.timezone``, and a clock that
    repeats or steps back is split into segments with ``config.planner.split_on_clock_jumps``
    (else refused); a log or trace without a nameplate takes ``config.gpu.nameplate_w`` (noted).
    Tokens come from a trace's step log, or from the inference engine's metrics log beside a
    power log (:func:`engines_beside`), aligned with it as ``telemetry import --engine`` does:
    the tokens the engine generated over the log's span. Beside the index,
    ``out/folder-<hash>.txt`` names the folder read
    (:meth:`~grpo_power.layout.PlannerTraceFiles.folder_stamp`). A log of a known format that
    holds no sample (a header and no rows) is skipped, with the reason. Returns the index.

    Raises:
        ValueError: a trace that cannot be read (the message names the file and the field), or
            no trace with a sample.
    """
    folder = Path(folder)
    traces, skipped = find_traces(folder, [out] if leave_out is None else leave_out)

    def write(staging: Path) -> pd.DataFrame:
        index = _import_into(staging, traces, skipped, config, show_progress)
        if not (index["status"] == "imported").any():
            raise ValueError(
                f"{folder}: no power trace with samples found (every log holds a header and no "
                f"rows); expected {EXPECTED}"
            )
        stamp = staging / PLANNER_TRACES.folder_stamp(folder)
        stamp.write_text(f"{folder.resolve()}\n")
        return index

    # a refused trace leaves no traces behind, nor old ones
    return replace_folder_atomic(out, write)


def _import_into(
    out: Path,
    traces: list[FoundFile],
    skipped: list[FoundFile],
    config: Config,
    show_progress: bool,
) -> pd.DataFrame:
    """What :func:`import_traces` writes, into ``out``; returns the index."""
    defaults = TraceDefaults.from_config(config)
    engines = engines_beside(traces, skipped)
    paired: dict[str, str] = {}  # an engine log's key -> its reason: the power log it went with
    rows = []
    spans: list[GpuSpan] = []
    empty: list[FoundFile] = []  # logs of a known format with no sample: skipped, not refused
    for found in tqdm(traces, desc="importing traces", unit="trace", disable=not show_progress):
        if found.kind == "trace":
            frame, metadata, notes, tokens, tokens_from = _read_planner_trace(
                found, defaults, config.planner.split_on_clock_jumps
            )
        else:
            engine = engines.get(found.key)
            try:
                frame, metadata, tokens, tokens_from = _import_planner_log(found, engine, config)
            except NoSamples as error:
                reason = f"{found.kind} log with no sample ({error.got})"
                empty.append(FoundFile(found.path, found.key, None, reason, found.parts))
                continue
            notes = list((metadata.model_extra or {}).get("notes", []))
            if tokens_from and engine is not None:
                paired[engine[0].key] = (
                    f"an inference engine's metrics log ({engine[1]}), not power: aligned with "
                    f"the power log beside it ({found.key}), its generated tokens give that "
                    "trace's per-token figures"
                )
        write_trace(out / f"{found.key}.parquet", frame, metadata)
        spans += gpu_spans(frame, metadata, str(found.path))
        rows.append(
            {
                "key": found.key,
                "source_path": str(found.path),
                "format": found.kind,
                "status": "imported",
                "data": metadata.source,
                "gpus": int(frame["gpu"].nunique()),
                "samples": len(frame),
                "span_s": float(frame["t"].max() - frame["t"].min()) if len(frame) else 0.0,
                "sample_period_s": metadata.sample_period_s,
                "start_unix_s": metadata.start_unix_s,
                "nameplate_w": metadata.nameplate_w,
                "tokens": tokens,
                "tokens_from": tokens_from,
                "reason": "",
                "notes": NOTE_SEPARATOR.join(notes),
            }
        )
    rows += [
        {
            "key": f.key,
            "source_path": str(f.path),
            "status": "skipped",
            "reason": paired.get(f.key, f.reason),
        }
        for f in [*empty, *skipped]
    ]
    refuse_twice_logged(spans)  # before the index: an import that fails has none
    index = pd.DataFrame(rows)
    write_csv_atomic(out / INDEX, index)
    return index


def gpu_spans(frame: pd.DataFrame, metadata: TraceMetadata, where: str) -> list[GpuSpan]:
    """When an imported trace holds each of its GPUs that a UUID names (none if simulated):
    the spans over which the GPU's samples come at most
    :func:`~grpo_power.telemetry.checks.segment_gap_s` of its own period apart, so that a log
    of two days with a day between does not hold the GPU on the day between."""
    if metadata.simulated or not metadata.gpu_uuids or frame.empty:
        return []
    times = {int(gpu): t.to_numpy() for gpu, t in frame.groupby("gpu")["t"]}
    return [
        GpuSpan(
            uuid, metadata.start_unix_s + lo, metadata.start_unix_s + hi, metadata.run_id, where
        )
        for gpu, uuid in metadata.gpu_uuids.items()
        if int(gpu) in times
        for lo, hi in busy_spans(
            times[int(gpu)],
            segment_gap_s(gpu_period_s(times[int(gpu)], metadata.sample_period_s)),
        )
    ]
