"""Find the power traces in a folder, tell their formats apart, and import them into one folder.

A ``.parquet`` file is a trace (a run folder's ``steps.parquet`` is its step log, whose tokens
the economics use); any other file's format is told from its name and first line by
:func:`grpo_power.telemetry.formats.log_format` (nvidia-smi CSV or dmon, DCGM CSV, a Prometheus
result, a trace CSV), and a file that is none of them (a vLLM ``engine.csv``, a
``manifest.json``) is listed as skipped, with the reason. Logs are imported by
:func:`grpo_power.telemetry.importers.import_log` and traces read by
:func:`grpo_power.telemetry.store.read_trace`: the same checks as every other stage. Each trace
is named by its path in the folder (without the suffix), which is also its ``run_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from grpo_power.atomic import write_csv_atomic
from grpo_power.config import Config
from grpo_power.layout import PLANNER_TRACES, RUN
from grpo_power.telemetry.formats import log_format
from grpo_power.telemetry.importers import import_log
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import TraceDefaults, read_trace, write_trace

STEP_LOG = RUN.steps
INDEX = PLANNER_TRACES.index
EXPECTED = (
    "a folder of power traces: nvidia-smi or DCGM CSV logs, nvidia-smi dmon logs, Prometheus "
    "query results of DCGM power (JSON), grpo-power Parquet traces or trace CSVs (t, gpu, power_w)"
)


@dataclass(frozen=True)
class FoundFile:
    """A file of the folder: its name in the planner (``key``), format, or why it is skipped."""

    path: Path
    key: str
    kind: str | None  # an ImportFormat, or "trace"; None: not a trace
    reason: str = ""


def classify(path: Path, folder: Path) -> FoundFile:
    """What ``path`` (a file under ``folder``) is to the planner."""
    key = path.relative_to(folder).with_suffix("").as_posix()
    suffix = path.suffix.lower()
    if path.name == STEP_LOG:
        kind, reason = None, "a step log (its tokens go with the trace beside it)"
    elif suffix == ".parquet":
        kind, reason = "trace", ""
    else:
        try:
            kind, reason = log_format(path)
        except ValueError:
            if suffix in (".csv", ".json"):
                raise
            # another file, unreadable: not the planner's to refuse
            kind, reason = None, "not a .csv, .json or .parquet file, and cannot be read"
    return FoundFile(path, key, kind, reason)


def find_traces(folder: Path | str) -> tuple[list[FoundFile], list[FoundFile]]:
    """The power traces under ``folder`` (recursively, in path order) and the skipped files.

    Raises:
        ValueError: ``folder`` is not a folder, or holds no power trace.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(
            f"{folder}: expected {EXPECTED}, got {'a file' if folder.exists() else 'nothing'}"
        )
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    found = [classify(p, folder) for p in files]
    traces = [f for f in found if f.kind is not None]
    if not traces:
        raise ValueError(f"{folder}: no power trace found; expected {EXPECTED}")
    seen: dict[str, Path] = {}
    for f in traces:
        if f.key in seen:
            raise ValueError(
                f"{f.path}: the same trace name as {seen[f.key]} ({f.key!r}); expected one "
                "trace per name: rename or move one of them"
            )
        seen[f.key] = f.path
    return traces, [f for f in found if f.kind is None]


def import_traces(
    folder: Path | str, out: Path | str, config: Config, show_progress: bool = False
) -> pd.DataFrame:
    """Import every trace under ``folder`` into ``out/<key>.parquet`` and write ``out/index.csv``
    (one row per file: key, source, format, status, GPUs, samples, span, sample period, tokens,
    reason, notes).

    nvidia-smi timestamps are read in ``config.planner.timezone``; a log or trace without a
    nameplate takes ``config.gpu.nameplate_w`` (noted). Returns the index.

    Raises:
        ValueError: a trace that cannot be read (the message names the file and the field).
    """
    folder, out = Path(folder), Path(out)
    traces, skipped = find_traces(folder)
    defaults = TraceDefaults.from_config(config)
    rows = []
    for found in tqdm(traces, desc="importing traces", unit="trace", disable=not show_progress):
        if found.kind != "trace":
            frame, metadata = import_log(
                found.path,
                found.kind,  # type: ignore[arg-type]
                run_id=found.key,
                timezone=config.planner.timezone,
                fallback_nameplate_w=config.gpu.nameplate_w,
            )
            notes = list((metadata.model_extra or {}).get("notes", []))
        else:
            trace = read_trace(found.path, defaults)
            frame, notes = trace.frame, trace.notes
            metadata = trace.metadata.model_copy(update={"run_id": found.key})
        steps = found.path.with_name(STEP_LOG)
        tokens = None
        if found.kind == "trace" and steps.exists():
            tokens = float(read_step_log(steps)["completion_tokens"].sum())
        write_trace(out / f"{found.key}.parquet", frame, metadata)
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
                "reason": "",
                "notes": " | ".join(notes),
            }
        )
    rows += [
        {"key": f.key, "source_path": str(f.path), "status": "skipped", "reason": f.reason}
        for f in skipped
    ]
    index = pd.DataFrame(rows)
    write_csv_atomic(out / INDEX, index)
    return index
