"""Parquet files that survive the writing process being killed (traces, step logs).

A Parquet file's footer is written only when it is closed, so a Parquet file of a process killed
by SIGKILL is unreadable however many row groups it holds. While a file is written, rows
therefore go to a journal beside it (``<file>.partial``, an Arrow IPC stream flushed to the OS at
every :meth:`ParquetJournal.write`), which stays readable up to its last complete batch.
:meth:`ParquetJournal.close` converts the journal into the Parquet file (row groups, written to a
temporary name and renamed) and deletes it. :func:`read_journaled` reads either.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
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
    """

    def __init__(self, path: Path | str, schema: pa.Schema) -> None:
        self.path = Path(path)
        self.schema = schema
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._journal = journal_path(self.path)
        self._sink = open(self._journal, "wb")  # noqa: SIM115 - closed in close()
        self._stream = pa.ipc.new_stream(self._sink, self.schema)
        self._sink.flush()  # the schema first: an empty journal is still readable
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
        """Finish the journal and turn it into the Parquet file. Idempotent."""
        if self.closed:
            return self.path
        self._stream.close()
        self._sink.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        with pq.ParquetWriter(tmp, self.schema, compression="zstd") as parquet:
            pending: list[pa.RecordBatch] = []
            pending_rows = 0
            for batch in _journal_batches(self._journal):
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

    def __enter__(self) -> ParquetJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
