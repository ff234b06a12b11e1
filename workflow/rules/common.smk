# Shared by every rule file: the validated config and the input functions.
from pathlib import Path

from grpo_power.config import validate_config, write_resolved_config

# The same pydantic schema as the CLI: a bad config stops the workflow before any job runs.
CFG = validate_config(config, source="Snakemake config")
RESULTS = Path(CFG.results_dir)
# Rules hand this file to the CLI; it is rewritten only when the config changes, and each rule's
# params hold the settings it depends on, so a change reruns only the rules it concerns.
RESOLVED_CONFIG = str(write_resolved_config(CFG, RESULTS / "config.resolved.yaml"))


def run_folder(size, arm, seed):
    """The folder of one GRPO run: trace.parquet, steps.parquet, manifest.json."""
    return RESULTS / "runs" / size / arm / f"seed{seed}"


def run_folders():
    """Every run of the study: the configured size under each arm and seed."""
    return [
        run_folder(CFG.workload.size, arm, seed) for arm in CFG.arms.run for seed in CFG.seeds
    ]


def trace_files():
    """Every run trace the windows and fleet stages analyse."""
    return [folder / "trace.parquet" for folder in run_folders()]


def run_inputs(wildcards):
    """A run's inputs: the fixed-safe arm needs its calibration first."""
    if wildcards.arm == "fixed-safe":
        return [RESULTS / "calibration" / wildcards.size / "fixed_safe.json"]
    return []


def trace_key(trace):
    """A trace's path under RESULTS without suffix: results/runs/7B/x/seed0/trace.parquet ->
    runs/7B/x/seed0/trace; its windows outputs go to RESULTS / "windows" / key."""
    return str(Path(trace).relative_to(RESULTS).with_suffix(""))


def windows_outputs(name):
    """One windows-stage output file (e.g. "bins.parquet") of every trace."""
    return [RESULTS / "windows" / trace_key(trace) / name for trace in trace_files()]


FLEET_OUTPUTS = ["fleet_windows.csv", "scaling.csv", "comparison.csv", "comparison.md"]


def all_outputs():
    """Everything `rule all` builds; each stage adds its final outputs here."""
    return [
        *trace_files(),
        *windows_outputs("exceedance.csv"),
        *[RESULTS / "fleet" / name for name in FLEET_OUTPUTS],
    ]
