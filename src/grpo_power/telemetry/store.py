"""The trace store: trace files (docs/design.md section 7) written through a crash-safe journal.

See :mod:`grpo_power.journal` for why a killed recording still leaves a readable trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from grpo_power.atomic import write_parquet_atomic
from grpo_power.config import Config, GpuSpec, TelemetryConfig
from grpo_power.journal import ROW_GROUP_ROWS, ParquetJournal, journal_path, read_journaled
from grpo_power.telemetry.checks import (
    EPOCH_S_MIN,
    check_clock,
    check_frame_power,
    counter_restarts,
    median_spacing,
    split_clock_jumps,
    time_unit,
)
from grpo_power.telemetry.logrows import DECOMPRESSION_ERRORS, log_stem, log_suffix, open_log
from grpo_power.telemetry.schema import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    TRACE_COLUMNS,
    TRACE_SCHEMA,
    TraceMetadata,
)
from grpo_power.user_paths import one_line, output_problem, path_problem

__all__ = [
    "Trace",
    "TraceDefaults",
    "TraceWriter",
    "free_trace_path",
    "journal_path",
    "numbered_trace_path",
    "read_trace",
    "trace_output_problem",
    "write_trace",
]


def numbered_trace_path(path: Path, number: int) -> Path:
    """``path`` for ``number`` 1, else ``<stem>-<number><suffix>`` beside it."""
    return path if number == 1 else path.with_name(f"{path.stem}-{number}{path.suffix}")


def free_trace_path(path: Path, number: int = 1) -> Path:
    """Where a new recording for ``path`` goes: :func:`numbered_trace_path` of ``number``, or
    of the next number on where a trace or its journal (a killed recording's) is there
    already: a recording is never written over."""
    chosen = numbered_trace_path(path, number)
    while chosen.exists() or journal_path(chosen).exists():
        number += 1
        chosen = numbered_trace_path(path, number)
    return chosen


def trace_output_problem(path: Path | str) -> str | None:
    """Why a trace cannot be written to ``path``, or None: a trace is a Parquet file, so its
    name must end ``.parquet`` (a ``power.csv`` would hold Parquet bytes no CSV reader takes),
    and the path must be writable as a file (:func:`~grpo_power.user_paths.output_problem`)."""
    path = Path(path)
    problem = output_problem(path, "file")
    if problem is None and path.suffix.lower() != ".parquet":
        return (
            f"{path}: a trace is written as Parquet; expected a file name ending .parquet "
            f"(such as {path.with_suffix('.parquet').name})"
        )
    return problem


def earlier_import(out: Path, logs: list[Path]) -> str | None:
    """Whether an import may write ``out`` where a file already is: None where nothing is
    there; a note where it is an earlier import of the same log (``logs``: the log's parts),
    which the import replaces.

    Raises:
        ValueError: another trace (a recording, another log's import) or another file is
            there, which an import never writes over (``telemetry record`` never does either).
    """
    if not out.exists():
        return None
    import pyarrow.parquet as pq

    try:
        raw = TraceMetadata.raw_from_schema(pq.read_schema(out), str(out)) or {}
    except (OSError, ValueError, pa.ArrowException):
        raw = {}
    source = raw.get("imported_from")
    if isinstance(source, str) and Path(source).resolve() in {p.resolve() for p in logs}:
        return f"{out}: an earlier import of {source}, replaced"
    held = (
        f"a trace imported from {source}"
        if isinstance(source, str)
        else f"a trace of source {raw['source']}"
        if "source" in raw
        else "a file"
    )
    raise ValueError(
        f"{out}: {held} is already there; expected a path where no file is (an import replaces "
        "only its own earlier import of the same log): give another --out, or remove it"
    )


class TraceWriter(ParquetJournal):
    """Append samples to a trace file; see :class:`grpo_power.journal.ParquetJournal`.

    With ``append`` (a resumable run) samples follow those of its earlier attempts, whose
    metadata the file keeps; samples not later than theirs are dropped.
    """

    def __init__(self, path: Path | str, metadata: TraceMetadata, append: bool = False) -> None:
        problem = trace_output_problem(path)
        if problem:
            raise ValueError(problem)
        super().__init__(path, metadata.to_schema(), append_key="t" if append else None)
        self.metadata = metadata


@dataclass
class Trace:
    """A trace read back: samples, metadata, whether the file was closed properly, and notes on
    what the reader inferred or repaired (metadata taken from the config, milliseconds, ...)."""

    frame: pd.DataFrame
    metadata: TraceMetadata
    path: Path
    complete: bool
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TraceDefaults:
    """What a trace without (some of) its metadata takes: the config's GPU and period."""

    nameplate_w: float = GpuSpec.model_fields["nameplate_w"].default
    period_s: float = TelemetryConfig.model_fields["period_s"].default
    gpu_name: str = GpuSpec.model_fields["name"].default
    source: str = "the default config"

    @classmethod
    def from_config(cls, config: Config, source: str = "the config") -> TraceDefaults:
        return cls(config.gpu.nameplate_w, config.telemetry.period_s, config.gpu.name, source)


TRACE_FILE = "a trace file (.parquet, or .csv with columns t, gpu, power_w)"


def read_trace(
    path: Path | str,
    defaults: TraceDefaults | None = None,
    split_on_clock_jumps: bool = False,
) -> Trace:
    """Read a trace file (Parquet, or CSV with at least t, gpu, power_w), or the journal a
    killed recording left behind (named by the trace's path or its own), and check it
    (:mod:`grpo_power.telemetry.checks`): the one reader of traces, for every stage.

    Columns other than t, gpu and power_w are optional (absent: null). Metadata that is absent
    (a trace from other tools) is taken from ``defaults`` (the config) or inferred from the
    samples, each named in :attr:`Trace.notes`. A t in milliseconds is converted to seconds
    (noted); a t that repeats or steps back within a GPU is refused naming its rows, or with
    ``split_on_clock_jumps`` split into segments (see
    :func:`~grpo_power.telemetry.checks.split_clock_jumps`).

    Raises:
        FileNotFoundError: neither the trace nor its journal exists.
        ValueError: a folder given, not a trace, a missing or non-numeric column, bad
            metadata, implausible power, an ambiguous time unit or a clock jump (the message
            names the file and what was expected).
    """
    path = Path(path)
    problem = path_problem(
        path, TRACE_FILE, ("trace.parquet", journal_path(Path("trace.parquet")).name)
    )
    if problem:
        raise ValueError(problem)
    path = _trace_of(path)
    if log_suffix(path) == ".csv":  # a trace CSV, compressed or not (by its suffix)
        frame, raw, complete = _read_csv_trace(path), None, True
    else:
        frame, raw, complete = _read_parquet_trace(path)
    defaults = defaults or TraceDefaults()
    frame, metadata, notes = _checked(frame, raw, path, defaults, split_on_clock_jumps)
    return Trace(frame=frame, metadata=metadata, path=path, complete=complete, notes=notes)


def _trace_of(path: Path) -> Path:
    """The trace ``path`` names: the trace whose journal it is (``<trace>.partial``), else
    ``path`` itself."""
    trace = path.with_suffix("")
    return trace if journal_path(trace) == path else path


def _missing_columns_error(path: Path, missing: list[str]) -> ValueError:
    return ValueError(
        f"{path}: missing trace column(s) {missing}; expected {list(REQUIRED_COLUMNS)} "
        f"(optional: {list(OPTIONAL_COLUMNS)})"
    )


def _read_parquet_trace(path: Path) -> tuple[pd.DataFrame, dict[str, Any] | None, bool]:
    table, complete = read_journaled(path)
    missing = [name for name in REQUIRED_COLUMNS if name not in table.column_names]
    if missing:
        raise _missing_columns_error(path, missing)
    present = [name for name in TRACE_COLUMNS if name in table.column_names]
    for name in present:
        kind = table.schema.field(name).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
            raise ValueError(
                f"{path}: column '{name}': expected numbers "
                f"({TRACE_SCHEMA.field(name).type}), got {kind}"
            )
    raw = TraceMetadata.raw_from_schema(table.schema, str(path))
    return table.select(present).to_pandas(), raw, complete


def _read_csv_trace(path: Path) -> pd.DataFrame:
    expected = "a trace CSV with a header line naming at least t, gpu, power_w"
    try:
        with open_log(path) as file:
            frame = pd.read_csv(file, encoding="utf-8-sig", skipinitialspace=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file; expected {expected}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: expected {expected}, got an empty file") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, *DECOMPRESSION_ERRORS) as error:
        raise ValueError(
            f"{path}: expected {expected}, got unreadable CSV ({one_line(error, 120)})"
        ) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [name for name in REQUIRED_COLUMNS if name not in frame.columns]
    if missing and "timestamp" in frame.columns:
        raise ValueError(
            f"{path}: a log with a timestamp column, not a trace CSV (t, gpu, power_w); import it "
            f"with `grpo-power telemetry import {path.name}` (--format nvidia-smi or dcgm)"
        )
    if missing:
        raise _missing_columns_error(path, missing)
    present = [name for name in TRACE_COLUMNS if name in frame.columns]
    out = {}
    for name in present:
        number = pd.to_numeric(frame[name], errors="coerce")
        unparsed = number.isna() & frame[name].notna()
        if unparsed.any():
            row = int(np.argmax(unparsed.to_numpy()))
            raise ValueError(
                f"{path}: column '{name}': expected numbers, got {frame[name].iloc[row]!r} at "
                f"line {row + 2}"
            )
        out[name] = number.astype(np.float64)
    return pd.DataFrame(out)


def _declared_period(raw: dict[str, Any] | None) -> float | None:
    value = (raw or {}).get("sample_period_s")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) and value > 0 else None
    return None


def _checked(
    frame: pd.DataFrame,
    raw: dict[str, Any] | None,
    path: Path,
    defaults: TraceDefaults,
    split: bool,
) -> tuple[pd.DataFrame, TraceMetadata, list[str]]:
    """The frame in the trace schema's columns and its metadata, checked; notes on what was
    taken from the config or inferred."""
    where = str(path)
    notes: list[str] = []
    gpu_values = frame["gpu"].to_numpy(dtype=np.float64, na_value=np.nan)
    if len(gpu_values) and not np.isfinite(gpu_values).all():
        row = int(np.argmax(~np.isfinite(gpu_values)))
        raise ValueError(
            f"{where}: column 'gpu': expected a GPU index in every row, got none at row {row + 1}"
        )
    fractional = gpu_values != np.round(gpu_values)
    if len(gpu_values) and (fractional.any() or np.abs(gpu_values).max() >= 2**31):
        row = int(np.argmax(fractional)) if fractional.any() else int(np.argmax(np.abs(gpu_values)))
        raise ValueError(
            f"{where}: column 'gpu': expected whole GPU indices, got {gpu_values[row]:g} at row "
            f"{row + 1}"
        )
    gpu = gpu_values.astype(np.int64)
    t = original_t = frame["t"].to_numpy(dtype=np.float64, na_value=np.nan)
    declared = _declared_period(raw)
    declared_from, by_trace = "the trace metadata's", True
    if declared is None and raw is None:
        declared, declared_from = defaults.period_s, f"{defaults.source}'s telemetry.period_s"
        by_trace = False
    spacing = median_spacing(gpu, t)
    scale, note = time_unit(t, spacing, where, "t", declared, declared_from, by_trace)
    if scale != 1.0:
        t = t * scale
        spacing = None if spacing is None else spacing * scale
        notes.append(note or "")
    jumps = None
    if split:
        result = split_clock_jumps(gpu, t, where)
        if result is not None:
            frame = frame.iloc[result.order].reset_index(drop=True)
            gpu, t = gpu[result.order], result.t
            notes.append(result.note)
            jumps = result.jumps
    else:
        check_clock(gpu, t, where)
    if "energy_j" in frame.columns:
        energy_j = frame["energy_j"].to_numpy(dtype=np.float64, na_value=np.nan)
        power_w = frame["power_w"].to_numpy(dtype=np.float64, na_value=np.nan)
        counter, restarts = counter_restarts(gpu, t, power_w, energy_j, where)
        if restarts:
            frame = frame.assign(energy_j=counter)
            notes += restarts
    data = dict(raw or {})
    if raw is None:
        notes.append(
            f"{where}: no grpo-power metadata: run_id '{log_stem(path)}', source 'imported', GPU "
            f"'{defaults.gpu_name}' (from {defaults.source})"
        )
    for key, value in (
        ("run_id", log_stem(path)),
        ("source", "imported"),
        ("gpu_name", defaults.gpu_name),
        ("host", "unknown"),
    ):
        if data.get(key) is None:
            data[key] = value
    raw_nameplate = data.get("nameplate_w")
    if raw_nameplate is None:
        data["nameplate_w"] = defaults.nameplate_w
        notes.append(
            f"{where}: nameplate {defaults.nameplate_w:g} W from {defaults.source} "
            "(gpu.nameplate_w): the trace metadata has none"
        )
    if data.get("sample_period_s") is None:
        period = spacing if spacing else defaults.period_s
        data["sample_period_s"] = period
        origin = (
            "inferred from the spacing of samples"
            if spacing
            else f"from {defaults.source} (telemetry.period_s)"
        )
        notes.append(f"{where}: sample period {period:.6g} s {origin}")
    if data.get("start_unix_s") is None:
        if len(t) and np.isfinite(t).all() and float(t.min()) >= EPOCH_S_MIN:
            start = float(t.min())
            t = t - start
            data["start_unix_s"] = start
            notes.append(f"{where}: t read as unix time; the trace starts at {start:.6f}")
        else:
            data["start_unix_s"] = 0.0
            if len(t):
                notes.append(
                    f"{where}: no start time: t = 0 is taken as unix time 0 (wall-clock bins "
                    "and fleet alignment count from there)"
                )
    if scale != 1.0:
        data["t_unit_converted"] = "ms"
    if jumps:
        data["clock_jumps"] = jumps
    metadata = TraceMetadata.validated(data, where)
    if t is not original_t:
        frame["t"] = t
    if frame["gpu"].dtype != np.int32:
        frame["gpu"] = gpu.astype(np.int32)
    if list(frame.columns) != list(TRACE_COLUMNS):
        frame = frame.reindex(columns=list(TRACE_COLUMNS))
    check_frame_power(frame, where, metadata.nameplate_w)
    peak_w = float(frame["power_w"].max()) if len(frame) else 0.0
    if raw_nameplate is None and peak_w > metadata.nameplate_w:
        notes.append(
            f"{where}: readings reach {peak_w:g} W, above the nameplate "
            f"{metadata.nameplate_w:g} W from {defaults.source}: if the trace is of another part, "
            "give its gpu.name or gpu.nameplate_w in the config"
        )
    return frame, metadata, notes


def write_trace(path: Path | str, frame: pd.DataFrame, metadata: TraceMetadata) -> Path:
    """Write a whole trace at once (importers, tests); atomic like :class:`TraceWriter`.
    Optional columns the frame lacks are written as null.

    Raises:
        ValueError: ``path`` is no trace file name (:func:`trace_output_problem`).
    """
    problem = trace_output_problem(path)
    if problem:
        raise ValueError(problem)
    table = pa.Table.from_pandas(
        frame.reindex(columns=list(TRACE_COLUMNS)), schema=TRACE_SCHEMA, preserve_index=False
    )
    return write_parquet_atomic(path, table, metadata.to_schema().metadata, ROW_GROUP_ROWS)
