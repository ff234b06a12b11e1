"""Overhead of the power monitor: per measurement window and per sample (simulated A100).

A window costs two boundary reads (its start and end) and its statistics; a sample costs one
read of the source and its storage for the windows. Both are timed over many calls in the
calling thread, with the background sampler running at 0.1 s as in use, for 1 and 8 GPUs.
Target: well under a millisecond per window, so a window per step (or per phase) is free.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.common import save_result
from grpo_power.telemetry.monitor import PowerMonitor

TARGET_US_PER_WINDOW = 1000.0
CALLS = 2000


def _overhead(n_gpus: int, folder: Path) -> dict[str, float]:
    trace = folder / f"monitor-{n_gpus}.parquet"
    with PowerMonitor(gpus=list(range(n_gpus)), period_s=0.1, source="simulated", trace=trace) as m:
        m.signal.set("train", 8)
        for _ in range(50):  # warm-up
            with m.window("warm-up"):
                pass
        started = time.perf_counter()
        for _ in range(CALLS):
            m.begin_window("bench")
            m.end_window("bench")
        per_window_us = (time.perf_counter() - started) / CALLS * 1e6
        started = time.perf_counter()
        for _ in range(CALLS):
            m.sampler.take_now()
        per_sample_us = (time.perf_counter() - started) / CALLS * 1e6
        with m.window("outer"):  # a window around a long stretch of samples
            time.sleep(1.0)
            started = time.perf_counter()
        long_window_us = (time.perf_counter() - started) * 1e6
    return {
        "gpus": n_gpus,
        "per_window_us": round(per_window_us, 1),
        "per_sample_us": round(per_sample_us, 1),
        "window_over_1_s_close_us": round(long_window_us, 1),
        "source": "simulated",
    }


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        runs = [_overhead(1, Path(tmp)), _overhead(8, Path(tmp))]
    return save_result(
        "monitor",
        {
            "runs": runs,
            "target_us_per_window": TARGET_US_PER_WINDOW,
            "meets_target": all(r["per_window_us"] < TARGET_US_PER_WINDOW for r in runs),
        },
    )


if __name__ == "__main__":
    print(main())
