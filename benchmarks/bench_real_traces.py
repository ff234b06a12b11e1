"""The real-traces stage on every shared public trace (``../shared/data/real-traces/``), as the
README's ``snakemake --config real_traces=...`` command configures it: each run's nvidia-smi log
imported with its vLLM engine metrics aligned, the decode power fit on the arrival-pattern runs
and its validation on the held-out ones, and each run's windowed exceedance
(:func:`grpo_power.real_traces.run_real_traces`).

Target (issue 17): all of it in under 10 s on this machine. Run:
``python -m benchmarks real_traces``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import save_result
from grpo_power.config import load_config
from grpo_power.real_traces import find_runs, run_real_traces

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "real-traces"
TARGET_S = 10.0
# as the README's real-traces study command sets them
HELD_OUT = ["arrival_rate", "trace_replay"]
ORIGIN = "grantwilkins/powertrace-sim @96361ef"


def main() -> dict[str, Any]:
    if not SHARED.is_dir():  # a checkout without the shared data beside it: nothing to time
        print(f"skipped: no public traces at {SHARED}")
        return {"skipped": f"no public traces at {SHARED}", "target_s": TARGET_S}
    config = load_config(
        REPO / "config" / "config.yaml",
        overrides={"real_traces": {"folder": SHARED, "held_out": HELD_OUT, "origin": ORIGIN}},
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        fit = run_real_traces(config, Path(tmp))
    total_s = time.perf_counter() - started
    result = {
        "runs": len(find_runs(SHARED)),
        "total_s": total_s,
        "target_s": TARGET_S,
        "meets_target": total_s < TARGET_S,
        "decode_samples": fit["decode_samples"],
    }
    save_result("real_traces", result)
    return result
