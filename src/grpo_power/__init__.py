"""grpo-power: measure, cap and provision the GPU power of GRPO post-training runs.

Packages, in the direction of their dependencies::

    config      the one pydantic schema every stage reads
    sim         physics only: the A100 power model (later: GRPO step and fleet simulators)
    telemetry   samplers (NVML, simulated), the trace store, importers
    workload    the workloads whose power is measured
    cli         one subcommand per stage

See DESIGN.md (shared/) for the whole architecture.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("grpo-power")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
