"""Parquet files that survive the writing process being killed (traces, step logs).

A Parquet file's footer is written only when it is closed, so a Parquet file of a process killed
by SIGKILL is unreadable however many row groups it holds. While a file is written, rows
therefore go to a journal beside it (``<file>.partial``, an Arrow IPC stream flushed to the OS at
every :meth:`ParquetJournal.write`), which stays readable up to its last complete batch.
:meth:`ParquetJournal.close` converts the journal into the Parquet file (row groups, written to a
temporary name and renamed) and deletes it. :func:`read_journaled` reads either.

A resumed run appends to the rows of its earlier attempts. An IPC stream cannot be reopened for
appending, so each attempt writes a journal of its own. An attempt that ends unfinished (stopped,
failed, or killed and then sealed by :func:`seal_journal`) moves its rows to ``<file>.earlier``
(Parquet); only the attempt that completes writes ``<file>``, from the earlier rows and its own.
The file itself therefore appears only when it is whole, and a workflow manager that deletes
the outputs of a failed job (Snakemake does) never deletes the rows of earlier attempts.
Appended rows are keyed by a column that only grows (trace time, step number): a row whose key
is not above the last one kept is already there, so a merge interrupted by a kill and repeated
never duplicates a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from grpo_power.atomic import write_atomic

ROW_GROUP_ROWS = 65_536


def journal_path(path: Path) -> Path:
    """Where the live journal of a file is kept while it is written."""
    return path.with_name(path.name + ".partial")


def earlier_path(path: Path) -> Path:
    """Where the rows of a resumed file's unfinished earlier attempts are kept (Parquet)."""
    return path.with_name(path.name + ".earlier")


class ParquetJournal:
    """Append rows to a Parquet file; durable at every :meth:`write`, Parquet after :meth:`close`.

    Args:
        path: the final Parquet file.
        schema: its Arrow schema (with file metadata, if any).
        append_key: a column that grows along the file; when given, rows of earlier attempts
            (``<file>.earlier``) come first at close, and rows not above them are dropped.
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

    def close(self, complete: bool = True) -> Path:
        """Finish the journal; write the Parquet file, or with ``complete=False`` (an attempt
        that stops unfinished) add the rows to the earlier ones. Idempotent."""
        if self.closed:
            return self.path
        self._stream.close()
        self._sink.close()
        earlier = earlier_path(self.path)
        parts = [_journal_batches(self._journal)]
        if self.append_key is not None and earlier.exists():
            parts.insert(0, pq.ParquetFile(earlier).iter_batches())
        target = self.path if complete else earlier
        _merge(target, _schema(earlier, self.schema), parts, self.append_key)
        self._journal.unlink()
        if complete:
            earlier.unlink(missing_ok=True)
        self.closed = True
        return self.path if complete else earlier

    def discard(self) -> None:
        """Close the journal and remove it, writing no file (a writer that was never given
        rows, as a script that failed before it began leaves one). Idempotent."""
        if self.closed:
            return
        self._stream.close()
        self._sink.close()
        self._journal.unlink(missing_ok=True)
        self.closed = True

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


def _schema(earlier: Path, schema: pa.Schema) -> pa.Schema:
    """The schema rows are merged under: the earlier attempts' (their metadata stays)."""
    return pq.ParquetFile(earlier).schema_arrow if earlier.exists() else schema


def _merge(
    target: Path,
    schema: pa.Schema,
    parts: Iterable[Iterable[pa.RecordBatch]],
    key: str | None,
) -> Merged:
    """Write ``target`` anew (temporary name, then rename) from the batches of ``parts`` in
    order; with ``key``, rows whose key is not above the last one kept are dropped."""
    counts = [0, 0]  # rows kept, rows dropped

    def write(tmp: Path) -> None:
        last: Any = None
        kept = dropped = 0
        with pq.ParquetWriter(tmp, schema, compression="zstd") as parquet:
            pending: list[pa.RecordBatch] = []
            pending_rows = 0
            for batch in (batch for part in parts for batch in part):
                if key is not None and last is not None:
                    filtered = batch.filter(pc.greater(batch.column(key), last))
                    dropped += batch.num_rows - filtered.num_rows
                    batch = filtered
                if key is not None and batch.num_rows:
                    last = pc.max(batch.column(key)).as_py()
                kept += batch.num_rows
                pending.append(_conform(batch, schema))
                pending_rows += batch.num_rows
                if pending_rows >= ROW_GROUP_ROWS:
                    parquet.write_table(pa.Table.from_batches(pending, schema))
                    pending, pending_rows = [], 0
            if pending or kept == 0:
                parquet.write_table(pa.Table.from_batches(pending, schema))
        counts[:] = [kept, dropped]

    write_atomic(target, write)
    return Merged(*counts)


def seal_journal(path: Path | str, key: str) -> Merged:
    """Add what an unfinished attempt left (its journal and, had it completed just before a
    kill, the file itself) to the earlier rows (``<file>.earlier``), and delete it.

    Rows whose ``key`` is not above the last one kept are already there and are dropped, so
    this is safe to repeat after a kill at any point. Returns what the merge kept in all.
    """
    path = Path(path)
    earlier, journal = earlier_path(path), journal_path(path)
    parts: list[Iterable[pa.RecordBatch]] = []
    schemas: list[pa.Schema] = []
    for source in (earlier, path):
        if source.exists():
            parquet = pq.ParquetFile(source)
            parts.append(parquet.iter_batches())
            schemas.append(parquet.schema_arrow)
    if journal.exists():
        with open(journal, "rb") as stream:
            try:
                schemas.append(pa.ipc.open_stream(stream).schema)
                parts.append(_journal_batches(journal))
            except pa.ArrowInvalid:  # killed before its header: it holds no rows
                pass
    merged = _merge(earlier, schemas[0], parts, key) if schemas else Merged(0, 0)
    journal.unlink(missing_ok=True)
    path.unlink(missing_ok=True)
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
    """Read a Parquet file, or what an unfinished writer left: the rows of earlier attempts and
    the journal; return (table, complete).

    Raises:
        FileNotFoundError: neither the file nor an unfinished writer's rows exist.
        ValueError: a file is not readable Parquet, or the journal holds no schema.
    """
    path = Path(path)
    earlier, journal = earlier_path(path), journal_path(path)
    if path.exists():
        return _read_parquet(path), True
    tables = [_read_parquet(earlier)] if earlier.exists() else []
    if journal.exists():
        with open(journal, "rb") as source:
            try:
                schema = pa.ipc.open_stream(source).schema
            except pa.ArrowInvalid:
                if not tables:
                    raise ValueError(
                        f"{journal}: the writer was killed before its header"
                    ) from None
                schema = None
        if schema is not None:
            tables.append(pa.Table.from_batches(list(_journal_batches(journal)), schema))
    if not tables:
        raise FileNotFoundError(f"{path}: no such file (nor a journal {journal.name})")
    schema = tables[0].schema
    batches = [_conform(batch, schema) for table in tables for batch in table.to_batches()]
    return pa.Table.from_batches(batches, schema), False


def _read_parquet(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as error:
        raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
