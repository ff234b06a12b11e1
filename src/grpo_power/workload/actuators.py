"""The actuators a controller changes between GRPO steps, behind one small interface.

``concurrency`` (occupancy): sequences generated together, read by
:class:`~grpo_power.workload.trainer.PowerAwareGRPOTrainer` on every generation call.
``max_new_tokens`` (volume): ``trainer.generation_config.max_new_tokens``, read on every
``generate()`` call. Values outside the configured bounds are clamped, and the clamp is reported.
The stock ``trl.GRPOTrainer`` has no concurrency: there only max new tokens is driven, and a
requested concurrency is reported as not applied (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_power.config import ActuatorBounds
from grpo_power.control.contract import Action

ACTUATORS = ("concurrency", "max_new_tokens")


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


class Actuators:
    """Reads and sets, within bounds, the actuators a trainer has: both on a
    :class:`PowerAwareGRPOTrainer`, max new tokens alone on the stock ``GRPOTrainer``."""

    def __init__(self, trainer: Any, bounds: dict[str, ActuatorBounds]) -> None:
        self.trainer = trainer
        self.available = tuple(
            name for name in ACTUATORS if name != "concurrency" or hasattr(trainer, "concurrency")
        )
        missing = set(self.available) - set(bounds)
        if missing:
            raise ValueError(f"actuator bounds missing for {sorted(missing)}")
        self.bounds = bounds

    def values(self) -> dict[str, int]:
        """Current values of the available actuators."""
        values = {"max_new_tokens": int(self.trainer.generation_config.max_new_tokens)}
        if "concurrency" in self.available:
            values["concurrency"] = int(self.trainer.concurrency)
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
        if "concurrency" in self.available:
            self.trainer.concurrency = applied["concurrency"]
        self.trainer.generation_config.max_new_tokens = applied["max_new_tokens"]
        return AppliedAction(requested=requested, applied=applied, clamped=clamped)
