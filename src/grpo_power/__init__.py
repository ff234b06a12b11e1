"""grpo-power: measure, cap and provision the GPU power of GRPO post-training runs.

Packages, in the direction of their dependencies::

    config      the one pydantic schema every stage reads
    sim         physics only: the A100 power model (later: GRPO step and fleet simulators)
    telemetry   samplers (NVML, simulated), the trace store, importers, the power monitor
    workload    the workloads whose power is measured
    callbacks   PowerCallback and PowerCapCallback for a user's own TRL / HF Trainer script
    planner     a folder of traces to fleet, economics and a report (no GRPO run)
    cli         one subcommand per stage

``from grpo_power import PowerMonitor`` is :class:`grpo_power.telemetry.monitor.PowerMonitor`
(imported on first use, so the command line starts without it).

See DESIGN.md (shared/) for the whole architecture.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("grpo-power")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    if name == "PowerMonitor":
        from grpo_power.telemetry.monitor import PowerMonitor

        return PowerMonitor
    raise AttributeError(f"module 'grpo_power' has no attribute {name!r}")
