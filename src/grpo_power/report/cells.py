"""Report cells that know the file, row and column they came from, and the tables made of them.

A number in a table is a :class:`Num`: the value read from a stage's CSV or JSON, how it is
shown (format spec and scale), and its provenance. :class:`CsvFile` and :class:`JsonFile` read a
stage's file once and hand out its numbers; :func:`csv_table` builds a :class:`Table` row by row
from a CSV's rows and :class:`Col` specifications. The HTML (``report/html.py``) writes the
provenance into the number's element (``data-src``, ``data-col``, ``data-row``, ``data-spec``,
``data-scale``), so a reader or a test can trace any shown number back to the file a stage
wrote. The study report's tables (``report/tables.py``) and the planner's
(``planner/report.py``) are built from these.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_power.stage_files import read_csv, read_json


@dataclass(frozen=True)
class Num:
    """A number shown in a table, with the file, row and column it was read from.

    ``row``: (key column, value as text) pairs that select exactly one CSV row; empty for JSON,
    where ``column`` is a dotted key path. Shown as ``format(value * scale, spec)``.
    """

    value: float
    src: Path
    column: str
    row: tuple[tuple[str, str], ...] = ()
    spec: str = ",.1f"
    scale: float = 1.0

    def text(self) -> str:
        """The number as shown, ``n/a`` when missing."""
        if self.value is None or not math.isfinite(self.value):
            return "n/a"
        return format(self.value * self.scale, self.spec)


Part = str | Num
Cell = Part | list[Part]


@dataclass
class Table:
    """A table of the report: a title, headers, rows of cells, its source files, and a note
    under it (a cell: its numbers traceable like the rows')."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    sources: list[Path] = field(default_factory=list)
    note: Cell = ""


def _row_key(row: pd.Series, keys: Sequence[str]) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(row[k])) for k in keys)


def number(value: Any, src: Path, column: str, row: tuple[tuple[str, str], ...] = ()) -> float:
    """``value``, read from ``column`` of ``src`` (in the row ``row`` selects), as a float; None
    and blank cells are NaN (shown ``n/a``).

    Raises:
        ValueError: not a number (the message names the file, the column, the row and the value).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        where = f" (row {', '.join(f'{k}={v}' for k, v in row)})" if row else ""
        raise ValueError(f"{src}: {column}{where}: expected a number, got {value!r}") from None


def is_true(value: Any) -> bool:
    """Whether a flag read from a stage's CSV (``within_budget``, ``met``) is true: pandas reads
    a column of ``True``/``False`` as booleans and one with blanks as text, so it is compared as
    text ("False" as text is truthy)."""
    return str(value) == "True"


class CsvFile:
    """A CSV a stage wrote, read once; hands out :class:`Num` cells of its rows."""

    def __init__(
        self, path: Path | str, expected: str | None = None, columns: Sequence[str] = ()
    ) -> None:
        """Read ``path`` (``expected``: what it should be, for messages; ``columns``: those it
        must have)."""
        self.path = Path(path)
        self.frame = read_csv(
            self.path, expected or f"an earlier stage's {self.path.name}", columns
        )

    def select(self, **keys: Any) -> pd.DataFrame:
        """The rows whose key columns equal ``keys`` (compared as text)."""
        mask = pd.Series(True, index=self.frame.index)
        for column, value in keys.items():
            self.require(column)
            mask &= self.frame[column].astype(str) == str(value)
        return self.frame[mask]

    def require(self, column: str) -> None:
        """Raise a ValueError naming the file and ``column`` where the file lacks it."""
        if column not in self.frame.columns:
            raise ValueError(
                f"{self.path}: {column}: expected a column of this name, got "
                f"{list(self.frame.columns)[:12]}"
            )

    def num(self, column: str, spec: str = ",.1f", scale: float = 1.0, **keys: Any) -> Num:
        """The number in ``column`` of the one row matching ``keys``.

        Raises:
            ValueError: no row, or several rows, match.
        """
        self.require(column)
        rows = self.select(**keys)
        if len(rows) != 1:
            raise ValueError(f"{self.path}: {len(rows)} rows match {keys}, expected one")
        row = rows.iloc[0]
        ident = _row_key(row, list(keys))
        return Num(
            number(row[column], self.path, column, ident), self.path, column, ident, spec, scale
        )


class JsonFile:
    """A JSON file a stage wrote; hands out :class:`Num` cells of its keys."""

    def __init__(self, path: Path | str, expected: str | None = None) -> None:
        self.path = Path(path)
        self.expected = expected or f"an earlier stage's {self.path.name}"
        self.data = read_json(self.path, self.expected)

    def get(self, key: str) -> Any:
        """The value at a dotted key path (``evaluation.trained_return``).

        Raises:
            ValueError: the file has no such key (the message names the file and the key).
        """
        value: Any = self.data
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                raise ValueError(f"{self.path}: {key}: expected {self.expected} with this key")
            value = value[part]
        return value

    def has(self, key: str) -> bool:
        """Whether the file has the dotted ``key``."""
        try:
            self.get(key)
        except ValueError:
            return False
        return True

    def num(self, key: str, spec: str = ",.1f", scale: float = 1.0) -> Num:
        return Num(number(self.get(key), self.path, key), self.path, key, (), spec, scale)


@dataclass(frozen=True)
class Col:
    """A column of a CSV-backed table: a header, the CSV column, and how to show it.

    ``spec`` None: the value as text. ``ci``: append ``[low, high]`` from the columns
    ``<ci_prefix>ci_low`` and ``<ci_prefix>ci_high`` (prefix default ``<column>_``).
    """

    header: str
    column: str
    spec: str | None = None
    scale: float = 1.0
    ci: bool = False
    ci_prefix: str | None = None


def csv_table(
    key: str,
    title: str,
    source: CsvFile,
    cols: Sequence[Col],
    keys: Sequence[str],
    rows: pd.DataFrame | None = None,
    note: Cell = "",
) -> Table:
    """One table row per row of ``rows`` (default: every row of ``source``); ``keys``: the
    columns that identify a row in ``source``."""
    table = Table(key, title, [c.header for c in cols], sources=[source.path], note=note)
    needed = list(keys)
    for c in cols:
        prefix = f"{c.column}_" if c.ci_prefix is None else c.ci_prefix
        needed += [c.column, f"{prefix}ci_low", f"{prefix}ci_high"] if c.ci else [c.column]
    missing = [n for n in needed if n not in source.frame.columns]
    if missing:
        raise ValueError(
            f"{source.path}: {missing[0]}: expected the column(s) {missing} for the {key} table, "
            f"got {list(source.frame.columns)[:12]}"
        )
    for _, row in (source.frame if rows is None else rows).iterrows():
        ident = _row_key(row, keys)
        cells: list[Cell] = []
        for c in cols:
            if c.spec is None:
                cells.append(str(row[c.column]) if pd.notna(row[c.column]) else "")
                continue
            prefix = f"{c.column}_" if c.ci_prefix is None else c.ci_prefix
            names = (c.column, f"{prefix}ci_low", f"{prefix}ci_high") if c.ci else (c.column,)
            nums = [
                Num(number(row[n], source.path, n, ident), source.path, n, ident, c.spec, c.scale)
                for n in names
            ]
            cells.append([nums[0], " [", nums[1], ", ", nums[2], "]"] if c.ci else nums[0])
        table.rows.append(cells)
    return table


def with_unit(num: Num, unit: str) -> list[Part]:
    """A number with its unit (``$`` before it, any other unit after it); the unit is left out
    when the number is missing."""
    if num.text() == "n/a":
        return [num]
    if unit.startswith("$"):  # "$", or "$ (one-time)": $12,072,938 (one-time)
        return ["$", num, *([unit[1:]] if unit[1:] else [])]
    return [num, f" {unit}"]


def interval_pct(summary: JsonFile) -> str:
    """The confidence of a stage's intervals as text (``"95 %"``), from its ``summary.json``'s
    ``confidence`` (``evaluate.confidence`` when the stage ran), never assumed."""
    return f"{100 * float(summary.get('confidence')):g} %"


def _source(label: str) -> str:
    """A data label's source: ``nvml`` of ``measured (nvml)``, else the label itself."""
    label = label.strip()
    if label.startswith("measured (") and label.endswith(")") and "simulated" not in label:
        return label[len("measured (") : -1]
    return label


def data_label(data: Iterable[str]) -> str:
    """``SIMULATED`` when the data is (or has) simulated power, ``SIMULATED and measured: ...``
    when some is measured too, else the sources (e.g. ``measured: nvml``; ``measured`` where
    that is the only label); items may list several sources separated by commas."""
    sources = {_source(source) for item in data for source in str(item).split(",")}
    measured = sorted(source for source in sources if "simulated" not in source)
    named = [source for source in measured if source != "measured"]
    shown = "measured" + (": " + ", ".join(named) if named else "")
    if len(measured) == len(sources):
        return shown
    return "SIMULATED" + (f" and {shown}" if measured else "")
