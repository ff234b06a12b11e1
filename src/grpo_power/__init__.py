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
    launch      submitit job arrays (Slurm on clusters)
    analysis    windows, fleet, authority, evaluation: files in, files out
    economics   cost, carbon, oversubscription value, pilot
    report      figures, tables, the HTML report
    cli         one command per stage

``docs/design.md`` describes the architecture and maps each stage to its rule, command, code
and outputs.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("grpo-power")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
