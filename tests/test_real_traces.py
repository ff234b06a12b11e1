"""The public measured A100 traces (``../shared/data/real-traces/``, grantwilkins/powertrace-sim):
engine metrics aligned to power, the decode power fit and its held-out error, and the README's
commands on them. Their repository has no license file, so nothing of them is committed:
excerpts are cut into ``tmp_path`` at run time. Absent traces skip these tests (with the reason),
except under CI=true, where they fail (``tests.conftest.real_traces``)."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from grpo_power.config import GpuSpec, load_config
from grpo_power.sim import trace_fit
from grpo_power.sim.trace_fit import block_bootstrap_interval, steady_decode
from grpo_power.telemetry.engine import add_engine_columns, read_engine_log
from grpo_power.telemetry.importers import ImportError_, import_log
from tests.conftest import (
    REAL_RUNS,
    REAL_TRACE_COMMANDS,
    REPO,
    checkout_copy,
    readme_commands,
    real_traces,
    run_as_user,
)


@pytest.fixture(scope="module")
def shared() -> Path:
    return real_traces()


def _imported(folder: Path) -> tuple[pd.DataFrame, object]:
    frame, meta = import_log(folder / "power.csv", "nvidia-smi", nameplate_w=400.0, timezone="UTC")
    return add_engine_columns(frame, meta, read_engine_log(folder / "engine.csv"))


def test_engine_clock_offset_is_found_from_the_data(shared: Path) -> None:
    folder = shared / REAL_RUNS["bursty"]
    frame, meta = _imported(folder)
    manifest = json.loads((folder / "manifest.json").read_text())["clock"]
    info = meta.model_extra["engine_alignment"]
    # the recording's own clock description (not read by the import): local = UTC - 7 h
    assert info["zone_offset_s"] == -manifest["local_utc_offset_s"]
    assert abs(info["skew_s"]) <= 1.0
    assert info["power_samples_matched"] > 0.95
    assert abs(meta.start_unix_s - manifest["reference_epoch_s"]) < 1.5
    engine = pd.read_csv(folder / "engine.csv")
    assert frame["concurrency"].max() == engine["num_requests_running"].max()
    # tokens/s integrates back to the counter's total over the run, within one sample's worth
    rate = read_engine_log(folder / "engine.csv")
    total = engine["generation_tokens_total"]
    integrated = float(np.sum(rate.tokens_per_s[1:] * np.diff(rate.unix_s)))
    assert integrated == pytest.approx(total.iloc[-1] - total.iloc[0], rel=1e-6)


def test_an_engine_log_no_offset_fits_is_refused(shared: Path, tmp_path: Path) -> None:
    folder = shared / REAL_RUNS["bursty"]
    engine = pd.read_csv(folder / "engine.csv")
    engine["timestamp"] += 2 * 86400.0  # an excerpt of another day's run, cut at run time
    engine.head(100).to_csv(tmp_path / "engine.csv", index=False)
    frame, meta = import_log(folder / "power.csv", "nvidia-smi", nameplate_w=400.0)
    with pytest.raises(ImportError_, match=r"engine\.csv: timestamp: expected engine samples"):
        add_engine_columns(frame, meta, read_engine_log(tmp_path / "engine.csv"))


def test_a_missing_engine_column_names_the_ones_found(shared: Path, tmp_path: Path) -> None:
    engine = pd.read_csv(shared / REAL_RUNS["bursty"] / "engine.csv")
    engine.drop(columns="num_requests_running").to_csv(tmp_path / "e.csv", index=False)
    with pytest.raises(ImportError_, match=r"missing column 'num_requests_running'"):
        read_engine_log(tmp_path / "e.csv")
    engine.rename(columns={"num_requests_running": "sglang:num_running_reqs"}).to_csv(
        tmp_path / "s.csv", index=False
    )
    assert read_engine_log(tmp_path / "s.csv", "sglang").concurrency.max() > 0


def test_readme_real_trace_commands_meet_the_targets(shared: Path, tmp_path: Path) -> None:
    """The README's commands on the shared traces, as written, in a checkout copy whose
    ``../shared`` is the real one; the held-out run meets the issue's targets."""

    checkout = checkout_copy(tmp_path / "checkout")
    (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    assert set(REAL_TRACE_COMMANDS) <= set(readme_commands())  # the README's, as written
    for command in REAL_TRACE_COMMANDS:
        run_as_user(command, checkout)
    out = checkout / "results" / "identify" / "traces"
    fit = json.loads((out / "trace_fit.json").read_text())
    held = fit["held_out_error"]["runs"]["r2p5"]
    assert held["bins"] >= 2
    assert held["mean_pct_nameplate"] < 5.0 and held["p95_pct_nameplate"] < 10.0
    assert held["prior_mean_pct_nameplate"] > held["mean_pct_nameplate"]
    p = fit["parameters"]
    assert p["transient_peak_frac"]["value"] > 0.2  # real single readings pass 1.2x nameplate
    assert p["decode_slope_per_doubling"]["low"] > 0  # power does rise with concurrency
    assert fit["data"] == "measured (public trace)"
    # the simulator's default decode curve is this fit's steady line; the literature stays prior
    default = load_config(REPO / "config" / "config.yaml")
    span_w = default.gpu.nameplate_w - default.gpu.idle_w
    sim = default.telemetry.simulated
    steady = fit["steady_decode"]
    for key, value in (
        ("power_at_1_w", default.gpu.idle_w + span_w * sim.decode_base_frac),
        ("slope_w_per_doubling", span_w * sim.decode_slope_per_doubling),
        ("noise_w", sim.noise_w),
    ):
        assert steady[key]["low"] <= value <= steady[key]["high"], key
    # the cited constants (sim/defaults.py, docs/calibration.md) are this fit, rounded
    from grpo_power.sim import defaults

    for key, cited in (
        ("power_at_1_w", defaults.MEASURED_DECODE_AT_1_W),
        ("slope_w_per_doubling", defaults.MEASURED_DECODE_W_PER_DOUBLING),
        ("noise_w", defaults.MEASURED_NOISE_W),
    ):
        fitted = [steady[key][k] for k in ("value", "low", "high")]
        assert fitted == pytest.approx(list(cited), abs=0.06), key
    assert p["transient_peak_frac"]["value"] == pytest.approx(sim.transient_peak_frac, abs=0.005)
    assert p["decode_base_frac"]["prior"] == pytest.approx(0.49, abs=0.005)
    assert p["decode_slope_per_doubling"]["prior"] == pytest.approx(0.057)
    table = pd.read_csv(out / "validation.csv")
    assert set(table["split"]) == {"fit", "held-out"}
    assert (table["samples"] > 0).all()


def test_gpu_name_chooses_the_parameter_set_and_its_nvml_semantics() -> None:
    h200 = GpuSpec(name="NVIDIA H200")
    assert (h200.nameplate_w, h200.nvml_power) == (700.0, "average_1s")
    assert GpuSpec(name="NVIDIA A100-SXM4-80GB", nameplate_w=500).nameplate_w == 500
    with pytest.raises(ValueError, match="expected 400 W for the NVIDIA A100-SXM4-40GB, got 500"):
        GpuSpec(name="NVIDIA A100-SXM4-40GB", nameplate_w=500)
    with pytest.raises(ValueError, match=r"gpu\.name: expected one of.*gpu\.idle_w"):
        GpuSpec(name="NVIDIA A100")  # no parameter set, and the section gives none
    other = GpuSpec(name="NVIDIA L40S", nameplate_w=350, idle_w=35)  # described by the section
    assert (other.nameplate_w, other.idle_w, other.nvml_power) == (350.0, 35.0, "instant")


def test_a_calibration_is_refused_for_another_gpu() -> None:
    from grpo_power.sim.calibration import check_calibration_matches, default_calibration

    a100 = load_config(REPO / "config" / "config.yaml")
    h100 = a100.model_copy(update={"gpu": GpuSpec(name="NVIDIA H100 80GB HBM3")})
    with pytest.raises(ValueError, match=r"gpu\.name: expected 'NVIDIA H100 80GB HBM3'"):
        check_calibration_matches(default_calibration(a100), h100, "cal.json")
    # parts of the same board power are told apart by name: an H100's for an H200, an A100 40 GB
    # board's for the 80 GB one
    h200 = a100.model_copy(update={"gpu": GpuSpec(name="NVIDIA H200")})
    with pytest.raises(ValueError, match=r"gpu\.name: expected 'NVIDIA H200'.*'NVIDIA H100"):
        check_calibration_matches(default_calibration(h100), h200, "cal.json")
    a100_40 = a100.model_copy(update={"gpu": GpuSpec(name="NVIDIA A100-SXM4-40GB")})
    with pytest.raises(ValueError, match="calibration of another GPU"):
        check_calibration_matches(default_calibration(a100), a100_40, "cal.json")
    # a calibration without a name (an older file) is still judged by its board power
    unnamed = default_calibration(a100)
    unnamed.gpu.pop("name")
    with pytest.raises(ValueError, match="expected 700 W"):
        check_calibration_matches(unnamed, h100, "cal.json")
    check_calibration_matches(default_calibration(a100), a100, "cal.json")


def test_a_1s_average_part_reports_the_average_as_its_power() -> None:
    from grpo_power.config import SimulatedPowerConfig
    from grpo_power.telemetry.signals import WorkloadSignal
    from grpo_power.telemetry.simulated import SimulatedGpuSource

    rows = {}
    for name in ("NVIDIA A100-SXM4-40GB", "NVIDIA H200"):
        signal = WorkloadSignal()
        source = SimulatedGpuSource(GpuSpec(name=name), SimulatedPowerConfig(), signal, [0])
        readings = [source.read(i * 0.1)[0] for i in range(5)]
        signal.set("train", 8)
        time.sleep(0.05)  # past the 25 ms sensor window
        readings += [source.read(0.5 + i * 0.1)[0] for i in range(3)]
        rows[name] = readings[-1]
    a100, h200 = rows.values()
    assert a100["power_w"] != pytest.approx(a100["power_avg_w"])  # instant after a step up
    assert h200["power_w"] == pytest.approx(h200["power_avg_w"])
    assert h200["power_w"] < h200["power_limit_w"] * 0.9  # still averaging the idle second in


def test_step_log_gives_concurrency_inside_generation_only() -> None:
    from grpo_power.telemetry.steplog import decode_columns

    steps = pd.DataFrame(
        {
            "start_s": [0.0, 10.0],
            "generate_s": [4.0, 2.0],
            "concurrency": [8, 32],
            "sequences": [16, 16],
            "completion_tokens": [400, 100],
        }
    )
    c, rate = decode_columns(np.array([1.0, 5.0, 10.5, 12.5]), steps)
    assert np.array_equal(c[[0, 2]], [8, 16]) and np.isnan(c[[1, 3]]).all()
    assert rate[0] == 100 and rate[2] == 50


def test_real_traces_stage_and_its_report_section(shared: Path, tmp_path: Path) -> None:
    """`grpo-power real-traces` on the shared folder: every run imported and windowed, the
    arrival-pattern runs fitted, the others held out; the report's section shows the measured
    points, every number traced to the stage's files and labelled as measured."""
    from grpo_power.real_traces import run_real_traces
    from grpo_power.report.real_traces import real_traces_section

    config = load_config(REPO / "config" / "config.yaml")
    config = config.model_copy(
        update={
            "real_traces": config.real_traces.model_copy(
                update={
                    "folder": shared,
                    "held_out": ["arrival_rate", "trace_replay"],
                    "origin": "grantwilkins/powertrace-sim @96361ef",
                }
            )
        }
    )
    out = tmp_path / "real-traces"
    fit = run_real_traces(config, out)
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 6 and (runs["split"] == "fit").sum() == 2
    assert fit["held_out_error"]["runs"]  # validated on the held-out runs
    exceedance = pd.read_csv(out / "exceedance.csv")
    assert set(exceedance["window_s"]) == set(config.windows.windows_s)
    # the 0.5 s windows of a decode-heavy run at 320 W: some over the cap, fewer at 5 s
    bursty = exceedance[exceedance["run_id"].str.startswith("arrival_pattern_qwen3-8b_a100_bursty")]
    share = bursty.set_index("window_s")["exceedance"]
    assert share[0.5] > 0 and share[5.0] <= share[0.5]
    page, figures = real_traces_section(out, tmp_path / "report", 60)
    assert [f.name for f in figures] == ["real_traces.pdf", "real_traces.png"]
    assert page.count("measured (public trace)") >= 3 and "SIMULATED" not in page
    assert page.count('data-src="') > 50  # every number carries its file
    # the validation's targets too, read from the fit the stage wrote (they were typed in)
    assert fit["held_out_error"]["targets_pct_nameplate"] == {"mean": 5.0, "p95": 10.0}
    assert 'data-col="held_out_error.targets_pct_nameplate.p95"' in page
    # each bin held to the targets is judged against them, in the file and on the page (the
    # table showed the errors only, and the cached trace replay's -12 % went unremarked)
    validation = pd.read_csv(out / "fit" / "validation.csv")
    held = validation[validation["held_to_targets"]]
    within = (held["error_mean_pct_nameplate"].abs() <= 5.0) & (
        held["error_p95_pct_nameplate"].abs() <= 10.0
    )
    assert held["meets_targets"].astype(bool).tolist() == within.tolist()
    assert validation.loc[~validation["held_to_targets"], "meets_targets"].isna().all()
    replay = held[held["run_id"].str.startswith("trace_replay_qwen3-8b_a100_cache_on")]
    assert len(replay) and not replay["meets_targets"].astype(bool).any()  # -7 to -12 %
    pooled = held[(held["split"] == "held-out") & (held["run_id"] == "all")]
    error = fit["held_out_error"]
    assert error["bins_meeting_targets"] == int(pooled["meets_targets"].astype(bool).sum())
    assert error["bins"] == len(pooled) > error["bins_meeting_targets"]
    assert "<th>meets the targets</th>" in page
    assert 'data-col="held_out_error.bins_meeting_targets"' in page
    assert (tmp_path / "report" / "figures" / "real_traces.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match=r"real_traces\.held_out: expected some of the runs"):
        run_real_traces(
            config.model_copy(
                update={"real_traces": config.real_traces.model_copy(update={"held_out": [""]})}
            ),
            tmp_path / "none",
        )


def test_identify_refuses_a_run_given_twice(shared: Path, tmp_path: Path) -> None:
    """``identify --trace X --trace X`` fitted each sample twice (its intervals narrowed as if
    there were twice the data), and ``--validate X`` of a fitting run reported its own fit as
    held-out error: each is refused, naming the run and both options."""
    from typer.testing import CliRunner

    from grpo_power.cli import app
    from grpo_power.telemetry.store import write_trace

    frame, meta = _imported(shared / REAL_RUNS["r2p5"])
    meta = meta.model_copy(update={"gpu_name": "NVIDIA A100-SXM4-80GB"})
    trace = write_trace(tmp_path / "r2p5.parquet", frame, meta)
    copy = write_trace(tmp_path / "copy.parquet", frame, meta)  # the same run under another name
    runner = CliRunner()
    for given, where in (
        (["--trace", str(trace), "--trace", str(trace)], "--trace"),
        (["--trace", str(trace), "--validate", str(copy)], "--validate"),
    ):
        result = runner.invoke(app, ["identify", *given, "--out", str(tmp_path / "fit")])
        assert result.exit_code == 2, result.output
        assert f"{where}: the run '{meta.run_id}' is given twice (also as --trace" in result.output
        assert not (tmp_path / "fit").exists()


def test_identify_fits_a_part_the_config_describes_itself(shared: Path, tmp_path: Path) -> None:
    """A part without a parameter set, described by its config (name, board and idle power),
    is fitted like a known one: identify refused it naming no file ("gpu.name: expected one
    of ...") though the config had been accepted."""
    from typer.testing import CliRunner

    from grpo_power.cli import app
    from grpo_power.telemetry.store import write_trace

    frame, meta = _imported(shared / REAL_RUNS["r2p5"])
    meta = meta.model_copy(update={"gpu_name": "NVIDIA L40S", "nameplate_w": 350.0})
    trace = write_trace(tmp_path / "l40s.parquet", frame, meta)
    config = tmp_path / "l40s.yaml"
    config.write_text('gpu: {name: "NVIDIA L40S", nameplate_w: 350, idle_w: 35}\ncap_w: 280\n')
    out = tmp_path / "fit"
    result = CliRunner().invoke(
        app, ["identify", "--trace", str(trace), "--out", str(out), "--config", str(config)]
    )
    assert result.exit_code == 0, result.output
    fit = json.loads((out / "trace_fit.json").read_text())
    assert fit["gpu_name"] == "NVIDIA L40S" and fit["nameplate_w"] == 350.0
    idle = fit["parameters"]["idle_w"]
    assert (idle["prior"], idle["prior_low"], idle["prior_high"]) == (35.0, 35.0, 35.0)


def test_the_steady_line_at_concurrency_1_has_an_interval_that_holds_it():
    """Decode samples at concurrency 8-32 put concurrency 1 three doublings below them: the
    line there moves with the slope. The interval of the median offset under the fitted slope
    alone held the true 277 W in 5 of 20 such data sets; the whole line's bootstrap must hold it
    about as often as its 95 % says."""
    held = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        doublings = np.log2(rng.integers(8, 33, 150))
        power_w = 277.0 + 6.5 * doublings + rng.normal(0.0, 6.0, 150)
        at_1 = steady_decode(doublings, power_w)["power_at_1_w"]
        held += at_1["low"] <= 277.0 <= at_1["high"]
    assert held >= 10


def test_the_steady_line_of_a_long_trace_draws_its_pairs(monkeypatch: pytest.MonkeyPatch):
    """An hour at 0.1 s has 650 million sample pairs (scipy's theilslopes held them all: 3.6 GB
    at 12,000 samples). Past MAX_PAIRS the line takes that many pairs at random, and still finds
    the line the samples lie on."""
    monkeypatch.setattr(trace_fit, "MAX_PAIRS", 2_000)
    rng = np.random.default_rng(0)
    doublings = np.log2(rng.integers(1, 33, 3_000))
    power_w = 277.0 + 6.5 * doublings + rng.normal(0.0, 6.0, 3_000)
    steady = steady_decode(doublings, power_w)
    for key, true in (("power_at_1_w", 277.0), ("slope_w_per_doubling", 6.5)):
        assert steady[key]["low"] <= true <= steady[key]["high"], key
        assert steady[key]["high"] - steady[key]["low"] < 4.0, key


def _prior() -> dict[str, dict[str, float]]:
    """The prior ``identify --trace`` fits against on the default A100 (idle 60 W, 56-66)."""
    from grpo_power.sim.defaults import literature_decode_prior

    config = load_config(REPO / "config" / "config.yaml")
    prior = literature_decode_prior(config)
    prior["idle_w"] = {"value": config.gpu.idle_w, "low": 56.0, "high": 66.0}
    return prior


def _run(levels: dict[float, int], seed: int = 0, idle: int = 55) -> trace_fit.TraceRun:
    """A run of ``idle`` idle samples at 82 W and, per concurrency level, that many decode
    samples on 277 W + 6.5 W per doubling with 6 W of noise."""
    rng = np.random.default_rng(seed)
    c = np.concatenate([np.zeros(idle), *(np.full(n, level) for level, n in levels.items())])
    power_w = np.where(
        c >= 1, 277.0 + 6.5 * np.log2(np.maximum(c, 1.0)) + rng.normal(0, 6, len(c)), 82.0
    )
    frame = pd.DataFrame({"power_w": power_w, "concurrency": c, "sm_util": np.where(c >= 1, 95, 0)})
    return trace_fit.TraceRun("synthetic", frame, "simulated")


def _bursty_slice(
    shared: Path,
    tmp_path: Path,
    name: str,
    keep: Callable[[pd.DataFrame], pd.Series],
    origin: str | None = "public",
) -> Path:
    """The public bursty run's samples where ``keep(frame)`` holds, as a trace file (origin
    set unless None), cut into ``tmp_path`` at run time."""
    from grpo_power.telemetry.store import write_trace

    frame, meta = _imported(shared / REAL_RUNS["bursty"])
    frame = frame[keep(frame)].reset_index(drop=True)
    data = {**meta.model_dump(), "gpu_name": "NVIDIA A100-SXM4-80GB", "run_id": name}
    if origin is not None:
        data["origin"] = origin
    return write_trace(tmp_path / f"{name}.parquet", frame, type(meta).model_validate(data))


def _identify(*args: str) -> Any:
    """``grpo-power identify ARGS`` in a CLI runner; returns its result."""
    from typer.testing import CliRunner

    from grpo_power.cli import app

    return CliRunner().invoke(app, ["identify", *args])


def test_a_level_of_a_few_samples_does_not_count_as_a_level(shared: Path, tmp_path: Path):
    """42 decode samples at concurrency 5 and one prefill burst at 17 were "two levels": the
    line through them gave -0.16 of nameplate - idle at concurrency 1 (28.8 W, under idle) and
    +112 W per doubling, written as a fit. A level needs MIN_LEVEL_SAMPLES samples, two such
    levels are needed, and the refusal names the file and what it found."""
    with pytest.raises(
        ValueError,
        match=r"^synthetic: concurrency: expected at least 10 .* got 43 \(42 at 5, 1 at 17\)$",
    ):
        trace_fit.fit_decode_power([_run({5: 42, 17: 1})], 400.0, _prior())
    # ten at each of two levels is a line, and the line through them holds the true one
    fit = trace_fit.fit_decode_power([_run({4: 10, 16: 10})], 400.0, _prior())
    steady = fit["steady_decode"]
    assert steady["power_at_1_w"]["low"] <= 277.0 <= steady["power_at_1_w"]["high"]
    rare = _bursty_slice(shared, tmp_path, "rare", lambda f: f["concurrency"].isin([0, 5, 17]))
    result = _identify("--trace", str(rare), "--out", str(tmp_path / "fit"))
    assert result.exit_code == 2, result.output
    assert f"{rare}: concurrency: expected at least 10 decode samples" in result.output
    assert "got 43 (42 at 5, 1 at 17)" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "fit").exists()


def test_the_steady_lines_resamples_of_one_level_are_left_out_and_counted():
    """A resample that draws a single concurrency level has no line: it was NaN, and NaN in
    np.quantile made both intervals NaN (with numpy's "Mean of empty slice"). Such resamples are
    left out and counted; where more than MAX_LEFT_OUT_SHARE of them are, the line is refused."""
    import warnings

    rng = np.random.default_rng(1)
    doublings = np.log2(np.r_[np.full(25, 4.0), np.full(5, 8.0)])
    power_w = 277.0 + 6.5 * doublings + rng.normal(0, 6, 30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarning fails the test
        steady = steady_decode(doublings, power_w)
    # (25/30)^30 of 999 resamples miss all five samples at 8: about 4
    assert 0 < steady["line_resamples_left_out"] <= 0.05 * trace_fit.LINE_RESAMPLES
    for key in ("power_at_1_w", "slope_w_per_doubling"):
        assert np.isfinite([steady[key]["low"], steady[key]["high"]]).all(), key
        assert steady[key]["low"] <= steady[key]["value"] <= steady[key]["high"], key
    # eleven at 4 and one at 8: a third of the resamples miss the one
    doublings = np.log2(np.r_[np.full(11, 4.0), 8.0])
    with pytest.raises(ValueError, match=r"at most 5% of its 999 resamples drawing a single"):
        steady_decode(doublings, 277.0 + 6.5 * doublings + rng.normal(0, 6, 12))
    with pytest.raises(ValueError, match=r"at 2 or more concurrency levels .* got 12 at 1$"):
        steady_decode(np.full(12, 2.0), rng.normal(290, 6, 12))


def test_idle_without_idle_samples_is_said_to_be_the_configs(shared: Path, tmp_path: Path):
    """Traces without idle samples printed and wrote ``idle_w: 60 [60, 60]`` like a measurement:
    it is the config's gpu.idle_w, written with source "config" and no interval, and said so in
    the printed fit and the report's table."""
    from grpo_power.report import cells, html
    from grpo_power.report.real_traces import _parameter_table

    busy = _bursty_slice(shared, tmp_path, "busy", lambda f: f["concurrency"] >= 1)
    out = tmp_path / "fit"
    result = _identify("--trace", str(busy), "--out", str(out))
    assert result.exit_code == 0, result.output
    idle = json.loads((out / "trace_fit.json").read_text())["parameters"]["idle_w"]
    assert idle["source"] == "config" and idle["value"] == 60.0
    assert idle["low"] is None and idle["high"] is None and idle["estimate"] is None
    assert "idle_w: 60 (W), the config's gpu.idle_w, not fitted: the traces have 0 idle" in (
        result.output
    )
    assert "[60, 60]" not in result.output
    table = html.table_html(_parameter_table(cells.JsonFile(out / "trace_fit.json")), tmp_path)
    row = next(r for r in table.split("<tr>") if r.startswith("<td>idle (W"))
    assert "(the config&#x27;s gpu.idle_w, not fitted: the traces have 0 idle samples" in row
    assert "[" not in row


def test_an_idle_only_held_out_trace_is_refused_naming_it(shared: Path, tmp_path: Path):
    """A --validate trace of idle samples only crashed with a raw KeyError: 'predicted_mean_w'
    (nothing written): it is refused in one line naming the file and what it lacks."""
    fitted = _bursty_slice(shared, tmp_path, "all", lambda f: f["concurrency"] >= 0)
    idle = _bursty_slice(shared, tmp_path, "idle", lambda f: f["concurrency"] == 0)
    result = _identify(
        "--trace", str(fitted), "--validate", str(idle), "--out", str(tmp_path / "fit")
    )
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: {idle}: concurrency: expected decode samples (concurrency >= 1) in a "
        "--validate trace to validate the fit on, got none (55 samples: 55 at concurrency 0, "
        "the rest unknown)"
    ]
    assert not (tmp_path / "fit").exists()


def test_a_peak_under_nameplate_is_not_identifiable():
    """Runs that never pass nameplate gave transient_peak_frac -0.2 with a zero-width interval,
    though the config requires it >= 0: it is written as not identifiable, with its estimate
    and why, not clamped; the validation still runs on the estimate."""
    run = _run({4: 60, 8: 60, 16: 60})
    fit = trace_fit.fit_decode_power([run], 400.0, _prior())
    peak = fit["parameters"]["transient_peak_frac"]
    highest_w = float(run.frame["power_w"].max())
    assert peak["value"] is None and peak["low"] is None and peak["high"] is None
    assert peak["identifiable"] is False
    assert peak["estimate"] == pytest.approx(highest_w / 400.0 - 1.0) and peak["estimate"] < 0
    assert (
        "outside telemetry.simulated.transient_peak_frac's valid range [0, 0.5]" in (peak["reason"])
    )
    assert "under nameplate (400 W)" in peak["reason"]
    assert fit["parameters"]["decode_slope_per_doubling"]["identifiable"] is True
    table = trace_fit.validation_rows(fit, [run], "fit")
    assert table["predicted_max_w"].max() <= highest_w + 1e-9


def test_labels_units_and_bins_of_the_trace_fit(shared: Path, tmp_path: Path):
    """A trace imported without --origin beside a public one was labelled "measured and
    simulated"; the report's row of decode power at concurrency 1 (W) showed fractions of two
    different spans beside watts; "give --validate" was printed with --validate given; and
    concurrency 0 fell in decode bin 1 of trace_points.csv."""
    from grpo_power.report import cells
    from grpo_power.report.real_traces import PARAMETER_COLS, _parameter_table

    public = _bursty_slice(shared, tmp_path, "public", lambda f: f.index % 2 == 0)
    private = _bursty_slice(shared, tmp_path, "own", lambda f: f.index % 2 == 1, origin=None)
    few = _bursty_slice(shared, tmp_path, "few", lambda f: (f["t"] >= 40) & (f["t"] < 43))
    out = tmp_path / "fit"
    result = _identify(
        "--trace", str(public), "--trace", str(private), "--validate", str(few), "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    fit = json.loads((out / "trace_fit.json").read_text())
    assert fit["data"] == "measured, measured (public trace)"
    assert "simulated" not in result.output
    assert "give --validate" not in result.output
    assert "no concurrency bin of the held-out traces has >= 30 samples" in result.output
    # every cell of a watts row is watts: the least-squares and prior lines in W
    table = _parameter_table(cells.JsonFile(out / "trace_fit.json"))
    for header, _ in PARAMETER_COLS:
        row = next(r for r in table.rows if r[0] == header)
        for cell in row[1:]:
            parts = cell if isinstance(cell, list) else [cell]
            assert not any("nameplate" in str(p) for p in parts if isinstance(p, str)), header
    at_1 = next(r for r in table.rows if r[0] == PARAMETER_COLS[0][0])
    assert [cell[0].value for cell in at_1[1:]] == pytest.approx(
        [
            fit["steady_decode"]["power_at_1_w"]["value"],
            fit["least_squares_w"]["power_at_1_w"]["value"],
            60.0 + 340.0 * fit["parameters"]["decode_base_frac"]["prior"],
        ]
    )
    p = fit["parameters"]
    idle_w = p["idle_w"]["value"]
    assert fit["least_squares_w"]["power_at_1_w"]["value"] == pytest.approx(
        idle_w + (400.0 - idle_w) * p["decode_base_frac"]["value"]
    )
    points = pd.read_csv(out / "trace_points.csv")
    assert points.loc[points["concurrency"] == 0, "bin"].isna().all()
    decode = points[points["concurrency"] >= 1]
    assert (decode["bin"] <= decode["concurrency"]).all()
    assert (decode["concurrency"] < 2 * decode["bin"]).all()
    assert np.isnan(trace_fit.concurrency_bin(np.array([0.0, np.nan]))).all()


def test_engine_metrics_scraped_coarsely_are_named_in_the_fit(shared: Path, tmp_path: Path):
    """vLLM's metrics scraped every 5 s (a Prometheus scrape; the public runs' are every
    0.25 s) gave a steady line of +3.6 W per doubling against +7.25 at 0.25 s, printed and
    written as a fit like any other. A power sample takes the concurrency of the nearest
    scrape, so the fit now says which traces' concurrency is that coarse and what it does."""
    from grpo_power.telemetry.store import write_trace

    folder = shared / REAL_RUNS["bursty"]
    engine = pd.read_csv(folder / "engine.csv")
    coarse = tmp_path / "engine-5s.csv"
    engine.iloc[::20].to_csv(coarse, index=False)
    traces = {}
    for name, log in (("fine", folder / "engine.csv"), ("coarse", coarse)):
        frame, meta = import_log(folder / "power.csv", "nvidia-smi", nameplate_w=400.0)
        frame, meta = add_engine_columns(frame, meta, read_engine_log(log))
        data = {**meta.model_dump(), "gpu_name": "NVIDIA A100-SXM4-80GB", "run_id": name}
        traces[name] = write_trace(tmp_path / f"{name}.parquet", frame, type(meta)(**data))
    fits = {}
    for name, trace in traces.items():
        result = _identify("--trace", str(trace), "--out", str(tmp_path / f"fit-{name}"))
        assert result.exit_code == 0, result.output
        fits[name] = (json.loads((tmp_path / f"fit-{name}" / "trace_fit.json").read_text()), result)
    slope = {n: f["steady_decode"]["slope_w_per_doubling"]["value"] for n, (f, _) in fits.items()}
    assert slope["coarse"] < 0.75 * slope["fine"]  # the bias the note names
    fine, coarse_fit = fits["fine"][0], fits["coarse"][0]
    assert fine["notes"] == []
    [note] = coarse_fit["notes"]
    assert note.startswith(f"{traces['coarse']}: concurrency comes from engine metrics every 5.")
    assert "flattened" in note and note in fits["coarse"][1].output


def test_the_steady_lines_intervals_hold_for_readings_averaged_over_a_second() -> None:
    """An H100 reads 1 s averages; read every 0.25 s, each value comes four times. The steady
    line's bootstrap drew single samples, so the copies counted as four times the data and
    its intervals were about half as wide as those of the same readings taken once a second.
    Blocks of consecutive samples now keep them as wide."""
    rng = np.random.default_rng(3)
    c = rng.choice([2.0, 4.0, 8.0, 16.0], 300)
    once = 277.0 + 6.5 * np.log2(c) + rng.normal(0, 6, 300)
    x_once = np.log2(c)
    width = {}
    for name, (x, y) in {
        "once": (x_once, once),
        "four times": (np.repeat(x_once, 4), np.repeat(once, 4)),
    }.items():
        steady = steady_decode(x, y)
        width[name] = {
            key: steady[key]["high"] - steady[key]["low"]
            for key in ("power_at_1_w", "slope_w_per_doubling", "noise_w")
        }
        assert steady["power_at_1_w"]["low"] <= 277.0 <= steady["power_at_1_w"]["high"], name
    for key, once_w in width["once"].items():
        assert width["four times"][key] > 0.75 * once_w, key
    assert steady["bootstrap_block"] > 1


def test_the_idle_and_noise_intervals_hold_for_correlated_or_skewed_readings() -> None:
    """The fit's idle median had an i.i.d. bootstrap interval, and its noise a chi-square one:
    on idle readings correlated as a GPU's are (AR(1), rho 0.95) the first held the true median
    in about 4 of 10 data sets, and on decode residuals with prefill bursts (skewed) the second
    held the true standard deviation in about 6 of 10. Each must hold it about as often as its
    95 % says."""
    held = {"idle": 0, "noise": 0}
    rng = np.random.default_rng(11)
    for _ in range(40):
        idle = np.empty(400)
        idle[0] = rng.normal(0.0, 1.0)
        for k in range(1, 400):  # stationary AR(1): sd 1 about 82.5 W, median 82.5 W
            idle[k] = 0.95 * idle[k - 1] + rng.normal(0.0, np.sqrt(1 - 0.95**2))
        low, high = block_bootstrap_interval(idle + 82.5, np.median)
        held["idle"] += low <= 82.5 <= high
        # residuals: 6 W of noise, a burst of +120 W in 5 % of the samples (sd of the mixture)
        bursts = rng.random(1000) < 0.05
        residuals = rng.normal(0.0, 6.0, 1000) + 120.0 * bursts
        true_sd = np.sqrt(36.0 + 120.0**2 * 0.05 * 0.95)
        low, high = block_bootstrap_interval(
            residuals, lambda r, axis=-1: np.std(r, ddof=2, axis=axis)
        )
        held["noise"] += low <= true_sd <= high
    assert held["idle"] >= 34 and held["noise"] >= 34, held


def test_the_idle_interval_of_a_long_log_resamples_in_bounded_memory() -> None:
    """scipy's bootstrap resampled all 999 draws of the idle readings at once, and the median
    copied them: a day of 1 s readings took 1.4 GB and a week's 9.7 GB. Uncorrelated readings
    (scipy's path) of 60,000 samples must be resampled within 160 MB (95 MB now; the old call
    peaked at 959 MB)."""
    idle = np.random.default_rng(3).normal(60.0, 3.0, 60_000)
    tracemalloc.start()
    try:
        low, high = block_bootstrap_interval(idle, np.median)
        peak_b = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak_b < 160e6, peak_b
    assert 59.9 < low < 60.0 < high < 60.1
