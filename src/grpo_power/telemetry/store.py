"""The trace store: Parquet files that survive the recording process being killed.

A Parquet file's footer is written only when it is closed, so a Parquet file of a process killed
by SIGKILL is unreadable however many row groups it holds. While recording, samples therefore go
to a journal beside the trace (``<trace>.partial``, an Arrow IPC stream, flushed to the OS every
``flush_s``), which stays readable up to its last complete batch. :meth:`TraceWriter.close`
converts the journal into the trace's Parquet file (row groups, written to a temporary name and
renamed) and deletes it. :func:`read_trace` reads either, so a killed run's trace is still read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from grpo_power.telemetry.schema import TRACE_COLUMNS, TRACE_SCHEMA, TraceMetadata

ROW_GROUP_ROWS = 65_536


def journal_path(path: Path) -> Path:
    """Where the live journal of a trace file is kept while it is recorded."""
    return path.with_name(path.name + ".partial")


class TraceWriter:
    """Append samples to a trace; durable at every :meth:`write`, Parquet after :meth:`close`.

    Args:
        path: the final Parquet file (``.parquet``).
        metadata: file metadata (run id, source, GPU, period...).
    """

    def __init__(self, path: Path | str, metadata: TraceMetadata) -> None:
        self.path = Path(path)
        self.metadata = metadata
        self.schema = metadata.to_schema()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._journal = journal_path(self.path)
        self._sink = open(self._journal, "wb")  # noqa: SIM115 - closed in close()
        self._stream = pa.ipc.new_stream(self._sink, self.schema)
        self.rows_written = 0
        self.closed = False

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append rows (dicts keyed by trace column) and flush them to the operating system."""
        if not rows:
            return
        batch = pa.RecordBatch.from_pylist(list(rows), schema=self.schema)
        self._stream.write_batch(batch)
        self._sink.flush()
        self.rows_written += batch.num_rows

    def close(self) -> Path:
        """Finish the journal and turn it into the trace's Parquet file. Idempotent."""
        if self.closed:
            return self.path
        self._stream.close()
        self._sink.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        with pq.ParquetWriter(tmp, self.schema, compression="zstd") as parquet:
            pending: list[pa.RecordBatch] = []
            pending_rows = 0
            for batch in _read_journal_batches(self._journal):
                pending.append(batch)
                pending_rows += batch.num_rows
                if pending_rows >= ROW_GROUP_ROWS:
                    parquet.write_table(pa.Table.from_batches(pending, self.schema))
                    pending, pending_rows = [], 0
            if pending or self.rows_written == 0:
                parquet.write_table(pa.Table.from_batches(pending, self.schema))
        os.replace(tmp, self.path)
        self._journal.unlink()
        self.closed = True
        return self.path

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_journal_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """Yield the complete batches of a journal; a batch cut off by a kill ends the stream."""
    with open(path, "rb") as source:
        try:
            reader = pa.ipc.open_stream(source)
        except pa.ArrowInvalid:
            return  # killed before the schema was written: no samples
        while True:
            try:
                yield reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowInvalid, OSError):
                return  # the last batch was cut off mid-write


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
        ValueError: the file is not a grpo-power trace or lacks columns (message names them).
    """
    path = Path(path)
    journal = journal_path(path)
    if path.exists():
        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as error:
            raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
        complete = True
    elif journal.exists():
        with open(journal, "rb") as source:
            try:
                schema = pa.ipc.open_stream(source).schema
            except pa.ArrowInvalid:
                raise ValueError(f"{journal}: the recording was killed before any sample") from None
        table = pa.Table.from_batches(list(_read_journal_batches(journal)), schema)
        complete = False
    else:
        raise FileNotFoundError(f"{path}: no such trace (nor a journal {journal.name})")
    missing = [name for name in TRACE_COLUMNS if name not in table.column_names]
    if missing:
        raise ValueError(
            f"{path}: missing trace column(s) {missing}; expected {list(TRACE_COLUMNS)}"
        )
    metadata = TraceMetadata.from_schema(table.schema, str(path))
    frame = table.select(list(TRACE_COLUMNS)).to_pandas()
    return Trace(frame=frame, metadata=metadata, path=path, complete=complete)


def write_trace(path: Path | str, frame: pd.DataFrame, metadata: TraceMetadata) -> Path:
    """Write a whole trace at once (importers, tests); atomic like :class:`TraceWriter`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(
        frame[list(TRACE_COLUMNS)], schema=TRACE_SCHEMA, preserve_index=False
    )
    table = table.replace_schema_metadata(metadata.to_schema().metadata)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    os.replace(tmp, path)
    return path
