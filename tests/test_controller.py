"""The gymnasium environment, PPO training, the saved controller, the oracle, and the ppo arm
driving a real tiny run (SIMULATED physics; the tiny run's power is the simulated A100's)."""

from __future__ import annotations

import json
import pickle
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from grpo_power.analysis.objective import Outcome, meets_budget, pooled
from grpo_power.config import Config, load_config
from grpo_power.control.contract import Observation, percentile_95, random_observations
from grpo_power.control.controllers import FixedController
from grpo_power.control.env import (
    OBSERVATION_SIZE,
    ControlSpace,
    GrpoPowerEnv,
    observe,
    tracks_budget,
)
from grpo_power.control.policy import (
    PPOController,
    controller_folder,
    deployment_for_size,
    tracked_multiplier,
)
from grpo_power.control.ppo import (
    CURVE_COLUMNS,
    HOLD_GAIN,
    oracle_holds,
    robust_holds,
    train_controller,
    training_caps_w,
)
from grpo_power.control.simulate import run_outcome, simulate
from grpo_power.control.validation import choose_snapshot, oracle_reference
from grpo_power.sim.calibration import default_calibration
from grpo_power.sim.schedule import Schedule
from grpo_power.sim.step_model import physics_for
from tests.conftest import REPO, FakeGpu, authority_rows, best_static_tokens, fake_nvml


def fast_config(results_dir) -> Config:
    return load_config(
        REPO / "config" / "config.yaml",
        {
            "results_dir": str(results_dir),
            "controller": {
                "total_timesteps": 6144,
                "n_envs": 4,
                "n_steps": 64,
                "batch_size": 128,
                "episode_steps": 32,
            },
        },
    )


def test_the_observations_p95_is_numpys_percentile_bit_for_bit():
    """The hot loop's partial-sort p95 equals ``np.percentile(x, 95)`` exactly, on float32
    readings (the simulator's) and float64, from one sample to a window of thousands, ties
    included."""
    rng = np.random.default_rng(7)
    for size in [1, 2, 3, 19, 20, 21, 50, 101, 1000, 4321]:
        for dtype in (np.float32, np.float64):
            values = rng.normal(250.0, 40.0, size).astype(dtype)
            assert percentile_95(values) == float(np.percentile(values, 95)), (size, dtype)
            ties = np.round(values / 25.0) * 25.0
            assert percentile_95(ties) == float(np.percentile(ties, 95)), (size, dtype)
    per_gpu = rng.normal(250.0, 40.0, (37, 4)).astype(np.float32)  # samples x GPUs, pooled
    assert percentile_95(per_gpu) == float(np.percentile(per_gpu, 95))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A short PPO training of the 7b controller at one multiplier, saved where the ppo arm
    looks for it (budget tracking, 7b's default, needs longer training than a unit test's:
    ``test_budget_tracking_trains_over_prices_and_steers_by_the_run_share``)."""
    results = tmp_path_factory.mktemp("results")
    config = fast_config(results)
    config.sim.deployment("7b").budget_tracking = False
    config.sim.deployment("7b").training_steps_factor = 1.0
    calibration = default_calibration(config)
    folder = controller_folder(config, "7b")
    result = train_controller(config, calibration, "7b", authority_rows("7b", True, True), folder)
    return config, calibration, result


# --------------------------------------------------------------------------------------------
# environment


def test_env_passes_the_gymnasium_and_sb3_checks(config):
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    space = ControlSpace.from_authority(authority_rows("7b", True, True), "7b", config.workload)
    env = GrpoPowerEnv(config, default_calibration(config), "7b", space)
    check_env(env, skip_render_check=True)
    sb3_check_env(env, warn=False)
    assert env.observation_space.shape == (OBSERVATION_SIZE + 1,)  # 7b tracks the budget
    assert env.action_space.shape == (2,)


def test_env_speaks_the_run_contract_and_scores_rates(config):
    space = ControlSpace.from_authority(authority_rows("72b"), "72b", config.workload)
    env = GrpoPowerEnv(config, default_calibration(config), "72b", space, randomize=False)
    obs, info = env.reset(seed=0)
    assert info["cap_w"] == 220.0  # the deployment's own cap
    first = Observation(0.0, 0.0, 0.0, 0.0, 32, 32, 0.0, 220.0, 0, train_micro_batch=4)
    np.testing.assert_array_equal(obs, first.to_array())
    obs, reward, terminated, truncated, info = env.step(np.array([-1.0], dtype=np.float32))
    assert (info["concurrency"], info["max_new_tokens"]) == (1, 64)  # driven, held
    np.testing.assert_array_equal(obs, observe(env.run).to_array())
    # the Lagrangian reward, written out: tokens against the fixed arm's expected rate, minus
    # the multiplier times the violation share over the budget (no breaker window yet: the
    # run is shorter than it), minus nothing for energy (weight 0)
    step_s = env.run.t_s
    w = config.workload
    fixed = env.run.model.plan(w.concurrency, w.max_new_tokens, w.num_generations)
    expected = (info["tokens"] / step_s) / (fixed.tokens / fixed.step_s) - 10.0 * (
        info["samples_over_cap"] / info["samples"] - 0.02
    )
    assert info["breaker"] == 0.0
    assert reward == pytest.approx(expected)
    assert not terminated and not truncated
    steps = 1
    while not truncated:
        *_, truncated, _ = env.step(np.array([1.0], dtype=np.float32))
        steps += 1
    assert steps == config.controller.episode_steps


def test_domain_randomisation_changes_physics_and_cap(config):
    space = ControlSpace.from_authority(authority_rows("7b"), "7b", config.workload)
    env = GrpoPowerEnv(config, default_calibration(config), "7b", space, randomize=True)
    caps, decode = set(), set()
    for seed in range(4):
        _, info = env.reset(seed=seed)
        caps.add(info["cap_w"])
        decode.add(env.run.model.physics.times["decode_base_ms"])
    assert len(caps) == 4 and len(decode) == 4
    jitter = config.controller.cap_jitter_frac
    assert all(320 * (1 - jitter) <= c <= 320 * (1 + jitter) for c in caps)


def test_training_conditions_change_within_episodes_and_act_on_the_steps():
    """With changing conditions the environment redraws them about every
    ``change_every_steps`` steps, about half of them nominal, and each kind of change moves the
    simulated step as it should: early ends make fewer tokens, a lower cap is the one observed
    (the power limit following it), derating lengthens the step."""
    every = 32
    config = load_config(
        REPO / "config" / "config.yaml",
        {"controller": {"conditions": {"change_every_steps": every}}},
    )
    space = ControlSpace.from_authority(authority_rows("7b"), "7b", config.workload)
    frac = 0.95
    calibration = default_calibration(config)
    env = GrpoPowerEnv(
        config, calibration, "7b", space, randomize=False, power_limit_frac=frac, changing=True
    )
    env.reset(seed=0)
    hold = np.zeros(env.action_space.shape, dtype=np.float32)
    steps, changes = [], 0
    for _ in range(1500):
        now = env.run.schedule.conditions[0]
        cap_seen, limit_w = env.run.cap_w, env.run.model.power_limit_w
        *_, truncated, info = env.step(hold)
        assert info["samples"] > 0
        assert info["nominal"] == (now == env.nominal)
        steps.append((now, cap_seen, info["tokens"], info["step_s"], limit_w))
        changes += env.run.schedule.conditions[0] != now
        if truncated:
            env.reset()
    nominal = [s for s in steps if s[0] == env.nominal]
    early = [s for s in steps if s[0].completion_tokens is not None]
    lower = [s for s in steps if s[0].cap_frac < 1.0]
    slower = [s for s in steps if s[0].slowdown > 1.0]
    assert 0.35 < len(nominal) / len(steps) < 0.65
    assert min(len(early), len(lower), len(slower)) > 0.08 * len(steps)
    assert 0.5 * len(steps) / every < changes < 1.5 * len(steps) / every
    full = np.median([s[2] for s in nominal])
    assert all(s[2] < full for s in early if s[0].completion_tokens < 20)
    assert all(s[2] == full for s in lower + slower)
    for conditions, cap_w, *_, limit_w in lower:
        assert cap_w == pytest.approx(320.0 * conditions.cap_frac)
        assert limit_w == pytest.approx(frac * cap_w)
    nominal_s = np.median([s[3] for s in nominal])
    assert np.median([s[3] for s in slower if s[0].slowdown > 1.25]) > 1.1 * nominal_s
    # by default (change_every_steps 0) the conditions stay nominal, training or not
    default = load_config(REPO / "config" / "config.yaml")
    env = GrpoPowerEnv(default, calibration, "7b", space, randomize=False, changing=True)
    env.reset(seed=0)
    for _ in range(100):
        env.step(hold)
        assert env.run.schedule.conditions[0] == env.nominal


# --------------------------------------------------------------------------------------------
# training, saving, loading


@pytest.mark.slow
def test_budget_tracking_trains_over_prices_and_steers_by_the_run_share(tmp_path):
    """Budget tracking (on for 7b, off for the others by default): training episodes draw
    their multiplier about the dual update's and the policy sees its log; the saved controller
    holds the law and decides at the price the simulated run's violation share so far sets,
    which the run counts exactly."""
    config = fast_config(tmp_path)
    config.controller.total_timesteps = 1024
    config.controller.validation_snapshots = 2
    assert not config.controller.budget_tracking.enabled
    assert [tracks_budget(config, d) for d in ("7b", "14b", "72b")] == [True, False, False]
    config.controller.budget_tracking.enabled = True
    config.sim.deployment("7b").budget_tracking = False  # a deployment's own setting wins
    assert [tracks_budget(config, d) for d in ("7b", "14b")] == [False, True]
    config.sim.deployment("7b").budget_tracking = None
    calibration = default_calibration(config)
    rows = authority_rows("7b", True, True)
    space = ControlSpace.from_authority(rows, "7b", config.workload)
    env = GrpoPowerEnv(config, calibration, "7b", space)
    env.set_multiplier(8.0)
    spread = config.controller.budget_tracking.spread
    drawn = []
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        assert obs.shape == (OBSERVATION_SIZE + 1,) == env.observation_space.shape
        assert obs[-1] == pytest.approx(np.log(env.multiplier), rel=1e-6)
        drawn.append(np.log(env.multiplier / 8.0))
    assert -spread - 1e-9 <= min(drawn) < -spread / 2 and spread / 2 < max(drawn) <= spread + 1e-9
    # the step's reward prices its violations at the episode's multiplier
    _, reward, _, _, info = env.step(np.zeros(len(space.actuators)))
    share = info["samples_over_cap"] / info["samples"]
    tokens_share = info["tokens"] / info["step_s"] / env._ref_tokens_per_s
    budget = config.objective.violation_budget
    assert reward == pytest.approx(
        tokens_share - env.multiplier * (share - budget + info["breaker"]), rel=1e-9
    )

    folder = tmp_path / "controller"
    train_controller(config, calibration, "7b", rows, folder)
    controller = PPOController.load(folder)
    tracking = controller.meta["budget_tracking"]
    curve = pd.read_csv(folder / "learning_curve.csv")
    assert tracking["multiplier"] in set(curve["multiplier"])  # the dual's, at a snapshot
    assert tracking["target"] == pytest.approx(0.9 * budget)
    assert controller.meta["observation"]["fields"][-1] == "log_multiplier"
    # the law: the trained price at the target, dearer above it, cheaper below, within bounds
    seen = random_observations(1, np.random.default_rng(0))[0]
    price = {
        share: tracked_multiplier(
            tracking, replace(seen, run_samples=1000, run_share_above_cap=share)
        )
        for share in (0.0, tracking["target"], 2 * budget, 1.0)
    }
    assert price[tracking["target"]] == pytest.approx(tracking["multiplier"])
    assert price[0.0] < tracking["multiplier"] < price[2 * budget] <= price[1.0]
    assert price[0.0] >= config.controller.reward.multiplier_min
    assert price[1.0] == config.controller.reward.multiplier_max
    # a simulated run counts its samples above the cap exactly as its records hold them
    physics = physics_for(calibration, "7b", config)
    run = simulate(physics, config, controller, controller.meta["cap_w"], 120.0, 3)
    power = np.concatenate([step.power_w.ravel() for step in run.steps])
    caps = np.concatenate([np.full(step.power_w.size, step.cap_w) for step in run.steps])
    seen = observe(run)
    assert seen.run_samples == power.size
    assert seen.run_share_above_cap == pytest.approx(float(np.mean(power > caps)))


def test_short_training_beats_a_random_policy(trained):
    _, _, result = trained
    e = result.evaluation
    # the objective (docs/design.md): within the violation budget, and more output than a
    # uniformly random policy over the same actuators (which, on nominal physics, is not within
    # it); the per-step Lagrangian return is the means, not the measure
    budget = trained[0].objective.violation_budget
    assert e["trained_violation_rate"] <= budget < e["random_violation_rate"]
    assert e["trained_tokens"] > e["random_tokens"]
    # the oracle's plan on the same episodes, what the curve is drawn against: more output
    # than the short training's policy, about the budget (planned to it on the tuning seeds over
    # the whole budget, these episodes are shorter), a higher return than the random policy
    assert e["oracle_tokens"] > e["trained_tokens"]
    assert abs(e["oracle_violation_rate"] - budget) < budget / 2
    assert e["oracle_return"] > e["random_return"]
    assert result.space.actuators == ("concurrency", "max_new_tokens")
    for name in ("policy.zip", "vecnormalize.pkl", "policy.npz", "controller.json"):
        assert (result.folder / name).exists()
    curve = pd.read_csv(result.folder / "learning_curve.csv")
    assert list(curve.columns) == [*CURVE_COLUMNS, "data"] and len(curve) >= 2
    assert (curve["data"] == "simulated").all()  # the curve is the simulator's, and says so
    assert curve["timesteps"].is_monotonic_increasing


def test_the_saved_policy_is_the_validated_choice(trained):
    """Training keeps policy snapshots and saves the one the objective prefers on the tuning
    seeds: the saved controller, run again on those seeds, is that snapshot's validation, and
    no snapshot within the budget made more tokens."""
    config, calibration, result = trained
    selection = json.loads((result.folder / "controller.json").read_text())["selection"]
    candidates = selection["candidates"]
    assert 2 <= len(candidates) <= config.controller.validation_snapshots + 1
    assert selection["seeds"] == config.evaluate.tuning_seeds
    assert not set(selection["seeds"]) & set(config.evaluate.seeds)  # never the evaluation's
    assert candidates[-1]["final"] and not any(c["final"] for c in candidates[:-1])
    assert {c["seed"] for c in candidates} == {config.seed}  # one training by default
    _assert_saved_is_chosen(config, calibration, result.folder, selection)


def _assert_saved_is_chosen(config, calibration, folder, selection) -> None:
    """The controller saved in ``folder``, run again on the validation's seeds, is the chosen
    snapshot's validation, and no snapshot within the budget made more tokens."""
    candidates = selection["candidates"]
    chosen = candidates[selection["chosen"]]
    controller = PPOController.load(folder)
    physics = physics_for(calibration, "7b", config)
    budget_s = selection["budget_s"]
    schedule = Schedule.constant(budget_s, config.sim.completion_tokens)
    outcomes = [
        run_outcome(
            simulate(
                physics, config, controller, controller.meta["cap_w"], budget_s, s, None, schedule
            ),
            budget_s,
            config.objective,
        )
        for s in selection["seeds"]
    ]
    tokens_per_s = np.mean([o.tokens for o in outcomes]) / budget_s
    assert tokens_per_s == pytest.approx(chosen["tokens_per_s"], rel=1e-9)
    assert np.mean([o.violation_rate for o in outcomes]) == pytest.approx(chosen["violation_rate"])
    # validated at the caps the training draws, the deployment's first
    cap_w = controller.meta["cap_w"]
    assert selection["caps_w"] == [
        cap_w,
        *(c for c in training_caps_w(config, cap_w) if c != cap_w),
    ]
    for row in chosen["other_caps"]:
        runs = [
            simulate(physics, config, controller, row["cap_w"], budget_s, s, None, schedule)
            for s in selection["seeds"]
        ]
        tokens = np.mean([run_outcome(r, budget_s, config.objective).tokens for r in runs])
        assert tokens / budget_s == pytest.approx(row["tokens_per_s"], rel=1e-9)
    within = [c for c in candidates if c["within_budget"]]
    if not within:
        assert chosen["violation_rate"] == min(c["violation_rate"] for c in candidates)
        return
    # within the budget at the deployment's cap, and no such snapshot has a larger sum over the
    # caps of its tokens as a share of the most made within the budget at each
    assert chosen["within_budget"]
    rows = [[c, *c["other_caps"]] for c in candidates]
    best = [
        max((r[k]["tokens_per_s"] for r in rows if r[k]["within_budget"]), default=0.0)
        for k in range(len(rows[0]))
    ]

    def score(row):
        return sum(r["tokens_per_s"] / best[k] for k, r in enumerate(row) if r["within_budget"])

    chosen_score = score(rows[selection["chosen"]])
    assert all(score(r) <= chosen_score + 1e-12 for r in rows if r[0]["within_budget"])


def test_the_validation_prefers_a_snapshot_that_keeps_the_budget_across_the_training_caps():
    """The 7b controller chosen at its own cap alone made 53.9 % of its oracle at 305 W, within
    its training's caps: a snapshot that makes a little less at the deployment's cap and keeps
    the budget at the others is preferred to one that breaks it there; the deployment's cap
    comes first, and with no snapshot within the budget the fewest violations win."""
    objective = load_config(REPO / "config" / "config.yaml").objective

    def outcome(tokens, violation_rate):
        return Outcome(tokens, violation_rate, 0.0, 0.0, 250.0)

    narrow = [outcome(1000, 0.019), outcome(0, 0.09), outcome(1200, 0.01)]  # over at the low cap
    robust = [outcome(950, 0.018), outcome(600, 0.019), outcome(1150, 0.01)]
    greedy = [outcome(1100, 0.03), outcome(700, 0.01), outcome(1300, 0.01)]  # over at its own
    assert choose_snapshot([narrow, robust, greedy], [0, 0, 0], objective) == 1
    assert choose_snapshot([narrow[:1], robust[:1], greedy[:1]], [0, 0, 0], objective) == 0
    over = [[outcome(1000, 0.05)], [outcome(500, 0.03)]]
    assert choose_snapshot(over, [0, 0], objective) == 1
    assert choose_snapshot([narrow, narrow], [0, 1], objective) == 0  # ties: the first training


def test_several_trainings_are_validated_together(tmp_path):
    """With ``controller.training_seeds`` above 1 each seed trains its own policy, every
    training's snapshots are validated alike, and the saved controller is the one the objective
    prefers among them all, whichever training it came from (its seed in controller.json)."""
    config = fast_config(tmp_path)
    config.controller.total_timesteps = 1024
    config.controller.validation_snapshots = 2
    config.controller.training_seeds = 2
    config.sim.deployment("7b").budget_tracking = False
    config.sim.deployment("7b").training_steps_factor = 1.0
    calibration = default_calibration(config)
    folder = tmp_path / "controller"
    train_controller(config, calibration, "7b", authority_rows("7b", True, True), folder)
    meta = json.loads((folder / "controller.json").read_text())
    selection = meta["selection"]
    candidates = selection["candidates"]
    seeds = [config.seed, config.seed + 1]
    assert meta["training"]["seeds"] == seeds
    assert [c["seed"] for c in candidates] == sorted(c["seed"] for c in candidates)
    assert {c["seed"] for c in candidates} == set(seeds)
    for seed in seeds:  # each training's last snapshot is its final policy
        own = [c for c in candidates if c["seed"] == seed]
        assert [c["final"] for c in own] == [False] * (len(own) - 1) + [True]
    # the trainings differ: they are not one policy validated twice
    assert len({(c["tokens_per_s"], c["violation_rate"]) for c in candidates}) > len(seeds)
    assert meta["training"]["seed"] == candidates[selection["chosen"]]["seed"]
    _assert_saved_is_chosen(config, calibration, folder, selection)


def test_saved_controller_matches_sb3(trained):
    from stable_baselines3 import PPO

    _, _, result = trained
    controller = PPOController.load(result.folder)
    model = PPO.load(result.folder / "policy.zip", device="cpu")
    with (result.folder / "vecnormalize.pkl").open("rb") as handle:
        normalizer = pickle.load(handle)
    for observation in random_observations(50, np.random.default_rng(0)):
        obs = observation.to_array()
        ours = controller.action_vector(obs)
        theirs, _ = model.predict(normalizer.normalize_obs(obs[None, :]), deterministic=True)
        np.testing.assert_allclose(ours, np.clip(theirs[0], -1, 1), atol=1e-5)
    meta = controller.meta
    assert meta["simulated"] is True and meta["deployment"] == "7b"
    assert meta["authority"] and meta["calibration_digest"]
    # the metadata names every entry of the observation vector the policy was trained on
    names = meta["observation"]["fields"]
    assert len(names) == len(meta["observation"]["mean"]) == len(obs) == len(set(names))
    assert {"train_micro_batch", "pause_s"} <= set(names)


def test_a_controller_says_which_inputs_lie_far_from_its_training() -> None:
    """A trained controller in a user's script read a tiny model's tokens per second (or a
    held chunk at its bound) tens of standard deviations from its training, and acted on it
    (7 s pauses before every step) without a word: it names such inputs, which
    PowerCapCallback warns of once each."""
    from grpo_power.control.contract import ARRAY_FIELDS

    n = len(ARRAY_FIELDS)
    mean = np.zeros(n)
    mean[ARRAY_FIELDS.index("tokens_per_s")] = 300.0
    var = np.ones(n)
    var[ARRAY_FIELDS.index("tokens_per_s")] = 400.0  # sd 20 tokens/s
    meta = {
        "space": {
            "deployment": "7b",
            "actuators": ["concurrency"],
            "bounds": {"concurrency": [1, 32]},
            "holds": {},
        },
        "observation": {
            "mean": mean.tolist(),
            "var": var.tolist(),
            "epsilon": 1e-8,
            "clip": 10.0,
            "fields": list(ARRAY_FIELDS),
        },
    }
    arrays = {"w0": np.zeros((1, n)), "b0": np.zeros(1), "activations": np.array([], dtype=str)}
    controller = PPOController(meta, arrays)
    seen = Observation(0.0, 0.0, 0.0, 0.0, 0, 0, 48.0, 300.0, 40)
    assert controller.far_inputs(seen, 5.0) == [("tokens_per_s", 48.0, pytest.approx(-12.6))]
    near = replace(seen, tokens_per_s=290.0)
    assert controller.far_inputs(near, 5.0) == []


def test_missing_controller_names_the_file_and_the_command(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        PPOController.load(tmp_path / "controller" / "7b")
    message = str(error.value)
    assert "controller.json" in message and "grpo-power controller train --deployment 7b" in message
    # a folder of one's own names no deployment: it said `--deployment user` of `user/`
    with pytest.raises(FileNotFoundError, match="controller train --deployment DEPLOYMENT --out"):
        PPOController.load(tmp_path / "user")
    # the controller.json itself, given for its folder: said so (it looked for
    # controller.json/controller.json and suggested `--deployment controller.json`)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "controller.json").write_text("{}")
    with pytest.raises(ValueError, match=r"controller.json: a file; expected the controller's fo"):
        PPOController.load(tmp_path / "mine" / "controller.json")


def test_a_damaged_or_mixed_controller_folder_is_refused_naming_the_file(trained, tmp_path):
    """A policy.npz of another training beside its controller.json, or statistics or an action
    space damaged, loaded fine and failed at the first decision in numpy (a matmul of 10 and 9
    values, zip() too short, KeyError, NaN to integer); each is refused at load, naming the file
    and the field. A ppo+hwcap folder's hint names the arm."""
    import json
    import shutil

    _, _, result = trained
    controller = json.loads((result.folder / "controller.json").read_text())
    arrays = dict(np.load(result.folder / "policy.npz"))

    def folder(name, meta=None, npz=None):
        path = tmp_path / name
        shutil.copytree(result.folder, path)
        if meta is not None:
            (path / "controller.json").write_text(json.dumps(meta))
        if npz is not None:
            np.savez(path / "policy.npz", **npz)
        return path

    w0 = arrays["w0"]
    cases = {
        "wide": (None, {**arrays, "w0": np.zeros((w0.shape[0], w0.shape[1] + 1))}, "w0: expected"),
        "no_b1": (None, {k: v for k, v in arrays.items() if k != "b1"}, "w1, b1: expected both"),
        "var": (
            {
                **controller,
                "observation": {**controller["observation"], "var": [-1.0] * w0.shape[1]},
            },
            None,
            "observation.var: expected",
        ),
        "actuators": (
            {**controller, "space": {**controller["space"], "actuators": ["concurrency"]}},
            None,
            "expected 1 outputs (one per driven actuator",
        ),
        "bounds": (
            {**controller, "space": {**controller["space"], "bounds": {}}},
            None,
            "space.bounds: expected [min, max] of every driven actuator",
        ),
    }
    for name, (meta, npz, expected) in cases.items():
        with pytest.raises(ValueError, match=re.escape(expected)) as error:
            PPOController.load(folder(name, meta, npz))
        assert str(error.value).startswith(str(tmp_path / name)), name
    with pytest.raises(FileNotFoundError, match=r"--deployment 7b --arm ppo\+hwcap --out"):
        PPOController.load(tmp_path / "7b+hwcap")


def test_sizes_map_to_deployments(config):
    assert deployment_for_size(config, "tiny") == "7b"
    assert deployment_for_size(config, "qwen2.5-72b") == "72b"
    config.sim.deployments[0].sizes = []
    with pytest.raises(ValueError, match="sizes"):
        deployment_for_size(config, "tiny")


# --------------------------------------------------------------------------------------------
# the ppo arm on a real (tiny, CPU) run


@pytest.mark.slow
def test_ppo_arm_drives_a_real_tiny_run(trained, tmp_path):
    from grpo_power.telemetry.steplog import read_step_log
    from grpo_power.workload.arms import controller_for_arm
    from grpo_power.workload.runner import run_grpo

    config, _, _ = trained
    controller = controller_for_arm("ppo", config, tmp_path / "calibration")
    assert isinstance(controller, PPOController)
    run_grpo(config, "ppo", 0, tmp_path / "run", controller, steps=3, show_progress=False)
    steps = read_step_log(tmp_path / "run" / "steps.parquet")
    assert len(steps) == 3
    # the hook counts the run's samples before each decision: none before the first step
    assert steps["obs_run_samples"].iloc[0] == 0 < steps["obs_run_samples"].iloc[-1]
    assert steps["obs_run_samples"].is_monotonic_increasing
    assert steps["obs_run_share_above_cap"].between(0, 1).all()
    for _, row in steps.iterrows():
        observation = Observation(
            **{name: row[f"obs_{name}"] for name in Observation.__dataclass_fields__}
        )
        action = controller.decide(observation)
        assert row["action_concurrency"] == action.concurrency
        assert row["action_max_new_tokens"] == action.max_new_tokens
        assert row["concurrency"] == action.concurrency  # within bounds: applied as asked
    # the run's next generation used the controller's concurrency
    assert (steps["generate_calls"] == -(-steps["sequences"] // steps["concurrency"])).all()


def test_ppo_hwcap_arm_sets_its_trained_limit_through_nvml(trained, tmp_path, monkeypatch):
    """A real tiny run of the ppo+hwcap arm over NVML (a fake NVML module: this machine has no
    GPU) sets every GPU's power limit to the controller's trained share of the cap before the
    first step, samples under it, and restores the old limit when the run ends."""
    from grpo_power.telemetry import factory
    from grpo_power.telemetry.nvml import NvmlSource
    from grpo_power.telemetry.store import read_trace
    from grpo_power.workload.arms import controller_for_arm
    from grpo_power.workload.runner import run_grpo

    config, calibration, _ = trained
    folder = controller_folder(config, "7b", "ppo+hwcap")
    rows = authority_rows("7b", True, True)
    train_controller(config, calibration, "7b", rows, folder, hardware_tier=True)
    gpu = FakeGpu(0, "GPU-a", 250_000, 250_000, 0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(factory, "NvmlSource", lambda ids: NvmlSource(ids, nvml=fake_nvml([gpu])))
    telemetry = config.telemetry.model_copy(update={"source": "nvml"})
    nvml_config = config.model_copy(update={"telemetry": telemetry})
    controller = controller_for_arm("ppo+hwcap", nvml_config, tmp_path / "calibration")
    assert isinstance(controller, PPOController)
    frac = controller.power_limit_frac
    assert frac == json.loads((folder / "controller.json").read_text())["power_limit_frac"]
    result = run_grpo(
        nvml_config, "ppo+hwcap", 0, tmp_path / "run", controller, steps=2, show_progress=False
    )
    limit_mw = int(frac * config.cap_w * 1000)
    assert gpu.limits_set_mw == [limit_mw, 350_000]  # set for the run, then restored
    trace = read_trace(result.paths.trace)
    assert trace.complete and len(trace.frame) > 0
    np.testing.assert_allclose(trace.frame["power_limit_w"], limit_mw / 1000)
    manifest = json.loads(result.paths.manifest.read_text())
    assert manifest["power"] == "nvml"


def test_held_actuators_are_held_at_the_oracles_setting_where_it_meets_the_budget(config):
    """On the H100 the 7b sweep held concurrency at 4 (its reward, the others at their
    defaults, preferred 4 to 32 by 0.008) and the controller made 62 % less than fixed: a held
    actuator is held where the oracle's longest-held setting has it, when the oracle meets the
    budget; a driven actuator's setting and an infeasible oracle change nothing."""
    rows = authority_rows("7b", concurrency=False, max_new_tokens=True)
    rows[0]["hold_level"] = 4
    space = ControlSpace.from_authority(rows, "7b", config.workload)
    assert (space.actuators, space.holds) == (("max_new_tokens",), {"concurrency": 4})
    oracle = {
        "feasible": True,
        "settings": [
            {"concurrency": 16, "max_new_tokens": 40, "share": 0.3},
            {"concurrency": 32, "max_new_tokens": 24, "share": 0.7},
        ],
    }
    assert oracle_holds(oracle, space) == {"concurrency": 32}
    held = space.held_at(oracle_holds(oracle, space))
    assert held.holds == {"concurrency": 32} and held.actuators == space.actuators
    assert held.to_action(np.array([1.0])).concurrency == 32
    assert oracle_holds({**oracle, "feasible": False}, space) == {}
    assert space.held_at({"concurrency": 999}).holds == {
        "concurrency": space.bounds["concurrency"][1]
    }


def _space_driving(config: Config, deployment: str, driven: set[str]) -> ControlSpace:
    """The action space of an authority table where the actuators in ``driven`` cleared the
    threshold on ``deployment`` (the others held, at 8 until the oracle's plan holds them)."""
    rows = [
        {"deployment": deployment, "actuator": name, "data": "simulated",
         "selected": name in driven, "authority": 0.2, "hold_level": 8}
        for name in ("concurrency", "max_new_tokens", "train_micro_batch", "pause_s")
    ]  # fmt: skip
    return ControlSpace.from_authority(rows, deployment, config.workload)


def test_a_held_actuator_is_held_where_it_makes_the_most_across_the_training_caps():
    """The packaged 7b at 320 W: the oracle's plan held the training chunk at 4, tied at 320 W
    with 1, but 4 leaves far less under the lower caps the controller trains under (and the
    study's 305 W scenario evaluates), so it is held at 1: with concurrency, the
    best static setting within the budget at the training range's lowest cap makes more with
    chunks of 1 than of 4 (simulated)."""
    config = load_config(REPO / "config" / "config.yaml")
    calibration = default_calibration(config)
    space = _space_driving(config, "7b", {"concurrency", "max_new_tokens", "pause_s"})
    caps_w = training_caps_w(config, 320.0)
    assert caps_w == pytest.approx([294.4, 320.0, 345.6])
    nameplate_w = config.gpu.nameplate_w  # the training draws no cap above it
    assert training_caps_w(config, nameplate_w) == pytest.approx([0.92 * nameplate_w, nameplate_w])
    plan = {"feasible": True, "settings": [{"train_micro_batch": 4, "share": 1.0}]}
    assert robust_holds(config, calibration, "7b", 320.0, False, space, plan) == {
        "train_micro_batch": 1
    }
    # the simulator's own runs agree: at the lowest training cap, chunks of 1 make more
    physics = physics_for(calibration, "7b", config)
    low_w = caps_w[0]
    chunk_1 = best_static_tokens(physics, config, low_w, 300.0, (1,), range(1, 9))
    assert chunk_1 > best_static_tokens(physics, config, low_w, 300.0, (4,), range(1, 9))
    # no randomised caps: the oracle's hold stands, and nothing is searched
    fixed_caps = config.model_copy(
        update={"controller": config.controller.model_copy(update={"domain_randomization": False})}
    )
    assert training_caps_w(fixed_caps, 320.0) == [320.0]
    assert robust_holds(fixed_caps, calibration, "7b", 320.0, False, space, plan) == {
        "train_micro_batch": 4
    }


def test_a_held_level_the_plan_time_shares_about_is_held_between_where_one_setting_keeps_it():
    """The packaged 72b at 220 W: the oracle's plan time-shares max new tokens at 49 and 47 to
    meet the budget, and the controller held 49, its longest-held level, where run steadily
    the plan's concurrency and chunks break the budget. Held at 48, between the two, they keep
    it and make as much within the search's noise (simulated, the simulator's own runs)."""
    config = load_config(REPO / "config" / "config.yaml")
    calibration = default_calibration(config)
    space = _space_driving(config, "72b", {"concurrency", "train_micro_batch"})
    plan = oracle_reference(config, calibration, "72b", 220.0, False)
    shared = sorted({s["max_new_tokens"] for s in plan["settings"]})
    assert shared == [47, 49] and oracle_holds(plan, space)["max_new_tokens"] == 49
    assert {(s["concurrency"], s["train_micro_batch"]) for s in plan["settings"]} == {(32, 4)}
    assert robust_holds(config, calibration, "72b", 220.0, False, space, plan) == {
        "max_new_tokens": 48,
        "pause_s": 0,
    }
    physics = physics_for(calibration, "72b", config)
    budget_s = config.sim.deployment("72b").budget_s
    for seeds in (config.evaluate.tuning_seeds, config.evaluate.seeds):
        outcomes = {}
        for held in (48, 49):
            runs = [
                simulate(physics, config, FixedController(32, held, 4, 0), 220.0, budget_s, s)
                for s in seeds
            ]
            outcomes[held] = pooled([run_outcome(r, budget_s, config.objective) for r in runs])
        within = {
            held: meets_budget(o.violation_rate, o.breaker_excess_w, config.objective)
            for held, o in outcomes.items()
        }
        assert within == {48: True, 49: False}
        assert outcomes[48].tokens / budget_s >= (1.0 - HOLD_GAIN) * plan["tokens_per_s"]
