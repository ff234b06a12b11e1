"""Config section of the simulator's validation on measured runs: ``real_traces`` (a folder of
inference runs, each an nvidia-smi log beside its engine's metrics; ``grpo-power real-traces``,
the rule ``real_traces`` and the report's "Simulator against real traces" section)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from grpo_power.config.base import Strict


class RealTracesConfig(Strict):
    """Which measured runs the decode power model is fitted to and validated on."""

    folder: Path | None = Field(
        None,
        description="Folder of measured runs, searched recursively: every folder holding "
        "power.csv (an nvidia-smi log) and engine.csv (the engine's metrics, unix seconds). "
        "null: the report's section says none is configured.",
    )
    held_out: list[str] = Field(
        default_factory=list,
        description="Runs whose path under the folder contains one of these are held out "
        "from the fit and validated on; the others are fitted.",
    )
    origin: str | None = Field(
        None,
        description="Where the runs come from (a public repository and commit): recorded in "
        "each trace and shown as 'measured (public trace)'.",
    )
    engine_format: Literal["vllm", "sglang", "tgi"] = Field(
        "vllm", description="The engine whose metrics engine.csv holds."
    )
    timezone: str | None = Field(
        None,
        description="IANA zone of the nvidia-smi timestamps; null: this machine's (the engine "
        "clock's offset is found from the data either way).",
    )
