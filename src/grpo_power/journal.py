"""Parquet files that survive the writing process being killed (traces, step logs).

A Parquet file's footer is written only when it is closed, so a Parquet file of a process killed
by SIGKILL is unreadable however many row groups it holds. While a file is written, rows
therefore go to a journal beside it (``<file>.partial``, an Arrow IPC stream flushed to the OS at
every :meth:`ParquetJournal.write`), which stays readable up to its last complete batch.
:meth:`ParquetJournal.close` converts the journal into the Parquet file (row groups, written to a
temporary name and renamed) and deletes it. :func:`read_journaled` reads either.

A resumed run appends to the files of its earlier attempts. An IPC stream cannot be reopened
for appending, so each attempt writes a journal of its own, merged into the Parquet file at
close; the journal a killed attempt left is merged first by :func:`seal_journal`. Appended
rows are keyed by a column that only grows (trace time, step number): a row whose key is not
above the file's last is already there, so a merge interrupted by a kill and repeated never
duplicates a row.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROW_GROUP_ROWS = 65_536


def journal_path(path: Path) -> Path:
    """Where the live journal of a file is kept while it is written."""
    return path.with_name(path.name + ".partial")


class ParquetJournal:
    """Append rows to a Parquet file; durable at every :meth:`write`, Parquet after :meth:`close`.

    Args:
        path: the final Parquet file.
        schema: its Arrow schema (with file metadata, if any).
        append_key: a column that grows along the file; when given and the file exists (an
            earlier attempt of a resumed run), rows are appended to it at close.
    """

    def __init__(self, path: Path | str, schema: pa.Schema, append_key: str | None = None) -> None:
        self.path = Path(path)
        self.schema = schema
        self.append_key = append_key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._journal = journal_path(self.path)
        self._sink = open(self._journal, "wb")  # noqa: SIM115 - closed in close()
        self._stream = pa.ipc.new_stream(self._sink, self.schema)
        # The stream writes its schema only with a batch: an empty one makes the journal of a
        # writer killed before its first rows readable (no rows, but its columns and metadata).
        self._stream.write_batch(pa.RecordBatch.from_pylist([], schema=self.schema))
        self._sink.flush()
        self.rows_written = 0
        self.closed = False

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append rows (dicts keyed by column name) and flush them to the operating system."""
        if not rows or self.closed:
            return
        batch = pa.RecordBatch.from_pylist(list(rows), schema=self.schema)
        self._stream.write_batch(batch)
        self._sink.flush()
        self.rows_written += batch.num_rows

    def close(self) -> Path:
        """Finish the journal and turn it into (or append it to) the Parquet file. Idempotent."""
        if self.closed:
            return self.path
        self._stream.close()
        self._sink.close()
        key = self.append_key if self.append_key and self.path.exists() else None
        _merge(self.path, self.schema, _journal_batches(self._journal), key)
        self._journal.unlink()
        self.closed = True
        return self.path

    def __enter__(self) -> ParquetJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Merged:
    """What a merge kept: rows appended, and rows dropped as already in the file."""

    rows_kept: int
    rows_dropped: int


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch with the file's column order and schema (metadata included)."""
    columns = [
        batch.column(name).cast(field.type)
        for name, field in zip(schema.names, schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _merge(
    path: Path,
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    key: str | None,
) -> Merged:
    """Write ``path`` anew (temporary name, then rename): its own rows when ``key`` is given
    and it exists, then the rows of ``batches`` whose ``key`` is above the file's last."""
    existing = pq.ParquetFile(path) if key is not None and path.exists() else None
    if existing is not None:
        schema = existing.schema_arrow
    tmp = path.with_name(path.name + ".tmp")
    last: Any = None
    kept = dropped = 0
    with pq.ParquetWriter(tmp, schema, compression="zstd") as parquet:
        pending: list[pa.RecordBatch] = []
        pending_rows = 0

        def add(batch: pa.RecordBatch) -> None:
            nonlocal pending, pending_rows
            pending.append(_conform(batch, schema))
            pending_rows += batch.num_rows
            if pending_rows >= ROW_GROUP_ROWS:
                parquet.write_table(pa.Table.from_batches(pending, schema))
                pending, pending_rows = [], 0

        if existing is not None:
            assert key is not None
            for batch in existing.iter_batches():
                add(batch)
                if batch.num_rows:
                    high = pc.max(batch.column(key)).as_py()
                    last = high if last is None else max(last, high)
        for batch in batches:
            if last is not None:
                assert key is not None
                filtered = batch.filter(pc.greater(batch.column(key), last))
                dropped += batch.num_rows - filtered.num_rows
                batch = filtered
            kept += batch.num_rows
            add(batch)
        if pending or pending_rows == 0:
            parquet.write_table(pa.Table.from_batches(pending, schema))
    os.replace(tmp, path)
    return Merged(kept, dropped)


def seal_journal(path: Path | str, key: str) -> Merged:
    """Merge the journal a killed writer left into its Parquet file (created if absent).

    Rows whose ``key`` is not above the file's last are already there and are dropped. Without
    a journal this does nothing. Safe to repeat after a kill at any point.
    """
    path = Path(path)
    journal = journal_path(path)
    if not journal.exists():
        return Merged(0, 0)
    with open(journal, "rb") as source:
        try:
            schema = pa.ipc.open_stream(source).schema
        except pa.ArrowInvalid:  # killed before its header: it holds no rows
            journal.unlink()
            return Merged(0, 0)
    merged = _merge(path, schema, _journal_batches(journal), key)
    journal.unlink()
    return merged


def _journal_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """Yield the complete batches of a journal; a batch cut off by a kill ends the stream."""
    with open(path, "rb") as source:
        try:
            reader = pa.ipc.open_stream(source)
        except pa.ArrowInvalid:
            return  # killed before the schema was written: no rows
        while True:
            try:
                yield reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowInvalid, OSError):
                return  # the last batch was cut off mid-write


def read_journaled(path: Path | str) -> tuple[pa.Table, bool]:
    """Read a Parquet file, or the journal a killed writer left; return (table, complete).

    Raises:
        FileNotFoundError: neither the file nor its journal exists.
        ValueError: the file is not readable Parquet, or the journal holds no schema.
    """
    path = Path(path)
    journal = journal_path(path)
    if path.exists():
        try:
            return pq.read_table(path), True
        except (pa.ArrowInvalid, OSError) as error:
            raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
    if journal.exists():
        with open(journal, "rb") as source:
            try:
                schema = pa.ipc.open_stream(source).schema
            except pa.ArrowInvalid:
                raise ValueError(f"{journal}: the writer was killed before its header") from None
        return pa.Table.from_batches(list(_journal_batches(journal)), schema), False
    raise FileNotFoundError(f"{path}: no such file (nor a journal {journal.name})")
