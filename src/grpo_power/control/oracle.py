"""The oracle arm (simulator only): the best setting per segment, found in hindsight by the
simulator's own outcomes.

The oracle is the limit the other arms are compared with, not a deployable controller. It
searches every online actuator the simulator declares (``sim/step_model.py:
ONLINE_ACTUATORS``, each within ``workload.<name>_bounds``) and, for the ``oracle+hwcap`` arm
(the limit of the arms that may use the hardware tier: ``hwcap``, ``ppo+hwcap``), the GPU power
limit (``evaluate.oracle_power_limit_fracs`` of the cap, and
no limit). Each setting is scored by simulated runs (:class:`~grpo_power.sim.grpo_sim.SimRun`:
sensor window, jitter, prefill bursts, noise) judged by the study's objective
(``analysis/objective.py``: most tokens within the violation budget, no breaker window above
the cap), the same code that scores the arms. When the workload or the cap changes over the
run (a schedule), each segment is judged on its own samples and gets its own best setting.

The full product of every integer value of every actuator (and the limits) is too large to
simulate (7b: 32 x 57 x 8 x 9 settings x 6 limits: 5 shares of the cap and none), so the
search is:

1. screen the product of the generation actuators' levels (``GRID_ACTUATORS``, each
   ``ActuatorBounds.levels()``: bounds and powers of two) x the power limits, the training chunk
   and the pause at their defaults, on the first evaluation seed over ``tuning_budget_frac`` of
   the budget;
2. refine each segment's best by coordinate ascent: every integer value of each actuator in
   turn (the generation actuators, the training chunk, the pause), the others held at the best
   so far, repeated while a round moves the best (``REFINE_ROUNDS`` at most; same runs);
3. score the ``evaluate.oracle_finalists`` best per segment on every evaluation seed over the
   whole budget, and keep the best (hindsight on the seeds the arms are evaluated on).

In the simulator on 7b at the defaults (simulated, 2026-12-02): the product of all four
actuators' levels took 567 screening runs and planned 411,218 tokens at 2.00 % violations; this
search takes 118 and plans 409,787 at 1.97 % (0.3 % fewer tokens). A pause or a smaller
training chunk only lowers power, so its best value follows from the generation setting it is
paired with, which the coordinate rounds find.

Screening runs are short, so their violation share is noisy: the finalists are the best under a
ladder of screening budgets (2, 1, 1/2 and 1/4 times the violation budget, a setting a little
over the budget in a short run may be within it over the whole budget, and one well under it
is a safe fallback), and they are judged on the true budget.

The plan shares each segment's time between finalists (a linear programme): the most tokens
whose time-weighted violation share is within the run's budget (a segment may spend more of it
than another; time-sharing two settings reaches the budget exactly where one static setting
cannot, as a feedback controller does by switching) and no breaker window above the cap. The
finalists' outcomes are those of static runs; a plan that switches runs a step in flight at a
switch at the old setting, so it may land a little over the budget. Every plan is therefore run
on every evaluation seed (hindsight); one over the budget is solved again with the programme's
budget tightened by the share it overshot (and ``PLAN_MARGIN``), then bisected between the
tightest budget whose plan ran over and the loosest whose plan ran within, ``PLAN_CHECKS`` plans
in all (the last with no violation allowed where none has run within). The oracle is the
candidate that makes the most within the budget as it runs on the evaluation seeds: every plan
tried, and every finalist held through the run (a static run is its own outcome). A plan that
ran over used to be tightened by the margin with no way back: on 7b for 300 s (simulated,
2026-12-07, the packaged calibration) it made 59,429 tokens at 305 W where concurrency 4 with
training chunks of 1 held through the run made 66,594 within the budget (now 66,479;
``tests/test_oracle.py``), and adding a finalist could lower the plan (at 320 W over 900 s,
six finalists per rung planned 385,118 tokens, three 410,287; now 403,674 and 410,287, and on
the study's fitted calibration 7b at 320 W plans 439.8 tokens/s, 415.5 before). Screening the
training chunk's levels on the grid as well, four times the screening runs, then moved 7b's plan
at 305-330 W by -3.5 to +1.1 %, so it stays in the coordinate rounds. When
no plan is within the budget, the cap is infeasible for the deployment with these actuators: the
oracle holds the lowest-power finalist per segment and says so, with that lowest achievable mean
power. Everything it produces is simulated.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpo_power.analysis.objective import INFEASIBLE, Outcome, meets_budget, pooled, rank_key
from grpo_power.config import Config
from grpo_power.control.contract import Action
from grpo_power.control.controllers import FixedController, SegmentController
from grpo_power.control.simulate import run_outcome, segment_outcomes, simulate
from grpo_power.sim.schedule import Schedule
from grpo_power.sim.step_model import ONLINE_ACTUATORS, Physics

SCREENING_LADDER = (2.0, 1.0, 0.5, 0.25)  # screening budgets, times the violation budget
GRID_ACTUATORS = ("concurrency", "max_new_tokens")  # screened on a grid of levels together
REFINE_ROUNDS = 2  # coordinate rounds over every integer value of every actuator, at most
PLAN_CHECKS = 6  # plans tried: each run on every evaluation seed, the budget tightened if over
PLAN_MARGIN = 0.9  # each retry's budget, times the share the last plan overshot by
Setting = tuple[tuple[int, ...], float | None]  # actuator values in ONLINE_ACTUATORS order, limit


@dataclass(frozen=True)
class SegmentChoice:
    """The oracle's setting for one segment, its pooled outcome over the evaluation seeds there,
    and whether the whole plan is within the budget."""

    start_s: float
    end_s: float
    cap_w: float  # the cap in force in the segment
    values: dict[str, int]
    power_limit_w: float | None
    outcome: Outcome
    feasible: bool


@dataclass(frozen=True)
class OracleResult:
    """The oracle's plan: one choice per segment, and what was searched."""

    segments: list[SegmentChoice]
    searched: int
    max_step_tokens: int  # the most completion tokens one step of the plan makes, all GPUs

    @property
    def feasible(self) -> bool:
        """Whether the plan is within the budget (the run's: segments may spend it unevenly)."""
        return all(s.feasible for s in self.segments)

    def controller(self) -> SegmentController:
        """The plan as a controller (switches settings at segment starts, and a step that
        would run into a segment of lower power at that segment's setting)."""
        return SegmentController(
            [s.start_s for s in self.segments],
            [Action(**s.values) for s in self.segments],
            [s.power_limit_w for s in self.segments],
            [s.outcome.mean_power_w for s in self.segments],
        )

    def settings(self) -> dict[str, Any]:
        """The plan for ``arms.json`` (what the table and the report read)."""
        # infeasible: the lowest-power setting of every segment; the verdict quotes the mean
        # power they reach under the run's lowest cap (a schedule's higher caps are not binding)
        lowest_cap_w = min(s.cap_w for s in self.segments)
        binding = [s for s in self.segments if s.cap_w == lowest_cap_w]
        return {
            **self.segments[0].values,
            "power_limit_w": self.segments[0].power_limit_w,
            "feasible": self.feasible,
            "verdict": "feasible" if self.feasible else INFEASIBLE,
            "lowest_power_w": None
            if self.feasible
            else sum(s.outcome.mean_power_w * (s.end_s - s.start_s) for s in binding)
            / sum(s.end_s - s.start_s for s in binding),
            "lowest_power_cap_w": None if self.feasible else lowest_cap_w,
            "settings_searched": self.searched,
            "max_step_tokens": self.max_step_tokens,
            "search": "levels grid x power limits, coordinate refinement over every integer "
            "value, finalists on every evaluation seed (control/oracle.py)",
            "segments": [
                {
                    "start_s": s.start_s,
                    "end_s": s.end_s,
                    "cap_w": s.cap_w,
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
    peers: Iterable[tuple[int, int]] = (),
) -> OracleResult:
    """The oracle's plan on ``physics`` under ``cap_w`` and ``schedule`` (module docstring).

    Args:
        seeds: the evaluation seeds (the finalists are scored on all of them).
        hardware_tier: also search the GPU power limit.
        peers: the static arms' (concurrency, max new tokens), among the finalists too (the
            tuned fixed-safe's: a short screening on one seed can miss the one static setting
            within a budget of 0, which it then called infeasible).
    """
    w = config.workload
    objective = config.objective
    ladder = [
        objective.model_copy(update={"violation_budget": f * objective.violation_budget})
        for f in SCREENING_LADDER
    ]
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

    def best(segment: int, k: int = 1, screening: Any = ladder[0]) -> list[Setting]:
        ranked = sorted(scores, key=lambda s: _key(scores[s][segment], screening), reverse=True)
        return ranked[:k]

    grid = [
        bounds[n].levels() if n in GRID_ACTUATORS else [getattr(w, n)] for n in ONLINE_ACTUATORS
    ]
    for values in itertools.product(*grid):
        for limit in limits:
            screen((tuple(values), limit))
    for segment in range(n_segments):
        for _ in range(REFINE_ROUNDS):
            start = best(segment)[0]
            for i, name in enumerate(ONLINE_ACTUATORS):
                values, limit = best(segment)[0]
                for level in range(bounds[name].min, bounds[name].max + 1):
                    screen(((*values[:i], level, *values[i + 1 :]), limit))
            if best(segment)[0] == start:
                break
    k = config.evaluate.oracle_finalists
    finalists = {
        s for segment in range(n_segments) for rung in ladder for s in best(segment, k, rung)
    }
    finalists |= _static_settings(config, cap_w if hardware_tier else None, peers)
    final: dict[Setting, list[list[Outcome]]] = {}
    held: dict[Setting, Outcome] = {}  # each finalist held through the run, pooled over seeds
    for values, limit in sorted(finalists, key=_order):  # a set: same order every process
        runs = [
            simulate(
                physics, config, _fixed(values), cap_w, schedule.budget_s, seed, limit, schedule
            )
            for seed in seeds
        ]
        final[(values, limit)] = [segment_outcomes(run, schedule, objective) for run in runs]
        held[(values, limit)] = pooled(
            [run_outcome(run, schedule.budget_s, objective) for run in runs]
        )
    segments = schedule.segments()
    outcomes = [
        {s: pooled([runs[segment] for runs in final[s]]) for s in final}
        for segment in range(len(segments))
    ]
    sequences = w.prompts_per_step * w.num_generations

    def result_of(plan: list[list[tuple[Setting, float]]], feasible: bool) -> OracleResult:
        choices = _choices(segments, plan, outcomes, feasible, cap_w)
        step_tokens = max(sequences * c.values["max_new_tokens"] * physics.gpus for c in choices)
        return OracleResult(choices, len(scores), step_tokens)

    # candidates, each with its outcome as it runs on every evaluation seed: the plans of the
    # linear programme (a plan that switches may run over the budget: tightened and solved
    # again) and every finalist held through the run (a static run is its own outcome)
    candidates = [
        (outcome, result_of([[(setting, 1.0)] for _ in segments], True))
        for setting, outcome in held.items()
    ]
    budget = objective.violation_budget  # the programme's budget: tightened where a plan runs over
    within_at, over_at = None, None  # the programme's budgets whose plans ran within / over
    result = None
    for attempt in range(PLAN_CHECKS):
        plan, feasible = _combine(segments, outcomes, budget)
        if not feasible:
            break
        result = result_of(plan, True)
        runs = [
            simulate(
                physics,
                config,
                result.controller(),
                cap_w,
                schedule.budget_s,
                seed,
                None,
                schedule,
            )
            for seed in seeds
        ]
        realized = pooled([run_outcome(run, schedule.budget_s, objective) for run in runs])
        candidates.append((realized, result))
        if meets_budget(realized.violation_rate, realized.breaker_excess_w, objective):
            if over_at is None:  # the plan of the run's own budget runs within it
                break
            within_at = budget
        else:
            over_at = budget
        if within_at is not None:  # between the tightest over and the loosest within
            budget = (within_at + over_at) / 2
        elif attempt < PLAN_CHECKS - 2:  # tightened by the share it overshot, and a margin
            over = objective.violation_budget / max(realized.violation_rate, 1e-12)
            budget *= min(1.0, over) * PLAN_MARGIN
        else:  # the last try allows the finalists no violation
            budget = 0.0
    within = [
        (outcome, plan)
        for outcome, plan in candidates
        if meets_budget(outcome.violation_rate, outcome.breaker_excess_w, objective)
    ]
    if within:  # the candidate that makes the most within the budget as it runs
        return max(within, key=lambda item: item[0].tokens)[1]
    if result is not None:  # no candidate within as it runs: the last plan the programme found
        return result
    return result_of(*_combine(segments, outcomes, budget))


def _choices(
    segments: list[tuple[float, float, Any]],
    plan: list[list[tuple[Setting, float]]],
    outcomes: list[dict[Setting, Outcome]],
    feasible: bool,
    cap_w: float,
) -> list[SegmentChoice]:
    """The plan's time shares as consecutive choices, each with its finalist's outcome and the
    cap in force (``cap_w`` times the segment's share)."""
    choices = []
    for segment, (start_s, end_s, conditions) in enumerate(segments):
        at_s = start_s
        for setting, share in plan[segment]:
            length_s = share * (end_s - start_s)
            choices.append(
                SegmentChoice(
                    start_s=at_s,
                    end_s=at_s + length_s,
                    cap_w=cap_w * conditions.cap_frac,
                    values=dict(zip(ONLINE_ACTUATORS, setting[0], strict=True)),
                    power_limit_w=setting[1],
                    outcome=outcomes[segment][setting],
                    feasible=feasible,
                )
            )
            at_s += length_s
    return choices


def _combine(
    segments: list[tuple[float, float, Any]],
    outcomes: list[dict[Setting, Outcome]],
    budget: float,
) -> tuple[list[list[tuple[Setting, float]]], bool]:
    """Shares of each segment's time per finalist (a linear programme, scipy): the most tokens
    whose time-weighted violation share is within ``budget``, using only finalists with
    no breaker window above the cap. Time-sharing two settings reaches the budget exactly where
    one static setting cannot (what a feedback controller does by switching), so the plan is a
    limit for dynamic arms too. None within: the lowest-power finalist per segment."""
    from scipy.optimize import linprog

    durations = np.array([end - start for start, end, _ in segments])
    variables = [(i, s) for i, o in enumerate(outcomes) for s in o if o[s].breaker_excess_w <= 0.0]
    covered = {i for i, _ in variables}
    if covered == set(range(len(outcomes))):
        tokens = np.array([outcomes[i][s].tokens for i, s in variables])
        violation = np.array([outcomes[i][s].violation_rate * durations[i] for i, s in variables])
        one = np.array([[1.0 if i == seg else 0.0 for i, _ in variables] for seg in covered])
        result = linprog(
            -tokens,
            A_ub=violation[None, :],
            b_ub=[budget * durations.sum()],
            A_eq=one,
            b_eq=np.ones(len(covered)),
            bounds=(0.0, 1.0),
            method="highs",
        )
        if result.status == 0:
            plan: list[list[tuple[Setting, float]]] = [[] for _ in outcomes]
            for (i, s), share in zip(variables, result.x, strict=True):
                if share > 1e-6:
                    plan[i].append((s, float(share)))
            for i, items in enumerate(plan):  # the higher-power setting first, then shares sum 1
                items.sort(key=lambda item, i=i: -outcomes[i][item[0]].mean_power_w)
                total = sum(share for _, share in items)
                plan[i] = [(setting, share / total) for setting, share in items]
            return plan, True
    lowest = [[(min(o, key=lambda s, o=o: o[s].mean_power_w), 1.0)] for o in outcomes]
    return lowest, False


def _key(outcome: Outcome, objective: Any) -> tuple[bool, float]:
    """The objective's rank, and among settings that all miss the budget the lowest mean power
    first (the infeasible verdict reports the lowest achievable power)."""
    within, value = rank_key(outcome, objective)
    return (within, value if within else -outcome.mean_power_w)


def _static_settings(
    config: Config, limit_w: float | None, peers: Iterable[tuple[int, int]] = ()
) -> set[Setting]:
    """The settings of the static arms (uncontrolled, fixed, and ``peers``' (concurrency, max
    new tokens); ``limit_w`` given: under the hwcap limit too), always among the finalists:
    screening noise never leaves the oracle below a static arm."""
    w = config.workload
    held = {name: getattr(w, name) for name in ONLINE_ACTUATORS}
    corners = [
        {
            **held,
            "concurrency": w.concurrency_bounds.max,
            "max_new_tokens": w.max_new_tokens_bounds.max,
        },
        held,
        *({**held, "concurrency": c, "max_new_tokens": m} for c, m in peers),
    ]
    limits = [None] if limit_w is None else [None, limit_w]
    return {
        (tuple(int(c[name]) for name in ONLINE_ACTUATORS), limit)
        for c in corners
        for limit in limits
    }


def _order(setting: Setting) -> tuple[tuple[int, ...], float]:
    """A sort key of settings (no limit first): ``None`` hashes differently in every process,
    so a set of settings is iterated in the same order only once sorted."""
    values, limit = setting
    return values, -1.0 if limit is None else limit


def _fixed(values: tuple[int, ...]) -> FixedController:
    return FixedController(**dict(zip(ONLINE_ACTUATORS, values, strict=True)))
