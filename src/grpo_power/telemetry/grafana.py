"""Read a Grafana panel's CSV download of DCGM power into the rows the DCGM importer reads.

Where dcgm-exporter's series are watched on a Grafana dashboard, the planner's power history is
often the panel's own download (Inspect > Data > Download CSV). Grafana writes it as:

* a ``Time`` column, then one column per series (``Series joined by time``), named by the
  panel's legend (NVIDIA's DCGM dashboard: ``GPU {{gpu}}``; a fleet's: ``{{Hostname}} GPU
  {{gpu}}``) or, without a legend, by the series' labels
  (``DCGM_FI_DEV_POWER_USAGE{Hostname="dgx-a", gpu="0", ...}``); or, from a table panel, a
  ``Time`` column, one column per label (``gpu``, ``Hostname``, ...) and a ``Value`` column;
* times as the dashboard shows them (``2026-12-01 10:00:00``, in its time zone, which the
  import reads as ``--timezone`` / ``planner.timezone``) or, with "Formatted data" off, unix
  milliseconds; values with the panel's unit (``264.5 W``, ``1.2 kW``) or bare (watts, as
  dcgm-exporter gives them); an empty cell where a series has no sample at that time;
* with "Download for Excel", a first line ``sep=,`` and a byte-order mark; the delimiter is
  the browser locale's list separator (``,`` or ``;``).

:func:`read_grafana_log` turns it into one row per GPU and time with a power column, as a DCGM
CSV has (:func:`grpo_power.telemetry.series.dcgm_rows`). A GPU is the series' ``gpu`` label, or
the number the legend gives it (``GPU 3``, ``gpu3``, ``dgx-a:3``; the rest of the legend is its
host), or the GPU's UUID where the legend names only that (``{{UUID}}``, ``{{Hostname}}
{{UUID}}``: the import numbers such GPUs by UUID, as it does a DCGM CSV without an index; a UUID
beside a number is the number's GPU's UUID); a column that names no GPU is refused. Two series
of one GPU (a pod that changed) are one GPU where their samples do not overlap. Series of other
DCGM fields (``DCGM_FI_DEV_GPU_TEMP``) are left out: the panel's power is what is read.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from grpo_power.telemetry.logrows import (
    HOST_COLUMNS,
    ImportError_,
    NoSamples,
    csv_rows,
    read_log_text,
)
from grpo_power.telemetry.series import dcgm_rows, drop_repeats, first_clash, gpu_named

GRAFANA_EXPECTED = (
    "a Grafana panel's CSV download of DCGM power (Inspect > Data > Download CSV): a Time "
    "column and a column per GPU series"
)
POWER_FIELDS = ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_USAGE_INSTANT")
LEGEND_HINT = (
    "set the panel's legend to name it (GPU {{gpu}}, or {{Hostname}} GPU {{gpu}} across "
    "hosts), or clear the legend so that the series' labels name it"
)
SEP_LINE = re.compile(r"^\ufeff?sep=(.)\s*$")
HEADER = re.compile(r'^\ufeff?"?Time"?\s*([,;\t])')
_SERIES = re.compile(r"^(?P<metric>[A-Za-z_:][\w:]*)?\s*\{(?P<labels>.*)\}$", re.S)
_LABEL = re.compile(r'([A-Za-z_]\w*)\s*=\s*"((?:[^"\\]|\\.)*)"')
# an NVIDIA GPU's UUID (nvidia-smi's uuid, DCGM's UUID label), or a MIG instance's
_UUID = re.compile(
    r"(?<![\w-])(?:MIG-GPU-|MIG-|GPU-)[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}(?:/\d+)*", re.I
)
_GPU_WORD = re.compile(r"gpu\s*[#:=_-]?\s*(\d+)", re.I)
_LAST_NUMBER = re.compile(r"[\s:_#/.-](\d+)$")
_SEPARATORS = " \t-_:#/|,;@()[]{}."
_VALUE = r"^(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>\S*)$"
POWER_UNITS_W = {"": 1.0, "W": 1.0, "kW": 1e3, "mW": 1e-3, "MW": 1e6}
_NO_VALUE = {"", "null", "NaN", "nan", "N/A", "undefined", "-"}


def grafana_delimiter(line: str) -> str | None:
    """The delimiter of a Grafana CSV download whose first line is ``line`` (Excel's ``sep=``
    line, or a header that opens with Grafana's ``Time`` field), or None: not one."""
    match = SEP_LINE.match(line) or HEADER.match(line)
    return match.group(1) if match else None


def _series_gpu(name: str) -> tuple[str, str, str, str, str] | None:
    """A series column's (host, GPU index, DCGM field, part, UUID) from its name: the series'
    labels (``METRIC{gpu="0", Hostname="...", UUID="..."}``) or a legend that numbers the GPU or
    gives its UUID; None where the name names no GPU. The index is "" where only a UUID names
    the GPU. A legend's field is power, its host the rest of the legend, and its part unknown
    ("")."""
    name = name.strip()
    series = _SERIES.match(name)
    if series is not None:
        labels = dict(_LABEL.findall(series.group("labels")))
        field = series.group("metric") or labels.get("__name__") or POWER_FIELDS[0]
        gpu, uuid = labels.get("gpu", ""), labels.get("UUID", "")
        index = gpu if gpu.isascii() and gpu.isdigit() else ""
        if not index and not uuid:
            return None
        host = next((labels[h] for h in HOST_COLUMNS if h in labels), "")
        return host, index, field, labels.get("modelName", ""), uuid
    uuid = _UUID.search(name)
    rest = name if uuid is None else name[: uuid.start()] + name[uuid.end() :]
    # beside a UUID, only a GPU word numbers the GPU: a host's last number (node-3) does not
    number = _gpu_word(rest) or (_LAST_NUMBER.search(rest) if uuid is None else None)
    if number is None and uuid is None:
        return None
    if number is not None:
        rest = rest[: number.start()] + rest[number.end() :]
    index = str(int(number.group(1))) if number is not None else ""
    return rest.strip(_SEPARATORS), index, POWER_FIELDS[0], "", uuid.group(0) if uuid else ""


def _gpu_word(legend: str) -> re.Match[str] | None:
    """The word of ``legend`` that numbers its GPU (``GPU 3``, ``gpu-3``, ``gpu3``), or None.
    Where there are several (a host named ``gpu01`` or ``gpu-01`` beside ``GPU 0``), the one a
    host name cannot be: a number set apart from ``gpu`` by a space (host names hold none), else
    one without a leading zero (``01`` numbers hosts, not GPUs), else one set apart from ``gpu``
    at all; the last of equals, as the host comes first in the legends this reads
    (``{{Hostname}} GPU {{gpu}}``)."""

    def rank(word: re.Match[str]) -> tuple[bool, bool, bool]:
        between = legend[word.start() + 3 : word.start(1)]
        number = word.group(1)
        return (
            any(c.isspace() for c in between),
            number == "0" or not number.startswith("0"),
            not legend[word.start(1) - 1].isalpha(),
        )

    words = list(_GPU_WORD.finditer(legend))
    return max(reversed(words), key=rank) if words else None


def _values(path: Path, cells: pd.Series, columns: pd.Series, lines: pd.Series) -> pd.Series:
    """Power cells (``264.5 W``, ``1.2 kW``, ``264.5``) as watts (split by Arrow's regex kernel,
    in C++); refused, naming the column and line, where a cell is not a number or its unit not
    one of power."""
    text = pa.array(cells.to_numpy(dtype=object), type=pa.string())
    parts = pc.extract_regex(text, _VALUE)
    number = pc.cast(pc.struct_field(parts, [0]), pa.float64()).to_numpy(zero_copy_only=False)
    unit = pd.Series(pc.struct_field(parts, [1]).to_numpy(zero_copy_only=False), dtype=object)
    scale = unit.map(POWER_UNITS_W).to_numpy(dtype=float)
    bad = ~np.isfinite(number) | np.isnan(scale)
    if bad.any():
        i = int(np.argmax(bad))
        raise ImportError_(
            f"{path}: column '{columns.iloc[i]}' has the value {cells.iloc[i]!r} (line "
            f"{lines.iloc[i]}); expected power: a number in W, optionally with its unit (W, kW, "
            "mW; the panel's unit watt)"
        )
    return pd.Series(number * scale, index=cells.index)


def _table_readings(path: Path, header: list[str], body: pd.DataFrame) -> pd.DataFrame:
    """A table panel's download (``Time``, a column per label, ``Value``) as readings; its GPUs
    named by their ``gpu`` label, or by their ``UUID`` alone where the table has no ``gpu``."""
    values = [c for c in header if c == "Value" or c.startswith("Value #")]
    if len(values) != 1:
        raise ImportError_(
            f"{path}: a Grafana table with a 'gpu' or 'UUID' column: expected one 'Value' "
            f"column, got {len(values)} ({', '.join(values[:3]) or 'none'}); download one "
            "query's table"
        )
    host = next((h for h in HOST_COLUMNS if h in header), None)
    return pd.DataFrame(
        {
            "host": body[host] if host else "",
            "gpu": body["gpu"].str.strip() if "gpu" in header else "",
            "field": body["__name__"] if "__name__" in header else POWER_FIELDS[0],
            "model": body["modelName"] if "modelName" in header else "",
            "uuid": body["UUID"] if "UUID" in header else "",
            "time": body["Time"],
            "line": body["line"],
            "column": values[0],
            "cell": body[values[0]],
        }
    )


def _series_readings(path: Path, header: list[str], body: pd.DataFrame) -> pd.DataFrame:
    """A time-series panel's download (``Time``, a column per series) as readings."""
    named = []
    for column in header[1:]:
        gpu = _series_gpu(column)
        if gpu is None:
            raise ImportError_(
                f"{path}: column {column[:80]!r}: no GPU named by the series' name; expected "
                f"{GRAFANA_EXPECTED}: {LEGEND_HINT}"
            )
        named.append(gpu)
    parts = []
    for j, (host, gpu, field, model, uuid) in enumerate(named, 1):  # legends may repeat
        parts.append(
            pd.DataFrame(
                {
                    "host": host,
                    "gpu": gpu,
                    "field": field,
                    "model": model,
                    "uuid": uuid,
                    "time": body.iloc[:, 0].to_numpy(),
                    "line": body["line"].to_numpy(),
                    "column": header[j],
                    "cell": body.iloc[:, j].to_numpy(),
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def _time_order(readings: pd.DataFrame) -> np.ndarray:
    """A number per reading (in file order) that sorts its time: its time's place in file order,
    where a time a series has passed before and comes back to (the local hour repeated when the
    clocks go back, on a dashboard showing local time) is a later time than its first pass, as
    the series' order of rows says. The import places both passes by ``--timezone``."""
    codes, uniques = pd.factorize(readings["timestamp"])
    numbers = pd.to_numeric(pd.Series(uniques), errors="coerce")
    if numbers.notna().all():  # unix milliseconds: no time repeats
        return codes.astype(float)
    try:
        stamps = pd.to_datetime(pd.Series(uniques), errors="coerce", format="mixed")
        value = stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64).astype(float)
        value[stamps.isna().to_numpy()] = np.nan
    except (ValueError, TypeError, OverflowError):  # zoned times: none repeats
        return codes.astype(float)
    series = [readings[k] for k in ("host", "gpu", "field")]
    back = pd.Series(value[codes]).groupby(series).diff() < 0
    passes = back.astype(int).groupby(series).cumsum()
    if not passes.any():
        return codes.astype(float)
    return pd.factorize(passes.astype(str) + "|" + readings["timestamp"])[0].astype(float)


def read_grafana_log(path: Path) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """A Grafana panel's CSV download (the file at ``path``) as the rows of text a DCGM CSV
    gives: ``timestamp`` (as Grafana wrote it), ``gpu`` (none where the series name their GPUs
    by UUID alone), ``host`` where the series name hosts, ``modelName`` and ``UUID`` where their
    labels or legends do, and a power column; each row's line in the file; and notes (readings
    that several series repeat, read once). Empty cells (no sample of that series then) are
    left out.

    Raises:
        ImportError_: not text, no ``Time`` header, a column that names no GPU, columns naming
            their GPUs by index and by UUID alone, a value that is not power, no power series,
            two series giving one GPU's power at one time with different values.
    """
    text = read_log_text(path, GRAFANA_EXPECTED)
    end = text.find("\n")  # the first line, without copying the rest of the text
    first = (text if end < 0 else text[:end]).strip("\r")
    delimiter = grafana_delimiter(first)
    if delimiter is None:
        raise ImportError_(f"{path}: line 1: expected {GRAFANA_EXPECTED}, got {first[:60]!r}")
    rows, lines = csv_rows(path, text, GRAFANA_EXPECTED, delimiter)
    if SEP_LINE.match(first):
        rows, lines = rows[1:], lines[1:]
    if not rows or rows[0][0].strip() != "Time":
        raise ImportError_(
            f"{path}: line {lines[0] if rows else 1}: expected a header line "
            f"opening with Time; {GRAFANA_EXPECTED}"
        )
    header = [c.strip() for c in rows[0]]
    for row, line in zip(rows[1:], lines[1:], strict=True):
        if len(row) != len(header):
            raise ImportError_(
                f"{path}: line {line} has a different number of fields than the header: "
                f"expected {len(header)}, got {len(row)} (a truncated download)"
            )
    if len(rows) == 1:
        raise NoSamples(path, "a header and no rows")
    body = pd.DataFrame(rows[1:], columns=header, dtype=object)
    body["line"] = lines[1:]
    table = "gpu" in header or "UUID" in header  # a table panel names its GPUs by a label
    readings = (_table_readings if table else _series_readings)(path, header, body)
    readings["cell"] = readings["cell"].astype(str).str.strip()
    readings = readings[~readings["cell"].isin(_NO_VALUE)]
    readings = readings[readings["field"].isin(POWER_FIELDS)].reset_index(drop=True)
    if readings.empty:
        raise ImportError_(
            f"{path}: expected power readings ({' or '.join(POWER_FIELDS)} series), got none; "
            f"{GRAFANA_EXPECTED}"
        )
    by_uuid = (readings["gpu"] == "").to_numpy()  # series named by their UUID alone
    if by_uuid.any() and not by_uuid.all():
        raise ImportError_(
            f"{path}: column {readings['column'][by_uuid].iloc[0][:80]!r} names its GPU by UUID "
            f"alone, column {readings['column'][~by_uuid].iloc[0][:80]!r} by index; expected "
            f"every series named alike: {LEGEND_HINT}"
        )
    if by_uuid.any():
        readings["gpu"] = readings["uuid"]  # the GPU, until the import numbers them by UUID
    readings["value"] = _values(path, readings["cell"], readings["column"], readings["line"])
    readings["timestamp"] = readings["time"].astype(str).str.strip()
    readings = readings.sort_values("line", kind="stable").reset_index(drop=True)
    readings["order"] = _time_order(readings)
    readings, notes = drop_repeats(readings, str(path))
    clash = first_clash(readings)
    if clash is not None:
        raise ImportError_(
            f"{path}: two {'rows' if table else 'columns'} give the power of "
            f"{gpu_named(clash['host'], clash['gpu'])} at {clash['timestamp']} (line "
            f"{clash['line']}); expected one series per GPU: "
            + ("download one query's table" if table else LEGEND_HINT)
        )
    host_label = "host" if (readings["host"] != "").any() else None
    labels = {
        label: {
            (h, g): v
            for h, g, v in readings[["host", "gpu", column]].drop_duplicates().itertuples(False)
            if v
        }
        for label, column in (("modelName", "model"), ("UUID", "uuid"))
    }
    raw, lines = dcgm_rows(readings, host_label, labels)
    return (raw.drop(columns="gpu") if by_uuid.any() else raw), lines, notes
