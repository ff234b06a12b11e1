"""The oracle against the simulator (SIMULATED): over random small scenarios no arm, the
learned controller included, produces more than the oracle within the violation budget, and an
infeasible cap is called so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grpo_power.analysis.objective import Outcome, meets_budget, pooled
from grpo_power.config import SIM_ARM_NAMES, Config, load_config, oracle_for
from grpo_power.control.controllers import FixedController
from grpo_power.control.policy import controller_folder
from grpo_power.control.ppo import train_controller
from grpo_power.control.rollout import arm_plans
from grpo_power.control.simulate import run_outcome, simulate
from grpo_power.layout import CONTROLLER_ARMS
from grpo_power.sim.calibration import default_calibration
from grpo_power.sim.schedule import Conditions, Schedule
from grpo_power.sim.step_model import physics_for
from tests.conftest import REPO, authority_rows, best_static_tokens

ARMS = list(SIM_ARM_NAMES)  # every arm the simulator runs, the oracles included


def small_config(budget_s: float, results_dir: str = "results") -> Config:
    """A small step (8 sequences) so that steps are short against the schedule's segments, as
    in the study (steps of seconds, budgets of 15-60 minutes); a short PPO training."""
    return load_config(
        REPO / "config" / "config.yaml",
        {
            "results_dir": results_dir,
            "controller": {
                "total_timesteps": 4096,
                "n_envs": 4,
                "n_steps": 64,
                "batch_size": 128,
                "episode_steps": 32,
                "progress_bar": False,
            },
            "workload": {
                "prompts_per_step": 2,
                "num_generations": 4,
                "concurrency": 8,
                "concurrency_bounds": {"min": 1, "max": 8},
            },
            "sim": {
                "deployments": [{"name": "7b", "gpus": 1, "params_b": 7.6, "budget_s": budget_s}]
            },
            "evaluate": {
                "seeds": [0, 1, 2, 3, 4],
                "tuning_seeds": [1000],
                "threshold_grid": {
                    "high_frac_of_cap": [0.95, 1.0],
                    "low_frac_of_cap": [0.9],
                    "decrease_factor": [0.5],
                },
                "oracle_power_limit_fracs": [0.95, 1.0],
            },
            "objective": {"breaker_window_s": 10.0},
        },
    )


def random_schedule(rng: np.random.Generator, budget_s: float) -> Schedule:
    """Constant, or two segments with a lower cap or shorter completions in the second."""
    kind = rng.integers(3)
    if kind == 0:
        return Schedule.constant(budget_s)
    second = (
        Conditions(cap_frac=float(rng.uniform(0.7, 0.9)))
        if kind == 1
        else Conditions(completion_tokens=int(rng.integers(10, 40)))
    )
    return Schedule((0.0, budget_s / 2), (Conditions(), second), budget_s)


BUDGET_S = 120.0


@pytest.fixture(scope="module")
def ppo_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Short PPO trainings of the small 7b deployment's controllers: ``ppo``, and ``ppo+hwcap``
    under the hardware tier it tunes."""
    config = small_config(BUDGET_S, str(tmp_path_factory.mktemp("results")))
    folders = {}
    for arm in CONTROLLER_ARMS:
        folders[arm] = controller_folder(config, "7b", arm)
        rows = authority_rows("7b", True, True)
        tier = arm == "ppo+hwcap"
        train_controller(
            config, default_calibration(config), "7b", rows, folders[arm], hardware_tier=tier
        )
    return folders


@pytest.mark.parametrize("case", range(8))
def test_no_arm_beats_the_oracle_within_the_budget(case: int, ppo_folders: dict[str, Path]) -> None:
    rng = np.random.default_rng(100 + case)
    budget_s = BUDGET_S
    config = small_config(budget_s)
    physics = physics_for(default_calibration(config), "7b", config)
    cap_w = float(rng.uniform(0.83, 0.92) * physics.model.gpu.nameplate_w)
    schedule = random_schedule(rng, budget_s)
    seeds = config.evaluate.seeds
    controllers = ppo_folders
    plans = {
        p.arm: p for p in arm_plans(ARMS, physics, config, cap_w, controllers, schedule, seeds)
    }
    outcomes = {}
    for arm, plan in plans.items():
        runs = [plan.run(physics, config, cap_w, budget_s, s, schedule) for s in seeds]
        outcomes[arm] = pooled([run_outcome(r, budget_s, config.objective) for r in runs])
    for own in ("oracle", "oracle+hwcap"):  # a plan called feasible is within it as it runs
        if plans[own].settings["feasible"]:
            o = outcomes[own]
            assert meets_budget(o.violation_rate, o.breaker_excess_w, config.objective), (own, o)
    for arm, outcome in outcomes.items():
        within = meets_budget(outcome.violation_rate, outcome.breaker_excess_w, config.objective)
        own = oracle_for(arm)
        if within and arm != own:
            # an arm within the budget means its oracle found the budget feasible, and more
            assert plans[own].settings["feasible"], (arm, own)
            # the plan switches settings at its segments' starts; the step in flight at a
            # switch still runs at the old setting, so each switch may cost up to one step
            switches = len(plans[own].settings["segments"]) - 1
            step_tokens = plans[own].settings["max_step_tokens"]
            slack = switches * step_tokens
            assert outcome.tokens <= outcomes[own].tokens + slack + 1e-6, (arm, outcome, own)


def test_an_unreachable_cap_is_called_infeasible_with_the_lowest_power():
    config = small_config(120.0)
    physics = physics_for(default_calibration(config), "7b", config)
    cap_w = physics.idle_w + 20.0  # below what the training pass alone draws
    schedule = Schedule.constant(120.0)
    plan = arm_plans(["oracle"], physics, config, cap_w, {}, schedule, [0, 1, 2, 3, 4])[0]
    assert not plan.settings["feasible"]
    assert plan.settings["verdict"] == "cap infeasible for this deployment with these actuators"
    # the lowest power it reports is what the simulator gives its setting, and no searched
    # corner of the actuators draws less
    lowest = plan.settings["lowest_power_w"]
    for c, m in ((1, 8), (1, 64), (8, 8), (plan.settings["concurrency"], 8)):
        run = simulate(physics, config, FixedController(c, m), cap_w, 120.0, 0)
        assert run_outcome(run, 120.0, config.objective).mean_power_w >= lowest - 2.0


def test_a_cap_schedule_out_of_reach_is_called_infeasible_under_its_lowest_cap():
    """Demand response to a cap no setting keeps: the verdict quotes the lowest achievable
    power under the lowered cap, the one that binds, not beside the run's own cap (the table
    said "lowest achievable mean power 73.6 W per GPU (cap 320 W)")."""
    config = small_config(120.0)
    physics = physics_for(default_calibration(config), "7b", config)
    cap_w, low_w = 320.0, physics.idle_w + 20.0
    schedule = Schedule((0.0, 60.0), (Conditions(), Conditions(cap_frac=low_w / cap_w)), 120.0)
    plan = arm_plans(["oracle"], physics, config, cap_w, {}, schedule, [0, 1, 2, 3, 4])[0]
    assert not plan.settings["feasible"]
    assert [s["cap_w"] for s in plan.settings["segments"]] == pytest.approx([cap_w, low_w])
    assert plan.settings["lowest_power_cap_w"] == pytest.approx(low_w)
    # the power reached where the cap is lowered: above idle, and over that cap's reach
    lowered = plan.settings["segments"][1]
    assert plan.settings["lowest_power_w"] == pytest.approx(lowered["mean_power_w"])
    assert physics.idle_w < plan.settings["lowest_power_w"] < cap_w


def test_the_oracle_finds_a_static_peer_within_a_budget_of_none():
    """With no violation allowed, the short screening on one seed passed only settings that
    violate on the evaluation seeds: the oracle called the cap infeasible ("lowest achievable
    mean power 352.6 W") while the tuned fixed-safe arm ran without a violation at 347.8 W (a
    30B ZeRO-3 deployment on two H100s, cap 400 W). The static peers' settings are among its
    finalists, so it is within the budget with at least fixed-safe's output."""
    config = load_config(
        REPO / "config" / "config.yaml",
        {
            "gpu": {"name": "NVIDIA H100 80GB HBM3"},
            "cap_w": 550,
            "sim": {
                "deployments": [
                    {"name": "h30", "gpus": 2, "zero_stage": 3, "params_b": 30.0, "cap_w": 400,
                     "budget_s": 200, "sizes": ["tiny"]}
                ],
                "sweep_s": 60,
            },
            "authority": {"reference": "h30"},
            "objective": {"violation_budget": 0.0},
            "evaluate": {"scenarios": []},
        },
    )  # fmt: skip
    physics = physics_for(default_calibration(config), "h30", config)
    seeds, schedule = config.evaluate.seeds, Schedule.constant(200.0)
    plans = arm_plans(["fixed-safe", "oracle"], physics, config, 400.0, {}, schedule, seeds)
    outcomes = {
        plan.arm: pooled(
            [
                run_outcome(plan.run(physics, config, 400.0, 200.0, s, schedule), 200.0,
                            config.objective)
                for s in seeds
            ]
        )
        for plan in plans
    }  # fmt: skip
    safe = outcomes["fixed-safe"]
    assert meets_budget(safe.violation_rate, safe.breaker_excess_w, config.objective)
    assert plans[1].settings["feasible"]
    assert outcomes["oracle"].tokens >= safe.tokens - 1e-6


@pytest.mark.parametrize("cap_w", [305.0, 320.0])
def test_no_static_setting_makes_much_more_than_the_oracle(cap_w: float) -> None:
    """The study's 7b for 300 s: every setting of concurrency and the training chunk held
    through the run, within the budget on the evaluation seeds, makes at most 1 % more than the
    oracle's plan as it runs there. The plan that ran over the budget used to be tightened by a
    margin and solved again with no way back: it ran at 59,429 tokens at 305 W where
    concurrency 4 with chunks of 1 made 66,594, and at 320 W 128,401 against 130,674 (the
    oracle now keeps the best of every plan and finalist as each runs)."""
    config = load_config(REPO / "config" / "config.yaml")
    physics = physics_for(default_calibration(config), "7b", config)
    budget_s, seeds = 300.0, config.evaluate.seeds
    schedule = Schedule.constant(budget_s)

    def outcome(plan_run) -> Outcome:
        return pooled([run_outcome(plan_run(s), budget_s, config.objective) for s in seeds])

    plan = arm_plans(["oracle"], physics, config, cap_w, {}, schedule, seeds)[0]
    oracle = outcome(lambda s: plan.run(physics, config, cap_w, budget_s, s, schedule))
    assert meets_budget(oracle.violation_rate, oracle.breaker_excess_w, config.objective)
    best = best_static_tokens(physics, config, cap_w, budget_s, (1, 2, 4), range(1, 17))
    assert best > 0.0
    assert oracle.tokens >= 0.99 * best, (oracle.tokens, best)
