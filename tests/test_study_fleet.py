"""The simulated runs through the windows stage's code, and the study's fleet mix composed of
them: shares and peaks checked against hand computations on small synthetic runs (a linear
ramp, constant powers), never against the functions that produced them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from grpo_power.analysis.fleet.study_mix import analyze_study_fleet
from grpo_power.analysis.windows.simulated import analyze_sim_deployment, run_sim_windows
from grpo_power.config import Config, validate_config
from grpo_power.layout import SIM_RUN_METADATA_KEY

PERIOD_S = 0.1
N = 600  # 60 s of samples: t = 0.0 ... 59.9 s


def config(**fleet) -> Config:
    return validate_config(
        {
            "windows": {"windows_s": [0.5, 5.0, 30.0]},
            "fleet": {"window_s": 30.0, "draws": 200, "horizon_s": 60.0, **fleet},
        }
    )


def write_samples(path: Path, deployment: str, arm: str, power_w: dict, cap_w: float) -> Path:
    """An evaluation's ``<arm>.samples.parquet``: ``power_w[seed]`` is (samples, gpus)."""
    frames = []
    for seed, power in power_w.items():
        n, gpus = power.shape
        frames.append(
            pd.DataFrame(
                {
                    "seed": np.full(n * gpus, seed, dtype=np.int32),
                    "gpu": np.tile(np.arange(gpus, dtype=np.int16), n),
                    "sample": np.repeat(np.arange(n, dtype=np.int64), gpus),
                    "power_w": power.ravel(),
                    "cap_w": np.full(n * gpus, cap_w, dtype=np.float32),
                }
            )
        )
    metadata = {
        "simulated": True,
        "deployment": deployment,
        "arm": arm,
        "gpus": next(iter(power_w.values())).shape[1],
        "cap_w": cap_w,
        "budget_s": N * PERIOD_S,
        "period_s": PERIOD_S,
        "nameplate_w": 400.0,
    }
    table = pa.Table.from_pandas(pd.concat(frames), preserve_index=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        table.replace_schema_metadata({SIM_RUN_METADATA_KEY: json.dumps(metadata)}), path
    )
    return path


def ramp_runs(tmp_path: Path) -> Path:
    """72b, arm uncontrolled, cap 221.05 W: seed 0 GPU 0 ramps 150 + 2 t W, GPU 1 holds 100 W;
    seed 1 holds 250 W on both GPUs."""
    t_s = np.arange(N) * PERIOD_S
    seed0 = np.column_stack([150.0 + 2.0 * t_s, np.full(N, 100.0)])
    seed1 = np.full((N, 2), 250.0)
    path = tmp_path / "evaluate" / "72b" / "uncontrolled.samples.parquet"
    return write_samples(path, "72b", "uncontrolled", {0: seed0, 1: seed1}, 221.05)


def test_simulated_runs_are_windowed_as_hand_computed(tmp_path):
    result = analyze_sim_deployment([ramp_runs(tmp_path)], config())
    table = result.exceedance
    assert (table["data"] == "simulated").all()
    pooled = table[table["scope"] == "arm_pooled"].set_index("window_s")
    # The study's windows are added to the configured ones.
    assert sorted(pooled.index) == [0.5, 5.0, 30.0, 300.0]
    # Windows end every 0.1 s from W to 59.9 s: 600 - 10 W of them per GPU. The ramp's mean
    # over [e - W, e] is 150 + 2 (e - W / 2) (trapezoids are exact on a line), above 221.05 W
    # when e > 35.525 + W / 2: 0.5 s -> e = 35.8 ... 59.9 (242 ends); 30 s -> 50.6 ... 59.9 (94).
    # The 100 W GPU is never above, the 250 W seed always.
    for window_s, ramp_over in ((0.5, 242), (30.0, 94)):
        per_gpu = N - round(window_s / PERIOD_S)
        row = pooled.loc[window_s]
        assert row["windows"] == 4 * per_gpu
        assert row["windows_over"] == ramp_over + 2 * per_gpu
        assert row["exceedance"] == pytest.approx((ramp_over + 2 * per_gpu) / (4 * per_gpu))
        assert row["exceedance_seed_min"] == pytest.approx(ramp_over / (2 * per_gpu))
        assert row["exceedance_seed_max"] == 1.0
    assert pooled.loc[300.0, "windows"] == 0 and np.isnan(pooled.loc[300.0, "exceedance"])
    # keys an engineer joins on keep one integer dtype: a pooled row's GPU is -1, as the runs'
    # pooled rows have it (it was NaN, which made the column float), the bins' seed is int64 as
    # the metrics' (an int32 seed did not join) and their GPU int32 as the traces'
    assert table["gpu"].dtype == np.int64 and (pooled["gpu"] == -1).all()
    assert (result.bins["seed"].dtype, result.bins["gpu"].dtype) == (np.int64, np.int32)
    assert "no full 300 s window" in pooled.loc[300.0, "note"]
    # Each 0.5 s bin of the ramp holds its trapezoid energy: 0.5 x (150 + 2 x mid-time) J.
    bins = result.bins
    ramp = bins[(bins["seed"] == 0) & (bins["gpu"] == 0)].sort_values("bin")
    mid_s = ramp["bin"].to_numpy() * 0.5 + 0.25
    np.testing.assert_allclose(ramp["energy_j"], 0.5 * (150.0 + 2.0 * mid_s), rtol=1e-9)
    assert len(ramp) == 119  # whole bins in 0 ... 59.9 s


def test_a_cap_that_changes_within_a_seed_is_refused(tmp_path):
    path = ramp_runs(tmp_path)
    table = pq.read_table(path)
    caps = table.column("cap_w").to_numpy().copy()
    caps[-1] = 200.0
    table = table.set_column(table.column_names.index("cap_w"), "cap_w", pa.array(caps))
    pq.write_table(table, path)
    with pytest.raises(ValueError, match=r"cap_w: expected one cap per seed.*seed 1"):
        analyze_sim_deployment([path], config())


def constant_deployment(
    tmp_path: Path,
    name: str,
    gpus: int,
    cap_w: float,
    seeds: dict,
    arms: tuple[str, ...] = ("uncontrolled", "ppo"),
) -> Path:
    """A deployment's windows folder whose runs of each of ``arms`` hold ``seeds[seed]`` W on
    every GPU."""
    files = [
        write_samples(
            tmp_path / "evaluate" / name / f"{arm}.samples.parquet",
            name,
            arm,
            {seed: np.full((N, gpus), power) for seed, power in seeds.items()},
            cap_w,
        )
        for arm in arms
    ]
    out = tmp_path / "windows" / "simulated" / name
    run_sim_windows(files, out, config())
    return out


def test_study_fleet_of_constant_runs_as_hand_computed(tmp_path):
    big = constant_deployment(tmp_path, "72b", 4, 220.0, {0: 200.0, 1: 200.0})
    small = constant_deployment(tmp_path, "7b", 1, 320.0, {0: 300.0, 1: 340.0})
    mix = [{"deployment": "72b", "jobs": 2}, {"deployment": "7b", "jobs": 4}]
    result = analyze_study_fleet([big, small], config(study_mix=mix))
    fleet = result.fleet
    assert set(fleet["arm"]) == {"uncontrolled", "ppo"} and (fleet["data"] == "simulated").all()
    at = fleet[(fleet["arm"] == "ppo") & (fleet["window_s"] == 30.0)].iloc[0]
    # 12 GPUs: 2 x 4 x 200 W + k x 300 W + (4 - k) x 340 W, k ~ Binomial(4, 1/2) seeds 0 drawn:
    # 2960 - 40 k W, mean 2880 W over draws (standard error 40 / sqrt(200) = 2.8 W).
    assert at["n_gpus"] == 12 and at["nameplate_kw"] == pytest.approx(4.8)
    assert at["peak_kw_mean"] == pytest.approx(2.880, abs=0.012)
    assert 2.8 - 1e-9 <= at["peak_kw_p5"] < at["peak_kw_p95"] <= 3.04 + 1e-9
    assert at["peak_share_mean"] == pytest.approx(at["peak_kw_mean"] / 4.8)
    assert at["factor_no_margin_mean_peak"] == pytest.approx(4.8 / at["peak_kw_mean"])
    # The fleet's cap is the runs' caps summed: 8 x 220 + 4 x 320 = 3040 W, never exceeded.
    assert at["fleet_cap_kw"] == pytest.approx(3.04) and at["exceedance_max"] == 0.0
    rows = result.comparison.set_index(["key", "arm"])
    kw = rows.loc[("fleet_peak_kw", "ppo")]
    assert kw["reference_value"] == "3.17-3.59 kW" and kw["study_origin"] == "summary"
    assert kw["this_run"] == pytest.approx(at["peak_kw_mean"])
    assert kw["difference"] == pytest.approx(at["peak_kw_mean"] - 3.17)
    assert "12 GPUs: 2 x 72b (4 GPUs) + 4 x 7b (1 GPU)" in kw["note"]
    assert "the GPUs are" not in kw["note"]  # the study's own part
    # an H200 study's 6.42 kW beside the study's 3.17-3.59 kW of A100s read as like for like
    h200 = config(study_mix=mix).model_copy(
        update={"gpu": validate_config({"gpu": {"name": "NVIDIA H200"}}).gpu}
    )
    other = analyze_study_fleet([big, small], h200).comparison.set_index(["key", "arm"])
    note = other.loc[("fleet_peak_kw", "ppo"), "note"]
    assert "the GPUs are NVIDIA H200s (700 W), the study's A100s (400 W)" in note
    # The 72B windows come from the largest model of the mix: 200 W is under its 220 W cap.
    share = rows.loc[("exceedance_72b_0.5s", "uncontrolled")]
    assert share["this_run"] == 0.0 and share["study_origin"] == "abstract"
    assert share["difference"] == pytest.approx(-23.6)


def test_the_72b_rows_set_the_cap_against_the_fixed_arm_the_runs_show(tmp_path):
    """A 72b whose fixed arm draws 350 W per GPU under a 220 W cap (as on an H100): its rows
    say the cap is 37 % below that mean (they said "about 10 % above" whatever the runs drew);
    without a fixed arm they make no such claim."""
    arms = ("uncontrolled", "fixed", "ppo")
    big = constant_deployment(tmp_path, "72b", 4, 220.0, {0: 350.0, 1: 350.0}, arms)
    small = constant_deployment(tmp_path, "7b", 1, 320.0, {0: 300.0}, arms)
    mix = [{"deployment": "72b", "jobs": 2}, {"deployment": "7b", "jobs": 4}]
    rows = analyze_study_fleet([big, small], config(study_mix=mix)).comparison
    notes = rows.loc[rows["key"].str.startswith("exceedance_72b"), "note"]
    assert len(notes) == 9  # three windows, three arms
    claim = "cap 220 W per GPU (the deployment's, 37 % below its fixed-arm mean of 350 W;"
    for note in notes:  # 220 / 350 - 1 = -37.1 %
        assert claim in note and "about 10 % above" not in note
    without = tmp_path / "without"
    big = constant_deployment(without, "72b", 4, 220.0, {0: 200.0})
    small = constant_deployment(without, "7b", 1, 320.0, {0: 300.0})
    rows = analyze_study_fleet([big, small], config(study_mix=mix)).comparison
    notes = rows.loc[rows["key"].str.startswith("exceedance_72b"), "note"]
    assert all("cap 220 W per GPU (the deployment's; the study's 72B cap" in n for n in notes)


def test_study_fleet_needs_every_deployment_of_the_mix(tmp_path):
    big = constant_deployment(tmp_path, "72b", 4, 220.0, {0: 200.0})
    with pytest.raises(ValueError, match=r"fleet\.study_mix: deployment '14b': expected"):
        analyze_study_fleet([big], config())


def test_the_default_mix_is_off_without_the_study_deployments():
    one = {"name": "7b", "gpus": 1, "params_b": 7.6, "budget_s": 900}
    only_7b = validate_config({"sim": {"deployments": [one]}})
    assert only_7b.fleet.study_mix == []
    assert [e.deployment for e in config().fleet.study_mix] == ["72b", "14b", "7b"]


def test_study_mix_names_configured_deployments():
    with pytest.raises(ValueError, match=r"fleet\.study_mix: deployment 'h100' is not in"):
        validate_config({"fleet": {"study_mix": [{"deployment": "h100", "jobs": 1}]}})
    with pytest.raises(ValueError, match="study_mix lists a deployment twice"):
        validate_config(
            {
                "fleet": {
                    "study_mix": [{"deployment": "7b", "jobs": 1}, {"deployment": "7b", "jobs": 2}]
                }
            }
        )


def test_cli_sim_windows_names_a_deployment_the_evaluation_lacks(tmp_path):
    from grpo_power.cli import app

    ramp_runs(tmp_path)
    summary = {"deployments": {"72b": {"arms": ["uncontrolled"]}}}
    (tmp_path / "evaluate" / "summary.json").write_text(json.dumps(summary))
    runner = CliRunner()
    out = tmp_path / "sim" / "72b"
    done = runner.invoke(
        app, ["sim-windows", str(tmp_path / "evaluate"), "--deployment", "72b", "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    assert "SIMULATED" in done.output and (out / "bins.parquet").is_file()
    done = runner.invoke(
        app, ["sim-windows", str(tmp_path / "evaluate"), "--deployment", "14b", "--out", str(out)]
    )
    assert done.exit_code != 0
    assert "deployments: expected '14b' among the evaluated deployments" in done.output
