"""Config section of planner mode: ``planner`` (a folder of traces to fleet, economics and a
report, with no GRPO run and no simulator; ``grpo-power planner``, ``snakemake planner``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, PositiveFloat

from grpo_power.config.base import Strict


class PlannerConfig(Strict):
    """What planner mode reads (``grpo-power planner``, ``snakemake planner``)."""

    traces: Path | None = Field(
        None,
        description="Folder of power traces, searched recursively: nvidia-smi CSV logs, DCGM "
        "CSV logs, grpo-power Parquet traces, trace CSVs (t, gpu, power_w); a run folder's "
        "steps.parquet beside its trace gives its tokens. Needed by `snakemake planner`.",
    )
    timezone: str | None = Field(
        None,
        description="IANA zone of nvidia-smi timestamps (local time without a zone); null: "
        "this machine's zone.",
    )
    split_on_clock_jumps: bool = Field(
        False,
        description="Split a log or trace into segments where its clock repeats or steps back "
        "(a clock stepped back, logs concatenated) instead of refusing it "
        "(`planner run/import --split-on-clock-jumps`).",
    )
    cap_w: PositiveFloat | None = Field(
        None,
        description="Per-GPU power cap, W, the planner judges every trace and its fleet by "
        "(exceedance, the figures' dashed line; `planner run/fleet --cap-w`); at most each "
        "trace's nameplate. null: the config's cap_w, set for gpu's part (a trace of another "
        "part, an H100 under an A100's cap, is noted).",
    )
