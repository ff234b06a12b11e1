"""Readings of DCGM fields keyed by host, GPU and time, laid out as the rows of a DCGM CSV.

The Prometheus reader (:mod:`grpo_power.telemetry.prometheus`, a range query's series) and the
Grafana reader (:mod:`grpo_power.telemetry.grafana`, a panel's CSV download) both hold one
reading per row: its host, GPU index, DCGM field, time and value. :func:`dcgm_rows` pivots them
into what a dcgm-exporter CSV holds (one row per GPU and time, a column per field), which
:func:`grpo_power.telemetry.importers.import_log` reads as the ``dcgm`` format;
:func:`drop_repeats` reads once a reading several series repeat (a MIG GPU's power), and
:func:`first_clash` finds the readings two series give differently for one field of one GPU at
once.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

# One reading per row: host ("" where none), gpu (its index, text), field (a DCGM field name),
# order (a number that sorts the times), timestamp (the time as the log writes it), line (the
# reading's line in the file), value (float; NaN is a missing reading)
READING_COLUMNS = ("host", "gpu", "field", "order", "timestamp", "line", "value")
_KEY = ["host", "gpu", "order", "field"]

# The DCGM fields (and labels) the importer reads, and the trace columns they fill; a field not
# here (DCGM_FI_DEV_FB_USED, DCGM_FI_PROF_*) is not read
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
    "UUID": "gpu_uuid",
}


def gpu_named(host: str, gpu: str) -> str:
    """A GPU as a message names it: ``dgx-a gpu 0``, or ``gpu 0`` without a host."""
    shown = host if host.isprintable() else repr(host)
    return f"{shown} gpu {gpu}" if host else f"gpu {gpu}"


def drop_repeats(readings: pd.DataFrame, where: str) -> tuple[pd.DataFrame, list[str]]:
    """``readings`` without those that repeat another's GPU, field, time and value (a MIG
    GPU's power, which dcgm-exporter gives in the series of each of its instances; one exporter
    scraped twice), and a note (naming the file ``where``) saying how many were read once.
    Readings of one GPU, field and time with different values are left for
    :func:`first_clash`."""
    repeated = readings.duplicated([*_KEY, "value"])
    if not repeated.any():
        return readings, []
    return readings[~repeated].reset_index(drop=True), [
        f"{where}: {int(repeated.sum())} reading(s) that another series gives too, for the "
        "same GPU, field, time and value (a MIG GPU's power, given in the series of each of "
        "its instances; one exporter scraped twice), read once"
    ]


def drop_unread_clashes(readings: pd.DataFrame, where: str) -> tuple[pd.DataFrame, list[str]]:
    """``readings`` without the fields the importer does not read (not in :data:`DCGM_COLUMNS`)
    that two series give differently for one GPU at one time (a MIG instance's or a pod's own
    reading: ``DCGM_FI_DEV_FB_USED``, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``), and a note (naming the
    file ``where``) listing them. Such a field is a part's of a GPU, and a trace holds GPUs'."""
    twice = readings.duplicated(_KEY, keep=False)
    fields = sorted(set(readings.loc[twice, "field"]) - set(DCGM_COLUMNS))
    if not fields:
        return readings, []
    keep = ~readings["field"].isin(fields)
    return readings[keep].reset_index(drop=True), [
        f"{where}: {', '.join(fields)}: given differently by several series of one GPU at one "
        "time (a MIG instance's or a pod's own reading, not the GPU's), not read"
    ]


def first_clash(readings: pd.DataFrame) -> pd.Series | None:
    """The first reading (a row of ``readings``) that another one gives for the same field of
    the same GPU at the same time, or None."""
    twice = readings.duplicated(_KEY, keep=False)
    return readings[twice].iloc[0] if twice.any() else None


def dcgm_rows(
    readings: pd.DataFrame,
    host_label: str | None,
    labels: dict[str, dict[tuple[str, str], str]],
) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows of text a DCGM CSV holds for ``readings`` (:data:`READING_COLUMNS`, no two of
    them for one field of one GPU at one time): ``timestamp``, ``gpu``, ``host_label`` (where
    not None: each row's host), a column per label of ``labels`` that names some (host, gpu)
    pair (``modelName``: its part; ``UUID``: the GPU's own name) and one column per field, the
    values' text ("" missing); in time order, then host and GPU. Also each row's line in the
    file (its first reading's)."""
    readings = readings[list(READING_COLUMNS)]  # a reader's own columns left behind
    wide = readings.pivot(index=["order", "host", "gpu"], columns="field", values="value")
    where = readings.groupby(["order", "host", "gpu"])[["timestamp", "line"]].first()
    wide = wide.join(where).sort_index(kind="stable").reset_index()
    wide.columns.name = None
    raw = wide[["timestamp", "gpu"]].astype(object)
    if host_label:
        raw[host_label] = wide["host"]
    for label, values in labels.items():
        if values:
            raw[label] = [
                values.get(pair, "") for pair in zip(wide["host"], wide["gpu"], strict=True)
            ]
    fields = [c for c in wide.columns if c not in ("order", "host", "gpu", "timestamp", "line")]
    for field in fields:
        raw[field] = wide[field].map(lambda v: "" if math.isnan(v) else repr(v))
    return raw, wide["line"].to_numpy(dtype=np.int64)
