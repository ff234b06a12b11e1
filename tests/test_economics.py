"""Economics: hand-computed cost and carbon, rejected regions and constants, oversubscription
value, the pilot plan, and the stage on small inputs built by the earlier stages' own code.

:func:`build_stage_outputs` (also used by ``test_report.py``) writes a small study: three real
run folders (trace, step log, manifest; simulated power), their windows and fleet outputs from
the windows and fleet stages, an evaluate folder of synthetic simulated runs scored by the
evaluate stage's code, an authority table and two controller folders.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from grpo_power.analysis.authority import write_authority
from grpo_power.analysis.evaluate import evaluate_folder
from grpo_power.analysis.fleet import run_fleet
from grpo_power.analysis.windows import run_windows
from grpo_power.config import Config, ConfigError, PilotConfig, validate_config
from grpo_power.config.carbon_region import UnknownRegion, carbon_intensity
from grpo_power.economics.carbon import carbon_kg
from grpo_power.economics.cost import Assumptions, arm_costs, hours_in_year, per_run, savings
from grpo_power.economics.oversubscription import extra_gpus, oversubscription_table
from grpo_power.economics.pilot import headroom_windows, pilot_plan
from grpo_power.economics.records import run_record
from grpo_power.economics.stage import run_economics
from grpo_power.layout import ECONOMICS, SIM_RUN_METADATA_KEY
from grpo_power.telemetry.schema import TraceMetadata
from grpo_power.telemetry.steplog import STEP_LOG_SCHEMA
from grpo_power.telemetry.store import read_trace, write_trace

RUN_ARMS = ("uncontrolled", "fixed", "threshold")
SIM_ARMS = ("uncontrolled", "fixed", "fixed-safe", "ppo")
SIM_DEPLOYMENTS = {"7b": (1, 320.0), "72b": (4, 220.0)}  # gpus, cap per GPU


def small_config(root: Path) -> Config:
    """The default config with small windows, fleets and report settings under ``root``."""
    return validate_config(
        {
            "results_dir": str(root),
            "windows": {"windows_s": [0.5, 1.0, 5.0, 10.0]},
            "fleet": {
                "n_gpus": 4,
                "window_s": 5.0,
                "draws": 10,
                "horizon_s": 40.0,
                "scaling_sizes": [4, 16, 64],
                "scaling_draws": 3,
            },
            "economics": {"fleet_gpus": 32},
            "report": {"trace_s": 10.0, "max_points": 400, "dpi": 50},
        }
    )


def _square_wave(n: int, low_w: float, high_w: float, period: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    wave = np.where((np.arange(n) // (period // 2)) % 2 == 0, high_w, low_w)
    return wave + rng.normal(0.0, 3.0, n)


def write_run(folder: Path, config: Config, arm: str, high_w: float, tokens: int) -> Path:
    """A completed run folder: 30 s of 0.1 s samples on one GPU, 10 steps of ``tokens``."""
    period_s, n = 0.1, 301
    t = np.arange(n) * period_s
    power = _square_wave(n, 150.0, high_w, 20, len(arm))
    energy = np.concatenate([[0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * period_s)])
    frame = pd.DataFrame(
        {
            "t": t,
            "gpu": 0,
            "power_w": power,
            "power_avg_w": np.nan,
            "energy_j": energy,
            "sm_util": 50.0,
            "mem_util": 20.0,
            "sm_clock_mhz": 1410.0,
            "temp_c": 50.0,
            "power_limit_w": 400.0,
        }
    )
    run_id = f"tiny-{arm}-seed0"
    metadata = TraceMetadata(
        run_id=run_id,
        source="simulated",
        gpu_name="NVIDIA A100-SXM4-40GB",
        nameplate_w=400.0,
        sample_period_s=period_s,
        model_size="tiny",
    )
    write_trace(folder / "trace.parquet", frame, metadata)
    steps = 10
    columns: dict[str, list] = {}
    for f in STEP_LOG_SCHEMA:
        default = False if pa.types.is_boolean(f.type) else 0
        columns[f.name] = [default] * steps
    columns["step"] = list(range(1, steps + 1))
    columns["start_s"] = [3.0 * i for i in range(steps)]
    columns["end_s"] = [3.0 * (i + 1) for i in range(steps)]
    columns["completion_tokens"] = [tokens] * steps
    table = pa.Table.from_pydict(
        {
            k: [float(v) if pa.types.is_floating(STEP_LOG_SCHEMA.field(k).type) else v for v in vs]
            for k, vs in columns.items()
        },
        schema=STEP_LOG_SCHEMA,
    )
    pq.write_table(table, folder / "steps.parquet")
    manifest = {
        "status": "completed",
        "arm": arm,
        "size": "tiny",
        "seed": 0,
        "run_id": run_id,
        "host": "test-host",
        "hardware": {"platform": "test-platform", "cpu_count": 2, "cuda_devices": []},
        "packages": {"grpo-power": "0.1.0", "torch": "2.13.0+cpu", "trl": "1.16.0"},
        "python": "3.11.7",
        "config": config.model_dump(mode="json"),
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _sim_parquet(path: Path, frame: pd.DataFrame, metadata: dict) -> None:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(
        table.replace_schema_metadata({SIM_RUN_METADATA_KEY: json.dumps(metadata)}), path
    )


def write_evaluation(folder: Path, config: Config) -> None:
    """Synthetic simulated runs of each arm (60 s, 5 seeds) scored by the evaluate stage."""
    levels = {
        "uncontrolled": (350.0, 1.2),
        "fixed": (330.0, 1.0),
        "fixed-safe": (280.0, 0.8),
        "ppo": (300.0, 1.15),
    }
    budget_s, period_s = 60.0, 0.1
    for deployment, (gpus, cap_w) in SIM_DEPLOYMENTS.items():
        out = folder / deployment
        out.mkdir(parents=True)
        scale = cap_w / 320.0
        arms = {}
        for arm in SIM_ARMS:
            high_w, speed = levels[arm]
            samples, steps = [], []
            for seed in range(5):
                n = int(budget_s / period_s)
                power = _square_wave(n * gpus, 150.0 * scale, high_w * scale, 40, seed)
                samples.append(
                    pd.DataFrame(
                        {
                            "seed": seed,
                            "gpu": np.tile(np.arange(gpus), n),
                            "sample": np.repeat(np.arange(n), gpus),
                            "power_w": power,
                        }
                    )
                )
                starts = np.arange(0.0, budget_s, 2.0)
                steps.append(
                    pd.DataFrame(
                        {
                            "seed": seed,
                            "step": np.arange(1, len(starts) + 1),
                            "start_s": starts,
                            "end_s": starts + 2.0,
                            "concurrency": 16,
                            "max_new_tokens": 32,
                            "tokens": 1000.0 * speed * (1.0 + 0.02 * seed),
                        }
                    )
                )
            metadata = {
                "deployment": deployment,
                "arm": arm,
                "gpus": gpus,
                "cap_w": cap_w,
                "budget_s": budget_s,
                "period_s": period_s,
            }
            _sim_parquet(out / f"{arm}.samples.parquet", pd.concat(samples), metadata)
            _sim_parquet(out / f"{arm}.steps.parquet", pd.concat(steps), metadata)
            arms[arm] = (
                {"actuators": ["concurrency"], "holds": {}}
                if arm == "ppo"
                else {"concurrency": 16, "max_new_tokens": 32}
            )
        info = {
            "simulated": True,
            "deployment": deployment,
            "gpus": gpus,
            "cap_w": cap_w,
            "budget_s": budget_s,
            "seeds": list(range(5)),
            "arms": arms,
        }
        (out / "arms.json").write_text(json.dumps(info))
    evaluate_folder(folder, list(SIM_DEPLOYMENTS), 0.5, config.evaluate.confidence)


def write_identify(folder: Path, config: Config) -> None:
    """An authority table from synthetic sweeps (the identify stage's writer)."""
    rows = []
    for data, deployment, gpus, gain in (
        ("simulated", "7b", 1, 1.0),
        ("simulated", "72b", 4, 0.3),
        ("measured (simulated power)", "tiny-run", 1, 0.8),
    ):
        for actuator, span_w in (("concurrency", 70.0), ("num_generations", 40.0)):
            for level, power in ((1, 200.0), (16, 200.0 + gain * span_w)):
                rows.append(
                    {
                        "data": data,
                        "deployment": deployment,
                        "gpus": gpus,
                        "actuator": actuator,
                        "level": level,
                        "mean_power_w": power,
                        "tokens_per_s": 100.0 + level,
                        "nameplate_w": 400.0,
                        "idle_w": 60.0,
                        "default": level == 16,
                        "violation_rate": 0.0,
                    }
                )
    weights = config.controller.reward.model_dump()
    write_authority(pd.DataFrame(rows), config.authority.threshold, "7b", weights, folder)


def write_controllers(root: Path) -> list[Path]:
    """Controller folders (controller.json) for the simulated deployments; 7b has a curve."""
    folders = []
    for deployment in SIM_DEPLOYMENTS:
        folder = root / deployment
        folder.mkdir(parents=True)
        evaluation = {"trained_return": 30.0, "random_return": -10.0}
        info = {"simulated": True, "deployment": deployment, "evaluation": evaluation}
        (folder / "controller.json").write_text(json.dumps(info))
        folders.append(folder)
    curve = pd.DataFrame({"timesteps": [64, 128, 192], "episode_return": [-5.0, 10.0, 25.0]})
    curve.to_csv(root / "7b" / "learning_curve.csv", index=False)
    return folders


def build_stage_outputs(root: Path) -> tuple[Config, dict[str, list[Path] | Path]]:
    """Every input of the economics and report stages, written by the stages' own code."""
    config = small_config(root)
    runs = [
        write_run(root / "runs" / "tiny" / arm / "seed0", config, arm, high, tokens)
        for arm, high, tokens in zip(RUN_ARMS, (360.0, 330.0, 310.0), (900, 800, 760), strict=True)
    ]
    exceedance = []
    for folder in runs:
        out = root / "windows" / folder.relative_to(root) / "trace"
        run_windows(folder / "trace.parquet", out, config)
        exceedance.append(out / "exceedance.csv")
    run_fleet([p.parent / "bins.parquet" for p in exceedance], root / "fleet", config)
    write_evaluation(root / "evaluate" / "study", config)
    write_identify(root / "identify", config)
    controllers = write_controllers(root / "controller")
    paths = {"runs": runs, "exceedance": exceedance, "controllers": controllers}
    return config, paths


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, dict]:
    root = tmp_path_factory.mktemp("study")
    config, paths = build_stage_outputs(root)
    result = run_economics(
        config, root / "economics", paths["runs"], root / "evaluate" / "study", root / "fleet"
    )
    return config, {**paths, "root": root, "result": result}


def _assumptions(**changes: object) -> Assumptions:
    base = Assumptions(
        usd_per_kwh=0.10,
        pue=1.5,
        carbon=carbon_intensity("USA"),
        gpu_hour_usd=4.0,
        usd_per_mw=10e6,
        host_w_per_gpu=0.0,
        fleet_gpus=10,
        fleet_hours=8760.0,
    )
    return replace(base, **changes)


def test_cost_and_carbon_of_a_hand_computed_run() -> None:
    # 2 GPUs, 1 h, 7.2 MJ (2 kWh) of GPU energy, 2 M tokens; PUE 1.5, 0.10 $/kWh, USA grid.
    records = pd.DataFrame(
        [
            {
                "source": "run",
                "deployment": "x",
                "arm": "fixed",
                "seed": 0,
                "gpus": 2,
                "tokens": 2e6,
                "energy_j": 7.2e6,
                "wall_s": 3600.0,
                "data": "simulated",
            }
        ]
    )
    a = _assumptions()
    row = per_run(records, a).iloc[0]
    usa = carbon_intensity("USA").g_per_kwh
    assert usa == pytest.approx(369.473)  # CodeCarbon's 2023 figure for the United States
    assert row["kwh_per_mtok"] == pytest.approx(1.5)  # 2 kWh x 1.5 / 2 Mtok
    assert row["energy_usd_per_mtok"] == pytest.approx(0.15)
    assert row["carbon_kg_per_mtok"] == pytest.approx(1.5 * usa / 1000)  # 0.554 kg
    assert row["gpu_usd_per_mtok"] == pytest.approx(4.0)  # 2 GPU-hours / 2 Mtok x $4
    assert row["power_w_per_gpu"] == pytest.approx(1000.0)
    # a fleet-year: 10 GPUs x 8760 h at 1000 W each, x PUE 1.5 = 131.4 MWh
    assert row["annual_mwh"] == pytest.approx(131.4)
    assert row["annual_energy_usd"] == pytest.approx(13_140.0)
    assert row["annual_carbon_t"] == pytest.approx(131.4 * usa / 1000)
    assert row["annual_mtok"] == pytest.approx(2e6 / 3600 / 2 * 10 * 8760 * 3600 / 1e6)
    assert carbon_kg(10.0, carbon_intensity("FRA")) == pytest.approx(0.56039)


def test_savings_are_for_the_same_work() -> None:
    base = {
        "source": "run",
        "deployment": "x",
        "seed": 0,
        "gpus": 1,
        "wall_s": 100.0,
        "data": "simulated",
    }
    records = pd.DataFrame(
        [
            {**base, "arm": "ppo", "tokens": 2e6, "energy_j": 3.6e6},
            {**base, "arm": "fixed", "tokens": 1e6, "energy_j": 3.6e6},
        ]
    )
    arms = arm_costs(records, _assumptions(), 0.95)
    pair = savings(arms).set_index(["arm", "versus"]).loc[("ppo", "fixed")]
    assert pair["energy_per_token_change_pct"] == pytest.approx(-50.0)
    assert pair["throughput_change_pct"] == pytest.approx(100.0)
    ppo = arms.set_index("arm").loc["ppo"]
    # ppo: 0.75 kWh/Mtok x $0.10; fixed: 1.5 kWh/Mtok x $0.10, over ppo's fleet-year of tokens
    assert pair["energy_usd_saved_per_year"] == pytest.approx((0.15 - 0.075) * ppo["annual_mtok"])


def test_hours_in_year() -> None:
    assert hours_in_year(2025) == 8760
    assert hours_in_year(2024) == 8784


def test_cloud_region_and_unknown_region() -> None:
    gcp = carbon_intensity("gcp:us-central1")
    assert gcp.g_per_kwh == 430 and "cloud.google.com" in gcp.source
    with pytest.raises(UnknownRegion, match="closest: USA"):
        carbon_intensity("US")


@pytest.mark.parametrize(
    ("economics", "expected"),
    [
        ({"carbon_region": "Atlantis"}, "economics.carbon_region: Value error, unknown carbon"),
        ({"carbon_region": "gcp:us-cental1"}, "closest: gcp:us-central1"),
        ({"sensitivity": {"carbon_regions": ["FRA", "XX"]}}, "economics.sensitivity.carbon"),
        ({"electricity_price": {"value": 8.06, "source": "EIA", "year": 2023}}, "in cents?"),
        ({"pue": {"value": 0.9, "source": "x", "year": 2023}}, "economics.pue.value"),
        ({"capacity_cost": {"value": 11.7, "source": "x", "year": 2024}}, "write dollars"),
        ({"pue": {"value": 1.2}}, "economics.pue.source: Field required"),
        ({"gpu_hour": {"value": 4.1, "source": "", "year": 2024}}, "economics.gpu_hour.source"),
        ({"controller_arm": "fixed"}, "both 'fixed'"),
        ({"sensitivity": {"pue": {"low": 2.0, "high": 1.2}}}, "must not exceed high"),
        ({"sensitivity": {"pue": {"low": 0.8, "high": 1.2}}}, "pue.low (0.8) must be at least 1"),
    ],
)
def test_bad_economics_settings_are_rejected(economics: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        validate_config({"economics": economics})
    assert expected in str(error.value)


def test_a_resumed_runs_wall_time_leaves_out_the_time_between_attempts(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "run", small_config(tmp_path), "fixed", 300.0, 100)
    plain = run_record(folder)
    trace = read_trace(folder / "trace.parquet")
    frame = trace.frame.copy()
    frame.loc[frame["t"] > 15.01, "t"] += 100.0  # attempt 2 starts 100 s after attempt 1 ended
    write_trace(folder / "trace.parquet", frame, trace.metadata)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["attempts"] = [{"t_start_s": 0.0, "t_end_s": 15.0}, {"t_start_s": 115.1}]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    resumed = run_record(folder)
    assert plain["wall_s"] == pytest.approx(30.0)
    assert resumed["wall_s"] == pytest.approx(29.9)  # 130 s of trace less the 100.1 s between


def test_config_yaml_documents_the_schema_defaults(config: Config) -> None:
    assert config.economics == Config().economics and config.report == Config().report


def test_default_constants_carry_source_and_year(config: Config) -> None:
    e = config.economics
    for value in (e.electricity_price, e.pue, e.capacity_cost, e.host_power, e.gpu_hour):
        assert value.source and 2000 <= value.year <= 2030 and value.unit


def test_extra_gpus_by_hand() -> None:
    # GPUs only: factor 2 doubles the fleet; with host power the gain is diluted.
    assert extra_gpus(16, 2.0, 400.0, 0.0) == pytest.approx(16.0)
    # 16 x 812.5 W / (200 + 412.5 W) = 21.22 GPUs: 5.22 extra
    assert extra_gpus(16, 2.0, 400.0, 412.5) == pytest.approx(16 * 812.5 / 612.5 - 16)
    assert extra_gpus(16, 0.9, 400.0, 0.0) < 0


def test_pilot_sizes_by_hand() -> None:
    pilot = PilotConfig(min_seeds=2, sd_inflation=1.0, min_effect_share=1.0)
    assert headroom_windows(pilot) == math.ceil(-math.log(0.05) / 0.001)  # 2996
    rows = []
    gains = [0.10, 0.30, 0.10, 0.30]  # output +20 % +- 11.5 % over 4 seeds
    for seed, gain in enumerate(gains):
        for arm, output in (("fixed", 1000.0), ("ppo", 1000.0 * (1 + gain))):
            rows.append(
                {
                    "deployment": "7b",
                    "arm": arm,
                    "seed": seed,
                    "gpus": 1,
                    "steps": 100,
                    "budget_s": 1000.0,
                    "output_tokens": output,
                    "tokens_per_mj": 50.0,
                    "violation_rate": 0.0,
                }
            )
    for seed in range(4):  # a deployment where the controller gains nothing
        for arm in ("fixed", "ppo"):
            rows.append({**rows[0], "deployment": "72b", "arm": arm, "seed": seed})
    plans = pilot_plan(pd.DataFrame(rows), "ppo", "fixed", 16, 30.0, 4.0, pilot)
    none = plans.set_index("deployment").loc["72b"]
    assert none["sized_by"] == "no simulated gain" and math.isinf(none["seeds_per_arm"])
    assert list(plans["smallest"]) == [True, False]
    plan = plans.iloc[0]
    sd = float(np.std(gains, ddof=1))
    z = 1.959963984540054 + 0.8416212335729143
    assert plan["sized_by"] == "output_tokens"  # the only metric with a gain
    assert plan["seeds_per_arm"] == max(2, math.ceil((z * sd / 0.2) ** 2))
    assert plan["nodes"] == 2 and plan["gpus"] == 16  # the 16-GPU fleet on 8-GPU nodes
    run_h = 500 * 10.0 / 3600  # 500 steps of 10 s
    runs_h = math.ceil(2 * plan["seeds_per_arm"] / 16) * run_h
    assert plan["hours"] == pytest.approx(max(runs_h, 2996 * 30 / 3600))
    assert plan["cost_usd"] == pytest.approx(16 * plan["hours"] * 4.0)


def test_oversubscription_from_the_fleet_stage(study: tuple[Config, dict]) -> None:
    config, paths = study
    a = Assumptions.from_config(config.economics)
    table = oversubscription_table(paths["root"] / "fleet", config.gpu.nameplate_w, a)
    fleet = pd.read_csv(paths["root"] / "fleet" / "fleet_windows.csv")
    chosen = fleet[fleet["window_s"] == config.fleet.window_s].iloc[0]
    stage = table[table["scope"] == "fleet stage"].iloc[0]
    assert stage["factor"] == pytest.approx(chosen["factor"])
    assert stage["extra_gpus"] == math.floor(
        extra_gpus(4, chosen["factor"], 400.0, config.economics.host_power.value)
    )
    assert stage["capital_usd_avoided"] == pytest.approx(
        stage["extra_gpus"] * (400.0 + 412.5) / 1e6 * 11.7e6
    )
    economics_fleet = table[table["scope"] == "economics fleet"].iloc[0]
    assert economics_fleet["n_gpus"] == 32 and economics_fleet["factor_from_gpus"] == 16


def test_economics_stage_on_small_inputs(study: tuple[Config, dict]) -> None:
    _, paths = study
    out = paths["root"] / "economics"
    for name in ECONOMICS.names():
        assert (out / name).stat().st_size > 0, name
    runs = pd.read_csv(out / "runs.csv")
    run = runs[(runs["source"] == "run") & (runs["arm"] == "fixed")].iloc[0]
    trace = pq.read_table(paths["runs"][1] / "trace.parquet").to_pandas()
    assert run["energy_j"] == pytest.approx(trace["energy_j"].iloc[-1])  # the counter
    assert run["tokens"] == 8000 and run["wall_s"] == pytest.approx(30.0)
    assert run["data"] == "simulated"
    arms = pd.read_csv(out / "arms.csv")
    assert set(arms["source"]) == {"run", "simulator"}
    sim = arms[(arms["source"] == "simulator") & (arms["deployment"] == "7b")]
    assert set(sim["arm"]) == set(SIM_ARMS) and (sim["data"] == "simulated").all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["carbon_region"] == "USA" and summary["pilot"]["smallest"]
    sensitivity = pd.read_csv(out / "sensitivity.csv")
    price = sensitivity[sensitivity["parameter"] == "electricity price"]
    saved = price[price["quantity"].str.startswith("energy $ saved")]
    assert len(saved) == 2 * 2  # low and high price, two deployments
    pue = sensitivity[
        (sensitivity["parameter"] == "PUE") & sensitivity["quantity"].str.startswith("carbon per")
    ]
    # carbon scales with PUE: 1.10 / 1.58 - 1 = -30.4 %
    assert pue["change_pct"].min() == pytest.approx(100 * (1.10 / 1.58 - 1))
    constants = pd.read_csv(out / "constants.csv").set_index("name")
    assert constants.loc["electricity_price", "value"] == 0.0806
    assert constants.loc["carbon_intensity", "year"] == 2023


def test_economics_cli_reports_errors_cleanly(tmp_path: Path) -> None:
    from grpo_power.cli import app

    config = tmp_path / "config.yaml"
    config.write_text("economics:\n  carbon_region: Narnia\n")
    result = CliRunner().invoke(app, ["economics", "--out", str(tmp_path), "-c", str(config)])
    assert result.exit_code == 2
    assert "economics.carbon_region" in result.output and "unknown carbon region" in result.output
