"""The oracle arm (simulator only): the best setting per segment, found in hindsight by the
simulator's own outcomes.

The oracle is the limit the other arms are compared with, not a deployable controller. It
searches every online actuator the simulator declares (``sim/step_model.py:
ONLINE_ACTUATORS``, each within ``workload.<name>_bounds``) and, where an evaluated arm may use
the hardware tier, the GPU power limit (``evaluate.oracle_power_limit_fracs`` of the cap, and
no limit). Each setting is scored by simulated runs (:class:`~grpo_power.sim.grpo_sim.SimRun`:
sensor window, jitter, prefill bursts, noise) judged by the study's objective
(``analysis/objective.py``: most tokens within the violation budget, no breaker window above
the cap), the same code that scores the arms. When the workload or the cap changes over the
run (a schedule), each segment is judged on its own samples and gets its own best setting.

The full product of every integer value of every actuator (and the limits) is too large to
simulate (7b: 32 x 57 x 5 settings), so the search is:

1. screen the product of each actuator's levels (``ActuatorBounds.levels()``: bounds and powers
   of two) x the power limits, on the first evaluation seed over ``tuning_budget_frac`` of the
   budget;
2. refine each segment's best by trying every integer value of each actuator in turn, the
   others held (coordinate search, same runs);
3. score the ``evaluate.oracle_finalists`` best per segment on every evaluation seed over the
   whole budget, and keep the best (hindsight on the seeds the arms are evaluated on).

When no setting meets the budget in a segment, the cap is infeasible there with these
actuators: the oracle holds the setting with the lowest mean power and says so. Everything it
produces is simulated.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from grpo_power.analysis.objective import INFEASIBLE, Outcome, meets_budget, pooled, rank_key
from grpo_power.config import Config
from grpo_power.control.contract import Action
from grpo_power.control.controllers import FixedController, SegmentController
from grpo_power.control.simulate import segment_outcomes, simulate
from grpo_power.sim.schedule import Schedule
from grpo_power.sim.step_model import ONLINE_ACTUATORS, Physics

Setting = tuple[tuple[int, ...], float | None]  # actuator values in ONLINE_ACTUATORS order, limit


@dataclass(frozen=True)
class SegmentChoice:
    """The oracle's setting for one segment and its pooled outcome over the evaluation seeds."""

    start_s: float
    end_s: float
    values: dict[str, int]
    power_limit_w: float | None
    outcome: Outcome
    feasible: bool


@dataclass(frozen=True)
class OracleResult:
    """The oracle's plan: one choice per segment, and what was searched."""

    segments: list[SegmentChoice]
    searched: int

    @property
    def feasible(self) -> bool:
        return all(s.feasible for s in self.segments)

    def controller(self) -> SegmentController:
        """The plan as a controller (switches settings at segment starts)."""
        return SegmentController(
            [s.start_s for s in self.segments],
            [Action(**s.values) for s in self.segments],
            [s.power_limit_w for s in self.segments],
        )

    def settings(self) -> dict[str, Any]:
        """The plan for ``arms.json`` (what the table and the report read)."""
        infeasible = [s for s in self.segments if not s.feasible]
        return {
            **self.segments[0].values,
            "power_limit_w": self.segments[0].power_limit_w,
            "feasible": self.feasible,
            "verdict": INFEASIBLE if infeasible else "feasible",
            "lowest_power_w": min(s.outcome.mean_power_w for s in infeasible)
            if infeasible
            else None,
            "settings_searched": self.searched,
            "search": "levels grid x power limits, coordinate refinement over every integer "
            "value, finalists on every evaluation seed (control/oracle.py)",
            "segments": [
                {
                    "start_s": s.start_s,
                    "end_s": s.end_s,
                    **s.values,
                    "power_limit_w": s.power_limit_w,
                    "feasible": s.feasible,
                    "expected_tokens": s.outcome.tokens,
                    "expected_violation_rate": s.outcome.violation_rate,
                    "expected_breaker_excess_w": s.outcome.breaker_excess_w,
                    "mean_power_w": s.outcome.mean_power_w,
                }
                for s in self.segments
            ],
        }


def search_oracle(
    physics: Physics,
    config: Config,
    cap_w: float,
    schedule: Schedule,
    seeds: list[int],
    hardware_tier: bool,
) -> OracleResult:
    """The oracle's plan on ``physics`` under ``cap_w`` and ``schedule`` (module docstring).

    Args:
        seeds: the evaluation seeds (the finalists are scored on all of them).
        hardware_tier: also search the GPU power limit.
    """
    w = config.workload
    objective = config.objective
    bounds = {name: getattr(w, f"{name}_bounds") for name in ONLINE_ACTUATORS}
    limits: list[float | None] = [None]
    if hardware_tier:
        limits += [cap_w * f for f in config.evaluate.oracle_power_limit_fracs]
    screen_s = schedule.budget_s * config.evaluate.tuning_budget_frac
    screen_schedule = schedule.scaled(screen_s)
    n_segments = len(schedule.segments())
    scores: dict[Setting, list[Outcome]] = {}

    def screen(setting: Setting) -> None:
        if setting in scores:
            return
        values, limit = setting
        run = simulate(
            physics,
            config,
            _fixed(values),
            cap_w,
            screen_s,
            seeds[0],
            limit,
            screen_schedule,
        )
        scores[setting] = segment_outcomes(run, screen_schedule, objective)

    def best(segment: int, k: int = 1) -> list[Setting]:
        ranked = sorted(scores, key=lambda s: _key(scores[s][segment], objective), reverse=True)
        return ranked[:k]

    for values in itertools.product(*(bounds[n].levels() for n in ONLINE_ACTUATORS)):
        for limit in limits:
            screen((tuple(values), limit))
    for segment in range(n_segments):
        values, limit = best(segment)[0]
        for i, name in enumerate(ONLINE_ACTUATORS):
            for level in range(bounds[name].min, bounds[name].max + 1):
                screen(((*values[:i], level, *values[i + 1 :]), limit))
    finalists = {
        s for seg in range(n_segments) for s in best(seg, config.evaluate.oracle_finalists)
    }
    final: dict[Setting, list[list[Outcome]]] = {}
    for values, limit in finalists:
        final[(values, limit)] = [
            segment_outcomes(
                simulate(
                    physics,
                    config,
                    _fixed(values),
                    cap_w,
                    schedule.budget_s,
                    seed,
                    limit,
                    schedule,
                ),
                schedule,
                objective,
            )
            for seed in seeds
        ]
    choices = []
    for segment, (start_s, end_s, _) in enumerate(schedule.segments()):
        outcomes = {s: pooled([runs[segment] for runs in final[s]]) for s in final}
        chosen = max(outcomes, key=lambda s: _key(outcomes[s], objective))
        outcome = outcomes[chosen]
        choices.append(
            SegmentChoice(
                start_s=start_s,
                end_s=end_s,
                values=dict(zip(ONLINE_ACTUATORS, chosen[0], strict=True)),
                power_limit_w=chosen[1],
                outcome=outcome,
                feasible=meets_budget(outcome.violation_rate, outcome.breaker_excess_w, objective),
            )
        )
    return OracleResult(choices, len(scores))


def _key(outcome: Outcome, objective: Any) -> tuple[bool, float]:
    """The objective's rank, and among settings that all miss the budget the lowest mean power
    first (the infeasible verdict reports the lowest achievable power)."""
    within, value = rank_key(outcome, objective)
    return (within, value if within else -outcome.mean_power_w)


def _fixed(values: tuple[int, ...]) -> FixedController:
    return FixedController(**dict(zip(ONLINE_ACTUATORS, values, strict=True)))
