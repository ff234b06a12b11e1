"""Helpers shared by the benchmarks: where results go, and writing them atomically."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

RESULTS_DIR = Path("results/benchmarks")


def save_result(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """Write ``result`` (plus the machine it ran on) to results/benchmarks/NAME.json."""
    result = {**result, "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(path)
    return result
