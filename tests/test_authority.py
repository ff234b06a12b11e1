"""The authority table (analysis/authority.py) and the action space built from it
(control/env.py ControlSpace): definitions on hand-made sweeps, and the occupancy-versus-volume
principle from the simulator's physics (SIMULATED)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_power.analysis.authority import (
    authority_table,
    markdown,
    read_authority,
    write_authority,
)
from grpo_power.control.env import ControlSpace
from grpo_power.sim.calibration import default_calibration
from grpo_power.sim.defaults import Parameter, literature_decode_prior
from grpo_power.sim.grpo_sim import sweep_deployment

WEIGHTS = {"tokens_weight": 1.0, "violation_weight": 10.0, "energy_weight": 0.2}


def sweep_rows(deployment: str, actuator: str, levels, powers, tokens, violations, default):
    return [
        {
            "deployment": deployment,
            "gpus": 1 if deployment == "one" else 4,
            "actuator": actuator,
            "level": level,
            "default": level == default,
            "mean_power_w": power,
            "tokens_per_s": tps,
            "violation_rate": viol,
            "nameplate_w": 400.0,
            "idle_w": 60.0,
            "data": "simulated",
        }
        for level, power, tps, viol in zip(levels, powers, tokens, violations, strict=True)
    ]


@pytest.fixture
def sweeps() -> pd.DataFrame:
    rows = []
    rows += sweep_rows(
        "one", "concurrency", [1, 8, 32], [200, 260, 302], [10, 60, 100], [0, 0, 0.3], 32
    )
    rows += sweep_rows("one", "max_new_tokens", [8, 64], [280, 290], [60, 80], [0.2, 0.2], 8)
    rows += sweep_rows("one", "num_generations", [2, 16], [250, 300], [50, 90], [0, 0], 16)
    rows += sweep_rows("four", "concurrency", [1, 32], [180, 198], [5, 40], [0, 0.01], 32)
    rows += sweep_rows("four", "max_new_tokens", [8, 64], [190, 200.2], [20, 45], [0.0, 0.05], 8)
    rows += sweep_rows("four", "num_generations", [2, 16], [195, 198.4], [20, 40], [0, 0], 16)
    return pd.DataFrame(rows)


def test_authority_definitions(sweeps):
    table = authority_table(sweeps, threshold=0.05, reference="one", weights=WEIGHTS)
    row = table.set_index(["deployment", "actuator"])
    # (power at the highest level - at the lowest) / (nameplate - idle)
    assert row.loc[("one", "concurrency"), "authority"] == pytest.approx(102 / 340)
    assert row.loc[("four", "concurrency"), "authority"] == pytest.approx(18 / 340)
    # retained = sharded / single-GPU authority, same actuator
    assert row.loc[("four", "concurrency"), "retained_authority"] == pytest.approx(18 / 102)
    assert row.loc[("four", "num_generations"), "retained_authority"] == pytest.approx(3.4 / 50)
    assert row.loc[("one", "concurrency"), "retained_authority"] == pytest.approx(1.0)
    # selected: |authority| >= threshold; the effect is measured, not named
    assert row.loc[("four", "concurrency"), "selected"]
    assert not row.loc[("four", "num_generations"), "selected"]
    assert row.loc[("one", "max_new_tokens"), "effect"] == "duration"
    assert row.loc[("one", "concurrency"), "effect"] == "power"
    assert not row.loc[("one", "num_generations"), "online"]
    # hold level: the best reward vs the default level (64 gives +33 % tokens, same violations)
    assert row.loc[("one", "max_new_tokens"), "hold_level"] == 64
    # on "four" the longer limit costs 5 points of violations (x 10 = 0.5) for +125 % tokens
    assert row.loc[("four", "max_new_tokens"), "hold_level"] == 64


def test_hold_level_weighs_violations(sweeps):
    heavy = {**WEIGHTS, "violation_weight": 100.0}
    table = authority_table(sweeps, 0.05, "one", heavy).set_index(["deployment", "actuator"])
    assert table.loc[("four", "max_new_tokens"), "hold_level"] == 8


def test_single_level_and_missing_columns_are_errors(sweeps):
    one_level = sweeps[~((sweeps["deployment"] == "one") & (sweeps["level"] > 1))]
    one_level = one_level[one_level["actuator"] == "concurrency"]
    with pytest.raises(ValueError, match="one level only"):
        authority_table(one_level[one_level["deployment"] == "one"], 0.05, "one", WEIGHTS)
    with pytest.raises(ValueError, match="lack column"):
        authority_table(sweeps.drop(columns="idle_w"), 0.05, "one", WEIGHTS)


def test_files_round_trip(sweeps, tmp_path):
    table = write_authority(sweeps, 0.05, "one", WEIGHTS, tmp_path)
    rows = read_authority(tmp_path / "authority.json")
    assert len(rows) == len(table) == 6
    text = (tmp_path / "authority.md").read_text()
    assert "SIMULATED" in text and "17-22 %" in text
    assert markdown(table) == text
    with pytest.raises(FileNotFoundError, match="grpo-power identify"):
        read_authority(tmp_path / "nope" / "authority.json")


# --------------------------------------------------------------------------------------------
# the action space is built from the table


def test_action_space_from_the_table(sweeps, config):
    table = authority_table(sweeps, 0.05, "one", WEIGHTS)
    rows = table.to_dict(orient="records")
    single = ControlSpace.from_authority(rows, "one", config.workload)
    assert single.actuators == ("concurrency",)  # max_new_tokens lacks authority here
    assert single.holds == {"max_new_tokens": 64}
    assert not single.fallback
    # raise the threshold: nothing qualifies on "four", the strongest online actuator is driven
    strict = authority_table(sweeps, 0.2, "one", WEIGHTS).to_dict(orient="records")
    fallback = ControlSpace.from_authority(strict, "four", config.workload)
    assert fallback.fallback and fallback.actuators == ("concurrency",)
    assert fallback.holds == {"max_new_tokens": 64}
    # lower it: both online actuators are driven
    loose = authority_table(sweeps, 0.01, "one", WEIGHTS).to_dict(orient="records")
    both = ControlSpace.from_authority(loose, "four", config.workload)
    assert both.actuators == ("concurrency", "max_new_tokens") and both.holds == {}
    # CSV strings work as well as booleans
    as_text = [{**r, "selected": str(r["selected"])} for r in rows]
    assert ControlSpace.from_authority(as_text, "one", config.workload) == single
    with pytest.raises(ValueError, match="no simulated rows"):
        ControlSpace.from_authority(rows, "seven", config.workload)


def test_actions_map_onto_the_bounds(sweeps, config):
    rows = authority_table(sweeps, 0.01, "one", WEIGHTS).to_dict(orient="records")
    space = ControlSpace.from_authority(rows, "one", config.workload)
    w = config.workload
    low = space.to_action(np.array([-1.0, -1.0]))
    high = space.to_action(np.array([1.0, 5.0]))  # clipped
    assert (low.concurrency, low.max_new_tokens) == (
        w.concurrency_bounds.min,
        w.max_new_tokens_bounds.min,
    )
    assert (high.concurrency, high.max_new_tokens) == (
        w.concurrency_bounds.max,
        w.max_new_tokens_bounds.max,
    )
    middle = space.to_action(np.array([0.0, 0.0]))
    assert middle.concurrency == round((w.concurrency_bounds.min + w.concurrency_bounds.max) / 2)
    assert ControlSpace.from_dict(space.to_dict()) == space


# --------------------------------------------------------------------------------------------
# the principle, from the simulator's physics


@pytest.fixture(scope="module")
def simulated_table():
    from grpo_power.config import load_config
    from tests.conftest import REPO

    # The principle on the literature decode curve (docs/calibration.md '7-8B decode'), where
    # occupancy moves decode power by 19 W per doubling; the measured default's steady line
    # moves it by 6.55 W, and its table is the study's own (the identify stage's authority.csv).
    config = load_config(REPO / "config" / "config.yaml")
    prior = literature_decode_prior(config)
    simulated = config.telemetry.simulated.model_copy(
        update={k: prior[k]["value"] for k in ("decode_base_frac", "decode_slope_per_doubling")}
    )
    config = config.model_copy(
        update={"telemetry": config.telemetry.model_copy(update={"simulated": simulated})}
    )
    calibration = default_calibration(config)
    rows = []
    for name in ("7b", "14b", "72b"):
        rows += sweep_deployment(calibration, name, config, seed=0)
    table = authority_table(pd.DataFrame(rows), 0.05, "7b", WEIGHTS)
    return config, calibration, table.set_index(["deployment", "actuator"])


def test_sharding_removes_most_authority(simulated_table):
    _, _, table = simulated_table
    assert table.loc[("7b", "concurrency"), "selected"]
    assert table.loc[("7b", "num_generations"), "authority"] > 0.05  # TRL: group = occupancy
    # 72B sharded with ZeRO-3: group size has almost no authority, concurrency a minority
    assert table.loc[("72b", "num_generations"), "authority"] < 0.05
    assert not table.loc[("72b", "num_generations"), "selected"]
    retained = table.loc[("72b", "concurrency"), "retained_authority"]
    assert 0.0 < retained < 0.5
    assert table.loc[("72b", "concurrency"), "selected"]
    # more sharding, less authority
    assert (
        table.loc[("7b", "concurrency"), "authority"]
        > table.loc[("14b", "concurrency"), "authority"]
        > table.loc[("72b", "concurrency"), "authority"]
    )


def test_the_loss_of_authority_comes_from_the_gathers(simulated_table):
    """Remove the 72B deployment's parameter gathers: its authority comes back (so the
    table's result is physics, not a constant)."""
    config, calibration, table = simulated_table
    for key in ("gather_ms", "gather_overlap"):
        calibration.deployments["72b"]["parameters"][key] = Parameter(0.0, 0.0, 0.0, "test")
    rows = sweep_deployment(calibration, "72b", config, seed=0)
    rows += sweep_deployment(calibration, "7b", config, seed=0)
    ungathered = authority_table(pd.DataFrame(rows), 0.05, "7b", WEIGHTS)
    ungathered = ungathered.set_index(["deployment", "actuator"])
    assert ungathered.loc[("72b", "concurrency"), "retained_authority"] > 0.8
    assert (
        ungathered.loc[("72b", "num_generations"), "authority"]
        > table.loc[("72b", "num_generations"), "authority"] * 2
    )


def test_a_pause_dilutes_power_by_its_share_of_the_step(simulated_table):
    """The pause's authority is the duty cycle's: the mean power at a pause of P seconds is the
    step's energy plus P seconds of idle over the step's time plus P (computed here from the
    noise-free plan); a fixed pause weighs less on longer steps (7b > 14b > 72b)."""
    from grpo_power.sim.step_model import StepModel, physics_for

    config, _, table = simulated_table
    calibration = default_calibration(config)  # the fixture's is changed by the gathers test
    w = config.workload
    for name in ("7b", "14b", "72b"):
        physics = physics_for(calibration, name, config)
        plan = StepModel(physics, w, config.sim.prompt_tokens).plan(
            w.concurrency, w.max_new_tokens, w.num_generations
        )
        pause_s = w.pause_s_bounds.max
        expected_w = (plan.energy_j + physics.idle_w * pause_s) / (plan.step_s + pause_s)
        assert table.loc[(name, "pause_s"), "power_high_w"] == pytest.approx(expected_w, rel=0.03)
        assert table.loc[(name, "pause_s"), "authority"] < 0
    magnitude = [-table.loc[(n, "pause_s"), "authority"] for n in ("7b", "14b", "72b")]
    assert magnitude[0] > magnitude[1] > magnitude[2]


def test_the_training_chunk_amortises_the_gathers(simulated_table):
    """Without gathers (7b) a training chunk's time is proportional to its tokens, so the chunk
    size moves power but not throughput; on the sharded 72b every chunk pays its gathers, so a
    larger chunk is faster as well as more occupied."""
    config, _, table = simulated_table
    calibration = default_calibration(config)  # the fixture's is changed by the gathers test
    rows = pd.DataFrame(sweep_deployment(calibration, "7b", config, seed=0))
    rows = pd.concat([rows, pd.DataFrame(sweep_deployment(calibration, "72b", config, seed=0))])
    chunk = rows[rows["actuator"] == "train_micro_batch"].set_index(["deployment", "level"])
    low, high = (
        config.workload.train_micro_batch_bounds.min,
        config.workload.train_micro_batch_bounds.max,
    )
    assert chunk.loc[("7b", high), "tokens_per_s"] == pytest.approx(
        chunk.loc[("7b", low), "tokens_per_s"], rel=1e-9
    )
    assert chunk.loc[("72b", high), "tokens_per_s"] > 1.5 * chunk.loc[("72b", low), "tokens_per_s"]
    for name in ("7b", "72b"):
        assert table.loc[(name, "train_micro_batch"), "authority"] > 0  # occupancy: more power


def test_new_actuators_enter_the_action_space_only_when_selected(simulated_table):
    from grpo_power.sim.step_model import ONLINE_ACTUATORS

    config, _, table = simulated_table
    rows = table.reset_index().to_dict(orient="records")
    for name in ("7b", "14b", "72b"):
        space = ControlSpace.from_authority(rows, name, config.workload)
        selected = {a for a in ONLINE_ACTUATORS if table.loc[(name, a), "selected"]}
        assert set(space.actuators) == selected
        assert set(space.holds) == set(ONLINE_ACTUATORS) - selected
        action = space.to_action(-np.ones(len(space.actuators)))
        for actuator in ONLINE_ACTUATORS:  # driven: the lower bound; held: the hold level
            expected = (
                getattr(config.workload, f"{actuator}_bounds").min
                if actuator in selected
                else int(table.loc[(name, actuator), "hold_level"])
            )
            assert getattr(action, actuator) == expected
    text = markdown(table.reset_index())
    assert "beside the study's 72B authority sweep" in text
    assert "| pause_s | inter-batch pause |" in text and "| 6.3 % |" in text
