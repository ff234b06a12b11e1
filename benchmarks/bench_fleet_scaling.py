"""Fleet scaling study from 16 to 100,000 GPUs (target: under 10 minutes on this machine).

Sources: 4 jobs of 4 GPUs, 24 h each at the 0.5 s bin width (the bins the windows stage writes
for a 16-GPU x 24 h x 2 Hz fleet). The study draws ``scaling_draws`` Monte Carlo fleets of each
configured size at the 6 default windows, exactly as ``grpo-power fleet`` does. Also measured:
that FFT and direct summation agree on a 1,000-GPU draw, and the wall-clock path streaming
the same 16 GPUs from Parquet in time partitions (time and peak memory at two partition sizes),
and the memory the jobs hold as sources read from those files.
Run: ``python -m benchmarks.bench_fleet_scaling [HOURS]`` (default 24).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.bench_windows import GPUS_PER_JOB, N_GPUS, job_power_w
from benchmarks.common import save_result
from grpo_power.analysis.fleet import (
    JobSource,
    MonteCarloFleet,
    load_job_source,
    monte_carlo,
    read_run_bins,
    wall_clock_fleet,
)
from grpo_power.atomic import write_parquet_atomic
from grpo_power.config import Config
from grpo_power.layout import BINS_METADATA_KEY

BIN_S = 0.5
TARGET_S = 600.0


def job_bins(hours: float, seed: int) -> np.ndarray:
    """Per-GPU energy per 0.5 s bin of one 4-GPU job, J (GPUs x bins)."""
    rng = np.random.default_rng(seed)
    n = int(hours * 3600 / BIN_S)
    shape = job_power_w(np.arange(n) * BIN_S, rng)
    power = np.abs(shape[None, :] + rng.normal(0.0, 6.0, (GPUS_PER_JOB, n)))
    return power * BIN_S


def _write_bins(folder: Path, job: int, per_gpu_j: np.ndarray, start_bin: int) -> Path:
    n = per_gpu_j.shape[1]
    frame = pd.DataFrame(
        {
            "bin": np.repeat(np.arange(start_bin, start_bin + n, dtype=np.int64), GPUS_PER_JOB),
            "gpu": np.tile(np.arange(GPUS_PER_JOB, dtype=np.int32), n),
            "energy_j": per_gpu_j.T.ravel(),
        }
    )
    info = {
        "run_id": f"job{job}",
        "source": "simulated",
        "simulated": True,
        "data": "simulated",
        "model_size": None,
        "gpu_name": "A100",
        "gpu_indices": list(range(GPUS_PER_JOB)),
        "n_gpus": GPUS_PER_JOB,
        "nameplate_w": 400.0,
        "cap_w": 300.0,
        "bin_s": BIN_S,
        "start_unix_s": start_bin * BIN_S,
        "bin_range": [start_bin, start_bin + n - 1],
        "trace": "synthetic",
    }
    path = folder / f"job{job}" / "bins.parquet"
    write_parquet_atomic(path, frame, metadata={BINS_METADATA_KEY: json.dumps(info).encode()})
    return path


def _file_sources(paths: list[Path]) -> dict:
    """The memory the jobs read from their bins files hold as Monte Carlo sources, against
    their per-GPU bins, and the time to read one job again cut to fewer GPUs."""
    runs = [read_run_bins(p) for p in paths]
    load_job_source(runs[0])  # a first read also loads pyarrow's modules
    tracemalloc.start()
    sources = [load_job_source(r) for r in runs]
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    started = time.perf_counter()
    sources[0].series(GPUS_PER_JOB - 1)
    return {
        "held_bytes": held,
        "per_gpu_bins_bytes": sum(s.n_gpus * s.length * 8 for s in sources),
        "cut_job_read_s": round(time.perf_counter() - started, 3),
    }


def _wall_clock(paths: list[Path], config: Config, partition_bins: int) -> dict:
    runs = [read_run_bins(p) for p in paths]
    args = (runs, config.windows.windows_s, BIN_S, config.cap_w * N_GPUS, partition_bins)
    started = time.perf_counter()
    counts, info = wall_clock_fleet(*args)
    elapsed = time.perf_counter() - started
    tracemalloc.start()
    wall_clock_fleet(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "partition_bins": partition_bins,
        "seconds": round(elapsed, 3),
        "peak_bytes": peak,
        "partitions": info["partitions"],
        "peak_share_30s": round(counts[3].peak_mean_w / (N_GPUS * 400.0), 4),
    }


def main(hours: float = 24.0) -> dict:
    config = Config()
    fc = config.fleet
    windows_s = config.windows.windows_s
    jobs = [job_bins(hours, seed) for seed in range(N_GPUS // GPUS_PER_JOB)]
    sources = [JobSource.from_per_gpu(f"job{i}", 400.0, j) for i, j in enumerate(jobs)]
    bins_per_gpu = jobs[0].shape[1]
    print(
        f"{len(sources)} jobs x {GPUS_PER_JOB} GPUs x {bins_per_gpu:,} bins; sizes "
        f"{fc.scaling_sizes}, {fc.scaling_draws} draws each, {len(windows_s)} windows",
        flush=True,
    )

    mc = MonteCarloFleet(sources, None, np.random.default_rng(0))
    per_size = []
    started = time.perf_counter()
    for size in fc.scaling_sizes:
        t0 = time.perf_counter()
        stats = mc.run(size, fc.scaling_draws, windows_s, BIN_S, config.cap_w)
        elapsed = time.perf_counter() - t0
        i30 = windows_s.index(fc.window_s)
        share = stats.peak_share[:, i30]
        per_size.append(
            {
                "n_gpus": size,
                "seconds": round(elapsed, 3),
                "effective_gpu_bins_per_s": round(size * bins_per_gpu * fc.scaling_draws / elapsed),
                "peak_share_30s_mean": round(float(share.mean()), 4),
                "peak_share_30s_p95": round(float(np.quantile(share, 0.95)), 4),
                "factor_30s": round(
                    1.0 / (float(np.quantile(share, fc.peak_quantile)) * (1 + fc.margin)), 3
                ),
            }
        )
        print(f"  {size:>7} GPUs: {elapsed:6.2f} s", flush=True)
    total_s = time.perf_counter() - started

    tracemalloc.start()
    mc.run(fc.scaling_sizes[-1], 2, windows_s, BIN_S, config.cap_w)
    _, peak_largest = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    # FFT and direct summation of the same 1,000-GPU draw.
    draws = []
    for limit in (10**9, 0):
        saved = monte_carlo.DIRECT_MAX_COPIES, monte_carlo.DIRECT_WORK_PER_TRANSFORM
        monte_carlo.DIRECT_MAX_COPIES, monte_carlo.DIRECT_WORK_PER_TRANSFORM = limit, float(limit)
        try:
            energy, _ = MonteCarloFleet(sources, None, np.random.default_rng(9)).fleet_energy(1000)
        finally:
            monte_carlo.DIRECT_MAX_COPIES, monte_carlo.DIRECT_WORK_PER_TRANSFORM = saved
        draws.append(energy)
    fft_vs_direct = float(np.max(np.abs(draws[0] - draws[1])) / np.max(np.abs(draws[0])))

    with tempfile.TemporaryDirectory() as tmp:
        paths = [_write_bins(Path(tmp), i, j, 3_400_000_000) for i, j in enumerate(jobs)]
        wall = [_wall_clock(paths, config, 65536), _wall_clock(paths, config, 8192)]
        from_files = _file_sources(paths)

    result = {
        "sources": {
            "jobs": len(sources),
            "gpus_per_job": GPUS_PER_JOB,
            "hours": hours,
            "bins_per_gpu": bins_per_gpu,
        },
        "scaling_sizes": fc.scaling_sizes,
        "scaling_draws": fc.scaling_draws,
        "windows_s": windows_s,
        "per_size": per_size,
        "total_s": round(total_s, 2),
        "largest_fleet_peak_bytes_tracemalloc": peak_largest,
        "fft_vs_direct_max_rel_diff": fft_vs_direct,
        "wall_clock_streaming": wall,
        "sources_from_files": from_files,
        "process_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "target_s": TARGET_S,
        "meets_target": total_s < TARGET_S and max(fc.scaling_sizes) >= 100_000,
        "load_average_1min": os.getloadavg()[0],
    }
    return save_result("fleet_scaling", result)


if __name__ == "__main__":
    print(main(float(sys.argv[1]) if len(sys.argv) > 1 else 24.0))
