"""Config section of the arm-vs-arm evaluation in the simulator: ``evaluate`` (seeds, arms,
the threshold arm's tuning grid, the scenarios)."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from grpo_power.config.arms import SIM_ARM_NAMES, SimArmName
from grpo_power.config.base import (
    ExistingFile,
    PathName,
    PositiveFloat,
    Strict,
)


class ThresholdTuningConfig(Strict):
    """Grid the threshold arm is tuned over in the simulator (best reward on tuning seeds)."""

    high_frac_of_cap: list[Annotated[float, Field(gt=0, le=1.5)]] = Field(
        default_factory=lambda: [0.95, 1.0, 1.05, 1.1]
    )
    low_frac_of_cap: list[Annotated[float, Field(gt=0, le=1.5)]] = Field(
        default_factory=lambda: [0.85, 0.9, 0.95]
    )
    decrease_factor: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=lambda: [0.5, 0.75]
    )


class ScheduleSegmentConfig(Strict):
    """One segment of a scenario's schedule (``sim/schedule.py``): from ``start_frac`` of the
    run's time budget to the next segment's start."""

    start_frac: Annotated[float, Field(ge=0, lt=1)] = Field(
        description="Start of the segment as a share of the run's time budget."
    )
    cap_frac: Annotated[float, Field(gt=0, le=2)] = Field(
        1.0, description="The cap during the segment as a share of the deployment's cap."
    )
    completion_tokens: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="Completions end (EOS) at this length during the segment, tokens; null = "
        "sim.completion_tokens.",
    )
    slowdown: Annotated[float, Field(ge=1, le=3)] = Field(
        1.0,
        description="Thermal or co-tenant derating: phases last this many times longer and draw "
        "1/slowdown of their power above idle.",
    )


class ScenarioConfig(Strict):
    """An evaluation scenario the controllers were not tuned on."""

    name: PathName
    calibration: ExistingFile | None = Field(
        None, description="Another calibration; null = the study's."
    )
    cap_w: PositiveFloat | None = Field(
        None, description="Another cap for every deployment evaluated, W; null = their caps."
    )
    deployments: list[str] | None = Field(
        None, description="Deployments evaluated in the scenario; null = all."
    )
    retrain: bool = Field(True, description="Also retrain PPO in the scenario and report both.")
    schedule: list[ScheduleSegmentConfig] = Field(
        default_factory=list,
        description="Conditions changing over each run (cap schedule, completion lengths, "
        "derating); empty = constant.",
    )
    changing: bool = Field(
        False,
        description="A changing-workload or cap-schedule scenario (its PPO target is 110 % of "
        "the best classic peer within the budget, not 100 %).",
    )

    @field_validator("schedule")
    @classmethod
    def _segments_start_apart(
        cls, schedule: list[ScheduleSegmentConfig]
    ) -> list[ScheduleSegmentConfig]:
        """Two segments that start together leave one of them no time."""
        starts = [segment.start_frac for segment in schedule]
        if len(set(starts)) != len(starts):
            raise ValueError(f"expected each segment's start_frac once, got {starts}")
        return schedule


class EvaluateConfig(Strict):
    """Arm-vs-arm evaluation in the simulator (``analysis/evaluate.py``)."""

    seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0, 1, 2, 3, 4],
        min_length=5,
        description="Seeds every arm runs with on every deployment (at least 5).",
    )
    arms: list[SimArmName] = Field(
        default_factory=lambda: list(SIM_ARM_NAMES),
        min_length=1,
    )
    tuning_seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [1000, 1001],
        min_length=1,
        description="Seeds of the runs that tune fixed-safe and threshold (never evaluated).",
    )
    tuning_budget_frac: Annotated[float, Field(gt=0, le=1)] = Field(
        0.25, description="Tuning runs last this share of a deployment's budget_s."
    )
    exceedance_window_s: PositiveFloat = Field(
        0.5, description="Averaging window of the reported exceedance, s (the study: 0.5 s)."
    )
    confidence: Annotated[float, Field(gt=0.5, lt=1)] = Field(
        0.95, description="Confidence level of the intervals over seeds."
    )
    threshold_grid: ThresholdTuningConfig = Field(default_factory=ThresholdTuningConfig)
    oracle_power_limit_fracs: list[Annotated[float, Field(gt=0, le=2)]] = Field(
        default_factory=lambda: [0.9, 0.95, 1.0, 1.05, 1.1],
        description="Hardware power limits the oracle+hwcap arm searches, as shares of the cap "
        "(with no limit): the limit of the arms of the hardware tier (hwcap, ppo+hwcap).",
    )
    oracle_finalists: Annotated[int, Field(ge=1)] = Field(
        3,
        description="Best screened settings per segment the oracle scores on every evaluation "
        "seed over the whole budget.",
    )
    scenarios: list[ScenarioConfig] = Field(
        default_factory=lambda: [
            ScenarioConfig(name="7b-cap-305w", cap_w=305.0, deployments=["7b"])
        ],
        description="Scenarios evaluated besides the study's (as is, and after retraining).",
    )

    @field_validator("seeds", "tuning_seeds")
    @classmethod
    def _each_seed_once(cls, seeds: list[int]) -> list[int]:
        """A seed given twice is one run counted twice: its interval would narrow for nothing."""
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"expected each seed once, got {seeds}")
        return seeds

    @model_validator(mode="after")
    def _tuning_seeds_never_evaluated(self) -> EvaluateConfig:
        """The classic peers are tuned on runs the evaluation never scores (a fair comparison)."""
        shared = sorted(set(self.seeds) & set(self.tuning_seeds))
        if shared:
            raise ValueError(
                f"tuning_seeds: {shared} also in seeds; expected seeds the evaluation never "
                "runs (the peers would be scored on the runs they were tuned on)"
            )
        return self
