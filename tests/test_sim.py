"""The GRPO step simulator (sim/step_model.py, sim/grpo_sim.py) and its calibration.

Everything here is simulated; the tests check the physics the study relies on (power follows
occupancy, volume changes durations only, gathers dilute occupancy), telemetry semantics, the
calibration file, and the identify fit.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from grpo_power.config import Config, GpuSpec
from grpo_power.sim.calibration import (
    calibration_for,
    default_calibration,
    load_calibration,
    save_calibration,
)
from grpo_power.sim.defaults import DEPLOYMENT_PARAMETERS, POWER_PARAMETERS, Parameter, draw
from grpo_power.sim.fit import RunData, fit_completion_lengths, fit_from_runs, fit_linear
from grpo_power.sim.grpo_sim import SimRun, sweep_deployment
from grpo_power.sim.step_model import (
    DECODE,
    OPTIMIZER,
    PAUSE,
    PREFILL,
    TRAIN,
    StepModel,
    expected_rates,
    physics_for,
)


def model_for(config: Config, deployment: str = "7b", limit_w: float | None = None) -> StepModel:
    physics = physics_for(default_calibration(config), deployment, config)
    return StepModel(physics, config.workload, config.sim.prompt_tokens, limit_w)


def segment_power(plan, kind: int) -> float:
    return float(plan.power_w[plan.kind == kind][0])


def segment_time(plan, kind: int) -> float:
    return float(plan.duration_s[plan.kind == kind].sum())


# --------------------------------------------------------------------------------------------
# calibration file


def test_defaults_cover_every_parameter_with_a_source(config):
    calibration = default_calibration(config)
    assert set(calibration.power) == set(POWER_PARAMETERS)
    for name in ("7b", "14b", "72b"):
        parameters = calibration.deployment_parameters(name)
        assert set(parameters) == set(DEPLOYMENT_PARAMETERS)
        for key, p in parameters.items():
            assert p.low <= p.value <= p.high, (name, key)
            assert p.source, (name, key)
    # the 7B decode time is docs/calibration.md's Llama-3-8B row scaled to 7.6B parameters
    decode = calibration.deployment_parameters("7b")["decode_base_ms"]
    assert decode.value == pytest.approx(14.6 / 8.0 * 7.6)
    assert "docs/calibration.md" in decode.source
    # only sharded deployments gather parameters
    assert calibration.deployment_parameters("7b")["gather_ms"].value == 0.0
    assert calibration.deployment_parameters("72b")["gather_ms"].value > 0.0


def test_calibration_round_trip_and_errors(config, tmp_path):
    calibration = default_calibration(config)
    path = save_calibration(calibration, tmp_path / "calibration.json")
    loaded = load_calibration(path)
    assert loaded.to_dict() == calibration.to_dict()
    assert loaded.digest() == calibration.digest()
    assert json.loads(path.read_text())["simulated"] is True
    data = json.loads(path.read_text())
    data["power"]["noise_w"]["value"] = 100.0  # outside its range
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"power.noise_w: value 100.0 lies outside"):
        load_calibration(path)
    with pytest.raises(FileNotFoundError, match="grpo-power identify"):
        load_calibration(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text(json.dumps({"kind": "other"}))
    with pytest.raises(ValueError, match="not a grpo-power calibration"):
        load_calibration(tmp_path / "bad.json")


def test_calibration_for_prefers_the_file_and_fills_missing_deployments(config, tmp_path):
    calibration = default_calibration(config)
    del calibration.deployments["14b"]
    calibration.power["noise_w"] = Parameter(5.0, 2.0, 8.0, "test")
    path = save_calibration(calibration, tmp_path / "c.json")
    used = calibration_for(config, path)
    assert used.power["noise_w"].value == 5.0
    assert "14b" in used.deployments


def test_draw_stays_in_ranges(config):
    parameters = default_calibration(config).deployment_parameters("72b")
    rng = np.random.default_rng(0)
    for _ in range(20):
        values = draw(parameters, rng)
        for key, value in values.items():
            assert parameters[key].low <= value <= parameters[key].high
    assert draw(parameters, None) == {k: p.value for k, p in parameters.items()}


# --------------------------------------------------------------------------------------------
# physics: occupancy vs volume


def test_power_follows_occupancy_not_volume(config):
    model = model_for(config)
    g = config.workload.num_generations
    decode = [segment_power(model.plan(c, 32, g), DECODE) for c in (1, 4, 16, 32)]
    # the measured steady decode line: 6.55 W per doubling of the batch, 5 doublings from 1 to 32
    assert decode == sorted(decode) and decode[-1] - decode[0] > 25.0
    # volume: max new tokens and group size change durations, not the decode power
    short, long = model.plan(16, 8, g), model.plan(16, 64, g)
    assert segment_power(short, DECODE) == segment_power(long, DECODE)
    assert segment_time(long, DECODE) == pytest.approx(8 * segment_time(short, DECODE))
    assert long.tokens == 8 * short.tokens
    small, big = model.plan(8, 32, 4), model.plan(8, 32, 16)
    assert segment_power(small, DECODE) == segment_power(big, DECODE)
    assert segment_time(big, DECODE) == pytest.approx(4 * segment_time(small, DECODE))
    # the prefill draws more than the decode after it: all its prompt tokens at once
    plan = model.plan(16, 32, g)
    assert segment_power(plan, PREFILL) > segment_power(plan, DECODE)


def test_gathers_dilute_occupancy_on_sharded_deployments(config):
    g = config.workload.num_generations
    single, sharded = model_for(config, "7b"), model_for(config, "72b")

    def decode_range(model):
        return segment_power(model.plan(32, 32, g), DECODE) - segment_power(
            model.plan(1, 32, g), DECODE
        )

    assert decode_range(sharded) < 0.5 * decode_range(single)
    # the same deployment without gathers gets the single-GPU occupancy curve back
    calibration = default_calibration(config)
    for key in ("gather_ms", "gather_overlap"):
        calibration.deployments["72b"]["parameters"][key] = Parameter(0.0, 0.0, 0.0, "test")
    physics = physics_for(calibration, "72b", config)
    ungathered = StepModel(physics, config.workload, config.sim.prompt_tokens)
    assert decode_range(ungathered) == pytest.approx(decode_range(single), rel=1e-6)


def test_higher_concurrency_is_faster_and_tokens_are_counted_on_all_gpus(config):
    g = config.workload.num_generations
    model = model_for(config, "14b")
    assert model.plan(32, 32, g).step_s < model.plan(8, 32, g).step_s < model.plan(1, 32, g).step_s
    assert model.plan(32, 32, g).tokens == 2 * config.workload.sequences_per_step * 32


def test_hardware_limit_holds_power_and_slows_phases(config):
    g = config.workload.num_generations
    free, limited = model_for(config), model_for(config, limit_w=300.0)
    plan, held = free.plan(32, 32, g), limited.plan(32, 32, g)
    assert held.power_w.max() < 300.0
    assert segment_time(held, DECODE) > segment_time(plan, DECODE)
    slowdown_decode = segment_time(held, DECODE) / segment_time(plan, DECODE)
    assert slowdown_decode < 1.05  # memory-bound decode barely slows (Samsi et al.)
    # phases under the limit are untouched
    assert segment_time(held, OPTIMIZER) == segment_time(plan, OPTIMIZER)
    assert segment_power(held, OPTIMIZER) == segment_power(plan, OPTIMIZER)


def test_a_pause_adds_idle_time_and_no_tokens(config):
    g = config.workload.num_generations
    model = model_for(config)
    plan, paused = model.plan(32, 32, g), model.plan(32, 32, g, pause_s=3)
    assert paused.tokens == plan.tokens
    assert paused.step_s == pytest.approx(plan.step_s + 3.0)
    assert paused.energy_j == pytest.approx(plan.energy_j + 3.0 * model.physics.idle_w)
    assert segment_time(paused, PAUSE) == 3.0 and not (plan.kind == PAUSE).any()


def test_the_training_chunk_sets_the_training_occupancy(config):
    """A larger chunk draws more power in the training phase; on the gather-free 7b its time
    follows tokens only, so a size that leaves a remainder chunk (5: six chunks and one of 2)
    trains the step's 32 sequences in the same time as a divisor does."""
    g = config.workload.num_generations
    model = model_for(config)
    small, large, uneven = (model.plan(32, 32, g, train_micro_batch=k) for k in (1, 8, 5))
    assert segment_power(large, TRAIN) > segment_power(small, TRAIN)
    assert segment_time(uneven, TRAIN) == pytest.approx(segment_time(large, TRAIN))
    assert (uneven.kind == TRAIN).sum() == 2  # the chunks of 5 and the remainder
    run = SimRun(model, config.workload, 0.1, 5.0, config.cap_w, seed=0)
    record = run.step(train_micro_batch=1000, pause_s=-4)  # clamped to the bounds
    bounds = config.workload.train_micro_batch_bounds, config.workload.pause_s_bounds
    assert (record.train_micro_batch, record.pause_s) == (bounds[0].max, bounds[1].min)


# --------------------------------------------------------------------------------------------
# telemetry and runs


def test_samples_follow_the_period_and_the_sensor_window(config):
    model = model_for(config)
    run = SimRun(model, config.workload, 0.1, 5.0, config.cap_w, seed=0, record=True)
    for _ in range(5):
        run.step(16, 32)
    index = np.concatenate([s.sample_index for s in run.steps])
    assert (np.diff(index) == 1).all() and index[0] == 0
    assert index[-1] * 0.1 < run.t_s <= (index[-1] + 1) * 0.1 + 1e-9
    power = np.concatenate([s.power_w for s in run.steps])
    assert power.shape[1] == 1 and power.dtype == np.float32
    assert power.min() >= model.physics.idle_w and power.max() <= model.physics.model.peak_w
    recent = run.recent_power_w()
    assert len(recent) == pytest.approx(50, abs=1)


def test_noise_free_readings_average_the_sensor_window(config):
    physics = physics_for(default_calibration(config), "7b", config)
    params = physics.model.params.model_copy(update={"noise_w": 0.0})
    quiet = type(physics)(
        physics.name,
        physics.gpus,
        physics.power,
        physics.times,
        type(physics.model)(physics.model.gpu, params),
        sensor_window_s=0.05,
    )
    run = SimRun(StepModel(quiet, config.workload, 24), config.workload, 0.01, 5.0, 320.0, seed=0)
    record = run.step(32, 32)
    plan = run.model.plan(32, 32, config.workload.num_generations)
    bounds = np.cumsum(plan.duration_s)
    t = record.sample_index * 0.01
    inside = np.searchsorted(bounds, t) == np.searchsorted(bounds, t - 0.05)
    inside &= t >= 0.05
    # a reading whose window lies inside one phase is that phase's power
    expected = plan.power_w[np.searchsorted(bounds, t[inside])]
    np.testing.assert_allclose(record.power_w[inside, 0], expected, rtol=1e-5)
    # a reading straddling a boundary lies between the two phases' powers
    straddle = ~inside & (t >= 0.05)
    lo = np.minimum(
        plan.power_w[np.searchsorted(bounds, t[straddle])],
        plan.power_w[np.searchsorted(bounds, t[straddle] - 0.05)],
    )
    assert (record.power_w[straddle, 0] >= lo - 1e-3).all()


def test_expected_rates_match_a_long_simulation(config):
    model = model_for(config)
    run = SimRun(model, config.workload, 0.1, 5.0, config.cap_w, seed=3, record=True)
    while run.t_s < 3000:
        run.step(24, 32)
    power = np.concatenate([s.power_w for s in run.steps])
    tokens = sum(s.tokens for s in run.steps)
    rates = expected_rates(
        model.plan(24, 32, config.workload.num_generations),
        config.cap_w,
        model.physics.model.params.noise_w,
    )
    assert tokens / run.t_s == pytest.approx(rates.tokens_per_s, rel=0.01)
    assert power.mean() == pytest.approx(rates.power_w, rel=0.02)
    # the closed form ignores the 25 ms sensor window, which smooths the prefill bursts
    assert (power > config.cap_w).mean() == pytest.approx(rates.violation_rate, abs=0.005)


def test_actuators_clamp_to_their_bounds(config):
    run = SimRun(model_for(config), config.workload, 0.1, 5.0, 320.0, seed=0)
    record = run.step(1000, 1)
    assert record.concurrency == config.workload.concurrency_bounds.max
    assert record.max_new_tokens == config.workload.max_new_tokens_bounds.min
    record = run.step(None, None)
    assert record.concurrency == config.workload.concurrency_bounds.max


def test_levels_and_sweeps(config):
    from grpo_power.config import ActuatorBounds

    assert ActuatorBounds(min=8, max=64).levels() == [8, 16, 32, 64]
    assert ActuatorBounds(min=3, max=20).levels() == [3, 4, 8, 16, 20]
    assert ActuatorBounds(min=1, max=32).levels() == [1, 2, 4, 8, 16, 32]
    assert ActuatorBounds(min=0, max=8).levels() == [0, 1, 2, 4, 8]
    rows = sweep_deployment(default_calibration(config), "72b", config, seed=0)
    frame = pd.DataFrame(rows)
    assert set(frame["actuator"]) == {
        "concurrency",
        "max_new_tokens",
        "num_generations",
        "train_micro_batch",
        "pause_s",
    }
    assert (frame["steps"] >= config.sim.sweep_min_steps).all()
    assert (frame["data"] == "simulated").all()
    assert frame.groupby("actuator")["default"].sum().eq(1).all()


# --------------------------------------------------------------------------------------------
# identify: the fit


def test_fit_linear_holds_unidentifiable_parameters():
    x = np.arange(10.0)
    fit = fit_linear(
        "y",
        2.0 + 3.0 * x,
        {
            "a": (np.ones(10), 1.0, 0.0),
            "b": (x, 1.0, 0.0),
            "c": (2 * x, 1.0, 0.5),  # collinear with b: held at its prior
        },
    )
    assert fit.held == {"c": 0.5}
    # the prior's contribution is subtracted before fitting the rest
    assert fit.coefficients["a"] == pytest.approx(2.0)
    assert fit.coefficients["b"] == pytest.approx(3.0 - 1.0)
    np.testing.assert_allclose(fit.residuals, 0.0, atol=1e-9)
    # coefficients stay non-negative (NNLS): the best fit with b >= 0 has b = 0
    clipped = fit_linear("y", 5.0 - 0.1 * x, {"a": (np.ones(10), 1.0, 0.0), "b": (x, 1.0, 0.0)})
    assert clipped.coefficients["b"] == 0.0
    assert clipped.coefficients["a"] == pytest.approx(np.mean(5.0 - 0.1 * x))
    summary = fit.summary()
    assert summary["points"] == 10 and summary["rms_residual"] == pytest.approx(0.0, abs=1e-9)


def _synthetic_run(config, truth, concurrency: int, seed: int, micro_batch: int = 4) -> RunData:
    """A run whose step log follows ``truth`` exactly (plus 1 % noise) and whose power is
    the simulated curve (training at 0.6 + 0.03 per doubling of the training chunk), to check
    that the fit recovers the parameters."""
    rng = np.random.default_rng(seed)
    w = config.workload
    rows, t, samples_t, samples_w = [], 0.0, [], []
    idle, span = config.gpu.idle_w, config.gpu.nameplate_w - config.gpu.idle_w
    for step in range(1, 9):
        m = int(rng.choice([16, 32, 64]))
        sequences = w.sequences_per_step
        calls = -(-sequences // concurrency)
        prompt = sequences * 20
        completion = sequences * m
        generate = (
            calls * truth["gen_call_s"]
            + prompt * truth["prefill_ms_per_token"] * 1e-3
            + calls * m * truth["decode_base_ms"] * 1e-3
            + completion * truth["decode_ms_per_seq"] * 1e-3
        ) * rng.normal(1, 0.01)
        train = (prompt + completion) * truth["train_ms_per_token"] * 1e-3
        score, optimizer = 0.05, 0.2
        end = t + generate + score + train + optimizer
        rows.append(
            {
                "step": step,
                "start_s": t,
                "end_s": end,
                "generate_s": generate,
                "score_s": score,
                "train_s": train,
                "generate_calls": calls,
                "sequences": sequences,
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "max_completion_tokens": m,
                "concurrency": concurrency,
                "max_new_tokens": m,
                "train_micro_batch": micro_batch,
            }
        )
        gen_frac = 0.5 + 0.05 * np.log2(concurrency)
        train_frac = 0.6 + 0.03 * np.log2(min(micro_batch, sequences))
        ts = np.arange(t, end, 0.05)
        in_gen = ts < t + generate
        in_train = ts >= t + generate + score
        power = np.where(in_gen, idle + span * gen_frac, idle + span * 0.1)
        power = np.where(in_train, idle + span * train_frac, power)
        in_optimizer = ts >= t + generate + score + train  # memory-bound: not training power
        power = np.where(in_optimizer, idle + span * 0.3, power)
        samples_t.append(ts)
        samples_w.append(power)
        t = end
    return RunData(
        f"synthetic-c{concurrency}",
        pd.DataFrame(rows),
        np.concatenate(samples_t),
        np.concatenate(samples_w),
        simulated_power=False,
    )


def test_fit_from_runs_recovers_phase_times_and_power(config):
    calibration = default_calibration(config)
    prior = calibration.deployment_parameters("7b")
    truth = {
        "gen_call_s": 0.03,
        "prefill_ms_per_token": 0.2,
        "decode_base_ms": 10.0,
        "decode_ms_per_seq": 0.5,
        "train_ms_per_token": 0.4,
    }
    runs = [
        _synthetic_run(config, truth, c, seed, micro_batch)
        for seed, (c, micro_batch) in enumerate(((1, 1), (4, 2), (8, 8), (32, 64)))
    ]
    fitted, power, summary, residuals = fit_from_runs(
        runs, prior, calibration.power, calibration.gpu, config.workload.train_micro_batch
    )
    assert fitted["decode_base_ms"].value == pytest.approx(10.0, rel=0.1)
    assert fitted["decode_ms_per_seq"].value == pytest.approx(0.5, rel=0.15)
    assert fitted["train_ms_per_token"].value == pytest.approx(0.4, rel=1e-6)
    assert fitted["optimizer_s"].value == pytest.approx(0.2, rel=1e-6)
    assert power["decode_base_frac"].value == pytest.approx(0.5, abs=0.02)
    assert power["decode_slope_per_doubling"].value == pytest.approx(0.05, abs=0.01)
    # the training chunk: 64 over 32 sequences trains them in one chunk of 32
    assert power["train_base_frac"].value == pytest.approx(0.6, abs=0.01)
    assert power["train_slope_per_doubling"].value == pytest.approx(0.03, abs=0.005)
    assert sorted(set(residuals["train_chunk"])) == [1, 2, 8, 32]  # what it was fitted against
    assert "identify fit" in fitted["decode_base_ms"].source
    # constant sequences per step: the per-sequence score time cannot be told from the base
    score = next(f for f in summary["fits"] if f["target"] == "score_s")
    assert "score_ms_per_seq" in score["held_at_prior"]
    assert summary["power_source"] == "measured"
    assert {"generate_s", "generate_s_fit"} <= set(residuals.columns)
    assert len(residuals) == 4 * 7  # the first step of each run is excluded
    # no power model given: no prior column to set beside the measured phase power
    assert residuals["generate_power_w_prior"].isna().all()
    assert (residuals["power_data"] == "measured").all()
    fit_w = residuals["generate_power_w_fit"]  # the fit's own line through the measured power
    assert np.sqrt(np.mean((residuals["generate_power_w"] - fit_w) ** 2)) < 0.05 * fit_w.mean()
    # every completion ran to max new tokens: no length distribution to fit
    assert summary["completion_lengths"]["identifiable"] is False
    # one training chunk in every run: its slope cannot be told and stays the prior's
    same_chunk = [_synthetic_run(config, truth, c, seed) for seed, c in enumerate((1, 32))]
    _, power, summary, _ = fit_from_runs(
        same_chunk, prior, calibration.power, calibration.gpu, config.workload.train_micro_batch
    )
    train = next(f for f in summary["fits"] if f["target"] == "train_power_frac")
    assert "train_slope_per_doubling" in train["held_at_prior"]
    assert power["train_base_frac"].value == pytest.approx(
        0.6 + 0.03 * 2 - calibration.power["train_slope_per_doubling"].value * 2, abs=0.01
    )  # the chunk of 4: the base takes what the prior's slope leaves of the measured power


@pytest.mark.parametrize(("median", "sigma"), [(20, 1.0), (40, 0.5), (200, 0.8)])
def test_completion_lengths_are_fitted_from_step_totals_and_longest(median, sigma):
    """Steps of lognormal completion lengths, drawn one by one and truncated at max new tokens,
    give back the median and spread from each step's total and longest completion."""
    rng = np.random.default_rng(median)
    rows = []
    for _ in range(60):
        n, limit = int(rng.choice([16, 32, 64])), int(rng.choice([64, 128, 256]))
        lengths = np.clip(np.rint(median * np.exp(sigma * rng.standard_normal(n))), 1, limit)
        rows.append(
            {
                "sequences": n,
                "completion_tokens": lengths.sum(),
                "max_completion_tokens": lengths.max(),
                "max_new_tokens": limit,
            }
        )
    fit = fit_completion_lengths(pd.DataFrame(rows))
    assert fit["identifiable"] and fit["points"] == 60
    assert fit["completion_tokens"] == pytest.approx(median, rel=0.1)
    assert fit["completion_tokens_sigma"] == pytest.approx(sigma, abs=0.1)


def test_completion_lengths_that_run_the_fit_to_its_bound_are_not_identifiable():
    """A tiny random-weight model's steps (the laptop study's real sweep): a few completions
    end early, most run to max new tokens. The fit ran to its sigma bound (a median of 447
    tokens, sigma 2.0, for limits of 8 to 64) and was written as identifiable, and identify
    told the user to simulate it."""
    steps = pd.DataFrame(
        [(32, total, 32, 32) for total in (952, 1015, 927, 972, 1023, 962)]
        + [(32, total, 64, 64) for total in (1824, 1907, 1878)]
        + [(64, total, 32, 32) for total in (1929, 2021, 2048)]
        + [(32, total, 8, 8) for total in (251, 256, 248)]
        + [(8, total, 32, 32) for total in (232, 256, 235)],
        columns=["sequences", "completion_tokens", "max_completion_tokens", "max_new_tokens"],
    )
    fit = fit_completion_lengths(steps)
    assert not fit["identifiable"]
    assert fit["reason"].startswith("the fit runs to its bound (")
    assert (
        "the completions ran to 95% of max new tokens (15 of 18 steps had one end early)"
        in (fit["reason"])
    )


# --------------------------------------------------------------------------------------------
# schedules: a cap that changes, completions that end earlier, derating


def test_a_cap_schedule_changes_the_cap_each_step_runs_under(config):
    from grpo_power.sim.schedule import Conditions, Schedule

    schedule = Schedule((0.0, 100.0, 200.0), (Conditions(), Conditions(0.7), Conditions()), 300.0)
    run = SimRun(
        model_for(config), config.workload, 0.1, 5.0, 320.0, seed=0, record=True, schedule=schedule
    )
    while run.t_s < 300.0:
        run.step(32, 32)
    for step in run.steps:
        inside = 100.0 <= step.start_s < 200.0
        assert step.cap_w == pytest.approx(224.0 if inside else 320.0)
    # the same readings score more violations while the cap is low
    low = [s.over_cap() / s.power_w.size for s in run.steps if s.cap_w < 300]
    high = [s.over_cap() / s.power_w.size for s in run.steps if s.cap_w > 300]
    assert np.mean(low) > np.mean(high) + 0.3
    # each reading is judged by the cap at its own time: a step across the drop at 100 s reads
    # 224 W from then on (its samples were all judged by the 320 W it began under)
    across = next(s for s in run.steps if s.start_s < 100.0 < s.end_s)
    t_s = across.sample_index * 0.1
    assert across.cap_w == 320.0
    assert across.sample_cap_w.tolist() == pytest.approx(np.where(t_s < 100.0, 320.0, 224.0))
    later = across.sample_cap_w[:, None] < 300
    assert across.over_cap() == np.count_nonzero(across.power_w > np.where(later, 224.0, 320.0))


def test_completions_that_end_early_shorten_decode_and_count_fewer_tokens(config):
    """Without spread (sigma 0) every completion ends at the end-of-sequence length."""
    model = model_for(config)
    model.physics = replace(model.physics, completion_sigma=0.0)
    full = model.plan(32, 64, 8)
    early = model.plan(32, 64, 8, completion_tokens=16)
    assert early.tokens == full.tokens // 4  # 16 of 64 tokens per completion
    decode = lambda plan: plan.duration_s[plan.kind == DECODE].sum()  # noqa: E731
    assert decode(early) == pytest.approx(decode(full) / 4)
    assert model.plan(32, 8, 8, completion_tokens=16).tokens == model.plan(32, 8, 8).tokens


def test_a_generate_call_lasts_until_its_longest_completion_ends(config):
    """Lengths spread about the end-of-sequence length (the default sigma): a chunk decodes
    as many steps as its longest completion, its batch shrinking (and its power falling) as the
    shorter ones end; a larger batch waits for a longer tail."""
    model = model_for(config)
    sigma = config.sim.completion_tokens_sigma
    assert sigma > 0
    lengths = model.completion_lengths(32, 64, 16)
    assert lengths[0] < 16 < lengths[-1] <= 64 and np.all(np.diff(lengths) >= 0)
    assert np.median(lengths) == pytest.approx(16, abs=1)  # the length is the median
    plan = model.plan(32, 64, 8, completion_tokens=16)  # one chunk of all 32 completions
    decode = plan.kind == DECODE
    steps = np.diff(np.unique(lengths), prepend=0)  # decode steps of each shrinking batch
    assert plan.tokens == lengths.sum() and decode.sum() == len(steps)
    assert np.all(np.diff(plan.power_w[decode]) < 0)  # fewer sequences decoding, less power
    assert np.all(np.diff(plan.duration_s[decode] / steps) < 0)  # and shorter decode steps
    one_length = replace(model.physics, completion_sigma=0.0)
    uniform = StepModel(one_length, config.workload, config.sim.prompt_tokens)
    longest = uniform.plan(32, int(lengths[-1]), 8, completion_tokens=int(lengths[-1]))
    assert plan.duration_s[decode].sum() < longest.duration_s[longest.kind == DECODE].sum()
    # four completions per call wait for a shorter tail than 32 do
    assert model.completion_lengths(4, 64, 16)[-1] < lengths[-1]


def test_derating_slows_steps_and_lowers_power_above_idle(config):
    from grpo_power.sim.schedule import Conditions, Schedule

    def run_with(slowdown: float) -> SimRun:
        schedule = Schedule((0.0,), (Conditions(slowdown=slowdown),), 200.0)
        run = SimRun(
            model_for(config),
            config.workload,
            0.1,
            5.0,
            320.0,
            seed=0,
            jitter=0.0,
            record=True,
            schedule=schedule,
        )
        while run.t_s < 200.0:
            run.step(32, 32)
        return run

    nominal, derated = run_with(1.0), run_with(1.5)
    step_n, step_d = nominal.steps[0], derated.steps[0]
    assert step_d.end_s - step_d.start_s == pytest.approx(1.5 * (step_n.end_s - step_n.start_s))
    idle = nominal.model.physics.idle_w
    assert step_d.energy_j == pytest.approx(
        step_n.energy_j + 0.5 * idle * (step_n.end_s - step_n.start_s), rel=1e-6
    )


def test_a_1s_average_part_reads_1s_averages_in_the_step_simulator(config):
    """An H100's NVML reports a 1 s average (`gpu.nvml_power: average_1s`), so the simulator the
    controllers train and are scored in reads that, not the A100's 25 ms window: noise-free, the
    short phases' swings are smoothed (a mean of 25 ms windows never exceeds their maximum)."""
    readings = {}
    for nvml_power in ("instant", "average_1s"):
        gpu = GpuSpec(name="NVIDIA H100 80GB HBM3", nvml_power=nvml_power)
        h100 = config.model_copy(update={"gpu": gpu})
        physics = physics_for(default_calibration(h100), "7b", h100)
        params = physics.model.params.model_copy(update={"noise_w": 0.0})
        quiet = replace(physics, model=type(physics.model)(physics.model.gpu, params))
        run = SimRun(
            StepModel(quiet, h100.workload, 24),
            h100.workload,
            0.01,
            5.0,
            560.0,
            seed=0,
            record=True,
        )
        for _ in range(3):
            run.step(32, 32)
        readings[nvml_power] = np.concatenate([s.power_w[:, 0] for s in run.steps[1:]])
        window_s = quiet.sensor_window_s
        assert window_s == (
            1.0 if nvml_power == "average_1s" else h100.telemetry.simulated.sensor_window_s
        )
    assert readings["average_1s"].max() <= readings["instant"].max() + 1e-3
    assert readings["average_1s"].std() < 0.8 * readings["instant"].std()
