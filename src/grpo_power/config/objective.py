"""Config section of the study's one objective: ``objective`` (the violation budget and the
breaker window every arm, the oracle, the PPO reward and the report are judged by)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from grpo_power.config.base import PositiveFloat, Strict


class ObjectiveConfig(Strict):
    """Maximise completion tokens subject to a violation budget (``analysis/objective.py``)."""

    violation_budget: Annotated[float, Field(ge=0, lt=1)] = Field(
        0.02,
        description="Largest share of per-GPU power samples above the cap a run may have "
        "(the study's PPO had 2.27 %).",
    )
    breaker_window_s: PositiveFloat = Field(
        30.0,
        description="No window of this length may have a mean per-GPU power above the cap, s "
        "(what a breaker or a site's power contract sees).",
    )
