"""The settings that each measured stage's results depend on: the workflow rules' ``params``.

Snakemake reruns a job when one of its params changed since its outputs were made (the
``params`` rerun trigger, on by default). So the run, calibration and sweep rules hold in their
params what their outputs depend on and nothing else: the telemetry flush interval, where the
tiny model is cached, how often a checkpoint is saved, a job's memory, or another arm's setting
never reruns a measured run. The fixed-safe calibration file is reused under the same rule
(:func:`calibration_settings` is its key).

Each function returns a JSON string with sorted keys, so equal settings compare equal.
"""

from __future__ import annotations

import json
from typing import Any

from grpo_power.config import Config

# Settings that change how a run is carried out, never what it measures.
RESULT_FREE_WORKLOAD = frozenset({"cache_dir", "checkpoint_every_steps", "report_to"})
RESULT_FREE_TELEMETRY = frozenset({"flush_s"})
# Arms whose actions depend on the cap (uncontrolled and fixed never look at it).
CAPPED_ARMS = frozenset({"fixed-safe", "threshold", "ppo", "hwcap", "ppo+hwcap"})


def result_config(data: dict[str, Any]) -> dict[str, Any]:
    """A dumped config (``Config.model_dump``) without what no run's result depends on: the
    ``launch`` section and the result-free workload and telemetry settings. Two attempts of a
    run compare their configs this way (:meth:`RunManifest.same_run`), so a resumed run may get
    more memory, another partition or another flush interval."""
    kept = {key: value for key, value in data.items() if key != "launch"}
    for section, names in (
        ("workload", RESULT_FREE_WORKLOAD),
        ("telemetry", RESULT_FREE_TELEMETRY),
    ):
        if isinstance(kept.get(section), dict):
            kept[section] = {k: v for k, v in kept[section].items() if k not in names}
    return kept


def _measured_run(config: Config) -> dict[str, Any]:
    """What every measured GRPO run of ``config.workload.size`` depends on."""
    run_size = config.run_size(config.workload.size)
    return {
        "gpu": config.gpu.model_dump(mode="json"),
        "telemetry": config.telemetry.model_dump(mode="json", exclude=set(RESULT_FREE_TELEMETRY)),
        "workload": config.workload.model_dump(mode="json", exclude=set(RESULT_FREE_WORKLOAD)),
        "processes": run_size.processes,
        "zero_stage": run_size.zero_stage,
        "observation_window_s": config.arms.observation_window_s,
        "staleness_s": config.arms.staleness_s,
    }


def _dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True)


def run_settings(config: Config, arm: str) -> str:
    """The settings runs of ``arm`` depend on (the run rule's params): the workload and its
    telemetry, the cap for the arms that act on it, and the arm's own section."""
    settings = _measured_run(config)
    if arm in CAPPED_ARMS:
        settings["cap_w"] = config.cap_w
    if arm == "threshold":
        settings["threshold"] = config.arms.threshold.model_dump(mode="json")
    if arm == "fixed-safe":
        settings["fixed_safe"] = config.arms.fixed_safe.model_dump(mode="json")
    return _dumps(settings)


def calibration_settings(config: Config) -> str:
    """The settings the fixed-safe calibration depends on (its rule's params and file key)."""
    settings = _measured_run(config)
    settings.update(cap_w=config.cap_w, fixed_safe=config.arms.fixed_safe.model_dump(mode="json"))
    return _dumps(settings)


def real_sweep_settings(config: Config) -> str:
    """The settings the identify stage's real-workload sweep depends on (its rule's params)."""
    settings = _measured_run(config)
    settings.update(
        real_sweep_steps=config.authority.real_sweep_steps,
        group_sizes=list(config.sim.group_sizes),
        seed=config.seed,
    )
    return _dumps(settings)
