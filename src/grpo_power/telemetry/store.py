"""The trace store: trace files (DESIGN.md section 7) written through a crash-safe journal.

See :mod:`grpo_power.journal` for why a killed recording still leaves a readable trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from grpo_power.atomic import write_parquet_atomic
from grpo_power.journal import ROW_GROUP_ROWS, ParquetJournal, journal_path, read_journaled
from grpo_power.telemetry.schema import TRACE_COLUMNS, TRACE_SCHEMA, TraceMetadata

__all__ = ["Trace", "TraceWriter", "journal_path", "read_trace", "write_trace"]


class TraceWriter(ParquetJournal):
    """Append samples to a trace file; see :class:`grpo_power.journal.ParquetJournal`.

    With ``append`` (a resumable run) samples follow those of its earlier attempts, whose
    metadata the file keeps; samples not later than theirs are dropped.
    """

    def __init__(self, path: Path | str, metadata: TraceMetadata, append: bool = False) -> None:
        super().__init__(path, metadata.to_schema(), append_key="t" if append else None)
        self.metadata = metadata


@dataclass
class Trace:
    """A trace read back: samples, metadata, and whether the file was closed properly."""

    frame: pd.DataFrame
    metadata: TraceMetadata
    path: Path
    complete: bool


def read_trace(path: Path | str) -> Trace:
    """Read a trace file, or the journal a killed recording left behind.

    Raises:
        FileNotFoundError: neither the trace nor its journal exists.
        ValueError: the file is not a grpo-power trace, lacks columns or has a non-numeric one
            (the message names them).
    """
    path = Path(path)
    table, complete = read_journaled(path)
    missing = [name for name in TRACE_COLUMNS if name not in table.column_names]
    if missing:
        raise ValueError(
            f"{path}: missing trace column(s) {missing}; expected {list(TRACE_COLUMNS)}"
        )
    for name in TRACE_COLUMNS:
        kind = table.schema.field(name).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
            raise ValueError(
                f"{path}: column '{name}': expected numbers "
                f"({TRACE_SCHEMA.field(name).type}), got {kind}"
            )
    metadata = TraceMetadata.from_schema(table.schema, str(path))
    frame = table.select(list(TRACE_COLUMNS)).to_pandas()
    return Trace(frame=frame, metadata=metadata, path=path, complete=complete)


def write_trace(path: Path | str, frame: pd.DataFrame, metadata: TraceMetadata) -> Path:
    """Write a whole trace at once (importers, tests); atomic like :class:`TraceWriter`."""
    table = pa.Table.from_pandas(
        frame[list(TRACE_COLUMNS)], schema=TRACE_SCHEMA, preserve_index=False
    )
    return write_parquet_atomic(path, table, metadata.to_schema().metadata, ROW_GROUP_ROWS)
