"""The actuators a controller changes between GRPO steps, behind one small interface.

``concurrency`` (occupancy): sequences generated together, read by
:class:`~grpo_power.workload.trainer.PowerAwareGRPOTrainer` on every generation call.
``max_new_tokens`` (volume): ``trainer.generation_config.max_new_tokens``, read on every
``generate()`` call. Values outside the configured bounds are clamped, and the clamp is reported.
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
    applied: dict[str, int]
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
    """Reads and sets the actuators of a :class:`PowerAwareGRPOTrainer` within bounds."""

    def __init__(self, trainer: Any, bounds: dict[str, ActuatorBounds]) -> None:
        missing = set(ACTUATORS) - set(bounds)
        if missing:
            raise ValueError(f"actuator bounds missing for {sorted(missing)}")
        self.trainer = trainer
        self.bounds = bounds

    def values(self) -> dict[str, int]:
        """Current actuator values."""
        return {
            "concurrency": int(self.trainer.concurrency),
            "max_new_tokens": int(self.trainer.generation_config.max_new_tokens),
        }

    def apply(self, action: Action) -> AppliedAction:
        """Set every actuator the action names, clamped to its bounds; others keep their value."""
        current = self.values()
        requested = {name: getattr(action, name) for name in ACTUATORS}
        applied, clamped = {}, {}
        for name in ACTUATORS:
            wanted = current[name] if requested[name] is None else int(requested[name])
            bounds = self.bounds[name]
            applied[name] = min(bounds.max, max(bounds.min, wanted))
            clamped[name] = applied[name] != wanted
        self.trainer.concurrency = applied["concurrency"]
        self.trainer.generation_config.max_new_tokens = applied["max_new_tokens"]
        return AppliedAction(requested=requested, applied=applied, clamped=clamped)
