"""Tell a power log's format from its name and first line: what the planner and
``grpo-power telemetry import`` (its default ``--format auto``) read a file as.

:func:`log_format` gives an importer's format (``nvidia-smi``, ``nvidia-smi-dmon``, ``dcgm``,
``prometheus``, ``grafana``; :data:`grpo_power.telemetry.importers.ImportFormat`), ``trace``
for a trace CSV (``t``, ``gpu``, ``power_w``), or why the file is none of them: an inference
engine's metrics log, an nvidia-smi log without its header line or without a column naming its
GPUs, a ``dcgmi dmon`` table, an ``nvidia-smi -q`` report, a Prometheus result without power
series. Only the first line that is not blank is read (the second after Excel's ``sep=`` line;
for a ``.json`` file its first 4096 characters, and the file in pieces for the power field), so
telling a folder's files apart is cheap.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from grpo_power.telemetry.engine import engine_of
from grpo_power.telemetry.grafana import HEADER, SEP_LINE
from grpo_power.telemetry.logrows import (
    DECOMPRESSION_ERRORS,
    HEADERLESS_HINT,
    NO_GPU_COLUMN_HINT,
    column_name,
    dmon_has_time,
    header_is_data,
    is_dmon_header,
    log_suffix,
    open_log,
    separator_reason,
    text_encoding,
)
from grpo_power.user_paths import one_line

DCGMI_DMON = (
    "a dcgmi dmon log: it has no time column, so its samples cannot be placed in time; record "
    "with dcgm-exporter scraped to CSV, nvidia-smi's CSV query or `nvidia-smi dmon -o DT`"
)
DMON_NO_TIME = (
    "an nvidia-smi dmon log without its Date and Time columns (recorded without -o DT): its "
    "samples cannot be placed in time; record with `nvidia-smi dmon -s pu -o DT`"
)
EXPOSITION = (
    "a Prometheus text exposition (a scrape of dcgm-exporter's /metrics): its samples carry "
    "no time of their own; ask Prometheus for the range instead (`curl -G "
    "http://PROMETHEUS:9090/api/v1/query_range ... > prometheus.json`, `--format prometheus`)"
)
EXPOSITION_LINE = re.compile(r"# (HELP|TYPE) \w+ |DCGM_FI_\w+\{")  # its first line
NVSMI_REPORT = (
    "an nvidia-smi -q report ({kind}): not read, as its layout changes between drivers; record "
    "power with `nvidia-smi --query-gpu=timestamp,index,power.draw,power.default_limit "
    "--format=csv -lms 100`"
)


def _first_line(path: Path, whole: bool = True) -> str:
    """The file's first line that is not blank (at most 4096 characters; a byte-order mark
    dropped, UTF-16 read as such; the next one after Excel's ``sep=,`` line, which only says
    the delimiter); with ``whole=False`` its first 4096 characters, whatever the lines."""
    try:
        with open_log(path) as raw:
            encoding = text_encoding(raw.read(2))
        with open_log(path) as raw, io.TextIOWrapper(raw, encoding, errors="replace") as file:
            if not whole:
                return file.read(4096)
            line = file.readline(4096)
            for _ in range(16):  # blank lines first (nvidia-smi -q opens with one)
                if line.strip() or not line:
                    break
                line = file.readline(4096)
            return file.readline(4096) if SEP_LINE.match(line) else line
    except DECOMPRESSION_ERRORS as error:
        reason = getattr(error, "strerror", None) or one_line(error, 80)
        raise ValueError(f"{path}: cannot be read ({reason}); expected a power log") from None


POWER_FIELD = b"DCGM_FI_DEV_POWER_USAGE"


def _prometheus_shaped(head: str) -> bool:
    """Whether a file whose first 4096 characters are ``head`` is shaped as a Prometheus query
    result or a JSON-lines export of series: a series' ``metric`` and its ``resultType`` or
    ``values`` near the start, whatever its labels."""
    return '"metric"' in head and any(k in head for k in ('"resultType"', '"values"'))


def _json_kind(path: Path) -> tuple[str | None, str]:
    """A ``.json`` (or ``.jsonl``) file's format (or why it is skipped): a Prometheus query
    result or a JSON-lines export of series (its first series' ``metric`` and ``values`` near the
    start) holding DCGM power series, or not a trace."""
    head = _first_line(path, whole=False)
    if re.search(r'"status"\s*:\s*"error"', head):
        return "prometheus", ""  # a failed query's answer: its reader says why, naming the file
    if re.search(r'"result"\s*:\s*\[\s*\]', head):
        return None, (
            "a Prometheus query result with no series (a selector or time range that matched "
            "nothing): query the DCGM power field over the logged time"
        )
    if not _prometheus_shaped(head):
        return None, "a .json file that is not a Prometheus query result"
    carry = b""
    try:
        with open_log(path) as file:  # the power field anywhere in the file, read in pieces
            while chunk := file.read(1 << 20):
                if POWER_FIELD in carry + chunk:
                    return "prometheus", ""
                carry = chunk[-len(POWER_FIELD) :]
    except DECOMPRESSION_ERRORS as error:
        raise ValueError(
            f"{path}: cannot be read ({one_line(error, 80)}); expected a power log"
        ) from None
    return None, (
        f"a Prometheus query result without {POWER_FIELD.decode()} series (no power): query "
        "that field"
    )


def engine_format(path: Path) -> str | None:
    """The engine (``vllm``, ``sglang``, ``tgi``) whose metrics CSV ``path`` is, from its header
    line, or None (another file, or one that cannot be read)."""
    try:
        line = _first_line(path)
    except ValueError:
        return None
    return engine_of(column_name(c) for c in line.split(","))


def not_power_reason(header: list[str]) -> str | None:
    """Why a CSV whose header cells are ``header`` is a known kind of file that is not a power
    log the importers read (an inference engine's metrics log), or None."""
    engine = engine_of(column_name(c) for c in header)
    if engine is not None:
        return (
            f"an inference engine's metrics log ({engine}), not power: `grpo-power telemetry "
            f"import POWER_LOG --engine THIS --engine-format {engine}` aligns it with the "
            "power log of the same run"
        )
    return None


def _csv_kind(line: str) -> tuple[str | None, str]:
    """A ``.csv`` file's format (or why it is skipped) from its first line."""
    if is_dmon_header(line):  # nvidia-smi dmon, whatever its suffix (--format csv too)
        return "nvidia-smi-dmon", ""
    if HEADER.match(line):  # Grafana's Time field first
        return "grafana", ""
    if not line.strip():
        return None, "an empty file: no header line"
    header = [c.strip() for c in line.split(",")]
    names = {column_name(c) for c in header}
    reason = not_power_reason(header)
    if any(c.startswith("DCGM_FI_") for c in names):
        return "dcgm", ""
    gpu_named = names & {"index", "uuid", "pci.bus_id"}
    if "timestamp" in names and any(c.startswith("power.draw") for c in names):
        if gpu_named:
            return "nvidia-smi", ""
        return None, f"an nvidia-smi log without a column naming its GPUs: {NO_GPU_COLUMN_HINT}"
    if {"t", "gpu", "power_w"} <= names:
        return "trace", ""
    if reason is not None:
        return None, reason
    if header_is_data(header):
        return (
            None,
            f"no header line (line 1 is data: {', '.join(header[:3])}, ...); {HEADERLESS_HINT}",
        )
    separator = separator_reason(line)
    if separator is not None:
        return None, separator
    return None, f"no power column in its header ({', '.join(header[:4])}, ...)"


def log_format(path: Path) -> tuple[str | None, str]:
    """``(format, "")`` of the power log at ``path``, or ``(None, why it is not one)``.

    A ``.json`` file is a Prometheus query result holding DCGM power series; a ``.csv`` file
    is told by its header line (DCGM fields, nvidia-smi's query names, a trace's columns, an
    ``nvidia-smi dmon`` header, or Grafana's ``Time`` field first); a file of another suffix is
    a log only where its first line shows one of those (``nvidia-smi --query-gpu=... >
    smi.log``, ``nvidia-smi dmon -o DT``).

    Raises:
        ValueError: the file cannot be read.
    """
    suffix = log_suffix(path)
    if suffix in (".json", ".jsonl"):
        return _json_kind(path)
    line = _first_line(path)
    unread = _unread_reason(path, line)
    if unread is not None:  # whatever its suffix
        return None, unread
    kind, reason = _csv_kind(line)
    if suffix == ".csv" or kind is not None:
        return kind, reason
    return None, "not a .csv or .json file, nor a log of a known format by its first line"


def _unread_reason(path: Path, line: str) -> str | None:
    """Why the file whose first line is ``line`` is a known kind of GPU log that no importer
    reads (a ``dcgmi dmon`` table, an ``nvidia-smi dmon`` log without ``-o DT``, an
    ``nvidia-smi -q`` report: text, or XML with ``-x``; a scrape of dcgm-exporter's
    ``/metrics``), or None: not one."""
    if line.startswith("#Entity"):
        return DCGMI_DMON
    if is_dmon_header(line) and not dmon_has_time(line):
        return DMON_NO_TIME
    if "NVSMI LOG" in line:
        return NVSMI_REPORT.format(kind="text")
    if EXPOSITION_LINE.match(line):
        return EXPOSITION
    if line.startswith("<?xml") and "nvidia_smi_log" in _first_line(path, whole=False):
        return NVSMI_REPORT.format(kind="XML, -x")
    return None


def unread_kind(path: Path) -> str | None:
    """Why ``path`` is a known kind of GPU log that no importer reads (a ``dcgmi dmon`` table,
    an ``nvidia-smi dmon`` log without ``-o DT``, an ``nvidia-smi -q`` report), or None: another
    file, or one that cannot be read."""
    try:
        return _unread_reason(path, _first_line(path))
    except ValueError:
        return None


def import_format(path: Path) -> tuple[str, bool]:
    """The importer's format for ``path`` (``telemetry import --format auto``) and whether the
    file told it: the format :func:`log_format` tells; else ``prometheus`` for a file shaped as
    a Prometheus query result with no power series by name (a query whose ``sum()`` dropped the
    labels), whose importer says what is wrong with it; else ``nvidia-smi`` (whose importer then
    says what is wrong with the file; a missing or unreadable one too)."""
    try:
        kind, _ = log_format(path)
        shaped = kind is None and _prometheus_shaped(_first_line(path, whole=False))
    except ValueError:
        return "nvidia-smi", False
    if shaped:
        return "prometheus", True
    if kind is None or kind == "trace":
        return "nvidia-smi", False
    return kind, True
