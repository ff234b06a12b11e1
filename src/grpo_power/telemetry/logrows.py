"""A log file's rows as text, and its cells as numbers: what every importer reads first.

:func:`read_csv_log` reads a comma-separated log with its header line (nvidia-smi's query, a
DCGM CSV, an inference engine's metrics; a regular one by pandas' C parser, any other line by
line with :mod:`csv`), :func:`read_dmon_log` an ``nvidia-smi dmon`` table,
each as text under its column names with every row's line in the file, for
:func:`grpo_power.telemetry.importers.import_log` (and :mod:`grpo_power.telemetry.engine`) to map
onto the trace schema; :func:`numeric_column` turns a column into floats (Arrow's kernels,
pandas where Arrow's parser refuses a cell). A log compressed as log rotation leaves it
(``smi.csv.gz``; bzip2, xz and zstd too) is read through :func:`open_log`, by its suffix, and a
rotated part's name (``smi.csv.1``, ``smi.csv-20261201``) told by :func:`rotated_name`, whose
parts :mod:`grpo_power.telemetry.rotation` reads as one log. Every
refusal is an :class:`ImportError_` whose one line names the file, the line or column, and what
was expected.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import re
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from grpo_power.user_paths import one_line, path_problem

# What nvidia-smi writes where a value has no reading (a sensor the part lacks, an NVML error,
# a GPU fallen off the bus): each is a missing value, never a number.
LOST_VALUES = {"[GPU is lost]", "[GPU requires reset]"}
MISSING_VALUES = {
    "[N/A]",
    "N/A",
    "[Not Supported]",
    "[Unknown Error]",
    "[Insufficient Permissions]",
    "",
    "nan",
    "NaN",  # Go's and Prometheus' no-value, as exporters and scrapers write it
    *LOST_VALUES,
}
# Columns (or Prometheus labels) that name a GPU's host: dcgm-exporter's label, a hand-added
# column, the exporter's address Prometheus adds. A log of several hosts tells its GPUs apart by
# host and index.
HOST_COLUMNS = ("Hostname", "hostname", "host", "instance")


def _open_zstd(path: Path, mode: str = "rb") -> IO[bytes]:
    """A Zstandard file's bytes as a stream (Arrow's codec: the stdlib has none before 3.14)."""
    return pa.input_stream(str(path), compression="zstd")  # type: ignore[return-value]


# Compression suffixes and the openers that read them: the stdlib's, and Arrow's for zstd
# (logrotate's ``compresscmd zstd``)
COMPRESSION_OPENERS: dict[str, Any] = {
    ".gz": gzip.open,
    ".bz2": bz2.open,
    ".xz": lzma.open,
    ".zst": _open_zstd,
}
# What a compressed file that cannot be decompressed raises (a truncated or mislabelled one)
DECOMPRESSION_ERRORS = (OSError, EOFError, lzma.LZMAError)


# What log rotation (logrotate, Python's RotatingFileHandler) appends to a log's name, beneath
# any compression suffix: a number (``smi.csv.1``, ``smi.csv.2.gz``: larger is older) or, with
# logrotate's ``dateext``, a date (``smi.csv-20261201``, ``smi.csv-2026-12-01-1764547200``)
_ROTATED = re.compile(
    r"^(?P<log>.+\.(?:csv|log|txt))"
    r"(?:\.(?P<number>\d+)|-(?P<date>\d{4}-?\d{2}-?\d{2}(?:[-_T.]?\d+)*))$",
    re.IGNORECASE,
)


def _uncompressed_name(path: Path) -> str:
    """A file's name without its compression suffix (``smi.csv.1`` for ``smi.csv.1.gz``)."""
    return path.stem if path.suffix.lower() in COMPRESSION_OPENERS else path.name


def rotated_name(path: Path) -> tuple[str, int | None, str | None] | None:
    """A part of a rotated log, told by its name: ``(the log's name, its number, its date)``
    (``("smi.csv", 2, None)`` for ``smi.csv.2.gz``, ``("smi.csv", None, "20261201")`` for
    ``smi.csv-20261201``); None for any other file."""
    match = _ROTATED.match(_uncompressed_name(path))
    if match is None:
        return None
    number = match["number"]
    date = re.sub(r"\D", "", match["date"]) if match["date"] else None
    return match["log"], (int(number) if number is not None else None), date


def _log_name(path: Path) -> str:
    """A log's own name: without compression suffix and rotation tag (``smi.csv``)."""
    rotated = rotated_name(path)
    return rotated[0] if rotated else _uncompressed_name(path)


def log_suffix(path: Path) -> str:
    """A log's own suffix in lower case, beneath a compression suffix and a rotation tag
    (``.csv`` for ``smi.csv.gz`` and ``smi.csv.2.gz``)."""
    return Path(_log_name(path)).suffix.lower()


def log_stem(path: Path) -> str:
    """A log's name without its suffix, compression suffix and rotation tag (``smi`` for
    ``smi.csv.gz`` and ``smi.csv.1``)."""
    return Path(_log_name(path)).stem


def open_log(path: Path) -> IO[bytes]:
    """The log's bytes as a stream, decompressed where its suffix names a compression."""
    opener = COMPRESSION_OPENERS.get(path.suffix.lower())
    return opener(path, "rb") if opener else path.open("rb")


def column_name(cell: str) -> str:
    """A header cell's column name without its unit (``power.draw [W]`` -> ``power.draw``)."""
    return cell.split(" [", 1)[0].strip()


HEADERLESS_HINT = (
    "an nvidia-smi log recorded with --format=csv,noheader has none: record with --format=csv, "
    "or add the header line its --query-gpu fields name (e.g. 'timestamp, index, power.draw [W]')"
)
NO_GPU_COLUMN_HINT = (
    "record with index (or uuid, pci.bus_id) in the query (--query-gpu=timestamp,index,"
    "power.draw,...): without it the rows of several GPUs cannot be told apart"
)
_DATA_CELL = re.compile(
    r"^(\d{4}[/-]\d{2}[/-]\d{2}[ T]|[-+]?\d+(\.\d*)?(e[-+]?\d+)?(\s*[A-Za-z%]+)?$)"
)


def separator_reason(line: str) -> str | None:
    """Why a log whose header line ``line`` holds no comma cannot be read as comma-separated:
    the separator it has instead (``;``: a CSV re-saved by Excel where the list separator is
    ``;``; a tab), or None where it has a comma or none of those."""
    separator = None if "," in line else next((c for c in ";\t|" if c in line), None)
    if separator is None:
        return None
    return (
        f"separated by {separator!r}, not commas (a CSV re-saved by Excel where the list "
        "separator is ';'): save it comma-separated, or read the log nvidia-smi wrote"
    )


def header_is_data(header: list[str]) -> bool:
    """True when a log's first line holds values rather than column names: its first cell a
    date or a number (with or without a unit), as a log written without its header line has."""
    return bool(header) and _DATA_CELL.match(header[0].strip()) is not None


class ImportError_(ValueError):
    """A log could not be imported; the message names the file, the column and the problem."""


class NoSamples(ImportError_):
    """A log of a known format that holds no sample (a header and no rows: a logger stopped
    before its first reading); the planner skips it where ``telemetry import`` refuses it.

    Args:
        path: the log, named first in the message.
        got: what it holds instead (``"a header and no rows"``), kept as :attr:`got`.
    """

    def __init__(self, path: object, got: str) -> None:
        super().__init__(f"{path}: expected at least one sample, got {got}")
        self.got = got


def text_encoding(head: bytes) -> str:
    """The encoding of a log that starts with ``head``: UTF-16 where it opens with that
    byte-order mark (Windows PowerShell 5 redirects ``nvidia-smi ... > log.csv`` so), else
    UTF-8 (its byte-order mark, which Excel writes, dropped)."""
    return "utf-16" if head[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"


class JoinedLog(Protocol):
    """A log kept in several files, read as one text
    (:class:`grpo_power.telemetry.rotation.RotatedLog`); its ``str`` names it in messages."""

    def read_text(self, expected: str) -> str:
        """The log's text; refused (:class:`ImportError_`) as :func:`read_log_text` refuses."""
        ...


LogSource = Path | JoinedLog  # what the readers of this module read


def read_log_text(path: LogSource, expected: str, leading_nuls: bool = False) -> str:
    """A log file's text (decompressed by its suffix, :func:`open_log`; :func:`text_encoding`; a
    byte-order mark dropped), or a :class:`JoinedLog`'s; refused, naming ``expected``, when the
    path is not a readable file of text. With ``leading_nuls`` NUL bytes before its first line
    (the hole a ``copytruncate`` rotation leaves in a log whose writer does not append) are
    let through, for the caller to drop."""
    if not isinstance(path, Path):
        return path.read_text(expected)
    problem = path_problem(path, f"{expected} (a file)", ())
    if problem:
        raise ImportError_(problem)
    try:
        with open_log(path) as file:
            data = file.read()
    except FileNotFoundError:
        raise ImportError_(f"{path}: no such file; expected {expected}") from None
    except DECOMPRESSION_ERRORS as error:
        if path.suffix.lower() not in COMPRESSION_OPENERS:
            raise
        raise ImportError_(
            f"{path}: cannot be decompressed ({one_line(error, 80)}); expected {expected}, "
            f"compressed as its "
            f"suffix {path.suffix} says"
        ) from None
    try:
        text = data.decode(text_encoding(data))
    except UnicodeDecodeError as error:
        raise ImportError_(
            f"{path}: expected {expected}, got bytes that are not text (byte {error.start})"
        ) from None
    start = len(text) - len(text.lstrip("\x00")) if leading_nuls else 0
    if "\x00" in text[start:]:
        raise ImportError_(
            f"{path}: expected {expected}, got bytes that are not text (byte "
            f"{text.index(chr(0), start)})"
        )
    return text


def _regular_table(text: str) -> tuple[pd.DataFrame, np.ndarray] | None:
    """A log without quotes, tabs or carriage returns (where pandas' C parser and :mod:`csv`
    could split or strip cells apart) whose every line has as many fields as its first, read by
    that parser: its rows as text (the header line first) and each row's line in the file; None
    for any other text, which `csv_rows` reads (and refuses) line by line."""
    if '"' in text or "\r" in text or "\t" in text:
        return None
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)  # no multi-byte char holds , \n
    ends = np.append(np.flatnonzero(data == ord("\n")), len(data))
    starts = np.concatenate([[0], ends[:-1] + 1])
    commas = np.flatnonzero(data == ord(","))
    present = ends > starts  # lines that hold something
    widths = np.bincount(np.searchsorted(ends, commas), minlength=len(ends))[present]
    if not len(widths) or (widths != widths[0]).any():
        return None  # a truncated or mixed row: the line-by-line reader says which
    try:
        table = pd.read_csv(
            io.StringIO(text),
            header=None,
            dtype=object,
            skipinitialspace=True,
            na_filter=False,
            engine="c",
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError):
        return None
    lines = np.flatnonzero(present).astype(np.int64) + 1
    if table.shape != (len(lines), widths[0] + 1):
        return None
    return table, lines


def csv_rows(
    path: LogSource, text: str, expected: str, delimiter: str = ","
) -> tuple[list[list[str]], np.ndarray]:
    """Every non-empty row of a CSV text (each as its cells) and the line each ends on."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, skipinitialspace=True)
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        for row in reader:
            if row:
                rows.append(row)
                lines.append(reader.line_num)
    except csv.Error as error:
        raise ImportError_(
            f"{path}: line {reader.line_num}: expected {expected}, got unreadable CSV ({error})"
        ) from None
    return rows, np.array(lines, dtype=np.int64)


def _header(path: LogSource, first: list[str], fmt: str, expected: str) -> list[str]:
    """A log's first row as its column names; refused where it cannot be a header."""
    header = [str(h).strip() for h in first]
    if len(header) == 1:
        why = separator_reason(header[0]) or "is it separated by something other than commas?"
        raise ImportError_(
            f"{path}: header: expected {expected} (timestamp, index or gpu, power, ...), got one "
            f"column {header[0][:60]!r}; {why}"
        )
    if header_is_data(header):
        hint = HEADERLESS_HINT if fmt == "nvidia-smi" else "add the header line naming its columns"
        raise ImportError_(
            f"{path}: line 1: expected a header line naming the columns, got data "
            f"({', '.join(header[:3])}, ...); {hint}"
        )
    return header


def _reading_kind(cell: str) -> tuple[bool, str] | None:
    """What a cell holds: ``(False, "")`` no reading ([N/A], :data:`MISSING_VALUES`), ``(True,
    unit)`` a number and its unit (``""`` for none), None other text (a date, a name)."""
    cell = cell.strip()
    if cell in MISSING_VALUES:
        return False, ""
    unit = re.search(_UNIT_SUFFIX, cell)
    try:
        float(cell[: unit.start()] if unit else cell)
    except ValueError:
        return None
    return True, unit.group(1) if unit else ""


def _without_line_being_written(path: LogSource, text: str) -> tuple[str, list[str]]:
    """``text`` without its last line where that line is one being written (a live log copied
    mid-write): it ends the file without a newline and does not parse like the line before it
    (fewer fields; or a last field that is no reading where that line's is one, or a number
    without the unit that line's carries, ``25`` for ``250.00 W``); and a note naming it. A
    complete last line without a newline is kept, as is a file of one line."""
    start = max(text.rfind("\n"), text.rfind("\r")) + 1
    last, before_last = text[start:], text[:start].rstrip()
    if not start or not last.strip() or not before_last:
        return text, []
    previous = before_last[max(before_last.rfind("\n"), before_last.rfind("\r")) + 1 :]
    cells, before = (
        next(csv.reader([line], skipinitialspace=True), []) for line in (last, previous)
    )
    cut = len(cells) < len(before)
    if not cut and len(cells) == len(before):
        got, had = _reading_kind(cells[-1]), _reading_kind(before[-1])
        cut = had is not None and (got is None or (got[0] and had[0] and got[1] != had[1]))
    if not cut:
        return text, []
    line = (text.count("\n", 0, start) or text.count("\r", 0, start)) + 1
    return text[:start], [
        f"{path}: line {line} ({last.strip()[:60]!r}) ends the file without a newline and "
        "does not parse like the line before it: a line being written when the log was read, "
        "left out"
    ]


def read_csv_log(path: LogSource, fmt: str) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """The log's rows as text (columns as in its header), each row's line in the file, and
    notes; ``fmt`` names the log's kind in errors (``nvidia-smi``, ``dcgm``, an engine's name).
    ``nvidia-smi -l`` repeats its header after a restart: every repeat of it is dropped. A last
    line being written (a live log: :func:`_without_line_being_written`) is left out, noted."""
    expected = f"a comma-separated {fmt} log with a header line"
    text, notes = _without_line_being_written(path, read_log_text(path, expected))
    regular = _regular_table(text)  # the common case, read in C
    rows: list[list[str]] = []
    if regular is None:
        rows, lines = csv_rows(path, text, expected)
        if not rows:
            raise ImportError_(f"{path}: expected {expected}, got an empty file")
    else:
        table, lines = regular
    header = _header(path, rows[0] if rows else table.iloc[0].tolist(), fmt, expected)
    if rows:  # a repeated header has the header's fields, so no other row may differ
        for row, line in zip(rows[1:], lines[1:], strict=True):
            if len(row) != len(header):
                raise ImportError_(
                    f"{path}: line {line} has a different number of fields than the header: "
                    f"expected {len(header)}, got {len(row)} (a truncated or mixed log)"
                )
        table = pd.DataFrame(rows, dtype=object)
    body = table.iloc[1:]
    same = (body[0].str.strip() == header[0]).to_numpy(copy=True)
    for i in np.flatnonzero(same):
        same[i] = [str(c).strip() for c in body.iloc[i]] == header
    return body[~same].set_axis(header, axis=1).reset_index(drop=True), lines[1:][~same], notes


# ``nvidia-smi dmon`` columns, by their header name, as the query names of NVIDIA_SMI_COLUMNS
DMON_COLUMNS = {
    "gpu": "index",
    "pwr": "power.draw",
    "gtemp": "temperature.gpu",
    "sm": "utilization.gpu",
    "mem": "utilization.memory",
    "pclk": "clocks.sm",
}
DMON_NAMES = {query: name for name, query in DMON_COLUMNS.items()}  # a dmon log's own names
DMON_EXPECTED = "an nvidia-smi dmon log with time columns (`nvidia-smi dmon -s pu -o DT`)"


def _dmon_cells(line: str) -> list[str]:
    """The fields of a dmon line (whitespace-separated, or comma-separated with ``--format
    csv``), without the ``#`` that starts a header line."""
    return [c for c in re.split(r"[,\s]+", line.lstrip("\ufeff").lstrip("#")) if c]


def is_dmon_header(line: str) -> bool:
    """True for the first line of an ``nvidia-smi dmon`` log (``# gpu pwr ...``, or
    ``#Date Time gpu pwr ...`` with ``-o DT``)."""
    names = [c.lower() for c in _dmon_cells(line)]
    return line.lstrip("\ufeff").startswith("#") and "gpu" in names and "pwr" in names


def dmon_has_time(line: str) -> bool:
    """True when an ``nvidia-smi dmon`` header line (:func:`is_dmon_header`) names the Date and
    Time columns that ``-o DT`` adds: without them its samples cannot be placed in time."""
    return {"date", "time"} <= {c.lower() for c in _dmon_cells(line)}


def read_dmon_log(path: LogSource) -> tuple[pd.DataFrame, np.ndarray]:
    """An ``nvidia-smi dmon`` log (whitespace- or comma-separated; ``#`` lines are its header,
    repeated every screenful, and units) as :func:`read_csv_log` gives a CSV log: rows as text under
    the nvidia-smi query names (``timestamp``, ``index``, ``power.draw``, ...), ``-`` as
    ``[N/A]``, and each row's line in the file. Its time columns (``-o DT``: ``YYYYMMDD`` and
    local ``HH:MM:SS``) are required: without them the samples cannot be placed in time."""
    text = read_log_text(path, DMON_EXPECTED)
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not numbered or not is_dmon_header(numbered[0][1]):
        first = numbered[0][1].strip()[:60] if numbered else ""
        raise ImportError_(
            f"{path}: line 1: expected {DMON_EXPECTED}, whose first line names its columns "
            f"('#Date Time gpu pwr ...'), got {first!r}"
        )
    names = [c.lower() for c in _dmon_cells(numbered[0][1])]
    if len(set(names)) != len(names):
        raise ImportError_(
            f"{path}: line 1: expected {DMON_EXPECTED}, whose columns are named once each, got "
            f"{' '.join(names)}"
        )
    if not dmon_has_time(numbered[0][1]):
        raise ImportError_(
            f"{path}: line 1: no Date and Time columns (found {' '.join(names)}); expected "
            f"{DMON_EXPECTED}: without -o DT its samples cannot be placed in time"
        )
    body = [(n, _dmon_cells(line)) for n, line in numbered if not line.lstrip().startswith("#")]
    for n, cells in body:
        if len(cells) != len(names):
            raise ImportError_(
                f"{path}: line {n} has a different number of fields than the header: expected "
                f"{len(names)}, got {len(cells)} (a truncated or mixed log)"
            )
    frame = pd.DataFrame([c for _, c in body], columns=names, dtype=object)
    date = frame["date"].astype(str)
    raw = pd.DataFrame(
        {"timestamp": date.str[:4] + "/" + date.str[4:6] + "/" + date.str[6:] + " " + frame["time"]}
    )
    for name, query in DMON_COLUMNS.items():
        if name in frame:
            raw[query] = frame[name].where(frame[name] != "-", "[N/A]")
    return raw, np.array([n for n, _ in body], dtype=np.int64)


_UNIT_SUFFIX = r"\s*(W|%|MHz|C|mJ|J)$"


def _parsed(values: pd.Series) -> tuple[pd.Series, pd.Series]:
    """A text column's cells stripped of blanks and units (None where missing) and their
    numbers (NaN where not one): by Arrow's kernels, in C++, or by pandas where Arrow's parser
    refuses a cell (a unit after a non-ASCII space, a number in a form only Python reads)."""
    raw = values.astype(str)
    cells = pc.utf8_trim_whitespace(pa.array(raw.to_numpy(dtype=object), type=pa.string()))
    missing = pc.is_in(cells, value_set=pa.array(sorted(MISSING_VALUES), type=pa.string()))
    cells = pc.if_else(missing, pa.scalar(None, pa.string()), cells)
    cells = pc.replace_substring_regex(cells, pattern=_UNIT_SUFFIX, replacement="")
    try:
        number = pc.cast(cells, pa.float64()).to_numpy(zero_copy_only=False)
        text = pd.Series(cells.to_numpy(zero_copy_only=False), index=values.index, dtype=object)
        return text, pd.Series(number, index=values.index, dtype=float)
    except pa.ArrowInvalid:
        text = raw.str.strip()
        text = text.where(~text.isin(MISSING_VALUES), None)
        text = text.str.replace(_UNIT_SUFFIX, "", regex=True)
        return text, pd.to_numeric(text, errors="coerce").astype(float)


def numeric_column(path: LogSource, values: pd.Series, column: str, lines: np.ndarray) -> pd.Series:
    """A text column as floats (units stripped, [N/A] as NaN); a value that is not a number is
    refused naming the column and its line."""
    text, number = _parsed(values)

    def cell(i: int) -> str:
        """Row ``i``'s cell as the log wrote it (its unit too: it shows what the value is)."""
        return repr(str(values.iloc[i]).strip())

    unparsed = number.isna() & text.notna()
    if unparsed.any():
        i = int(np.argmax(unparsed.to_numpy()))
        raise ImportError_(
            f"{path}: column '{column}' has a non-numeric value {cell(i)} (line "
            f"{lines[i]}); expected a number, optionally with its unit, or [N/A]"
        )
    huge = ~np.isfinite(number.to_numpy()) & number.notna().to_numpy()
    if huge.any():
        i = int(np.argmax(huge))
        raise ImportError_(
            f"{path}: column '{column}': expected a finite number, got {cell(i)} (line {lines[i]})"
        )
    return number


def columns_shown(columns: Any, limit: int = 8) -> str:
    """A log's column names for a one-line message: the first ``limit``, each cut to 40
    characters, and how many there are (a file of another format has one very long "name")."""
    names = [str(c) if len(str(c)) <= 40 else f"{str(c)[:37]}..." for c in columns]
    more = f", ... ({len(names)} columns)" if len(names) > limit else ""
    return "[" + ", ".join(repr(n) for n in names[:limit]) + more + "]"
