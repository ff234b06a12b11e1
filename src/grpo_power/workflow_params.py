"""The settings that each stage's results depend on: the workflow rules' ``params``.

Snakemake reruns a job when one of its params changed since its outputs were made (the
``params`` rerun trigger, on by default). So every rule holds in its params what its outputs
depend on and nothing else (:func:`section_settings`): the telemetry flush interval, where the
tiny model is cached, how often a checkpoint is saved, where metrics are also reported, a job's
memory, or another arm's setting never reruns a measured run, and a setting that only another
rule reads never reruns a job. A run folder resumes only the run whose :func:`run_settings` it
holds (:meth:`RunManifest.same_run`), and the fixed-safe calibration file is reused under the
same rule (:func:`calibration_settings` is its key).

Each function returns a JSON string, so equal settings compare equal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from grpo_power.config import Config

# Settings that change how a job is carried out, never what it computes, per config section
# (the ``launch`` section is in no rule's params).
RESULT_FREE_FIELDS = {
    "workload": frozenset({"cache_dir", "checkpoint_every_steps", "report_to"}),
    "telemetry": frozenset({"flush_s"}),
}
# Arms whose actions depend on the cap (uncontrolled and fixed never look at it).
CAPPED_ARMS = frozenset({"fixed-safe", "threshold", "ppo", "hwcap", "ppo+hwcap"})
# Where each setting of :func:`run_settings` whose key is not its config path is in the config.
RUN_SETTING_FIELDS = {
    "processes": "run_sizes.processes",
    "zero_stage": "run_sizes.zero_stage",
    "observation_window_s": "arms.observation_window_s",
    "staleness_s": "arms.staleness_s",
    "threshold": "arms.threshold",
    "fixed_safe": "arms.fixed_safe",
}


# YAML's spellings of null: what Snakemake's ``--config`` leaves as text in a nested value.
YAML_NULLS = frozenset({"null", "Null", "NULL", "~"})


def with_yaml_nulls(value: Any) -> Any:
    """``value`` (a config mapping, list or scalar) with YAML's nulls as None, throughout.

    Snakemake reads a nested ``--config`` value (``evaluate='{scenarios: [...]}'``) with YAML's
    BaseLoader, which keeps every scalar as text: ``calibration: null`` arrives as the string
    ``'null'``, which the schema takes for a file of that name (numbers and booleans it reads
    from text). Returns a new value; the input is not changed.
    """
    if isinstance(value, dict):
        return {key: with_yaml_nulls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [with_yaml_nulls(item) for item in value]
    return None if isinstance(value, str) and value in YAML_NULLS else value


def section_settings(
    config: Config,
    section: str,
    exclude: Iterable[str] = (),
    include: Iterable[str] | None = None,
) -> str:
    """The settings of one config section that a rule's results depend on (a rule's param).

    Takes the config, the section's dotted path (``"workload"``, ``"controller.reward"``), the
    section's fields only other rules read (``exclude``, e.g. ``{"scenarios"}`` of
    ``evaluate``) and, where the rule reads only some fields, those (``include``). Returns the
    section as JSON without its :data:`RESULT_FREE_FIELDS`, so changing one of them reruns no
    job.
    """
    excluded = RESULT_FREE_FIELDS.get(section, frozenset()) | set(exclude)
    return attrgetter(section)(config).model_dump_json(
        exclude=excluded, include=None if include is None else set(include)
    )


def _section(config: Config, section: str) -> dict[str, Any]:
    """:func:`section_settings` of ``section`` as a mapping, to nest in a rule's settings."""
    return json.loads(section_settings(config, section))


def _measured_run(config: Config) -> dict[str, Any]:
    """What every measured GRPO run of ``config.workload.size`` depends on."""
    run_size = config.run_size(config.workload.size)
    return {
        "gpu": _section(config, "gpu"),
        "telemetry": _section(config, "telemetry"),
        "workload": _section(config, "workload"),
        "processes": run_size.processes,
        "zero_stage": run_size.zero_stage,
        "observation_window_s": config.arms.observation_window_s,
        "staleness_s": config.arms.staleness_s,
    }


def _dumps(data: dict[str, Any]) -> str:
    """``data`` as JSON with sorted keys."""
    return json.dumps(data, sort_keys=True)


def run_settings(config: Config, arm: str) -> str:
    """The settings runs of ``arm`` depend on (the run rule's params, and what a run folder's
    manifest must match to be resumed): the workload and its telemetry, the cap for the arms
    that act on it, and the arm's own section. Keys are config sections or fields; those named
    otherwise in the config are in :data:`RUN_SETTING_FIELDS`."""
    settings = _measured_run(config)
    if arm in CAPPED_ARMS:
        settings["cap_w"] = config.cap_w
    if arm == "threshold":
        settings["threshold"] = _section(config, "arms.threshold")
    if arm == "fixed-safe":
        settings["fixed_safe"] = _section(config, "arms.fixed_safe")
    return _dumps(settings)


def calibration_settings(config: Config) -> str:
    """The settings the fixed-safe calibration depends on (its rule's params and file key)."""
    settings = _measured_run(config)
    settings.update(cap_w=config.cap_w, fixed_safe=_section(config, "arms.fixed_safe"))
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
