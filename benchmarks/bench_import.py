"""Importing a large nvidia-smi log: 1 M rows (8 GPUs sampled each second for about 35 h).

What a datacenter planner's folder holds: ``nvidia-smi --query-gpu=timestamp,index,power.draw,
utilization.gpu --format=csv -l 1`` logs of whole nodes over days. The benchmark writes one such
log (units in the cells, as nvidia-smi writes them) and times
:func:`grpo_power.telemetry.importers.import_log` on it twice: as it runs (a regular log is read
by pandas' C parser and its numbers parsed by Arrow) and through the line-by-line reader that a
log with quotes or a malformed row takes (``logrows._regular_table`` answering None), the
reader every log took before (the numbers are parsed by Arrow in both). Both must give the same
trace. It also times a Grafana panel's CSV download of a week of 32 GPUs (four hosts) scraped
every 15 s, 1.3 M readings (``--format grafana``). No target: the numbers are for the README and
the closing note. Run: ``python -m benchmarks import``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd

from benchmarks.common import save_result
from grpo_power.telemetry import logrows
from grpo_power.telemetry.importers import import_log

GPUS = 8
SECONDS = 125_000  # x 8 GPUs = 1 M rows


def write_log(path: Path, seconds: int = SECONDS, gpus: int = GPUS, seed: int = 0) -> int:
    """Write an nvidia-smi CSV log of ``gpus`` GPUs sampled every second; returns its rows."""
    rng = np.random.default_rng(seed)
    stamps = pd.date_range("2026-11-02 09:00:00", periods=seconds, freq="s")
    stamp = np.repeat(stamps.strftime("%Y/%m/%d %H:%M:%S.000").to_numpy(), gpus)
    index = np.tile(np.arange(gpus), seconds).astype(str)
    power = np.char.mod("%.2f W", rng.normal(250.0, 40.0, seconds * gpus))
    util = np.char.mod("%d %%", rng.integers(0, 101, seconds * gpus))
    lines = [f"{a}, {b}, {c}, {d}" for a, b, c, d in zip(stamp, index, power, util, strict=True)]
    header = "timestamp, index, power.draw [W], utilization.gpu [%]"
    path.write_text("\n".join([header, *lines]) + "\n")
    return len(lines)


GRAFANA_SCRAPES = 40_320  # a week at 15 s
GRAFANA_GPUS = 32  # four hosts of eight


def write_grafana_export(path: Path, seed: int = 0) -> int:
    """Write a power panel's Download CSV (legend ``{{Hostname}} GPU {{gpu}}``, formatted times
    and watts, CRLF line ends); returns its readings."""
    rng = np.random.default_rng(seed)
    stamps = pd.date_range("2026-11-02", periods=GRAFANA_SCRAPES, freq="15s")
    times = stamps.strftime("%Y-%m-%d %H:%M:%S").to_numpy()
    cells = np.char.mod("%.1f W", rng.normal(250.0, 40.0, (GRAFANA_SCRAPES, GRAFANA_GPUS)))
    names = [f'"node{g // 8} GPU {g % 8}"' for g in range(GRAFANA_GPUS)]
    lines = [",".join(['"Time"', *names])]
    lines += [",".join([time_, *row]) for time_, row in zip(times, cells, strict=True)]
    path.write_text("\r\n".join(lines) + "\r\n")
    return cells.size


def _timed_import(path: Path, fmt: str = "nvidia-smi") -> tuple[float, pd.DataFrame]:
    """Seconds to import ``path`` (a log of ``fmt``) and the trace it gives."""
    started = time.perf_counter()
    frame, _ = import_log(path, fmt, nameplate_w=400.0, timezone="UTC")  # type: ignore[arg-type]
    return time.perf_counter() - started, frame


def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "node.csv"
        rows = write_log(path)
        fast_s, fast = _timed_import(path)
        with mock.patch.object(logrows, "_regular_table", lambda _text: None):
            slow_s, slow = _timed_import(path)
        grafana = Path(tmp) / "grafana.csv"
        readings = write_grafana_export(grafana)
        grafana_s, trace = _timed_import(grafana, "grafana")
    pd.testing.assert_frame_equal(fast, slow)
    assert len(trace) == readings  # every reading a sample
    return save_result(
        "import",
        {
            "rows": rows,
            "gpus": GPUS,
            "import_s": round(fast_s, 2),
            "rows_per_s": round(rows / fast_s),
            "line_by_line_s": round(slow_s, 2),
            "speedup": round(slow_s / fast_s, 2),
            "grafana_readings": readings,
            "grafana_import_s": round(grafana_s, 2),
        },
    )


if __name__ == "__main__":
    print(main())
