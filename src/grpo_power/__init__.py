"""grpo-power: measure, cap and provision the GPU power of GRPO post-training runs.

Packages and modules, from the bottom up (``tests/test_structure.py`` keeps every import
pointing down)::

    layout      every results folder, output file name and Parquet metadata key
    stats       scipy statistics: t intervals, a percentile bound, NNLS
    atomic      outputs written under a temporary name and renamed
    config      the one pydantic schema, a module per section
    sim         physics only: power model, sourced defaults, calibration, fit, step simulator
    telemetry   power sources (NVML, simulated), sampler, trace store, importers, step log
    control     the controller contract, controllers, the gymnasium env, PPO, simulated arms
    workload    the TRL GRPO runner, actuators, arms, resume, fixed-safe calibration
    callbacks   PowerCallback and PowerCapCallback for a user's own TRL / HF Trainer script
    launch      submitit job arrays (Slurm on clusters)
    analysis    windows, fleet, authority, evaluation: files in, files out
    economics   cost, carbon, oversubscription value, pilot
    report      figures, tables, the HTML report
    planner     a folder of traces to fleet, economics and a report (no GRPO run)
    cli         one command per stage

``from grpo_power import PowerMonitor`` is :class:`grpo_power.telemetry.monitor.PowerMonitor`
(imported on first use, so the command line starts without it).

``docs/design.md`` describes the architecture and maps each stage to its rule, command, code
and outputs.
"""

from typing import Any

from grpo_power.version import __version__

__all__ = ["PowerMonitor", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "PowerMonitor":
        from grpo_power.telemetry.monitor import PowerMonitor

        return PowerMonitor
    raise AttributeError(f"module 'grpo_power' has no attribute {name!r}")
