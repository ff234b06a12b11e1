"""Import and fit of every shared public trace (``../shared/data/real-traces/``): each run's
nvidia-smi log imported with its vLLM engine metrics aligned, then the decode power fit and
its validation (the first two runs fit, the rest held out).

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
from grpo_power.study import identify_traces
from grpo_power.telemetry.engine import add_engine_columns, read_engine_log
from grpo_power.telemetry.importers import import_log
from grpo_power.telemetry.store import write_trace

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "real-traces"
TARGET_S = 10.0


def main() -> dict[str, Any]:
    runs = sorted(p.parent for p in SHARED.glob("*/*/power.csv"))
    if not runs:  # a checkout without the shared data beside it: nothing to time
        print(f"skipped: no public traces at {SHARED}")
        return {"skipped": f"no public traces at {SHARED}", "target_s": TARGET_S}
    config = load_config(REPO / "config" / "config.yaml")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        traces = []
        for folder in runs:
            frame, meta = import_log(folder / "power.csv", "nvidia-smi", nameplate_w=400.0)
            frame, meta = add_engine_columns(frame, meta, read_engine_log(folder / "engine.csv"))
            traces.append(write_trace(Path(tmp) / f"{folder.name}.parquet", frame, meta))
        imported_s = time.perf_counter() - started
        fit = identify_traces(config, traces[:2], traces[2:], Path(tmp) / "fit")
    total_s = time.perf_counter() - started
    result = {
        "runs": len(runs),
        "import_s": imported_s,
        "total_s": total_s,
        "target_s": TARGET_S,
        "meets_target": total_s < TARGET_S,
        "decode_samples": fit["decode_samples"],
    }
    save_result("real_traces", result)
    return result
