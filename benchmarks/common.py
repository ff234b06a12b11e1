"""Helpers shared by the benchmarks: where results go, and writing them atomically."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grpo_power.atomic import write_json_atomic
from grpo_power.version import __version__

RESULTS_DIR = Path("results/benchmarks")


def save_result(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """Write ``result`` (plus when, by which version and on what machine it ran, so results of
    an older run are told apart) to results/benchmarks/NAME.json."""
    result = {
        **result,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "version": __version__,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    write_json_atomic(RESULTS_DIR / f"{name}.json", result)
    return result
