"""Workloads and caps that change over a run: piecewise-constant conditions in simulated time.

A :class:`Schedule` is a list of segments, each from a start time to the next one's, holding
:class:`Conditions`:

- ``cap_frac``: the cap as a share of the deployment's cap (demand response: 0.7 for ten
  minutes, then back to 1);
- ``completion_tokens``: the length at which completions end (end of sequence), tokens; None =
  every completion runs to max new tokens (a random-weight model never samples EOS). Lengths
  that grow or shrink over training are segments with different values;
- ``slowdown``: thermal or co-tenant derating: every phase lasts ``slowdown`` times longer and
  draws ``1 / slowdown`` of its power above idle (lower clocks, about the same energy per work).

Segment starts are given as shares of the run's time budget, so a tuning run (a share of the
budget) sees the same shape as the evaluation run. Everything here is simulated.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Conditions:
    """What holds during one segment (see the module docstring)."""

    cap_frac: float = 1.0
    completion_tokens: int | None = None
    slowdown: float = 1.0


@dataclass(frozen=True)
class Schedule:
    """Segments of conditions over a run of ``budget_s`` seconds (starts ascending, the first 0)."""

    starts_s: tuple[float, ...]
    conditions: tuple[Conditions, ...]
    budget_s: float

    @classmethod
    def constant(cls, budget_s: float, completion_tokens: int | None = None) -> Schedule:
        """One segment: the same conditions for the whole run."""
        return cls((0.0,), (Conditions(completion_tokens=completion_tokens),), budget_s)

    @classmethod
    def from_segments(
        cls,
        segments: Iterable[Any],
        budget_s: float,
        completion_tokens: int | None = None,
    ) -> Schedule:
        """A schedule from config segments (``start_frac``, ``cap_frac``, ``completion_tokens``,
        ``slowdown``; ``evaluate.scenarios[].schedule``); none = constant. A segment without a
        completion length keeps ``completion_tokens`` (``sim.completion_tokens``)."""
        items = sorted(segments, key=lambda s: s.start_frac)
        if not items:
            return cls.constant(budget_s, completion_tokens)
        starts = [float(s.start_frac) * budget_s for s in items]
        conditions = [
            Conditions(
                cap_frac=float(s.cap_frac),
                completion_tokens=(
                    s.completion_tokens if s.completion_tokens is not None else completion_tokens
                ),
                slowdown=float(s.slowdown),
            )
            for s in items
        ]
        if starts[0] > 0:
            starts.insert(0, 0.0)
            conditions.insert(0, Conditions(completion_tokens=completion_tokens))
        return cls(tuple(starts), tuple(conditions), budget_s)

    def index(self, t_s: float) -> int:
        """The segment holding at ``t_s``."""
        return max(0, bisect.bisect_right(self.starts_s, t_s) - 1)

    def cap_fracs(self, t_s: np.ndarray) -> np.ndarray:
        """The cap's share in force at each of the times ``t_s`` (a step's samples: a cap that
        drops within a step holds from its time, not from the next step)."""
        index = np.maximum(np.searchsorted(self.starts_s, t_s, side="right") - 1, 0)
        return np.array([c.cap_frac for c in self.conditions])[index]

    def lowest_cap_frac(self, start_s: float, end_s: float) -> float:
        """The lowest share of the cap in force at some time from ``start_s`` to ``end_s``."""
        first, last = self.index(start_s), self.index(end_s)
        return min(c.cap_frac for c in self.conditions[first : last + 1])

    def at(self, t_s: float) -> Conditions:
        """The conditions at ``t_s``."""
        return self.conditions[self.index(t_s)]

    def segments(self) -> list[tuple[float, float, Conditions]]:
        """(start s, end s, conditions) of every segment within the budget."""
        ends = [*self.starts_s[1:], self.budget_s]
        return [
            (start, min(end, self.budget_s), c)
            for start, end, c in zip(self.starts_s, ends, self.conditions, strict=True)
            if start < self.budget_s
        ]

    def scaled(self, budget_s: float) -> Schedule:
        """The same shape over a run of another length (tuning runs)."""
        factor = budget_s / self.budget_s
        return Schedule(tuple(s * factor for s in self.starts_s), self.conditions, budget_s)
