"""Import power logs recorded by other tools into the trace schema (source ``imported``).

Supported formats:

* ``nvidia-smi``: ``nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv -lms N``
  (with its header line; units such as ``W`` and ``%`` are stripped, ``[N/A]`` becomes null).
  ``power.draw.instant`` is preferred for ``power_w`` where present; ``power.draw.average`` fills
  ``power_avg_w``.
* ``dcgm``: CSV scraped from dcgm-exporter with a ``timestamp`` column, a ``gpu`` column and one
  column per DCGM field, named as in dcgm-exporter's counters file (``DCGM_FI_DEV_POWER_USAGE``,
  ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` in mJ, ...).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from grpo_power.telemetry.checks import check_frame_power
from grpo_power.telemetry.schema import TRACE_COLUMNS, TraceMetadata

ImportFormat = Literal["nvidia-smi", "dcgm"]

NVIDIA_SMI_COLUMNS = {
    "timestamp": "timestamp",
    "index": "gpu",
    "power.draw.instant": "power_w",
    "power.draw": "power_draw",
    "power.draw.average": "power_avg_w",
    "utilization.gpu": "sm_util",
    "utilization.memory": "mem_util",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "temperature.gpu": "temp_c",
    "power.limit": "power_limit_w",
    "enforced.power.limit": "power_limit_w",
    "power.default_limit": "nameplate_w",
    "name": "gpu_name",
}

DCGM_COLUMNS = {
    "timestamp": "timestamp",
    "gpu": "gpu",
    "DCGM_FI_DEV_POWER_USAGE_INSTANT": "power_w",
    "DCGM_FI_DEV_POWER_USAGE": "power_draw",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "energy_mj",
    "DCGM_FI_DEV_GPU_UTIL": "sm_util",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "mem_util",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit_w",
    "modelName": "gpu_name",
}

MISSING_VALUES = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "", "nan"}


class ImportError_(ValueError):
    """A log could not be imported; the message names the file, the column and the problem."""


def _read_csv(path: Path, fmt: ImportFormat) -> pd.DataFrame:
    expected = f"a comma-separated {fmt} log with a header line"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ImportError_(f"{path}: no such file; expected {expected}") from None
    except UnicodeDecodeError as error:
        raise ImportError_(
            f"{path}: expected {expected}, got bytes that are not text (byte {error.start})"
        ) from None
    rows = [r for r in csv.reader(io.StringIO(text), skipinitialspace=True) if r]
    if not rows:
        raise ImportError_(f"{path}: expected {expected}, got an empty file")
    header = [h.strip() for h in rows[0]]
    if len(header) == 1:
        raise ImportError_(
            f"{path}: header: expected {expected} (timestamp, index or gpu, power, ...), got one "
            f"column {header[0][:60]!r}; is it separated by something other than commas?"
        )
    # nvidia-smi -l repeats its header after a restart; drop every repeat of it.
    body = [r for r in rows[1:] if [c.strip() for c in r] != header]
    bad = [(i + 2, len(r)) for i, r in enumerate(body) if len(r) != len(header)]
    if bad:
        line, fields = bad[0]
        raise ImportError_(
            f"{path}: line {line} has a different number of fields than the header: expected "
            f"{len(header)}, got {fields} (a truncated or mixed log)"
        )
    return pd.DataFrame(body, columns=header)


def _strip_units(name: str) -> str:
    return name.split(" [", 1)[0].strip()


def _numeric(path: Path, values: pd.Series, column: str) -> pd.Series:
    text = values.astype(str).str.strip()
    text = text.where(~text.isin(MISSING_VALUES), None)
    text = text.str.replace(r"\s*(W|%|MHz|C|mJ|J)$", "", regex=True)
    number = pd.to_numeric(text, errors="coerce")
    unparsed = number.isna() & text.notna()
    if unparsed.any():
        raise ImportError_(
            f"{path}: column '{column}' has a non-numeric value {text[unparsed].iloc[0]!r}; "
            "expected a number, optionally with its unit, or [N/A]"
        )
    return number.astype(float)


def _timestamps_s(path: Path, values: pd.Series) -> tuple[np.ndarray, float]:
    """Seconds since the first sample (exact to the microsecond) and the first's unix time."""
    text = values.astype(str).str.strip()
    numeric = pd.to_numeric(text, errors="coerce")
    if numeric.notna().all():
        start_s = float(numeric.min())
        return (numeric - start_s).to_numpy(dtype=float), start_s
    stamps = pd.to_datetime(text, errors="coerce", format="mixed")
    if stamps.isna().any():
        raise ImportError_(
            f"{path}: column 'timestamp' has an unreadable value {text[stamps.isna()].iloc[0]!r}; "
            "expected 'YYYY/MM/DD HH:MM:SS.mmm' (nvidia-smi), ISO 8601, or unix seconds"
        )
    if stamps.dt.tz is not None:  # ISO 8601 with a zone: compare in UTC
        stamps = stamps.dt.tz_convert(None)
    start = stamps.min()
    start_s = (start - pd.Timestamp("1970-01-01")).total_seconds()
    return (stamps - start).dt.total_seconds().to_numpy(dtype=float), start_s


def import_log(
    path: Path | str,
    fmt: ImportFormat,
    nameplate_w: float | None = None,
    gpu_name: str | None = None,
    run_id: str | None = None,
) -> tuple[pd.DataFrame, TraceMetadata]:
    """Read a log into a trace frame and its metadata.

    Args:
        path: the log file.
        fmt: ``nvidia-smi`` or ``dcgm``.
        nameplate_w: the GPU's board power, W, when the log has no ``power.default_limit``.
        gpu_name: the GPU model when the log has no name column.
        run_id: the trace's run id (default: the file's stem).

    Raises:
        ImportError_: the file is not a CSV log, a required column is missing, or a value is
            unreadable or not a plausible power (NaN, negative, milliwatts: see
            :mod:`grpo_power.telemetry.checks`).
    """
    path = Path(path)
    raw = _read_csv(path, fmt)
    mapping = NVIDIA_SMI_COLUMNS if fmt == "nvidia-smi" else DCGM_COLUMNS
    renamed = {}
    for column in raw.columns:
        key = _strip_units(column) if fmt == "nvidia-smi" else column.strip()
        if key in mapping and mapping[key] not in renamed.values():
            renamed[column] = mapping[key]
    frame = raw[list(renamed)].rename(columns=renamed)
    power_column = "power_w" if "power_w" in frame else "power_draw"
    required = {"timestamp": "timestamp", "gpu": "index" if fmt == "nvidia-smi" else "gpu"}
    for name, shown in required.items():
        if name not in frame:
            raise ImportError_(
                f"{path}: missing column '{shown}' (expected in every {fmt} log); "
                f"found {list(raw.columns)}"
            )
    if power_column not in frame:
        expected = "power.draw" if fmt == "nvidia-smi" else "DCGM_FI_DEV_POWER_USAGE"
        raise ImportError_(
            f"{path}: missing power column '{expected}' (or its _INSTANT/.instant variant, "
            f"expected in watts); found {list(raw.columns)}"
        )
    if frame.empty:
        raise ImportError_(f"{path}: expected at least one sample, got a header and no rows")

    gpu = _numeric(path, frame["gpu"], "gpu")
    if gpu.isna().any():
        raise ImportError_(
            f"{path}: column '{required['gpu']}': expected a GPU index in every row, got [N/A]"
        )
    out = pd.DataFrame({"gpu": gpu.astype("int32")})
    original = {new: old for old, new in renamed.items()}
    out["t"], start_unix_s = _timestamps_s(path, frame["timestamp"])
    out["power_w"] = _numeric(path, frame[power_column], original[power_column])
    if out["power_w"].isna().any():
        raise ImportError_(
            f"{path}: column '{original[power_column]}': expected watts in every row, got "
            f"[N/A] in {int(out['power_w'].isna().sum())} row(s)"
        )
    for name in ("power_avg_w", "sm_util", "mem_util", "sm_clock_mhz", "temp_c", "power_limit_w"):
        out[name] = _numeric(path, frame[name], original[name]) if name in frame else np.nan
    if "energy_mj" in frame:
        energy_mj = _numeric(path, frame["energy_mj"], original["energy_mj"])
        out["energy_j"] = (energy_mj - energy_mj.groupby(out["gpu"]).transform("first")) / 1000.0
    else:
        out["energy_j"] = np.nan
    nameplate_from = "--nameplate-w"
    if nameplate_w is None and "nameplate_w" in frame:
        nameplate_from = original["nameplate_w"]
        nameplate_w = float(_numeric(path, frame["nameplate_w"], nameplate_from).max())
    if nameplate_w is None:
        raise ImportError_(
            f"{path}: no power.default_limit column; "
            "give the GPU's nameplate power with --nameplate-w"
        )
    if not nameplate_w > 0:
        raise ImportError_(f"{path}: {nameplate_from}: expected watts > 0, got {nameplate_w:g}")
    check_frame_power(out, str(path), nameplate_w, original[power_column])
    if gpu_name is None:
        gpu_name = str(frame["gpu_name"].iloc[0]).strip() if "gpu_name" in frame else "unknown"
    out = out.sort_values(["t", "gpu"], kind="stable").reset_index(drop=True)
    periods = out.groupby("gpu")["t"].diff().dropna()
    metadata = TraceMetadata(
        run_id=run_id or path.stem,
        source="imported",
        gpu_name=gpu_name,
        nameplate_w=nameplate_w,
        sample_period_s=float(periods.median()) if len(periods) and periods.median() > 0 else 1.0,
        start_unix_s=start_unix_s,
        host="unknown",
        imported_from=str(path),
        import_format=fmt,
    )
    return out[list(TRACE_COLUMNS)], metadata
