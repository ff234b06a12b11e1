"""Config section of the arms of a real run (``arms``) and the one list of arm names: the
real arms (``ARM_NAMES``) and, in the simulator, those and the oracle (``SIM_ARM_NAMES``)."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import (
    Field,
    model_validator,
)

from grpo_power.config.base import (
    PositiveFloat,
    Strict,
)
from grpo_power.config.workload import WorkloadConfig


class ThresholdArmConfig(Strict):
    """Classic feedback peer: multiplicative decrease / additive increase of concurrency."""

    high_frac_of_cap: Annotated[float, Field(gt=0, le=1.5)] = Field(
        1.0, description="Decrease when recent p95 power exceeds this share of the cap."
    )
    low_frac_of_cap: Annotated[float, Field(gt=0, le=1.5)] = Field(
        0.9, description="Increase when recent p95 power is below this share of the cap."
    )
    decrease_factor: Annotated[float, Field(gt=0, lt=1)] = 0.5
    increase_step: Annotated[int, Field(ge=1)] = 1

    @model_validator(mode="after")
    def _low_below_high(self) -> ThresholdArmConfig:
        if self.low_frac_of_cap >= self.high_frac_of_cap:
            raise ValueError("low_frac_of_cap must be below high_frac_of_cap")
        return self


class FixedSafeArmConfig(Strict):
    """How the fixed-safe arm's static setting is calibrated."""

    calibration_steps: Annotated[int, Field(ge=1)] = Field(
        10, description="GRPO steps measured per candidate setting."
    )
    percentile: Annotated[float, Field(gt=50, lt=100)] = Field(
        99.0, description="Power percentile that must stay under the cap."
    )
    confidence: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.95, description="Confidence of the percentile's upper bound that is compared to the cap."
    )


# The arms of a real run (`grpo-power run --arm`): the one list of their names. ``fixed-half`` is
# static at half the fixed arm's concurrency (the study's static batch 4 beside its batch 8);
# ``hwcap`` is the workload-blind baseline (uncontrolled settings under the GPU power limit);
# ``ppo+hwcap`` is the hardware limit as a tier under the workload controller, for sites where
# users may set it.
ArmName = Literal[
    "uncontrolled", "fixed", "fixed-half", "fixed-safe", "threshold", "ppo", "hwcap", "ppo+hwcap"
]
ARM_NAMES: tuple[str, ...] = get_args(ArmName)
# The arms that set the GPUs' power limit to the cap.
HARDWARE_LIMIT_ARMS = frozenset({"hwcap", "ppo+hwcap"})
# The arms whose setting the config fixes for the whole run (:func:`static_setting`).
STATIC_ARMS = ("uncontrolled", "hwcap", "fixed", "fixed-half")


def static_setting(arm: str, workload: WorkloadConfig) -> tuple[int, int]:
    """The (concurrency, max new tokens) a static arm holds: ``uncontrolled`` and ``hwcap`` the
    upper bounds, ``fixed`` the workload's defaults, ``fixed-half`` half the default concurrency
    (at least its lower bound; the study's static generation batch 4 beside its batch 8).

    Raises:
        ValueError: ``arm`` is not one of :data:`STATIC_ARMS`.
    """
    if arm in ("uncontrolled", "hwcap"):
        return workload.concurrency_bounds.max, workload.max_new_tokens_bounds.max
    if arm == "fixed":
        return workload.concurrency, workload.max_new_tokens
    if arm == "fixed-half":
        half = max(workload.concurrency_bounds.min, workload.concurrency // 2)
        return half, workload.max_new_tokens
    raise ValueError(f"arm {arm!r} has no static setting; expected one of {STATIC_ARMS}")


class ArmsConfig(Strict):
    """Which arms the study runs, and their settings."""

    run: list[ArmName] = Field(
        default_factory=lambda: [
            "uncontrolled",
            "fixed",
            "fixed-half",
            "fixed-safe",
            "threshold",
            "ppo",
        ],
        min_length=1,
    )
    observation_window_s: PositiveFloat = Field(
        5.0, description="Power statistics a controller sees cover this many recent seconds."
    )
    staleness_s: PositiveFloat = Field(
        2.0,
        description="When the newest power sample is older than this (s), the controller is "
        "bypassed and the run holds the fail-safe setting (the fixed-safe one) until fresh "
        "samples return.",
    )
    threshold: ThresholdArmConfig = Field(default_factory=ThresholdArmConfig)
    fixed_safe: FixedSafeArmConfig = Field(default_factory=FixedSafeArmConfig)


# The simulator's arms: the real ones and the oracles (simulator-only limits): ``oracle`` over the
# workload actuators, ``oracle+hwcap`` with the GPU power limit too (the limit of the arms that
# may use the hardware tier).
SimArmName = Literal[ArmName, "oracle", "oracle+hwcap"]
ORACLE_ARMS = ("oracle", "oracle+hwcap")


def oracle_for(arm: str) -> str:
    """The oracle an arm is compared with: ``oracle+hwcap`` for arms of the hardware tier."""
    return "oracle+hwcap" if uses_hardware_tier(arm) else "oracle"


SIM_ARM_NAMES: tuple[str, ...] = get_args(SimArmName)


def power_limit_w(arm: str, cap_w: float, trained_frac: float | None = None) -> float | None:
    """The GPU power limit a run of ``arm`` sets, W: the cap for ``hwcap``; for ``ppo+hwcap``
    the share of the cap its controller was trained under (``trained_frac``, its
    ``power_limit_frac``); None for arms that leave the limit alone."""
    if arm not in HARDWARE_LIMIT_ARMS:
        return None
    return cap_w * (1.0 if trained_frac is None else trained_frac)


def uses_hardware_tier(arm: str) -> bool:
    """Whether an arm sets the GPU power limit (``hwcap``, and a ``+hwcap`` tier under a
    workload controller such as ``ppo+hwcap``)."""
    return "hwcap" in arm.split("+")
