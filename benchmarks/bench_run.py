"""Wall time of a 30-step tiny GRPO run on this machine (target: under 2 minutes).

Measured end to end through the CLI, as a user runs it: start-up, model load, 30 steps with
simulated telemetry, and closing the trace, step log and manifest.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import save_result
from grpo_power.telemetry.steplog import read_step_log

TARGET_S = 120.0
STEPS = 30


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "grpo_power.cli",
                "run",
                "--arm",
                "fixed",
                "--steps",
                str(STEPS),
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
        )
        wall_s = time.perf_counter() - started
        if done.returncode != 0:  # the run's own one-line error, not a CalledProcessError
            raise RuntimeError(
                f"the benchmark's run exited {done.returncode}: {done.stderr.strip()[-2000:]}"
            )
        steps = read_step_log(out / "steps.parquet")
    return save_result(
        "run",
        {
            "steps": len(steps),
            "wall_s": round(wall_s, 1),
            "steps_wall_s": round(float(steps["end_s"].max() - steps["start_s"].min()), 1),
            "completion_tokens": int(steps["completion_tokens"].sum()),
            "target_s": TARGET_S,
            "meets_target": wall_s < TARGET_S,
        },
    )


if __name__ == "__main__":
    print(main())
