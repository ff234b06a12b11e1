"""Config section of the real GRPO workload: ``workload`` (model, task, actuator bounds)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    Field,
    model_validator,
)

from grpo_power.config.base import (
    PositiveFloat,
    Strict,
)

# The model sizes a real run trains (each names a model built or loaded by workload/models.py).
ModelSize = Literal[
    "tiny", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-72b"
]


# The actuators a controller may change between the steps of a run; each has a default field
# and ``<name>_bounds`` here (sim/step_model.py names the same ones: ONLINE_ACTUATORS).
ONLINE_ACTUATORS = ("concurrency", "max_new_tokens", "train_micro_batch", "pause_s")


class ActuatorBounds(Strict):
    """Inclusive range a controller may set an actuator to; actions outside are clamped (0 is
    allowed for the pause; the actuators that count sequences or tokens start at 1)."""

    min: Annotated[int, Field(ge=0)]
    max: Annotated[int, Field(ge=1)]

    @model_validator(mode="after")
    def _ordered(self) -> ActuatorBounds:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self

    def levels(self) -> list[int]:
        """The levels an actuator is swept and searched at: its bounds and the powers of two
        between them, ascending (``min=0``: 0, then 1, 2, 4, ...)."""
        levels = {self.min, self.max}
        value = 1
        while value <= self.max:
            if value >= self.min:
                levels.add(value)
            value *= 2
        return sorted(levels)


class WorkloadConfig(Strict):
    """The GRPO run: model preset, task volume, TRL settings and actuator defaults and bounds."""

    size: ModelSize = Field(
        "tiny", description="Model preset (architecture shapes, random weights)."
    )
    model_path: str | None = Field(
        None, description="Local checkpoint folder or hub id to load instead of random weights."
    )
    cache_dir: Path = Field(
        Path(".cache/grpo-power"), description="Where the tiny model and tokenizer are built."
    )
    steps: Annotated[int, Field(ge=1)] = Field(30, description="Optimizer steps per run.")
    prompts_per_step: Annotated[int, Field(ge=1)] = 4
    num_generations: Annotated[int, Field(ge=2)] = Field(
        8, description="GRPO group size; fixed for a run (TRL builds its sampler once)."
    )
    train_micro_batch: Annotated[int, Field(ge=1)] = Field(
        4,
        description="Default sequences per training forward/backward chunk: the step's "
        "sequences are trained in chunks of this many (the last one smaller when it does not "
        "divide them), gradients accumulated inside the step, so the gradient does not depend "
        "on it. Occupancy of the training phase; an online actuator.",
    )
    concurrency: Annotated[int, Field(ge=1)] = Field(
        32,
        description="Default generation concurrency: sequences decoded together (fixed arm). "
        "TRL's own behaviour is one generate call for the whole step (= sequences per step).",
    )
    max_new_tokens: Annotated[int, Field(ge=1)] = Field(
        32, description="Default completion length limit, tokens (fixed arm)."
    )
    pause_s: Annotated[int, Field(ge=0)] = Field(
        0,
        description="Default pause before each step, whole seconds, the GPUs idle (an online "
        "actuator: the study's inter-batch pause).",
    )
    concurrency_bounds: ActuatorBounds = Field(
        default_factory=lambda: ActuatorBounds(min=1, max=32)
    )
    max_new_tokens_bounds: ActuatorBounds = Field(
        default_factory=lambda: ActuatorBounds(min=8, max=64)
    )
    train_micro_batch_bounds: ActuatorBounds = Field(
        default_factory=lambda: ActuatorBounds(min=1, max=8),
        description="Training chunk sizes a controller may set (max: twice the default, what "
        "memory is assumed to allow; a size above the sequences per step trains them in one "
        "chunk).",
    )
    pause_s_bounds: ActuatorBounds = Field(
        default_factory=lambda: ActuatorBounds(min=0, max=8),
        description="Pauses before a step a controller may set, whole seconds.",
    )
    learning_rate: PositiveFloat = 1e-5
    checkpoint_every_steps: Annotated[int, Field(ge=0)] = Field(
        10,
        description="Save the trainer and controller state every N steps, so a preempted, "
        "requeued or killed run resumes from there (0: only when a stop signal arrives).",
    )
    report_to: list[str] = Field(
        default_factory=lambda: ["none"],
        description="transformers' report_to for the run's logs (TRL's metrics and power/*): "
        "none, tensorboard (events in <run>/tensorboard), wandb, trackio, codecarbon, ...",
    )

    @property
    def sequences_per_step(self) -> int:
        """Completions generated per step on each process."""
        return self.prompts_per_step * self.num_generations

    @model_validator(mode="after")
    def _defaults_within_bounds(self) -> WorkloadConfig:
        # every bad actuator, a line each (validation_problems reports each as its own field)
        problems = []
        for name in ONLINE_ACTUATORS:
            value, bounds = getattr(self, name), getattr(self, f"{name}_bounds")
            if name != "pause_s" and bounds.min < 1:
                problems.append(f"{name}_bounds.min: {bounds.min} must be at least 1")
            elif not bounds.min <= value <= bounds.max:
                problems.append(
                    f"{name}: {value} lies outside {name}_bounds [{bounds.min}, {bounds.max}]"
                )
        if self.concurrency_bounds.max > self.sequences_per_step:
            problems.append(
                f"concurrency_bounds.max: {self.concurrency_bounds.max} exceeds the sequences "
                "generated per step (prompts_per_step x num_generations = "
                f"{self.sequences_per_step})"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self
