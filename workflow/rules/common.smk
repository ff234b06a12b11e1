# Shared by every rule file: the validated config and the input functions.
from pathlib import Path

from grpo_power.config import validate_config, write_resolved_config

# The same pydantic schema as the CLI: a bad config stops the workflow before any job runs.
CFG = validate_config(config, source="Snakemake config")
RESULTS = Path(CFG.results_dir)
# Rules hand this file to the CLI; it is rewritten only when the config changes, and each rule's
# params hold the settings it depends on, so a change reruns only the rules it concerns.
RESOLVED_CONFIG = str(write_resolved_config(CFG, RESULTS / "config.resolved.yaml"))


def trace_files():
    """Every run trace the windows and fleet stages analyse (the run stage adds its traces)."""
    return [RESULTS / "telemetry" / "demo.parquet"]


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
        RESULTS / "telemetry" / "demo.parquet",
        *windows_outputs("exceedance.csv"),
        *[RESULTS / "fleet" / name for name in FLEET_OUTPUTS],
    ]
