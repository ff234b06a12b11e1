"""Simulated runs driven by a controller, and their outcomes under the study's objective.

:func:`simulate` runs a controller on a :class:`~grpo_power.sim.grpo_sim.SimRun` (the tuning of
the classic peers, the oracle's search and every evaluated arm use it); :func:`segment_outcomes`
judges a recorded run per segment of its schedule with ``analysis/objective.py``, the code that
judges the evaluated arms' files. Everything here is simulated.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from grpo_power.analysis.objective import Outcome, judge
from grpo_power.config import Config, ObjectiveConfig
from grpo_power.control.controllers import Controller, SegmentController
from grpo_power.control.env import observe
from grpo_power.sim.grpo_sim import SimRun
from grpo_power.sim.schedule import Schedule
from grpo_power.sim.step_model import ONLINE_ACTUATORS, Physics, StepModel


def simulate(
    physics: Physics,
    config: Config,
    controller: Controller,
    cap_w: float,
    budget_s: float,
    seed: int,
    power_limit_w: float | None = None,
    schedule: Schedule | None = None,
    limit_shares: Mapping[float, float] | None = None,
) -> SimRun:
    """One simulated run of ``budget_s`` seconds driven by ``controller`` (recorded).

    A :class:`SegmentController` (the oracle) is told the time and may change the power limit
    per segment; every other controller decides from its observation. A GPU power limit is set
    relative to the cap: ``power_limit_w`` (or a segment's limit) holds at ``cap_w``, and while a
    schedule lowers the cap (demand response) the limit is lowered with it, as a site lowering
    its cap lowers the limits it set under it. ``limit_shares`` (the hardware tier's limit per
    cap, ``control/hardware_tier.py``) maps a schedule's ``cap_frac`` to the share of that cap
    the limit is set at instead; a cap not in it keeps ``power_limit_w``'s share."""
    models: dict[float | None, StepModel] = {}

    def model(limit_w: float | None) -> StepModel:
        if limit_w not in models:
            models[limit_w] = StepModel(physics, config.workload, config.sim.prompt_tokens, limit_w)
        return models[limit_w]

    run = SimRun(
        model(power_limit_w),
        config.workload,
        config.telemetry.period_s,
        config.arms.observation_window_s,
        cap_w,
        seed=seed,
        jitter=config.sim.step_jitter,
        record=True,
        schedule=schedule,
    )
    while run.t_s < budget_s:
        last = run.steps[-1] if run.steps else None  # the next step is expected to last as long
        ahead_s = last.end_s - last.start_s if last else 0.0
        if isinstance(controller, SegmentController):
            action, limit_w = controller.at(run.t_s, ahead_s)
        else:
            action, limit_w = controller.decide(observe(run)), power_limit_w
        run.conditions()  # the cap the next step begins under
        # the site lowers its limit when it lowers its cap, within a step too: the simulator
        # sets a limit per step, so a step expected to run into a lower cap runs under its limit
        cap_frac = (
            schedule.lowest_cap_frac(run.t_s, run.t_s + ahead_s) if schedule is not None else 1.0
        )
        if limit_w is not None and limit_shares and cap_frac in limit_shares:
            limit_w = limit_shares[cap_frac] * cap_frac * cap_w
        elif limit_w is not None:
            limit_w = limit_w * cap_frac
        run.model = model(limit_w)
        run.step(**{name: getattr(action, name) for name in ONLINE_ACTUATORS})
    return run


def segment_outcomes(run: SimRun, schedule: Schedule, objective: ObjectiveConfig) -> list[Outcome]:
    """The objective's outcome of each segment of a recorded run (its samples and the tokens of
    its steps within the segment, a step across a boundary pro rata)."""
    index = np.concatenate([s.sample_index for s in run.steps])
    power = np.concatenate([s.power_w for s in run.steps])
    caps = np.concatenate([s.sample_cap_w for s in run.steps])
    t_s = index * run.period_s
    start = np.array([s.start_s for s in run.steps])
    end = np.array([s.end_s for s in run.steps])
    tokens = np.array([s.tokens for s in run.steps], dtype=float)
    out = []
    for seg_start, seg_end, _ in schedule.segments():
        inside = (t_s >= seg_start) & (t_s < seg_end)
        overlap = np.clip(np.minimum(end, seg_end) - np.maximum(start, seg_start), 0.0, None)
        share = overlap / np.maximum(end - start, 1e-12)
        out.append(
            judge(power[inside], caps[inside], float(tokens @ share), run.period_s, objective)
        )
    return out


def run_outcome(run: SimRun, budget_s: float, objective: ObjectiveConfig) -> Outcome:
    """The objective's outcome of a whole recorded run over ``budget_s``."""
    return segment_outcomes(run, Schedule.constant(budget_s), objective)[0]
