"""The setting a run holds while its power telemetry is stale (the controller callback's
fail-safe), and the key that ties a fixed-safe calibration to the settings it was measured with.

A leaf of the workload package: the runner reads the fail-safe from here, and the fixed-safe
calibration (``fixed_safe.py``, which runs GRPO through the runner) writes the key.
"""

from __future__ import annotations

import hashlib
import json

from grpo_power.config import Config
from grpo_power.control.contract import Action
from grpo_power.workflow_params import calibration_settings


def calibration_key(config: Config) -> str:
    """A digest of the settings a fixed-safe calibration depends on: a saved calibration with
    another key was measured for other settings and is not used."""
    return hashlib.sha256(calibration_settings(config).encode()).hexdigest()[:16]


def failsafe_action(config: Config) -> Action:
    """The setting a run holds while its telemetry is stale: the calibrated fixed-safe
    concurrency where a calibration exists for this size, else the lowest concurrency, with the
    other actuators at the defaults the calibration was measured at."""
    path = config.layout.fixed_safe(config.workload.size)
    concurrency = config.workload.concurrency_bounds.min
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("key") == calibration_key(config):
            concurrency = int(saved["concurrency"])
    w = config.workload
    return Action(
        concurrency=concurrency,
        max_new_tokens=w.max_new_tokens,
        train_micro_batch=w.train_micro_batch,
        pause_s=w.pause_s,
    )
