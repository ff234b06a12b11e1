"""Rule-based controllers: a fixed setting, and the classic threshold (AIMD) feedback peer.

A controller is any object with ``decide(observation) -> Action``; the learned PPO controller
implements the same method. A controller that keeps state between decisions also implements
:class:`StatefulController`, so a resumed run continues where it stopped.
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Protocol, runtime_checkable

from grpo_power.config import ActuatorBounds, ThresholdArmConfig
from grpo_power.control.contract import Action, Observation


class Controller(Protocol):
    """Chooses the actuator values of the next GRPO step."""

    def decide(self, observation: Observation) -> Action: ...


@runtime_checkable
class StatefulController(Protocol):
    """A controller whose decisions depend on earlier ones; its state is JSON-like."""

    def decide(self, observation: Observation) -> Action: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class FixedController:
    """Holds one setting for the whole run (the uncontrolled, fixed and fixed-safe arms)."""

    def __init__(
        self,
        concurrency: int,
        max_new_tokens: int,
        train_micro_batch: int | None = None,
        pause_s: int | None = None,
    ) -> None:
        """The setting to hold; an actuator given as None is left as the run has it."""
        self.action = Action(
            concurrency=concurrency,
            max_new_tokens=max_new_tokens,
            train_micro_batch=train_micro_batch,
            pause_s=pause_s,
        )

    def decide(self, observation: Observation) -> Action:
        return self.action


class ThresholdController:
    """Multiplicative decrease / additive increase of concurrency on recent p95 power.

    Above ``high_frac_of_cap * cap`` concurrency is multiplied by ``decrease_factor`` (rounded
    down, at least the lower bound); below ``low_frac_of_cap * cap`` it grows by
    ``increase_step``; in between it holds. Max new tokens stays at its start value.
    """

    def __init__(
        self,
        settings: ThresholdArmConfig,
        bounds: ActuatorBounds,
        start_concurrency: int,
        max_new_tokens: int,
    ) -> None:
        self.settings = settings
        self.bounds = bounds
        self.concurrency = start_concurrency
        self.max_new_tokens = max_new_tokens

    def decide(self, observation: Observation) -> Action:
        s = self.settings
        if observation.samples > 0:
            if observation.p95_power_w > s.high_frac_of_cap * observation.cap_w:
                self.concurrency = math.floor(self.concurrency * s.decrease_factor)
            elif observation.p95_power_w < s.low_frac_of_cap * observation.cap_w:
                self.concurrency += s.increase_step
        self.concurrency = min(self.bounds.max, max(self.bounds.min, self.concurrency))
        return Action(concurrency=self.concurrency, max_new_tokens=self.max_new_tokens)

    def state_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.concurrency = int(state["concurrency"])


class SegmentController:
    """Holds a setting per segment of simulated time (the oracle's hindsight plan).

    A simulator-only controller: it is told the time (``at``), which a real run's controller
    never is; ``decide`` gives the first segment's setting.

    Args:
        starts_s: segment starts, s, ascending (the first 0).
        actions: the setting of each segment.
        power_limits_w: the hardware power limit of each segment (None: no limit).
        powers_w: each segment's mean power under its setting, W (None: never looks ahead).
    """

    def __init__(
        self,
        starts_s: list[float],
        actions: list[Action],
        power_limits_w: list[float | None],
        powers_w: list[float] | None = None,
    ) -> None:
        self.starts_s = list(starts_s)
        self.actions = list(actions)
        self.power_limits_w = list(power_limits_w)
        self.powers_w = powers_w

    def at(self, t_s: float, ahead_s: float = 0.0) -> tuple[Action, float | None]:
        """The setting and power limit for a step from ``t_s`` expected to last ``ahead_s``:
        of the segments it spans, the one of the lowest power (a cap that drops within a step
        holds from its time, and hindsight knows when it drops), else the segment holding at
        ``t_s``."""
        first = max(0, bisect.bisect_right(self.starts_s, t_s) - 1)
        last = max(first, bisect.bisect_right(self.starts_s, t_s + ahead_s) - 1)
        i = first
        if self.powers_w is not None:
            i = min(range(first, last + 1), key=lambda j: self.powers_w[j])  # type: ignore[index]
        return self.actions[i], self.power_limits_w[i]

    def decide(self, observation: Observation) -> Action:
        return self.actions[0]
