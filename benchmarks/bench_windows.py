"""Windowed exceedance at 6 windows on a 16-GPU x 24 h x 2 Hz fleet (about 2.8 M samples).

Targets (issue 5): at least 10x faster than a straightforward pandas ``rolling(...).mean()``
implementation, and under 2 GB peak memory. Three implementations run on the same in-memory
trace frame (the sampler's row layout: one row per GPU per sample, jittered timestamps, energy
counter present):

- ours: ``series_from_frame`` + ``gpu_window_counts`` (trapezoid/counter energy, gaps split,
  exact window means on a regular grid);
- pandas, straightforward: ``frame.groupby("gpu")["power_w"].rolling("<W>s").mean()`` on a
  time index, per window (sample means, no gap handling);
- pandas, per-GPU loop: one Series per GPU, ``Series.rolling("<W>s").mean()`` (a tuned variant
  of the same, shown for honesty).

Times are the median of warm repeats (first, cold, runs reported separately); peak memory is
the tracemalloc peak above the input frame, measured in a separate run of each.
Run: ``python -m benchmarks.bench_windows [HOURS]`` (default 24).
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import save_result
from grpo_power.analysis.windows import gpu_window_counts, run_windows, series_from_frame
from grpo_power.config import Config
from grpo_power.telemetry.schema import TRACE_COLUMNS, TraceMetadata
from grpo_power.telemetry.store import write_trace

WINDOWS_S = [0.5, 1.0, 5.0, 30.0, 60.0, 300.0]
CAP_W = 300.0
N_GPUS = 16
GPUS_PER_JOB = 4
PERIOD_S = 0.5
TARGET_SPEEDUP = 10.0
TARGET_PEAK_BYTES = 2 * 1024**3


def job_power_w(t_s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """GRPO-like power of one job's GPUs at times ``t_s``: generate / score / train steps.

    Generation at 220-320 W with a 0.3 s prefill spike to 430 W, scoring near idle, training at
    350-400 W; each step's phase lengths vary. Vectorised over the whole timeline.
    """
    horizon_s = float(t_s[-1]) + 120.0
    steps = int(horizon_s / 20.0) + 2
    gen_s = rng.uniform(15.0, 35.0, steps)
    score_s = rng.uniform(2.0, 4.0, steps)
    train_s = rng.uniform(8.0, 16.0, steps)
    gen_w = rng.uniform(220.0, 320.0, steps)
    train_w = rng.uniform(350.0, 400.0, steps)
    bounds = np.cumsum(np.stack([gen_s, score_s, train_s], axis=1).ravel())
    phase = np.searchsorted(bounds, t_s, side="right")
    step, kind = phase // 3, phase % 3
    phase_start = np.concatenate([[0.0], bounds])[phase]
    power = np.where(kind == 0, gen_w[step], np.where(kind == 1, 70.0, train_w[step]))
    spike = (kind == 0) & (t_s - phase_start < 0.3)
    return np.where(spike, 430.0, power)


def fleet_frame(hours: float, seed: int = 0) -> pd.DataFrame:
    """A 16-GPU trace frame (4 jobs of 4 GPUs) sampled at 2 Hz with 0-10 ms jitter."""
    rng = np.random.default_rng(seed)
    n = int(hours * 3600 / PERIOD_S)
    base = np.arange(n) * PERIOD_S
    t = np.empty((n, N_GPUS))
    power = np.empty((n, N_GPUS))
    for job in range(N_GPUS // GPUS_PER_JOB):
        cols = slice(job * GPUS_PER_JOB, (job + 1) * GPUS_PER_JOB)
        t[:, cols] = base[:, None] + rng.uniform(0.0, 0.01, (n, GPUS_PER_JOB))
        shape = job_power_w(base, rng)
        power[:, cols] = np.abs(shape[:, None] + rng.normal(0.0, 6.0, (n, GPUS_PER_JOB)))
    inc = 0.5 * (power[1:] + power[:-1]) * np.diff(t, axis=0)
    counter = 1.0e6 + np.vstack([np.zeros((1, N_GPUS)), np.cumsum(inc, axis=0)])
    frame = pd.DataFrame({c: np.full(n * N_GPUS, np.nan) for c in TRACE_COLUMNS})
    frame["t"] = t.ravel()
    frame["gpu"] = np.tile(np.arange(N_GPUS, dtype=np.int32), n)
    frame["power_w"] = power.ravel()
    frame["energy_j"] = counter.ravel()
    return frame


def ours(frame: pd.DataFrame) -> dict[tuple[int, float], float]:
    """Exceedance per GPU and window with grpo-power's windows module."""
    out = {}
    for series in series_from_frame(frame, 2.0, PERIOD_S):
        for c in gpu_window_counts(series, WINDOWS_S, CAP_W, PERIOD_S):
            out[(series.gpu, c.window_s)] = c.exceedance
    return out


def pandas_groupby(frame: pd.DataFrame) -> dict[tuple[int, float], float]:
    """The straightforward pandas way: groupby + time-based rolling mean, per window."""
    indexed = frame.set_index(pd.to_timedelta(frame["t"], unit="s"))
    out = {}
    for window_s in WINDOWS_S:
        mean = indexed.groupby("gpu")["power_w"].rolling(pd.Timedelta(seconds=window_s)).mean()
        share = (mean > CAP_W).groupby(level="gpu").mean()
        for gpu, value in share.items():
            out[(int(gpu), window_s)] = float(value)
    return out


def pandas_loop(frame: pd.DataFrame) -> dict[tuple[int, float], float]:
    """A tuned pandas variant: one Series per GPU, full windows only."""
    out = {}
    for gpu, group in frame.groupby("gpu"):
        t_s = group["t"].to_numpy()
        series = pd.Series(group["power_w"].to_numpy(), index=pd.to_timedelta(t_s, unit="s"))
        for window_s in WINDOWS_S:
            mean = series.rolling(pd.Timedelta(seconds=window_s)).mean().to_numpy()
            full = t_s - t_s[0] >= window_s
            out[(int(gpu), window_s)] = float((mean[full] > CAP_W).mean())
    return out


def _timed(func: Callable[[pd.DataFrame], Any], frame: pd.DataFrame, repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        func(frame)
        times.append(time.perf_counter() - started)
    warm = times[1:] or times
    return {
        "cold_s": round(times[0], 4),
        "median_s": round(statistics.median(warm), 4),
        "min_s": round(min(warm), 4),
        "repeats": repeats,
    }


def _peak_bytes(func: Callable[[pd.DataFrame], Any], frame: pd.DataFrame) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    func(frame)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def _stage_end_to_end(frame: pd.DataFrame) -> dict[str, float]:
    """The whole windows stage on a Parquet file: read, window, bins, write."""
    meta = TraceMetadata(
        run_id="bench",
        source="simulated",
        gpu_name="A100",
        nameplate_w=400.0,
        sample_period_s=PERIOD_S,
        start_unix_s=1.7e9,
        simulated=True,
    )
    config = Config.model_validate(
        {"cap_w": CAP_W, "windows": {"windows_s": WINDOWS_S}, "fleet": {"window_s": 30.0}}
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(Path(tmp) / "trace.parquet", frame, meta)
        started = time.perf_counter()
        run_windows(path, Path(tmp) / "out", config)
        return {"stage_s": round(time.perf_counter() - started, 3)}


def main(hours: float = 24.0) -> dict:
    frame = fleet_frame(hours)
    samples = len(frame)
    print(f"{samples:,} samples ({N_GPUS} GPUs x {hours:g} h x {1 / PERIOD_S:g} Hz)", flush=True)
    ours_time = _timed(ours, frame, repeats=6)
    loop_time = _timed(pandas_loop, frame, repeats=3)
    groupby_time = _timed(pandas_groupby, frame, repeats=2)
    ours_peak = _peak_bytes(ours, frame)
    groupby_peak = _peak_bytes(pandas_groupby, frame)
    loop_peak = _peak_bytes(pandas_loop, frame)
    ours_result, loop_result = ours(frame), pandas_loop(frame)
    # Different definitions (time-weighted exact means vs sample means): shown, not asserted.
    max_diff = max(abs(ours_result[k] - loop_result[k]) for k in ours_result)
    speedup_groupby = groupby_time["median_s"] / ours_time["median_s"]
    speedup_loop = loop_time["median_s"] / ours_time["median_s"]
    result = {
        "samples": samples,
        "windows_s": WINDOWS_S,
        "ours": {
            **ours_time,
            "peak_bytes": ours_peak,
            "samples_per_s": round(samples / ours_time["median_s"]),
        },
        "pandas_groupby_rolling": {
            **groupby_time,
            "peak_bytes": groupby_peak,
            "samples_per_s": round(samples / groupby_time["median_s"]),
        },
        "pandas_per_gpu_rolling": {
            **loop_time,
            "peak_bytes": loop_peak,
            "samples_per_s": round(samples / loop_time["median_s"]),
        },
        "speedup_vs_straightforward_pandas": round(speedup_groupby, 1),
        "speedup_vs_per_gpu_pandas_loop": round(speedup_loop, 1),
        "max_abs_exceedance_difference_vs_pandas": round(max_diff, 4),
        "stage_end_to_end": _stage_end_to_end(frame),
        "process_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "target_speedup": TARGET_SPEEDUP,
        "target_peak_bytes": TARGET_PEAK_BYTES,
        "meets_speed_target": speedup_groupby >= TARGET_SPEEDUP,
        "meets_memory_target": ours_peak < TARGET_PEAK_BYTES,
        "load_average_1min": os.getloadavg()[0],
    }
    return save_result("windows", result)


if __name__ == "__main__":
    print(main(float(sys.argv[1]) if len(sys.argv) > 1 else 24.0))
