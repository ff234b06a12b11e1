"""The hardware tier of the ``ppo+hwcap`` arm: the GPU power limit it runs under, tuned in the
simulator on the tuning seeds as the classic peers are (everything here is simulated).

The ``ppo+hwcap`` arm is the workload controller with the GPU power limit a tier under it, for
sites where users may set the limit. A limit at the cap itself leaves the sensor's transients
and noise above the cap (the ``hwcap`` baseline, which stays at the cap), so the tier's limit is
chosen among the limits the oracle of the hardware tier searches
(``evaluate.oracle_power_limit_fracs`` of the cap): the one under which the uncontrolled
settings (the upper bounds, what a workload-blind site would run) make the most output within
the violation budget on ``evaluate.tuning_seeds`` over ``tuning_budget_frac`` of the budget, by
the study's objective (``analysis/objective.py``); when none keeps the budget, the one with the
fewest violations. The controller is then trained under it (``control/ppo.py``).

A site keeps its limit per cap: where a schedule lowers the run's cap (demand response), the
tier's share of each lowered cap is tuned the same way at that cap (:func:`limits_by_cap`), as a
site answering the request sets the limit it keeps for that cap; the share that keeps the
uncontrolled settings within the budget at one cap may not at a lower one, where the same
transients are a larger part of the cap. At the run's own cap the arm keeps the share it was
trained under (as a real run does, whatever its cap). The choice is conservative: the
controller may lower the workload, so a higher limit could suit it, which would need a
controller trained per limit.
"""

from __future__ import annotations

from typing import Any

from grpo_power.analysis.objective import pooled, rank_key
from grpo_power.config import Config, static_setting
from grpo_power.control.controllers import FixedController
from grpo_power.control.simulate import run_outcome, simulate
from grpo_power.sim.schedule import Schedule
from grpo_power.sim.step_model import Physics


def tune_power_limit(
    physics: Physics, config: Config, cap_w: float, schedule: Schedule
) -> dict[str, Any]:
    """The hardware tier's limit by the documented search (see the module docstring).

    Args:
        physics: the deployment's nominal physics.
        config: ``evaluate`` (limits, tuning seeds and budget), ``workload`` (the uncontrolled
            settings), ``objective``.
        cap_w: the cap, W.
        schedule: the conditions of an evaluation run (the tuning runs scale it).

    Returns:
        ``{"power_limit_frac", "power_limit_w", "within_budget", "criterion", "candidates"}``:
        the chosen share of the cap and limit, whether it kept the budget, and each limit's
        pooled tokens per second, violation share and breaker excess.
    """
    budget_s = schedule.budget_s * config.evaluate.tuning_budget_frac
    tuning = schedule.scaled(budget_s)
    controller = FixedController(*static_setting("hwcap", config.workload))
    rows, keys = [], []
    for frac in config.evaluate.oracle_power_limit_fracs:
        limit_w = frac * cap_w
        outcome = pooled(
            [
                run_outcome(
                    simulate(physics, config, controller, cap_w, budget_s, seed, limit_w, tuning),
                    budget_s,
                    config.objective,
                )
                for seed in config.evaluate.tuning_seeds
            ]
        )
        key = rank_key(outcome, config.objective)
        keys.append(key)
        rows.append(
            {
                "power_limit_frac": frac,
                "power_limit_w": limit_w,
                "tokens_per_s": outcome.tokens / budget_s,
                "violation_rate": outcome.violation_rate,
                "breaker_excess_w": outcome.breaker_excess_w,
                "within_budget": key[0],
            }
        )
    best = max(range(len(rows)), key=lambda i: (keys[i], rows[i]["power_limit_frac"]))
    return {
        "power_limit_frac": rows[best]["power_limit_frac"],
        "power_limit_w": rows[best]["power_limit_w"],
        "within_budget": rows[best]["within_budget"],
        "criterion": "the uncontrolled settings' most output within the budget on the tuning "
        "seeds, else the fewest violations",
        "candidates": rows,
        "simulated": True,
    }


def limits_by_cap(
    physics: Physics,
    config: Config,
    cap_w: float,
    schedule: Schedule,
    trained_frac: float,
) -> list[dict[str, Any]]:
    """The hardware tier's limit at every cap a run is given (see the module docstring).

    Args:
        physics: the deployment's nominal physics.
        config: as :func:`tune_power_limit`.
        cap_w: the run's cap, W (the schedule's caps are fractions of it).
        schedule: the run's conditions; each distinct ``cap_frac`` is one cap (``cap_w``
            itself, ``cap_frac`` 1, always is).
        trained_frac: the share of the cap the controller was trained under.

    Returns:
        One row per cap, ``cap_w`` first, then the schedule's in its order: ``{"cap_frac",
        "cap_w", "power_limit_frac", "power_limit_w", "tuning"}``; ``tuning`` is None at
        ``cap_w`` (the trained share), else the :func:`tune_power_limit` result at that cap
        under the deployment's constant conditions over the schedule's length.
    """
    rows = []
    for cap_frac in dict.fromkeys([1.0, *(c.cap_frac for c in schedule.conditions)]):
        at_w = cap_w * cap_frac
        if cap_frac == 1.0:
            frac, tuning = trained_frac, None
        else:
            constant = Schedule.constant(schedule.budget_s, config.sim.completion_tokens)
            tuning = tune_power_limit(physics, config, at_w, constant)
            frac = tuning["power_limit_frac"]
        rows.append(
            {
                "cap_frac": cap_frac,
                "cap_w": at_w,
                "power_limit_frac": frac,
                "power_limit_w": frac * at_w,
                "tuning": tuning,
            }
        )
    return rows
