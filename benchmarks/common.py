"""Helpers shared by the benchmarks: where results go, and writing them atomically."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from grpo_power.atomic import write_json_atomic

RESULTS_DIR = Path("results/benchmarks")


def save_result(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """Write ``result`` (plus the machine it ran on) to results/benchmarks/NAME.json."""
    result = {**result, "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}
    write_json_atomic(RESULTS_DIR / f"{name}.json", result)
    return result
