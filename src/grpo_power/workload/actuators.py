"""The actuators a controller changes between GRPO steps, behind one small interface.

``concurrency`` (occupancy): sequences generated together, read by
:class:`~grpo_power.workload.trainer.PowerAwareGRPOTrainer` on every generation call.
``max_new_tokens`` (volume): where the trainer's generation reads it on every call:
``trainer.generation_config.max_new_tokens`` (transformers' ``generate()``), or, on a
``trl.GRPOTrainer`` with ``use_vllm=True`` (colocated engine or server),
``trainer.vllm_generation.max_completion_length``. ``train_micro_batch`` (training
occupancy): the trainer's chunk of the training pass, read on every step (the gradient does not
depend on it). ``pause_s``: seconds the GPUs idle before the step; held here and slept by the
controller hook (:mod:`grpo_power.workload.hook`), so it exists only where pause bounds are
given. Values outside the configured bounds are clamped, and the clamp is reported. The stock
``trl.GRPOTrainer`` has no concurrency and no training chunk, and a trainer that does not
generate (a plain HF ``Trainer``, TRL's ``SFTTrainer``) no max new tokens either: there a
requested value is reported as not applied (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_power.config import ActuatorBounds
from grpo_power.control.contract import Action

ACTUATORS = ("concurrency", "max_new_tokens", "train_micro_batch", "pause_s")
_ON_TRAINER = ("concurrency", "train_micro_batch")  # attributes of PowerAwareGRPOTrainer


def vllm_generation(trainer: Any) -> Any | None:
    """The ``trl.generation.vllm_generation.VLLMGeneration`` a ``trl.GRPOTrainer`` with
    ``use_vllm=True`` generates with (outside the model), else None."""
    engine = getattr(trainer, "vllm_generation", None)
    return engine if engine is not None and getattr(trainer, "use_vllm", False) else None


def _generation_length(trainer: Any) -> tuple[Any, str] | None:
    """Where ``trainer``'s generation reads its max new tokens on every call, as (object,
    attribute): TRL's vLLM generation (``max_completion_length``), else transformers'
    ``generation_config`` (``max_new_tokens``); None when it does not generate."""
    engine = vllm_generation(trainer)
    if engine is not None:
        return engine, "max_completion_length"
    config = getattr(trainer, "generation_config", None)
    if config is not None:
        return config, "max_new_tokens"
    return None


@dataclass(frozen=True)
class AppliedAction:
    """What was asked, what was set, and which actuators were clamped to their bounds."""

    requested: dict[str, int | None]
    applied: dict[str, int | None]  # None: the trainer has no such actuator
    clamped: dict[str, bool]

    def to_dict(self) -> dict[str, Any]:
        """Flat fields for the step log."""
        row: dict[str, Any] = {}
        for name in ACTUATORS:
            row[f"action_{name}"] = self.requested[name]
            row[name] = self.applied[name]
            row[f"clamped_{name}"] = self.clamped[name]
        return row


def trainer_settings(trainer: Any) -> dict[str, int]:
    """The present values of the actuators ``trainer`` has (max new tokens, concurrency, the
    training chunk; not the pause, which :class:`Actuators` holds)."""
    settings: dict[str, int] = {}
    length = _generation_length(trainer)
    if length is not None:
        settings["max_new_tokens"] = int(getattr(*length))
    for name in _ON_TRAINER:
        value = getattr(trainer, name, None)
        if value is not None:
            settings[name] = int(value)
    return settings


class Actuators:
    """Reads and sets, within bounds, the actuators a trainer has: all of them on a
    :class:`PowerAwareGRPOTrainer`, max new tokens (and the pause) on the stock
    ``GRPOTrainer``, the pause alone on a trainer that does not generate.

    Args:
        trainer: the trainer whose actuators are set.
        bounds: bounds of each actuator; the pause is available only when it has bounds.
        pause_s: the initial pause, s.
    """

    def __init__(self, trainer: Any, bounds: dict[str, ActuatorBounds], pause_s: int = 0) -> None:
        self.trainer = trainer
        self._length = _generation_length(trainer)
        on_trainer = trainer_settings(trainer)  # the pause is held here, given its bounds
        self.available = tuple(
            name
            for name in ACTUATORS
            if name in on_trainer or (name == "pause_s" and name in bounds)
        )
        missing = set(self.available) - set(bounds)
        if missing:
            raise ValueError(f"actuator bounds missing for {sorted(missing)}")
        self.bounds = bounds
        self.pause_s = int(pause_s)

    def values(self) -> dict[str, int]:
        """Current values of the available actuators."""
        values = trainer_settings(self.trainer)
        if "pause_s" in self.available:
            values["pause_s"] = self.pause_s
        return values

    def apply(self, action: Action) -> AppliedAction:
        """Set every available actuator the action names, clamped to its bounds; others keep
        their value."""
        current = self.values()
        requested = {name: getattr(action, name) for name in ACTUATORS}
        applied: dict[str, int | None] = {name: None for name in ACTUATORS}
        clamped = {name: False for name in ACTUATORS}
        for name in self.available:
            wanted = current[name] if requested[name] is None else int(requested[name])
            bounds = self.bounds[name]
            applied[name] = min(bounds.max, max(bounds.min, wanted))
            clamped[name] = applied[name] != wanted
        for name in _ON_TRAINER:
            if name in self.available:
                setattr(self.trainer, name, applied[name])
        if "pause_s" in self.available:
            self.pause_s = int(applied["pause_s"])  # type: ignore[arg-type]
        if self._length is not None:
            setattr(*self._length, applied["max_new_tokens"])
        return AppliedAction(requested=requested, applied=applied, clamped=clamped)
