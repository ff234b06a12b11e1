"""Config section of the calibrated simulator: ``sim`` (the simulated deployments)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    model_validator,
)

from grpo_power.config.base import (
    ExistingFile,
    PathName,
    PositiveFloat,
    Strict,
)
from grpo_power.config.workload import ModelSize


class DeploymentConfig(Strict):
    """One simulated GRPO deployment of the study (model size x GPUs x sharding).

    Its physics (phase times, gathers) come from the calibration file; this section says what
    the deployment is and how long it runs in the simulator.
    """

    name: PathName = Field(description="Deployment name, e.g. '7b' (used in file names).")
    gpus: Annotated[int, Field(ge=1)] = Field(description="GPUs the model runs on.")
    zero_stage: Literal[0, 3] = Field(
        0, description="DeepSpeed ZeRO stage; 3 = parameters sharded and gathered per forward."
    )
    params_b: PositiveFloat = Field(description="Model parameters, billions.")
    sizes: list[ModelSize] = Field(
        default_factory=list,
        description="workload.size presets this deployment stands for: a real run of one of "
        "these sizes loads this deployment's trained controller (the ppo arm).",
    )
    cap_w: PositiveFloat | None = Field(
        None,
        description="Per-GPU cap of this deployment, W; null = the top-level cap_w. A sharded "
        "deployment draws about half of nameplate, far below a cap meant for one GPU.",
    )
    budget_s: PositiveFloat = Field(
        description="Simulated time budget of one evaluation run, s ('output in a fixed time "
        "budget')."
    )
    training_steps_factor: PositiveFloat = Field(
        1.0,
        description="PPO trains this deployment's controller for controller.total_timesteps x "
        "this (a deployment whose learning curve still rises at the end needs more).",
    )
    budget_tracking: bool | None = Field(
        None,
        description="Train and deploy this deployment's controller with budget tracking "
        "(controller.budget_tracking); null = controller.budget_tracking.enabled.",
    )

    @model_validator(mode="after")
    def _sharding_needs_gpus(self) -> DeploymentConfig:
        if self.zero_stage == 3 and self.gpus < 2:
            raise ValueError(f"deployment {self.name}: zero_stage 3 needs at least 2 GPUs")
        return self


def _default_deployments() -> list[DeploymentConfig]:
    return [
        DeploymentConfig(
            name="7b",
            gpus=1,
            zero_stage=0,
            params_b=7.6,
            sizes=["tiny", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b"],
            budget_s=900.0,
            training_steps_factor=2.0,
            budget_tracking=True,
        ),
        DeploymentConfig(
            name="14b",
            gpus=2,
            zero_stage=3,
            params_b=14.8,
            sizes=["qwen2.5-14b"],
            cap_w=240.0,
            budget_s=1800.0,
            training_steps_factor=2.0,
        ),
        DeploymentConfig(
            name="72b",
            gpus=4,
            zero_stage=3,
            params_b=72.7,
            sizes=["qwen2.5-72b"],
            cap_w=220.0,
            budget_s=3600.0,
            training_steps_factor=3.0,
        ),
    ]


class SimConfig(Strict):
    """The GRPO step simulator (``sim/step_model.py``, ``sim/grpo_sim.py``): deployments and the
    workload's shape.

        Step shape and actuator defaults and bounds are the ``workload`` section's, so a policy
        trained here acts on a real run of the same workload unchanged.
    """

    calibration: ExistingFile | None = Field(
        None,
        description="Calibration file (JSON) written by `grpo-power identify`; null = the "
        "sourced defaults of sim/calibration.py (docs/calibration.md ranges).",
    )
    deployments: list[DeploymentConfig] = Field(default_factory=_default_deployments)
    prompt_tokens: Annotated[int, Field(ge=1)] = Field(
        24,
        description="Prompt length, tokens (the arithmetic task's prompts: 18-20 tokens; "
        "identify measures it from step logs).",
    )
    completion_tokens: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="Length at which completions sample end-of-sequence, tokens (a calibrated "
        "parameter of the trained model); null = never: a random-weight model runs every "
        "completion to max new tokens.",
    )
    completion_tokens_sigma: Annotated[float, Field(ge=0, le=2)] = Field(
        1.0,
        description="Spread of completion lengths about completion_tokens (their median): the "
        "sigma of a lognormal (reasoning RL: p99 about 10x the median), each completion "
        "truncated at max new tokens, a generate call lasting until its longest completion "
        "ends; 0 = all end at completion_tokens (docs/calibration.md 'completion lengths').",
    )
    step_jitter: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.03, description="Relative standard deviation of each step's phase times."
    )
    group_sizes: list[Annotated[int, Field(ge=2)]] = Field(
        default_factory=lambda: [2, 4, 8, 16],
        description="num_generations levels the authority stage sweeps (fixed per run in TRL).",
    )
    sweep_s: PositiveFloat = Field(
        600.0, description="Simulated seconds measured per actuator level in authority sweeps."
    )
    sweep_min_steps: Annotated[int, Field(ge=1)] = Field(
        4, description="Steps measured at least per sweep level (slow levels outlast sweep_s)."
    )

    @model_validator(mode="after")
    def _unique_names(self) -> SimConfig:
        names = [d.name for d in self.deployments]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"deployments need unique names, got {names}")
        return self

    def deployment(self, name: str) -> DeploymentConfig:
        """The deployment called ``name``; the error lists the configured ones."""
        for deployment in self.deployments:
            if deployment.name == name:
                return deployment
        raise ValueError(
            f"deployment: unknown deployment {name!r}; expected one of the config's "
            f"sim.deployments: {[d.name for d in self.deployments]}"
        )
