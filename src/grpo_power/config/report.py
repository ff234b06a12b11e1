"""Config section of the report stage: ``report`` (title, figure resolution, what is drawn)."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
)

from grpo_power.config.base import (
    PositiveFloat,
    Strict,
)


class ReportConfig(Strict):
    """Figures and the HTML report (the report stage)."""

    title: str = Field(
        "GRPO power: measurement, control, fleet provisioning and economics",
        description="Title of the HTML report.",
    )
    dpi: Annotated[int, Field(ge=50, le=600)] = Field(200, description="PNG resolution, dpi.")
    trace_s: PositiveFloat = Field(
        60.0, description="Seconds of each arm's power trace the trace figure shows."
    )
    max_points: Annotated[int, Field(ge=100)] = Field(
        20_000,
        description="Samples per arm and deployment drawn in distribution figures (evenly "
        "thinned beyond this).",
    )
