# Shared by every rule file: the validated config and the input functions.
from pathlib import Path

from grpo_power.config import validate_config, write_resolved_config

# The same pydantic schema as the CLI: a bad config stops the workflow before any job runs.
CFG = validate_config(config, source="Snakemake config")
RESULTS = Path(CFG.results_dir)
# Rules hand this file to the CLI; it is rewritten only when the config changes, and each rule's
# params hold the settings it depends on, so a change reruns only the rules it concerns.
RESOLVED_CONFIG = str(write_resolved_config(CFG, RESULTS / "config.resolved.yaml"))


def all_outputs():
    """Everything `rule all` builds; each stage adds its final outputs here."""
    return [RESULTS / "telemetry" / "demo.parquet"]
