"""CPU cost of the power sampler with the simulated A100 (target: < 1 % of one core at 0.5 s).

The sampler thread runs with a real trace writer while the main thread sleeps; the process's CPU
time over the wall time is the sampler's cost. The sleeping main thread's share is not taken
off: it is in the figure, which is an upper bound of the sampler's. Power is the simulated A100's
(``"simulated": true`` in the result).
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

from benchmarks.common import save_result
from grpo_power.config import load_config
from grpo_power.telemetry.record import trace_metadata
from grpo_power.telemetry.sampler import PowerSampler
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.simulated import SimulatedGpuSource
from grpo_power.telemetry.store import TraceWriter

TARGET_PCT_AT_0_5_S = 1.0


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cost_pct(period_s: float, seconds: float, n_gpus: int, folder: Path) -> dict[str, float]:
    config = load_config()
    signal = WorkloadSignal()
    source = SimulatedGpuSource(config.gpu, config.telemetry.simulated, signal, list(range(n_gpus)))
    metadata = trace_metadata(source, run_id=f"bench-{period_s}", period_s=period_s)
    writer = TraceWriter(folder / f"bench-{period_s}.parquet", metadata)
    sampler = PowerSampler(source, writer, period_s=period_s, flush_s=2.0)
    signal.set("train", 8)
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    cpu_s, wall_s = _cpu_s() - cpu0, time.perf_counter() - wall0
    return {
        "period_s": period_s,
        "gpus": n_gpus,
        "wall_s": round(wall_s, 2),
        "samples": sampler.samples_taken,
        "missed_slots": sampler.missed_slots,
        "cpu_pct_of_one_core": round(100.0 * cpu_s / wall_s, 3),
    }


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _cost_pct(0.5, 1.0, 1, folder)  # warm-up: imports, first Parquet write
        runs = [
            _cost_pct(0.5, 12.0, 1, folder),  # 24 samples and 6 flushes each
            _cost_pct(0.5, 12.0, 8, folder),
            _cost_pct(0.05, 6.0, 1, folder),
            _cost_pct(0.05, 6.0, 8, folder),
        ]
    at_half = runs[0]["cpu_pct_of_one_core"]
    return save_result(
        "sampler",
        {
            "simulated": True,  # the sampler reads the simulated A100
            "runs": runs,
            "target_pct_at_0_5_s": TARGET_PCT_AT_0_5_S,
            "meets_target": at_half < TARGET_PCT_AT_0_5_S,
        },
    )


if __name__ == "__main__":
    print(main())
