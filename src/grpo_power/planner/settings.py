"""The ``planner`` section of the config (validated with the rest by ``grpo_power.config``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class PlannerConfig(BaseModel):
    """What planner mode reads (``grpo-power planner``, ``snakemake planner``)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

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
