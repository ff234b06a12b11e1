"""Read DCGM power history exported from Prometheus into the rows the DCGM importer reads.

Where dcgm-exporter is scraped by Prometheus, a GPU's power history is a range query's answer:
``curl 'http://PROMETHEUS/api/v1/query_range?query=DCGM_FI_DEV_POWER_USAGE&start=..&end=..&step=15s'``
(or ``promtool query range -o json``), a JSON matrix of series, one per GPU and metric, each with
its labels (``__name__``, ``gpu``, ``Hostname``, ``modelName``, ...) and its ``[unix_s, "value"]``
samples. :func:`read_prometheus_log` turns it into one row per GPU and time with a column per DCGM
field, as a DCGM CSV has, for :func:`grpo_power.telemetry.importers.import_log`; a query of
several fields (``{__name__=~"DCGM_FI_DEV_POWER_USAGE|DCGM_FI_DEV_GPU_UTIL"}``) gives several
columns. A series whose GPU changed pods (Kubernetes adds ``pod``/``container`` labels) is the
same GPU: series are keyed by host, GPU and field only, and refused where two of them give the
same field at the same time. Where the series are kept by VictoriaMetrics, its export
(``curl http://VM:8428/api/v1/export -d 'match[]=DCGM_FI_DEV_POWER_USAGE'``, JSON lines of
``metric``, ``values`` and ``timestamps`` in ms) is read as the same series.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.telemetry.logrows import HOST_COLUMNS, ImportError_, NoSamples, read_log_text
from grpo_power.telemetry.series import (
    dcgm_rows,
    drop_repeats,
    drop_unread_clashes,
    first_clash,
    gpu_named,
)
from grpo_power.user_paths import one_line

PROMETHEUS_EXPECTED = (
    "a Prometheus query result of dcgm-exporter series (the JSON of /api/v1/query_range or "
    "`promtool query range -o json`)"
)


def _shown(text: str) -> str:
    """A label for a one-line message: as it is when printable, else quoted with escapes."""
    return text if text.isprintable() else repr(text)


def _series_list(path: Path, document: Any) -> list[Any]:
    """The series of an API answer (``{"status", "data": {"resultType", "result"}}``), of its
    ``data`` object, or of a bare list (promtool's)."""
    if isinstance(document, dict) and document.get("status", "success") != "success":
        kind = f"{document['errorType']}: " if document.get("errorType") else ""
        said = " ".join(f"{kind}{document.get('error', '')}".split())
        raise ImportError_(
            f"{path}: status: expected 'success' (a query's answer with its series), got "
            f"{document.get('status')!r}: {said[:200] or 'no error given'}; query again and save "
            "the answer"
        )
    if isinstance(document, dict) and "data" in document:
        document = document["data"]
    if isinstance(document, dict) and "result" in document:
        kind = document.get("resultType", "matrix")
        if kind not in ("matrix", "vector"):
            raise ImportError_(
                f"{path}: resultType: expected 'matrix' (a range query) or 'vector', got {kind!r}"
            )
        document = document["result"]
    if not isinstance(document, list):
        raise ImportError_(f"{path}: expected {PROMETHEUS_EXPECTED}, got another JSON document")
    return document


def _samples(path: Path, index: int, series: Any) -> tuple[dict[str, str], list[Any]]:
    """One series' labels and its ``[unix_s, "value"]`` samples (a vector's one sample too)."""
    if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
        raise ImportError_(
            f"{path}: series {index}: expected an object with 'metric' labels and 'values'"
        )
    samples = series.get("values", [series["value"]] if "value" in series else None)
    if not isinstance(samples, list):
        raise ImportError_(f"{path}: series {index}: expected a list of samples in 'values'")
    return {str(k): str(v) for k, v in series["metric"].items()}, samples


def _value(path: Path, where: str, sample: Any) -> tuple[float, float]:
    """A sample's (unix_s, value); Prometheus's ``NaN`` (a stale or missing reading) is NaN."""
    try:
        if not isinstance(sample, list) or len(sample) != 2 or not isinstance(sample[1], str):
            raise TypeError
        unix_s, value = float(sample[0]), float(sample[1])
    except (TypeError, ValueError, OverflowError):
        raise ImportError_(
            f'{path}: {where}: expected a sample [unix_s, "number"], got {str(sample)[:60]}'
        ) from None
    if not math.isfinite(unix_s) or math.isinf(value):
        raise ImportError_(f"{path}: {where}: expected a finite time and value, got {sample}")
    return unix_s, value


def _export_series(item: Any) -> dict[str, Any] | None:
    """One line of a JSON-lines export (VictoriaMetrics' ``/api/v1/export``: an object of
    ``metric`` labels, ``values`` and ``timestamps`` in unix ms of one length) as a query
    result's series, or None: not one."""
    values = item.get("values") if isinstance(item, dict) else None
    stamps = item.get("timestamps") if isinstance(item, dict) else None
    if not (isinstance(values, list) and isinstance(stamps, list)) or len(values) != len(stamps):
        return None
    samples = [
        [_seconds(t), str(v) if _is_number(v) else v] for t, v in zip(stamps, values, strict=True)
    ]
    return {"metric": item.get("metric"), "values": samples}  # type: ignore[union-attr]


def _exported_series(path: Path, text: str) -> list[Any] | None:
    """The series of a JSON-lines export, one a line (:func:`_export_series`), or None where
    the text's first line is not one.

    Raises:
        ImportError_: a later line that is not a series of the export.
    """
    series: list[Any] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            one = _export_series(json.loads(line))
        except ValueError:  # not JSON, or an integer too long to read
            one = None
        if one is None:
            if not series:
                return None
            raise ImportError_(
                f"{path}: line {number}: expected a series of a JSON-lines export ('metric', "
                "and 'values' and 'timestamps' of one length), got another line"
            )
        series.append(one)
    return series


def _is_number(value: Any) -> bool:
    """An int or float of JSON (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seconds(unix_ms: Any) -> Any:
    """An export's timestamp (unix ms) in seconds; anything else as it is (the sample's check
    then refuses it)."""
    if not _is_number(unix_ms):
        return unix_ms
    try:
        return unix_ms / 1000
    except OverflowError:
        return math.inf


def read_prometheus_log(path: Path) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """A Prometheus query result (the file at ``path``; or a JSON-lines export of the same
    series, VictoriaMetrics' ``/api/v1/export``) as rows of text a DCGM CSV gives:
    ``timestamp`` (unix s), ``gpu``, the host label (``Hostname`` or ``instance``) where the
    series have one, ``modelName`` and ``UUID`` where they have them, and one column per field
    (``DCGM_FI_DEV_POWER_USAGE``, ...), in time order; each row's number (from 1); and notes
    (readings that several series repeat, read once: :func:`drop_repeats`).

    Raises:
        ImportError_: not text, not JSON, not a query result, a series without ``__name__`` or
            ``gpu``, a sample that is not a number, two series giving one GPU's field at once
            with different values.
    """
    text = read_log_text(path, PROMETHEUS_EXPECTED)
    try:
        document = json.loads(text)
    except ValueError as error:  # not one document: JSON lines of an export, or not JSON
        listed = _exported_series(path, text)
        if listed is None and isinstance(error, json.JSONDecodeError):
            raise ImportError_(
                f"{path}: line {error.lineno}: expected {PROMETHEUS_EXPECTED}, got JSON that "
                f"does not parse ({error.msg})"
            ) from None
        if listed is None:  # an integer too long to read
            raise ImportError_(
                f"{path}: expected {PROMETHEUS_EXPECTED}, got JSON that cannot be read "
                f"({one_line(error, 80)})"
            ) from None
    else:
        exported = _export_series(document)  # an export of one series: one line, one document
        listed = [exported] if exported is not None else _series_list(path, document)
    if not listed:
        raise NoSamples(path, "an empty result (no series)")
    labelled = [_samples(path, i, series) for i, series in enumerate(listed, 1)]
    host_label = next((h for h in HOST_COLUMNS if any(h in m for m, _ in labelled)), None)
    records: list[tuple[str, str, str, float, float]] = []
    named: dict[str, dict[tuple[str, str], str]] = {"modelName": {}, "UUID": {}}
    for i, (labels, samples) in enumerate(labelled, 1):
        name, gpu = labels.get("__name__"), labels.get("gpu")
        if name is None or gpu is None:
            missing = "__name__" if name is None else "gpu"
            shown = _shown(", ".join(f"{k}={v}" for k, v in labels.items()))[:80]
            raise ImportError_(
                f"{path}: series {i} ({shown}): "
                f"no '{missing}' label; expected dcgm-exporter series queried by field name "
                "(an expression such as sum() or rate() drops the labels that name the GPU)"
            )
        if not (gpu.isascii() and gpu.isdigit()):
            raise ImportError_(
                f"{path}: series {i} ({_shown(name)}): label 'gpu': expected a GPU index, got "
                f"{gpu!r}"
            )
        host = labels.get(host_label, "") if host_label else ""
        for label, values in named.items():
            if label in labels:
                values.setdefault((host, gpu), labels[label])
        for j, sample in enumerate(samples, 1):
            unix_s, value = _value(
                path, f"series {i} ({_shown(name)}, gpu {gpu}), sample {j}", sample
            )
            records.append((host, gpu, name, unix_s, value))
    if not records:
        raise NoSamples(path, "series without any")
    readings = pd.DataFrame(records, columns=["host", "gpu", "field", "order", "value"])
    readings["timestamp"] = readings["order"].map(repr)
    readings["line"] = 0  # a JSON answer has no lines: rows are numbered instead
    readings, notes = drop_repeats(readings, str(path))
    readings, unread = drop_unread_clashes(readings, str(path))
    notes += unread
    clash = first_clash(readings)
    if clash is not None:
        raise ImportError_(
            f"{path}: two series give {_shown(clash['field'])} of "
            f"{gpu_named(clash['host'], clash['gpu'])} at unix time {clash['order']:.3f}; "
            "expected one series per GPU and field: query one exporter, or keep the labels "
            f"that tell them apart ({', '.join(HOST_COLUMNS)})"
        )
    raw, _ = dcgm_rows(readings, host_label, named)
    return raw, np.arange(1, len(raw) + 1, dtype=np.int64), notes
