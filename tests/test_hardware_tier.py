"""The ppo+hwcap arm's hardware tier: the GPU power limit tuned in the simulator, the
environment that trains under it, and the limit a run of each arm sets (SIMULATED)."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_power.analysis.objective import meets_budget, pooled
from grpo_power.config import load_config, power_limit_w, static_setting
from grpo_power.control.controllers import FixedController
from grpo_power.control.env import ControlSpace, GrpoPowerEnv
from grpo_power.control.hardware_tier import limits_by_cap, tune_power_limit
from grpo_power.control.simulate import run_outcome, simulate
from grpo_power.layout import controller_in
from grpo_power.sim.calibration import default_calibration
from grpo_power.sim.schedule import Conditions, Schedule
from grpo_power.sim.step_model import physics_for
from tests.conftest import REPO, authority_rows


@pytest.fixture(scope="module")
def config():
    return load_config(REPO / "config" / "config.yaml")


def test_the_tier_is_the_limit_with_the_most_output_within_the_budget(config):
    calibration = default_calibration(config)
    physics = physics_for(calibration, "7b", config)
    budget_s = config.sim.deployment("7b").budget_s
    tier = tune_power_limit(
        physics, config, config.cap_w, Schedule.constant(budget_s, config.sim.completion_tokens)
    )
    rows = {r["power_limit_frac"]: r for r in tier["candidates"]}
    assert sorted(rows) == sorted(config.evaluate.oracle_power_limit_fracs)
    # the physics: a lower limit holds the uncontrolled workload lower, fewer samples over the
    # cap and less output
    fracs = sorted(rows)
    assert rows[fracs[0]]["violation_rate"] < rows[fracs[-1]]["violation_rate"]
    assert rows[fracs[0]]["tokens_per_s"] < rows[fracs[-1]]["tokens_per_s"]
    # the choice: within the budget, and no limit within it makes more
    chosen = rows[tier["power_limit_frac"]]
    assert chosen["within_budget"] and tier["within_budget"]
    more = [r for r in rows.values() if r["tokens_per_s"] > chosen["tokens_per_s"]]
    assert not [r for r in more if r["within_budget"]]
    assert tier["power_limit_w"] == pytest.approx(tier["power_limit_frac"] * config.cap_w)


def test_the_environment_runs_under_the_limit(config):
    """At the uncontrolled settings, a limit of 0.85 of the cap holds every reading under the
    cap, where the same steps without a limit go over it."""
    calibration = default_calibration(config)
    space = ControlSpace.from_authority(authority_rows("7b", True, True), "7b", config.workload)
    top = np.ones(len(space.actuators))
    highest_w = {}
    for frac in (None, 0.85):
        env = GrpoPowerEnv(config, calibration, "7b", space, None, False, frac)
        env.reset(seed=3)
        readings = []
        for _ in range(10):
            env.step(top)
            readings.append(env.run.recent_power_w().max())
        highest_w[frac] = max(readings)
    assert highest_w[0.85] < config.cap_w < highest_w[None]


def test_the_limit_each_arm_sets():
    assert power_limit_w("hwcap", 320.0) == 320.0
    assert power_limit_w("ppo+hwcap", 320.0, 0.95) == pytest.approx(304.0)
    assert power_limit_w("ppo", 320.0, None) is None
    assert power_limit_w("fixed", 320.0) is None


def test_each_controller_arm_has_its_folder(tmp_path):
    assert controller_in(tmp_path, "7b") == tmp_path / "7b"
    assert controller_in(tmp_path, "7b", "ppo+hwcap") == tmp_path / "7b+hwcap"
    with pytest.raises(ValueError, match="no trained controller for arm 'threshold'"):
        controller_in(tmp_path, "7b", "threshold")


def test_the_limit_follows_the_cap_when_a_schedule_lowers_it(config):
    """Demand response: the cap drops to 70 % for 100 s. A limit set at 0.9 of the cap is
    lowered with it, so the uncontrolled workload stays under the lowered cap, where without a
    limit (or with one left at 0.9 of the old cap, 288 W) most of its readings are over it."""
    physics = physics_for(default_calibration(config), "7b", config)
    cap_w = config.cap_w
    schedule = Schedule((0.0, 100.0, 200.0), (Conditions(), Conditions(0.7), Conditions()), 300.0)
    over_low = {}
    for limit_w in (None, 0.9 * cap_w):
        run = simulate(physics, config, FixedController(32, 64), cap_w, 300.0, 0, limit_w, schedule)
        low = [s for s in run.steps if s.cap_w < cap_w]
        over_low[limit_w] = sum(s.over_cap() for s in low) / sum(s.power_w.size for s in low)
    assert over_low[0.9 * cap_w] < 0.05 < 0.3 < over_low[None]


def test_a_lower_cap_gets_the_tier_tuned_at_it(config):
    """Demand response on 14b: the cap drops to 70 % for two thirds of the run. The share tuned
    at the deployment's cap leaves the lowered cap's transients above it, so the uncontrolled
    workload goes over the budget on the evaluation seeds; the tier tuned at the lowered cap
    (on the tuning seeds, at a constant cap) sets a lower share there and keeps it."""
    physics = physics_for(default_calibration(config), "14b", config)
    cap_w = config.deployment_cap_w("14b")
    budget_s = config.sim.deployment("14b").budget_s
    constant = Schedule.constant(budget_s, config.sim.completion_tokens)
    trained = tune_power_limit(physics, config, cap_w, constant)["power_limit_frac"]
    starts = (0.0, 0.15 * budget_s, 0.8167 * budget_s)
    schedule = Schedule(starts, (Conditions(), Conditions(0.7), Conditions()), budget_s)
    rows = limits_by_cap(physics, config, cap_w, schedule, trained)
    assert [r["cap_frac"] for r in rows] == [1.0, 0.7]
    assert rows[0]["power_limit_frac"] == trained and rows[0]["tuning"] is None
    assert rows[1]["power_limit_frac"] < trained
    assert rows[1]["power_limit_w"] == pytest.approx(rows[1]["power_limit_frac"] * 0.7 * cap_w)
    shares = {r["cap_frac"]: r["power_limit_frac"] for r in rows}
    uncontrolled = static_setting("hwcap", config.workload)
    within = {}
    for name, per_cap in (("one share", None), ("per cap", shares)):
        runs = [
            simulate(
                physics,
                config,
                FixedController(*uncontrolled),
                cap_w,
                budget_s,
                seed,
                trained * cap_w,
                schedule,
                per_cap,
            )
            for seed in config.evaluate.seeds
        ]
        o = pooled([run_outcome(r, budget_s, config.objective) for r in runs])
        within[name] = meets_budget(o.violation_rate, o.breaker_excess_w, config.objective)
    assert within == {"one share": False, "per cap": True}
    # the limit a run ending under the lowered cap is left at
    ending_low = Schedule((0.0, 10.0), (Conditions(), Conditions(0.7)), 60.0)
    run = simulate(
        physics, config, FixedController(*uncontrolled), cap_w, 60.0, 0, trained * cap_w,
        ending_low, shares,
    )  # fmt: skip
    assert run.model.power_limit_w == pytest.approx(rows[1]["power_limit_w"])
