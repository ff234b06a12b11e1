"""The simulated A100 follows occupancy, stays within idle..peak, and obeys NVML semantics."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from grpo_power.config import Config
from grpo_power.sim.defaults import MEASURED_DECODE_AT_1_W, MEASURED_DECODE_W_PER_DOUBLING
from grpo_power.sim.power_model import GpuActivity, GpuPowerModel
from grpo_power.telemetry.sampler import PowerSampler
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.simulated import SimulatedGpuSource


def test_decode_power_rises_with_batch_and_matches_calibration(config: Config) -> None:
    model = GpuPowerModel(config.gpu, config.telemetry.simulated)
    powers = [model.steady_power_w("generate", b) for b in (1, 4, 16, 64)]
    assert powers == sorted(powers) and powers[0] < powers[-1]
    # docs/calibration.md 'measured decode, Qwen3-8B on vLLM': the steady line of the public
    # A100 traces (95 % intervals; tests/test_real_traces.py refits them from the traces)
    _, at_1_low, at_1_high = MEASURED_DECODE_AT_1_W
    _, slope_low, slope_high = MEASURED_DECODE_W_PER_DOUBLING
    assert at_1_low <= powers[0] <= at_1_high
    assert at_1_low + 6 * slope_low <= powers[3] <= at_1_high + 6 * slope_high
    # the literature row '7-8B decode' at b=64 (316-378 W, several engines) agrees there
    assert 316 <= powers[3] <= 378
    # Training draws 0.7-1.0 TDP (assumed lower than production training), scoring near idle.
    assert 0.7 * 400 <= model.steady_power_w("train", 4) <= 400
    assert model.steady_power_w("score", 1) < 0.25 * 400
    assert model.steady_power_w("idle", 1) == config.gpu.idle_w


def test_samples_stay_between_idle_and_peak(config: Config) -> None:
    model = GpuPowerModel(config.gpu, config.telemetry.simulated)
    rng = np.random.default_rng(1)
    for phase, batch in [
        ("idle", 1),
        ("generate", 1),
        ("generate", 256),
        ("train", 64),
        ("score", 1),
    ]:
        activity = GpuActivity(phase=phase, batch=batch)
        samples = [model.power_w(activity, rng) for _ in range(400)]
        assert min(samples) >= config.gpu.idle_w
        assert max(samples) <= model.peak_w == pytest.approx(1.28 * 400)  # measured transients


def test_prefill_follows_tokens_at_once_and_is_capped_at_the_transient_peak(config: Config) -> None:
    model = GpuPowerModel(config.gpu, config.telemetry.simulated)
    # A chunk of 16 sequences with 18 prompt tokens each: the prefill processes 288 tokens,
    # 4 doublings of the occupancy over the decode of 16 (6.55 W each on the defaults)
    assert model.steady_power_w("prefill", 16 * 18) > model.steady_power_w("generate", 16) + 20
    assert model.steady_power_w("prefill", 1) == model.steady_power_w("generate", 1)
    assert model.steady_power_w("prefill", 2**20) == pytest.approx(model.peak_w)  # 1.28 TDP


def test_source_follows_the_workload_signal(config: Config) -> None:
    signal = WorkloadSignal()
    source = SimulatedGpuSource(config.gpu, config.telemetry.simulated, signal, [0, 1], seed=0)
    t = time.monotonic()
    signal.set("generate", 1)
    time.sleep(0.05)  # past the 25 ms sensor window
    low = [source.read(t + 1 + 0.1 * i) for i in range(20)]
    signal.set("generate", 64)
    time.sleep(0.05)
    high = [source.read(t + 10 + 0.1 * i) for i in range(20)]
    mean_low = np.mean([r["power_w"] for rows in low for r in rows])
    mean_high = np.mean([r["power_w"] for rows in high for r in rows])
    assert mean_high - mean_low > 30.0  # 64x the occupancy: about 39 W more on the defaults
    assert {r["gpu"] for r in high[0]} == {0, 1}
    # The 1 s average lags the instantaneous reading; the counter is cumulative and increasing.
    energy = [rows[0]["energy_j"] for rows in low + high]
    assert all(b >= a for a, b in itertools.pairwise(energy))


def test_sampler_at_50_ms_keeps_its_period(config: Config) -> None:
    signal = WorkloadSignal()
    source = SimulatedGpuSource(config.gpu, config.telemetry.simulated, signal, [0], seed=0)
    sampler = PowerSampler(source, writer=None, period_s=0.05)
    with sampler:
        signal.set("train", 8)
        time.sleep(1.0)
    recent = sampler.recent(10.0)
    assert 17 <= sampler.samples_taken <= 23
    assert abs(np.median(np.diff(recent.t_s)) - 0.05) < 0.01
    assert sampler.error is None


def test_sensor_window_weighs_a_short_phase_in_proportion(config: Config) -> None:
    """A phase shorter than the 25 ms sensor window counts by its share of the window."""
    params = config.telemetry.simulated.model_copy(update={"noise_w": 0.0})
    model = GpuPowerModel(config.gpu, params)
    rng = np.random.default_rng(0)
    decode = GpuActivity("generate", 16)
    prefill = GpuActivity("prefill", 16 * 18)
    reading = model.sensed_power_w([(prefill, 0.005), (decode, 0.020)], rng)
    expected = 0.2 * model.steady_power_w("prefill", 288) + 0.8 * model.steady_power_w(
        "generate", 16
    )
    assert reading == pytest.approx(expected)
    signal = WorkloadSignal()
    signal.set("train", 4)
    time.sleep(0.05)
    mix = signal.mix(0.025)
    assert [a.phase for a, _ in mix] == ["train"]
    assert sum(w for _, w in mix) == pytest.approx(0.025, abs=0.002)


def test_the_simulated_clock_is_the_parts() -> None:
    """An H100 study's simulated readings boost to the H100's 1980 MHz (they read the A100's
    1410 whatever the part), and a part the config describes itself has no known clock."""
    from grpo_power.config import GpuSpec, SimulatedPowerConfig

    params = SimulatedPowerConfig()
    for gpu, clock_mhz in (
        (GpuSpec(), 1410.0),
        (GpuSpec(name="NVIDIA H100 80GB HBM3"), 1980.0),
        (GpuSpec(name="NVIDIA H100 80GB HBM3", sm_clock_max_mhz=1755.0), 1755.0),
    ):
        model = GpuPowerModel(gpu, params)
        assert model.sm_clock_mhz(gpu.idle_w) == clock_mhz
        assert model.sm_clock_mhz(gpu.nameplate_w) < clock_mhz  # throttled at the limit
    custom = GpuSpec(name="NVIDIA L40S", nameplate_w=350.0, idle_w=35.0)
    assert np.isnan(GpuPowerModel(custom, params).sm_clock_mhz(100.0))


def test_a_1s_average_part_reads_the_last_seconds_power_at_any_period() -> None:
    """An H100's NVML power is the mean of the last second. The simulated source averaged its
    own 25 ms readings over that second, so a 50 ms training burst once a period read 525 W
    (the burst alone) at a 0.5 s or 1 s period; it now reads the second's mean power, as the
    step simulator does: idle but for the burst, (75 + 450 x 0.05 / period) W."""
    from grpo_power.config import GpuSpec, SimulatedPowerConfig

    gpu = GpuSpec(name="NVIDIA H100 80GB HBM3")
    params = SimulatedPowerConfig(noise_w=0.0)
    train_w = GpuPowerModel(gpu, params).steady_power_w("train", 8)
    for period_s in (0.5, 1.0):
        signal = WorkloadSignal()
        source = SimulatedGpuSource(gpu, params, signal, [0])
        readings_w = []
        for k in range(4):
            signal.set("idle")
            time.sleep(period_s - 0.05)
            signal.set("train", 8)
            time.sleep(0.05)
            readings_w.append(source.read(k * period_s)[0]["power_w"])
        expected_w = gpu.idle_w + (train_w - gpu.idle_w) * 0.05 / min(1.0, period_s)
        assert readings_w[1:] == pytest.approx([expected_w] * 3, abs=12.0), period_s


def test_an_idle_gpu_reads_its_idle_power_not_the_clipped_noise_above_it(config: Config) -> None:
    """Decode's 6.4 W of noise was added at idle too and clipped there: an idle GPU read 62.4 W
    for 60 W (the public traces' idle readings spread by under 1 W), and a run of long pauses
    read 2 W above its energy's mean power. Idle now reads idle; busy phases keep their noise,
    and a run's mean reading is its mean power."""
    from grpo_power.sim.calibration import default_calibration
    from grpo_power.sim.grpo_sim import SimRun
    from grpo_power.sim.step_model import StepModel, physics_for

    source = SimulatedGpuSource(
        config.gpu, config.telemetry.simulated, WorkloadSignal(), [0], seed=0
    )
    idle_w = [source.read(0.1 * i)[0]["power_w"] for i in range(200)]
    assert np.mean(idle_w) == pytest.approx(config.gpu.idle_w, abs=0.1)
    physics = physics_for(default_calibration(config), "7b", config)
    w = config.workload
    model = StepModel(physics, w, config.sim.prompt_tokens)
    run = SimRun(model, w, 0.1, 10, 320.0, seed=1, record=True)
    run.apply(pause_s=w.pause_s_bounds.max)
    for _ in range(40):
        run.step()
    readings_w = np.concatenate([s.power_w[:, 0] for s in run.steps])
    energy_mean_w = sum(s.energy_j for s in run.steps) / run.t_s
    assert readings_w.mean() == pytest.approx(energy_mean_w, rel=0.005)
    assert readings_w.std() > 50  # the busy phases stand out of the pauses, noise and all


def test_the_decode_ranges_scale_with_the_part_as_its_default_does() -> None:
    """The default decode curve is a share of (nameplate - idle), but its randomisation range
    was in the A100's watts: on an H100 (700 W, idle 75 W) the default 475 W sat at the top of
    222-475 W, so a domain-randomised controller trained almost only on less power than the
    nominal part draws. The ranges are now shares too: the same place about the default on
    every part, and the A100's watts unchanged."""
    from grpo_power.config.loading import deep_merge, read_yaml, validate_config
    from grpo_power.sim.defaults import default_power
    from tests.conftest import REPO

    a100 = read_yaml(REPO / "config" / "config.yaml")
    h100 = deep_merge(a100, read_yaml(REPO / "config" / "h100.yaml"))
    parts = [default_power(validate_config(data)) for data in (a100, h100)]
    for name in ("decode_base_frac", "decode_slope_per_doubling"):
        a, h = (p[name] for p in parts)
        assert (h.value, h.low, h.high) == pytest.approx((a.value, a.low, a.high)), name
        assert a.low < a.value < a.high, name
    base = parts[0]["decode_base_frac"]
    watts = [60.0 + 340.0 * share for share in (base.low, base.high)]
    assert watts == pytest.approx([222.0, MEASURED_DECODE_AT_1_W[2]])
