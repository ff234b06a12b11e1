"""Import power logs recorded by other tools into the trace schema (source ``imported``).

Supported formats:

* ``nvidia-smi``: ``nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv -lms N``
  (with its header line; units such as ``W`` and ``%`` are stripped, ``[N/A]`` becomes null).
  ``power.draw.instant`` is preferred for ``power_w`` where present; ``power.draw.average`` fills
  ``power_avg_w``.
* ``nvidia-smi-dmon``: ``nvidia-smi dmon -s pu -o DT`` (whitespace-separated, ``#`` header
  lines; ``pwr`` is ``power_w``, whole watts; ``-`` becomes null). Its ``-o DT`` time columns
  are required (local time, as nvidia-smi's CSV); it names neither the part nor its nameplate,
  so ``--nameplate-w`` or ``--gpu-name`` (the planner: the config's ``gpu.nameplate_w``) does.
* ``dcgm``: CSV scraped from dcgm-exporter with a ``timestamp`` column, a ``gpu`` column and one
  column per DCGM field, named as in dcgm-exporter's counters file (``DCGM_FI_DEV_POWER_USAGE``,
  ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` in mJ, ...).
* ``prometheus``: dcgm-exporter's series as Prometheus answers a range query (JSON; see
  :mod:`grpo_power.telemetry.prometheus`), read into the rows of a DCGM CSV.
* ``grafana``: a Grafana panel's CSV download of those series (see
  :mod:`grpo_power.telemetry.grafana`), read into the rows of a DCGM CSV.

What real logs contain, and what the import does with it (each named in the trace metadata's
``notes``, which ``grpo-power telemetry import`` prints):

* no GPU index, but a ``uuid`` or ``pci.bus_id`` column (DCGM: ``UUID``): GPUs numbered from 0
  in sorted order, each named in the metadata's ``gpu_ids``;
* a ``uuid`` column (DCGM: ``UUID``) beside the index: each GPU number's UUID in the metadata's
  ``gpu_uuids`` (the planner's test of two logs holding the same GPUs);
* several hosts (a ``Hostname``, ``hostname``, ``host`` or ``instance`` column, as a fleet's
  DCGM export has): GPUs are told apart by host and index, numbered from 0 in host order, each
  number's ``host:index`` in the metadata's ``gpu_ids``; one host names the trace's ``host``;
* a UTF-8 byte-order mark (Excel): dropped; UTF-16 (PowerShell 5's ``>``): read as such;
* no header line (``--format=csv,noheader``: the first line is data): refused, saying how to
  record or repair it (the columns cannot be told apart without it);
* a live log's last line being written (no newline yet, and fewer fields or a value cut before
  its unit; nvidia-smi and DCGM CSV): left out, noted;
* no ``power.default_limit``: the nameplate from ``nameplate_w``, else the GPU name where it
  is a part of ``config/gpu_models.py``, else ``fallback_nameplate_w`` (noted, and noted again
  when readings rise above that one);
* an instantaneous power column that is ``[N/A]`` in every row (a part or driver without it):
  the next power column the log has is used (``power.draw``, else ``power.draw.average``;
  :data:`POWER_COLUMNS`), noted;
* a missing power reading (``[N/A]`` during a reset or under load, or an NVML error): the row
  is left out, a missing sample that is never interpolated; a log where missing readings
  dominate (more than half the rows, or every row of a GPU) is refused; a GPU the log says is
  lost (``[GPU is lost]``: fallen off the bus) has missing samples from then on, however many,
  noted per GPU;
* timestamps without a zone (nvidia-smi writes local time): read in ``timezone`` (default the
  machine's), recorded in the metadata; numeric timestamps in milliseconds: recognised by size
  or spacing (:func:`grpo_power.telemetry.checks.time_unit`), an ambiguous spacing refused;
* time that repeats or steps back within a GPU (a clock stepped back, logs concatenated):
  refused naming the lines, or split into segments with ``split_on_clock_jumps``; rows are
  never sorted into an order they were not recorded in.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal, NoReturn
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from grpo_power.config.gpu_models import GPU_MODELS
from grpo_power.telemetry.checks import (
    check_clock,
    check_frame_power,
    counter_restarts,
    median_spacing,
    rows_by_gpu,
    split_clock_jumps,
    time_unit,
)
from grpo_power.telemetry.formats import not_power_reason
from grpo_power.telemetry.grafana import read_grafana_log
from grpo_power.telemetry.logrows import (
    DMON_NAMES,
    HOST_COLUMNS,
    LOST_VALUES,
    MISSING_VALUES,
    NO_GPU_COLUMN_HINT,
    ImportError_,
    LogSource,
    NoSamples,
    column_name,
    columns_shown,
    log_stem,
    numeric_column,
    read_csv_log,
    read_dmon_log,
)
from grpo_power.telemetry.prometheus import read_prometheus_log
from grpo_power.telemetry.rotation import ROTATED_FORMATS, RotatedLog, naming_parts
from grpo_power.telemetry.schema import TRACE_COLUMNS, TraceMetadata
from grpo_power.telemetry.series import DCGM_COLUMNS

ImportFormat = Literal["nvidia-smi", "nvidia-smi-dmon", "dcgm", "prometheus", "grafana"]

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
    "uuid": "gpu_uuid",
    "pci.bus_id": "gpu_bus_id",
}

# The power columns, in the order preferred: the instantaneous reading (what a cap meets), then
# power.draw (instantaneous on the A100, a 1 s average on the H100 and newer), then the 1 s
# average (power.draw.average: a part or driver whose instant reading is [N/A] in every row)
POWER_COLUMNS = ("power_w", "power_draw", "power_avg_w")

CONFIG_NAMEPLATE = "the config's gpu.nameplate_w"  # where a fallback nameplate comes from


def machine_timezone() -> str:
    """The IANA name of this machine's time zone (``TZ``, else ``/etc/localtime``), or UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError, OSError):
                continue
            return name
    return "UTC"


def resolve_timezone(name: str | None, given_by: str = "--timezone") -> tuple[ZoneInfo, str, str]:
    """The zone of a log's local timestamps, ``name`` (None: the machine's), which
    ``given_by`` gave (an option, a config key): (zone, its name, where the name came from)."""
    origin = given_by
    if name is None:
        name, origin = machine_timezone(), "the machine's time zone"
    try:
        return ZoneInfo(name), name, origin
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ImportError_(
            f"{given_by}: expected an IANA time zone name such as 'Europe/Berlin' or 'UTC', got "
            f"{name!r}"
        ) from None


def _numbers_first(text: pd.Series) -> bool:
    """Whether a timestamp column may hold unix times: empty, or its first cell a number (else
    it holds dates, and parsing every cell as a number first would only cost time)."""
    if len(text) == 0:
        return True
    try:
        float(text.iloc[0])
    except ValueError:
        return False
    return True


def _timestamps(
    path: LogSource,
    values: pd.Series,
    lines: np.ndarray,
    gpu: np.ndarray,
    zone: tuple[Any, str, str],
) -> tuple[np.ndarray, float, dict[str, Any], list[str]]:
    """Seconds since the first row (file order, exact to the microsecond), the first row's unix
    time, metadata on how they were read, and notes."""
    text = values.astype(str).str.strip()
    numeric = pd.to_numeric(text, errors="coerce") if _numbers_first(text) else None
    if numeric is not None and numeric.notna().all():
        raw = numeric.to_numpy(dtype=float)
        if not np.isfinite(raw).all():
            i = int(np.argmax(~np.isfinite(raw)))
            raise ImportError_(
                f"{path}: column 'timestamp': expected a finite time, got {text.iloc[i]!r} (line "
                f"{lines[i]})"
            )
        scale, note = time_unit(raw, median_spacing(gpu, raw), str(path), "timestamp")
        t = (raw - raw[0]) * scale
        return (
            t,
            float(raw[0]) * scale,
            {"timestamp_unit": "ms" if scale != 1 else "s"},
            ([note] if note else []),
        )
    try:
        stamps = pd.to_datetime(text, errors="coerce", format="mixed")
    except (ValueError, TypeError, OverflowError):  # zoned and local timestamps mixed
        stamps = pd.to_datetime(text, errors="coerce", format="mixed", utc=True)
    if not pd.api.types.is_datetime64_any_dtype(stamps):  # several UTC offsets
        stamps = pd.to_datetime(text, errors="coerce", format="mixed", utc=True)
    if stamps.isna().any():
        i = int(np.argmax(stamps.isna().to_numpy()))
        raise ImportError_(
            f"{path}: column 'timestamp' has an unreadable value {text.iloc[i]!r} (line "
            f"{lines[i]}); expected 'YYYY/MM/DD HH:MM:SS.mmm' (nvidia-smi), ISO 8601, or unix "
            "seconds"
        )
    notes: list[str] = []
    if stamps.dt.tz is None:  # local time without a zone (nvidia-smi): the zone given
        tz, name, origin = zone
        ns = _local_to_utc_ns(path, stamps, lines, gpu, tz, name)
        info = {"timezone": name, "timezone_from": origin}
        notes.append(f"{path}: timestamps read as local time in {name} ({origin})")
    else:
        info = {"timezone": "from the log (UTC offsets)", "timezone_from": "the log"}
        ns = _utc_ns(stamps)
    return (ns - ns[0]) / 1e9, float(ns[0]) / 1e9, info, notes


def _utc_ns(stamps: pd.Series) -> np.ndarray:
    """Zoned times as UTC nanoseconds since the epoch."""
    utc = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    return utc.to_numpy().astype("datetime64[ns]").astype(np.int64)


def _local_to_utc_ns(
    path: LogSource, stamps: pd.Series, lines: np.ndarray, gpu: np.ndarray, tz: Any, name: str
) -> np.ndarray:
    """Local times of the zone ``tz`` as UTC nanoseconds. A time in the hour the clocks go back
    (it repeats) is placed by the log's order: each GPU's times run through the hour, go back
    and run through it again (pandas' ``ambiguous="infer"``, per GPU where several GPUs' rows
    interleave). Refused, naming the line, where a time falls in the hour the clocks skip, or
    a GPU's times in the repeated hour do not say which pass they are in."""
    try:
        return _utc_ns(stamps.dt.tz_localize(tz, ambiguous="infer", nonexistent="raise"))
    except (ValueError, OverflowError):  # several GPUs' rows interleave, or a time is off
        pass
    ns = np.empty(len(stamps), dtype=np.int64)
    order = rows_by_gpu(gpu)
    cuts = np.flatnonzero(np.diff(gpu[order])) + 1
    for rows in np.split(order, cuts):
        mine = stamps.iloc[rows]
        try:
            ns[rows] = _utc_ns(mine.dt.tz_localize(tz, ambiguous="infer", nonexistent="raise"))
        except (ValueError, OverflowError):
            _refuse_unplaced(path, mine, lines[rows], int(gpu[rows[0]]), tz, name)
    return ns


def _refuse_unplaced(
    path: LogSource, stamps: pd.Series, lines: np.ndarray, gpu: int, tz: Any, name: str
) -> NoReturn:
    """Refuse a GPU's local times that cannot be placed (see :func:`_local_to_utc_ns`), naming
    the first such time: one in the hour the clocks skip, else one in the hour they repeat."""
    try:
        gone = stamps.dt.tz_localize(tz, ambiguous=True, nonexistent="NaT").isna().to_numpy()
        unplaced = stamps.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT").isna().to_numpy()
    except OverflowError:  # a time at the end of the range pandas holds
        gone = unplaced = np.zeros(len(stamps), dtype=bool)
    if not unplaced.any():
        raise ImportError_(
            f"{path}: column 'timestamp': gpu {gpu}'s local times cannot be placed in time zone "
            f"{name}; expected times pandas can localise, or a log in UTC or with UTC offsets"
        )
    i = int(np.argmax(gone if gone.any() else unplaced))
    when = stamps.iloc[i].strftime("%Y-%m-%d %H:%M:%S")
    if gone.any():
        what = "falls in the hour the clocks skip (a daylight-saving change)"
    else:
        what = (
            "falls in the hour repeated when the clocks go back, and the times of its GPU do not "
            "show which pass it is in (the log starts or ends within that hour, or its rows are "
            "out of order)"
        )
    raise ImportError_(
        f"{path}: column 'timestamp': the local time {when} (line {int(lines[i])}, gpu {gpu}) "
        f"{what} in time zone {name}; expected the zone the log was written in (--timezone; the "
        "planner: planner.timezone), or a log in UTC or with UTC offsets"
    )


# Columns that name a GPU where a log has no index (NVIDIA's example queries log pci.bus_id)
GPU_ID_COLUMNS = ("gpu_uuid", "gpu_bus_id")


def _gpu_numbers(
    path: LogSource,
    raw: pd.DataFrame,
    frame: pd.DataFrame,
    original: dict[str, str],
    lines: np.ndarray,
) -> tuple[np.ndarray, str, dict[str, str], dict[str, str], list[str]]:
    """Each row's GPU number, the trace's host, each number's name, each number's UUID
    (:func:`_gpu_uuids`), and notes.

    A GPU is its index (``index``, ``gpu``), else its UUID or PCI bus id (numbered from 0 in
    sorted order); where the log has a host column (:data:`HOST_COLUMNS`) holding several hosts
    (a fleet's DCGM export, logs of several nodes concatenated), the (host, GPU) pairs are
    numbered from 0 in host order. ``gpu_ids`` names each number where it is not the index.
    """
    notes: list[str] = []
    if "gpu" in frame:
        gpu = numeric_column(path, frame["gpu"], original["gpu"], lines)
        bad = gpu.isna() | (gpu != gpu.round()) | (gpu.abs() >= 2**31)
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            raise ImportError_(
                f"{path}: column '{original['gpu']}': expected a GPU index (a whole number) in "
                f"every row, got {frame['gpu'].iloc[i]!r} (line {lines[i]})"
            )
        numbers = gpu.to_numpy().astype(np.int64)
        names = numbers.astype(str)
        by = "index"
    else:
        column = next(c for c in GPU_ID_COLUMNS if c in frame)
        names = frame[column].astype(str).str.strip().to_numpy()
        numbers, uniques = pd.factorize(names, sort=True)
        by = original[column]
    column = next((c for c in HOST_COLUMNS if c in raw.columns), None)
    hosts = raw[column].astype(str).str.strip().to_numpy() if column else np.array([""])
    several = len(set(hosts)) > 1
    if several:
        within = numbers if by == "index" else names  # indices in numeric order
        numbers, pairs = pd.factorize(pd.MultiIndex.from_arrays([hosts, within]), sort=True)
        ids = {str(i): f"{host}:{name}" for i, (host, name) in enumerate(pairs)}
        how = f"{len(set(hosts))} hosts in column '{column}': their GPUs numbered by host and {by}"
        numbers, ids, moved = _one_number_per_uuid(frame, numbers, ids)
        if moved:
            how = (
                f"{len(set(hosts))} names in column '{column}', {moved} GPU UUID(s) under more "
                "than one (an exporter that restarted on another pod or address, a host "
                f"renamed): each UUID is one GPU, named by its first {column} and {by}"
            )
    elif by != "index":
        ids = {str(i): str(name) for i, name in enumerate(uniques)}
        how = f"no GPU index column: GPUs numbered by their {by} in sorted order"
    else:
        ids, how = {}, ""
    if ids:
        shown = ", ".join(f"{i} = {ids[str(i)]}" for i in range(min(4, len(ids))))
        more = ", ..." if len(ids) > 4 else ""
        notes.append(f"{path}: {how} ({shown}{more}; the metadata's gpu_ids)")
    host = f"{len(set(hosts))} hosts" if several else (hosts[0] or "unknown")
    numbers = np.asarray(numbers, dtype=np.int64)
    return numbers, host, ids, _gpu_uuids(path, frame, numbers, notes), notes


def _one_number_per_uuid(
    frame: pd.DataFrame, numbers: np.ndarray, ids: dict[str, str]
) -> tuple[np.ndarray, dict[str, str], int]:
    """Host-and-index ``numbers`` (and their names ``ids``) renumbered so that each GPU UUID is
    one number, where every row names its UUID and one UUID sits under several hosts (the host
    label of an exporter that restarted elsewhere: the same GPU, not another): the UUID's first
    host-and-index number names it, and the numbers are made consecutive in that order.
    Returns (numbers, ids, UUIDs that sat under several numbers: 0 where nothing changed)."""
    if "gpu_uuid" not in frame:
        return numbers, ids, 0
    uuids = frame["gpu_uuid"].astype(str).str.strip().to_numpy()
    if np.isin(uuids, list(MISSING_VALUES)).any():
        return numbers, ids, 0
    pairs = pd.DataFrame({"n": numbers, "uuid": uuids}).drop_duplicates()
    per_uuid = pairs.groupby("uuid")["n"].agg(["min", "nunique"])
    moved = int((per_uuid["nunique"] > 1).sum())
    if not moved or pairs.groupby("n")["uuid"].nunique().max() > 1:
        return numbers, ids, 0  # a number of two UUIDs: not a label's change (_gpu_uuids says)
    first = per_uuid["min"].sort_values()
    renumber = {int(n): i for i, n in enumerate(first.to_numpy())}
    new = pd.Series(per_uuid["min"].reindex(uuids).to_numpy()).map(renumber).to_numpy()
    return new, {str(renumber[int(n)]): ids[str(int(n))] for n in first.to_numpy()}, moved


def _gpu_uuids(
    path: LogSource, frame: pd.DataFrame, numbers: np.ndarray, notes: list[str]
) -> dict[str, str]:
    """Each GPU number's UUID where the log names it (nvidia-smi ``uuid``, DCGM ``UUID``): the
    GPU's own name, the same in every log of it, by which the planner tells that two logs hold
    the same GPUs. Empty (with a note in ``notes``) where one number has two UUIDs (a log whose
    indices were renumbered, a reboot with a GPU replaced): the numbers then name no one GPU."""
    if "gpu_uuid" not in frame:
        return {}
    uuids = frame["gpu_uuid"].astype(str).str.strip().to_numpy()
    pairs = pd.DataFrame({"n": numbers, "uuid": uuids}).drop_duplicates()
    pairs = pairs[~pairs["uuid"].isin(MISSING_VALUES)]  # a lost GPU's uuid reads as lost
    clash = pairs[pairs["n"].duplicated(keep=False) | pairs["uuid"].duplicated(keep=False)]
    if len(clash):
        first = clash.iloc[0]
        notes.append(
            f"{path}: GPU {first['n']} has more than one UUID, or UUID {first['uuid']} more than "
            "one GPU number (GPUs renumbered within the log): its GPUs are not named by UUID, so "
            "no other log is taken to hold the same GPUs"
        )
        return {}
    return {str(n): str(u) for n, u in zip(pairs["n"], pairs["uuid"], strict=True)}


def _gpu_name(path: LogSource, names: pd.Series, original: dict[str, str]) -> str:
    """The one GPU part a log's name column names (a trace has one nameplate); a log of several
    parts (a fleet's export across node types) is refused, saying how to split it."""
    parts = sorted({str(n).strip() for n in names} - {""})
    if len(parts) > 1:
        raise ImportError_(
            f"{path}: column '{original['gpu_name']}': expected one GPU part per log (a trace has "
            f"one nameplate), got {len(parts)} ({', '.join(parts[:3])}); split the log by part "
            '(a Prometheus query: add {modelName="..."} to it)'
        )
    return parts[0] if parts else "unknown"


def _power(
    path: LogSource, frame: pd.DataFrame, original: dict[str, str], lines: np.ndarray
) -> tuple[pd.Series, np.ndarray, str, list[str]]:
    """The power column, of :data:`POWER_COLUMNS` the first in the log with a reading (a column
    that is [N/A] in every row is a sensor the part or driver lacks), with a note where it is
    not the first in the log; and the rows where it says the GPU is lost (:data:`LOST_VALUES`:
    fallen off the bus, or needing a reset). Returns (power in W, lost rows, its column's name
    in the log, notes)."""
    candidates = [name for name in POWER_COLUMNS if name in frame]
    notes = []
    parsed = {name: numeric_column(path, frame[name], original[name], lines) for name in candidates}
    chosen = next((n for n in candidates if parsed[n].notna().any()), candidates[0])
    passed = candidates[: candidates.index(chosen)]
    if passed:
        names = ", ".join(f"'{original[name]}'" for name in passed)
        verb = "is" if len(passed) == 1 else "are"
        notes.append(f"{path}: power from '{original[chosen]}': {names} {verb} [N/A] in every row")
    # a DCGM log of both power fields: the instantaneous one is read (a 1 s average in
    # power_avg_w is kept as the trace's own column: read too)
    unread = [
        n
        for n in candidates
        if n not in (chosen, "power_avg_w") and n not in passed and parsed[n].notna().any()
    ]
    if unread:
        names = ", ".join(f"'{original[name]}'" for name in unread)
        notes.append(
            f"{path}: power from '{original[chosen]}' (its peaks and shares above the cap are "
            f"of these readings); {names}, in the log too, not read"
        )
    power = parsed[chosen]
    lost = power.isna().to_numpy(copy=True)  # only a row without a reading can say the GPU is lost
    if lost.any():
        lost[lost] = frame[chosen][lost].astype(str).str.strip().isin(LOST_VALUES).to_numpy()
    return power, lost, original[chosen], notes


# dcgm-exporter's labels of a MIG instance: a MIG GPU's device-level fields (its power) come
# once per instance, the rows alike but for these
# The DCGM CSV columns that name a GPU at a time (its host's too, where the log has one)
DCGM_IDENTITY = ("timestamp", "gpu", "UUID", *HOST_COLUMNS)


def _other_labels(raw: pd.DataFrame, keys: list[str], labels: list[str]) -> np.ndarray:
    """Whether each row's ``labels`` differ from those of the first row with its ``keys``."""
    if not raw.duplicated(keys).any():
        return np.zeros(len(raw), dtype=bool)
    text = raw[labels].fillna("")
    first = text.groupby([raw[k] for k in keys], sort=False, dropna=False).transform("first")
    return (text != first).any(axis=1).to_numpy()


def _repeated_rows(
    path: LogSource, raw: pd.DataFrame, lines: np.ndarray
) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """A DCGM CSV's rows without those that repeat another row's GPU, time and every column the
    importer reads under other labels it does not read: a MIG GPU's readings, which
    dcgm-exporter gives in the rows of each of its instances (``GPU_I_ID``), or a shared GPU's,
    given for each pod (``pod``, ``vgpu``); and a note. Rows under the first row's labels (a log
    concatenated with itself, two recordings) are left for the clock check.

    Raises:
        ImportError_: rows of one GPU at one time under other labels give different readings
            (MIG instances that disagree on the GPU's power).
    """
    read = [c for c in raw.columns if c.strip() in DCGM_COLUMNS or c.strip() in HOST_COLUMNS]
    labels = [c for c in raw.columns if c not in read and not c.strip().startswith("DCGM_FI_")]
    if not labels:
        return raw, lines, []
    repeated = _other_labels(raw, read, labels)
    notes = []
    if repeated.any():
        shown = ", ".join(c.strip() for c in labels[:4]) + (", ..." if len(labels) > 4 else "")
        notes.append(
            f"{path}: {int(repeated.sum())} row(s) that repeat another row's GPU, time and "
            f"readings under other labels ({shown}: a MIG GPU's readings given for each of "
            "its instances, or a shared GPU's for each pod), read once"
        )
        raw, lines = raw[~repeated].reset_index(drop=True), lines[~repeated]
    identity = [c for c in read if c.strip() in DCGM_IDENTITY]
    named = [c for c in identity if c.strip() in ("gpu", "UUID")]
    differs = _other_labels(raw, identity, labels) if named else np.zeros(len(raw), bool)
    if differs.any():
        later = int(np.flatnonzero(differs)[0])
        same = (raw[identity] == raw.loc[later, identity]).all(axis=1).to_numpy()
        a, b = raw.loc[int(np.flatnonzero(same)[0])], raw.loc[later]
        given = "; ".join(
            f"{c.strip()} {a[c]!r} and {b[c]!r}" for c in read if c not in identity and a[c] != b[c]
        )
        raise ImportError_(
            f"{path}: lines {int(lines[a.name])} and {int(lines[later])}: gpu "
            f"{str(a[named[0]]).strip()} at one time, under other "
            f"{', '.join(c.strip() for c in labels if a[c] != b[c])}, gives {given}; expected "
            "the GPU's readings repeated alike in the rows of each of its MIG instances or pods"
        )
    return raw, lines, notes


def _lost_notes(
    path: LogSource, gpu: np.ndarray, lost: np.ndarray, lines: np.ndarray, row_word: str
) -> list[str]:
    """A note per GPU that the log says is lost: from which row, and how many rows."""
    notes = []
    for number in np.unique(gpu[lost]):
        rows = np.flatnonzero(lost & (gpu == number))
        whole = len(rows) == int((gpu == number).sum())
        every = " (every one of its rows: it is left out)" if whole else ""
        notes.append(
            f"{path}: gpu {int(number)} is lost (nvidia-smi: [GPU is lost] or [GPU requires "
            f"reset]: fallen off the bus, NVIDIA Xid 79, or awaiting a reset) in {len(rows)} "
            f"row(s) from {row_word} {int(lines[rows[0]])}{every}: missing samples, never "
            "interpolated"
        )
    return notes


@naming_parts
def import_log(
    path: Path | str | RotatedLog,
    fmt: ImportFormat,
    nameplate_w: float | None = None,
    gpu_name: str | None = None,
    run_id: str | None = None,
    timezone: str | None = None,
    split_on_clock_jumps: bool = False,
    fallback_nameplate_w: float | None = None,
    fallback_gpu_name: str | None = None,
    timezone_from: str = "--timezone",
) -> tuple[pd.DataFrame, TraceMetadata]:
    """Read a log into a trace frame and its metadata.

    A row whose power is missing (``[N/A]``: drivers write it during a reset or under load) is
    left out: a missing sample, never interpolated, counted in the notes; only a log where
    missing readings dominate (more than half the rows, or every row of a GPU) is refused.
    What the import inferred (the power column used, the time zone, gaps, clock jumps split)
    is listed in the metadata's ``notes``.

    Args:
        path: the log file.
        fmt: ``nvidia-smi``, ``nvidia-smi-dmon``, ``dcgm``, ``prometheus`` (a query result of
            dcgm-exporter series, :mod:`grpo_power.telemetry.prometheus`) or ``grafana`` (a
            panel's CSV download of them, :mod:`grpo_power.telemetry.grafana`).
        nameplate_w: the GPU's board power, W, when the log has no ``power.default_limit``.
        gpu_name: the GPU model when the log has no name column; a part the simulator knows
            (``config/gpu_models.py``) gives the nameplate when nothing else does.
        run_id: the trace's run id (default: the file's stem).
        timezone: the IANA zone of timestamps without one (nvidia-smi writes local time);
            default: the machine's. Recorded in the metadata.
        timezone_from: what gave ``timezone`` (``--timezone``, a config key such as
            ``planner.timezone``), named in the notes and errors.
        split_on_clock_jumps: split the log into segments where time repeats or steps back
            (see :func:`grpo_power.telemetry.checks.split_clock_jumps`) instead of refusing it.
        fallback_nameplate_w: the nameplate, W, when neither ``nameplate_w`` nor the log gives
            one (the planner passes the config's ``gpu.nameplate_w``; noted).
        fallback_gpu_name: the part ``fallback_nameplate_w`` is of (the config's ``gpu.name``):
            a log whose name column names another part, one the simulator does not know, never
            takes it: its highest ``power.limit`` is the nameplate (noted: the board's default
            may be higher), and without one it is refused.

    Raises:
        ImportError_: the file is not a CSV log, a required column is missing, or a value is
            unreadable or not a plausible power (NaN, negative, milliwatts: see
            :mod:`grpo_power.telemetry.checks`), the time unit is ambiguous, or time steps back.
    """
    path = path if isinstance(path, RotatedLog) else Path(path)
    if isinstance(path, RotatedLog) and fmt not in ROTATED_FORMATS:
        raise ImportError_(
            f"{path}: expected one {fmt} file (the parts of a rotated log are read as one for "
            f"{', '.join(ROTATED_FORMATS)} logs only); import each part on its own"
        )
    zone = resolve_timezone(timezone, timezone_from)
    smi = fmt in ("nvidia-smi", "nvidia-smi-dmon")
    row_word = "row" if fmt == "prometheus" else "line"  # what the error messages number
    read_notes: list[str] = []
    if fmt == "prometheus":
        raw, lines, read_notes = read_prometheus_log(path)
    elif fmt == "grafana":
        raw, lines, read_notes = read_grafana_log(path)
    elif fmt == "nvidia-smi-dmon":
        raw, lines = read_dmon_log(path)
    else:
        raw, lines, read_notes = read_csv_log(path, fmt)
    if fmt == "dcgm":
        raw, lines, repeated_notes = _repeated_rows(path, raw, lines)
        read_notes += repeated_notes
    mapping = NVIDIA_SMI_COLUMNS if smi else DCGM_COLUMNS
    renamed = {}
    for column in raw.columns:
        key = column_name(column) if smi else column.strip()
        if key in mapping and mapping[key] not in renamed.values():
            renamed[column] = mapping[key]
    frame = raw[list(renamed)].rename(columns=renamed)
    if "gpu" not in frame and any(c in frame for c in GPU_ID_COLUMNS):
        required = {"timestamp": "timestamp"}  # GPUs named by UUID or PCI bus id
    else:
        required = {"timestamp": "timestamp", "gpu": "index" if smi else "gpu"}
    for name, shown in required.items():
        if name not in frame:
            hint, alternatives = "", ""
            if name == "gpu" and smi:  # the hint names the columns that may stand for it
                hint = f"; {NO_GPU_COLUMN_HINT}"
            elif name == "gpu":
                alternatives = " (or one naming each GPU: UUID)"
            if {"t", "gpu", "power_w"} <= {c.strip() for c in raw.columns}:
                hint = (
                    "; a trace CSV (t, gpu, power_w) needs no import: give it to `grpo-power "
                    "windows` or `grpo-power telemetry summary` as it is"
                )
            elif (reason := not_power_reason([str(c) for c in raw.columns])) is not None:
                hint = f"; the file is {reason}"
            raise ImportError_(
                f"{path}: missing column '{shown}'{alternatives}, expected in every {fmt} log; "
                f"found {columns_shown(raw.columns)}{hint}"
            )
    if "power_w" not in frame and "power_draw" not in frame:
        expected = "power.draw" if smi else "DCGM_FI_DEV_POWER_USAGE"
        raise ImportError_(
            f"{path}: missing power column '{expected}' (or its _INSTANT/.instant variant, "
            f"expected in watts); found {columns_shown(raw.columns)}"
        )
    if frame.empty:
        raise NoSamples(path, "a header and no rows")

    original = {new: old for old, new in renamed.items()}
    if fmt == "nvidia-smi-dmon":  # messages name a dmon log's columns as its header does
        original = {new: DMON_NAMES.get(old, old) for new, old in original.items()}
    named_by = next(c for c in ("gpu", *GPU_ID_COLUMNS) if c in frame)
    nameless = frame[named_by].astype(str).str.strip().isin(LOST_VALUES).to_numpy()
    lost_notes = []
    if nameless.any():  # a lost GPU's rows where even its index reads [GPU is lost]
        lost_notes.append(
            f"{path}: {int(nameless.sum())} row(s) of a lost GPU that name no GPU ([GPU is lost] "
            f"in '{original[named_by]}', first at line {int(lines[np.argmax(nameless)])}) left "
            "out: missing samples, never interpolated"
        )
        keep = ~nameless
        raw, frame, lines = raw[keep], frame[keep], lines[keep]
        if frame.empty:
            raise ImportError_(f"{path}: expected a reading of a GPU, got lost GPUs' rows only")
    gpu_index, host, gpu_ids, gpu_uuids, notes = _gpu_numbers(path, raw, frame, original, lines)
    notes = read_notes + lost_notes + notes
    t, start_unix_s, time_info, time_notes = _timestamps(
        path, frame["timestamp"], lines, gpu_index, zone
    )
    notes += time_notes
    power, lost, power_column, power_notes = _power(path, frame, original, lines)
    notes += power_notes
    out = pd.DataFrame({"gpu": gpu_index.astype("int32")})
    out["t"] = t
    out["power_w"] = power.to_numpy()
    out["lost"] = lost  # follows the rows through a split; not a trace column
    for name in ("power_avg_w", "sm_util", "mem_util", "sm_clock_mhz", "temp_c", "power_limit_w"):
        out[name] = (
            numeric_column(path, frame[name], original[name], lines) if name in frame else np.nan
        )
    energy_mj = (
        numeric_column(path, frame["energy_mj"], original["energy_mj"], lines).to_numpy()
        if "energy_mj" in frame
        else np.full(len(out), np.nan)
    )

    frame_lines = lines  # each row of `frame`'s line, in `frame`'s order (a split reorders `out`)
    # Time: refuse a clock that repeats or steps back (naming the lines), or split it.
    clock: dict[str, Any] = {}
    try:
        if split_on_clock_jumps:
            split = split_clock_jumps(gpu_index, t, str(path), lines, row_word)
            if split is not None:
                out = out.iloc[split.order].reset_index(drop=True)
                out["t"] = split.t
                energy_mj, lines = energy_mj[split.order], lines[split.order]
                notes.append(split.note)
                clock["clock_jumps"] = split.jumps
        else:
            check_clock(gpu_index, t, str(path), lines, row_word)
    except ValueError as error:
        raise ImportError_(str(error)) from None

    # Missing readings: missing samples (gaps), unless they dominate; a lost GPU's rows are
    # missing samples however many there are, as no log can read a GPU off the bus.
    missing = out["power_w"].isna().to_numpy()
    lost = out["lost"].to_numpy() & missing
    unread = missing & ~lost
    if missing.any():
        total, count = len(out), int(unread.sum())
        per_gpu = pd.Series(unread).groupby(out["gpu"].to_numpy()).agg(["sum", "size"])
        empty = per_gpu[per_gpu["sum"] == per_gpu["size"]]
        if count * 2 > total or len(empty) or missing.all():
            which = f" (gpu {int(empty.index[0])}: every one of its rows)" if len(empty) else ""
            raise ImportError_(
                f"{path}: column '{power_column}': expected watts in most rows (a missing "
                f"reading becomes a gap), got no reading in {int(missing.sum())} of {total} "
                f"row(s){which}"
            )
        if count:
            first_line = int(lines[int(np.argmax(unread))])
            notes.append(
                f"{path}: {count} missing power reading(s) (no number in '{power_column}': [N/A] "
                f"or an NVML error, first at {row_word} {first_line}) left out as missing "
                "samples: gaps, never interpolated"
            )
        notes += _lost_notes(path, out["gpu"].to_numpy(), lost, lines, row_word)
        keep = ~missing
        out = out[keep].reset_index(drop=True)
        energy_mj, kept_lines = energy_mj[keep], lines[keep]
    else:
        kept_lines = lines
    if "energy_mj" in frame:
        first = pd.Series(energy_mj).groupby(out["gpu"].to_numpy()).transform("first")
        out["energy_j"], counter_notes = counter_restarts(
            out["gpu"].to_numpy(),
            out["t"].to_numpy(),
            out["power_w"].to_numpy(),
            (energy_mj - first.to_numpy()) / 1000.0,
            str(path),
            kept_lines,
            row_word,
        )
        notes += counter_notes
    else:
        out["energy_j"] = np.nan
    origin_s = float(out["t"].min())
    out["t"] = out["t"] - origin_s
    start_unix_s += origin_s

    nameplate_from = "--nameplate-w"
    if nameplate_w is None and "nameplate_w" in frame:
        nameplate_from = original["nameplate_w"]
        limits = numeric_column(path, frame["nameplate_w"], nameplate_from, frame_lines)
        nameplate_w = float(limits.max()) if limits.notna().any() else None
    if gpu_name is None:
        gpu_name = (
            _gpu_name(path, frame["gpu_name"], original) if "gpu_name" in frame else "unknown"
        )
    if nameplate_w is None and gpu_name in GPU_MODELS:  # a known part: its board power
        model = GPU_MODELS[gpu_name]
        nameplate_w, nameplate_from = model.nameplate_w, f"the GPU name {gpu_name!r}"
        others = ", ".join(f"{w:g}" for w in model.nameplate_variants_w if w != nameplate_w)
        also = f" (boards of {others} W exist: give --nameplate-w)" if others else ""
        notes.append(
            f"{path}: no power.default_limit: nameplate {nameplate_w:g} W, the default board "
            f"power of {gpu_name}{also}"
        )
    other_part = gpu_name not in ("unknown", fallback_gpu_name) and fallback_gpu_name is not None
    if nameplate_w is None and other_part and "power_limit_w" in out:
        enforced = out["power_limit_w"]
        if enforced.notna().any():
            nameplate_w, nameplate_from = float(enforced.max()), original["power_limit_w"]
            notes.append(
                f"{path}: no power.default_limit, and {gpu_name} is neither a part the simulator "
                f"knows nor the config's ({fallback_gpu_name}): nameplate {nameplate_w:g} W, the "
                "highest enforced power limit (the board's default may be higher: log "
                "power.default_limit)"
            )
    if nameplate_w is None and other_part:
        raise ImportError_(
            f"{path}: no power.default_limit or power.limit column, and {gpu_name} is neither a "
            f"part the simulator knows nor the config's ({fallback_gpu_name}): expected its "
            "board power (log power.default_limit, or describe the part in the config's gpu "
            "section: name, nameplate_w, idle_w)"
        )
    if nameplate_w is None and fallback_nameplate_w is not None:
        nameplate_w, nameplate_from = fallback_nameplate_w, CONFIG_NAMEPLATE
        notes.append(
            f"{path}: no power.default_limit: nameplate {nameplate_w:g} W from {nameplate_from}"
        )
    if nameplate_w is None:
        column = "column" if "nameplate_w" not in frame else "reading ([N/A] in every row)"
        raise ImportError_(
            f"{path}: no power.default_limit {column}; "
            "give the GPU's nameplate power with --nameplate-w"
        )
    if not (nameplate_w > 0 and math.isfinite(nameplate_w)):
        raise ImportError_(f"{path}: {nameplate_from}: expected watts > 0, got {nameplate_w:g}")
    # a Prometheus answer's rows are no lines of its JSON: named by time alone
    check_frame_power(
        out, str(path), nameplate_w, power_column, kept_lines if row_word == "line" else None
    )
    peak_w = float(out["power_w"].max()) if nameplate_from == CONFIG_NAMEPLATE else 0.0
    if peak_w > nameplate_w:
        notes.append(
            f"{path}: readings reach {peak_w:g} W, above the nameplate {nameplate_w:g} W from "
            f"{nameplate_from}: if the log is of another part, give its nameplate (--nameplate-w, "
            "or the config's gpu.nameplate_w)"
        )
    out = out.sort_values(["t", "gpu"], kind="stable").reset_index(drop=True)
    period = median_spacing(out["gpu"].to_numpy(), out["t"].to_numpy())
    if period is None:
        notes.append(f"{path}: one sample per GPU: a sample period of 1 s is assumed")
    file, rotation = path, {}
    if isinstance(path, RotatedLog):  # named by its newest part, its parts listed
        file, rotation = path.path, {"rotated_parts": [str(p) for p in path.parts]}
        notes = [*path.notes, *notes]
    metadata = TraceMetadata(
        run_id=run_id or log_stem(file),
        source="imported",
        gpu_name=gpu_name,
        nameplate_w=nameplate_w,
        sample_period_s=period or 1.0,
        start_unix_s=start_unix_s,
        host=host,
        imported_from=str(file),
        import_format=fmt,
        power_column=power_column,
        missing_readings=int(missing.sum()),
        notes=notes,
        gpu_uuids=gpu_uuids,
        **({"gpu_ids": gpu_ids} if gpu_ids else {}),
        **rotation,
        **time_info,
        **clock,
    )
    return out.reindex(columns=list(TRACE_COLUMNS)), metadata
