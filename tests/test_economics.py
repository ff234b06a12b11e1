"""Economics: hand-computed cost and carbon, rejected regions and constants, oversubscription
value, the pilot plan, and the stage on small inputs built by the earlier stages' own code.

:func:`tests.conftest.build_stage_outputs` (also used by ``test_report.py``) writes the small
study.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import stats
from typer.testing import CliRunner

from grpo_power.config import Config, ConfigError, PilotConfig, validate_config
from grpo_power.config.carbon_region import UnknownRegion, carbon_intensity
from grpo_power.economics.carbon import carbon_kg
from grpo_power.economics.cost import Assumptions, arm_costs, hours_in_year, per_run, savings
from grpo_power.economics.oversubscription import (
    FleetRows,
    extra_gpus,
    monte_carlo_label,
    monte_carlo_labelled,
    oversubscription_table,
)
from grpo_power.economics.pilot import headroom_windows, paired_t_power, pilot_plan
from grpo_power.economics.records import run_record
from grpo_power.economics.sensitivity import headline, sensitivity
from grpo_power.economics.stage import run_economics
from grpo_power.layout import ECONOMICS
from grpo_power.planner.economics import FROM_THE_TRACES, nameplate_origin
from grpo_power.report.cells import data_label
from grpo_power.telemetry.store import read_trace, write_trace
from tests.conftest import SIM_ARMS, build_stage_outputs, small_config, write_run


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
    """A saving is for the baseline's fleet-year of tokens made by the arm (it was the arm's
    own: a better arm's saving exceeded the baseline's whole yearly spend, and a worse arm's
    loss shrank); the fleet's yearly bill change is its own column, and the two can differ in
    sign."""
    base = {
        "source": "run",
        "deployment": "x",
        "seed": 0,
        "gpus": 1,
        "wall_s": 100.0,
        "data": "simulated",
    }
    # ppo: 2 Mtok for 1 kWh of GPU energy in 100 s; fixed: 1 Mtok for 2 kWh in 100 s
    records = pd.DataFrame(
        [
            {**base, "arm": "ppo", "tokens": 2e6, "energy_j": 3.6e6},
            {**base, "arm": "fixed", "tokens": 1e6, "energy_j": 7.2e6},
        ]
    )
    arms = arm_costs(records, _assumptions(), 0.95)
    pairs = savings(arms).set_index(["arm", "versus"])
    pair = pairs.loc[("ppo", "fixed")]
    assert pair["energy_per_token_change_pct"] == pytest.approx(-75.0)  # 0.75 vs 3 kWh/Mtok
    assert pair["throughput_change_pct"] == pytest.approx(100.0)
    # fleet: 10 GPUs x 8760 h; fixed makes 1e6 / 100 tok/s per GPU: 10 x 8760 x 3600 x 1e4 / 1e6
    fixed_mtok = 10 * 8760 * 3600 * 1e4 / 1e6
    # ppo: 1 kWh x 1.5 / 2 Mtok x $0.10 = $0.075/Mtok; fixed: 2 x 1.5 / 1 x 0.10 = $0.30/Mtok
    assert pair["energy_usd_saved_per_year"] == pytest.approx((0.30 - 0.075) * fixed_mtok)
    # fixed's own yearly energy bill: 10 GPUs at 72 kW... 72,000 W / 1000 per GPU: 72 kW x 1.5
    fixed_bill = 10 * 72_000.0 * 8760 / 1000 * 1.5 * 0.10
    assert pair["energy_usd_saved_per_year"] <= fixed_bill  # bounded by the baseline's spend
    # GPU time: ppo 100 s / 2 Mtok, fixed 100 s / 1 Mtok, at $4 per GPU-hour
    gpu_saved = (100 / 3600 / 1 - 100 / 3600 / 2) * 4.0 * fixed_mtok
    assert pair["gpu_usd_saved_per_year"] == pytest.approx(gpu_saved)
    usa = carbon_intensity("USA").g_per_kwh
    assert pair["carbon_t_saved_per_year"] == pytest.approx(
        (3.0 - 0.75) * usa / 1000 * fixed_mtok / 1000
    )
    # the fleet's bill: ppo draws 36 kW per GPU, fixed 72 kW; the same GPUs and hours
    ppo_bill = 10 * 36_000.0 * 8760 / 1000 * 1.5 * 0.10
    assert pair["fleet_energy_usd_change_per_year"] == pytest.approx(ppo_bill - fixed_bill)
    assert pair["fleet_carbon_t_change_per_year"] == pytest.approx(
        (ppo_bill - fixed_bill) / 0.10 * usa / 1e6
    )
    # the other way round: fixed's loss is over ppo's (the baseline's) fleet-year of tokens
    back = pairs.loc[("fixed", "ppo")]
    ppo_mtok = 2 * fixed_mtok
    assert back["energy_usd_saved_per_year"] == pytest.approx(-(0.30 - 0.075) * ppo_mtok)


def test_a_cheaper_token_can_come_with_a_higher_bill() -> None:
    """An arm drawing less power but making still fewer tokens: its bill is lower, its token
    dearer (the 7b ppo-against-fixed case); the two columns say so with opposite signs."""
    base = {"source": "simulator", "deployment": "7b", "seed": 0, "gpus": 1, "wall_s": 100.0}
    records = pd.DataFrame(
        [
            {**base, "arm": "ppo", "tokens": 0.5e6, "energy_j": 3.0e6, "data": "simulated"},
            {**base, "arm": "fixed", "tokens": 1e6, "energy_j": 3.6e6, "data": "simulated"},
        ]
    )
    pair = savings(arm_costs(records, _assumptions(), 0.95)).set_index(["arm", "versus"])
    ppo = pair.loc[("ppo", "fixed")]
    assert ppo["energy_usd_saved_per_year"] < 0  # dearer tokens: 6 vs 3.6 MJ per Mtok
    assert ppo["fleet_energy_usd_change_per_year"] < 0  # but 30 kW, not 36 kW: a lower bill


def test_per_token_costs_are_ratios_of_totals_over_seeds() -> None:
    """A noisy arm: the per-token figures are all seeds' totals over all their tokens, so they
    agree with the throughput and the fleet-year columns (the mean of per-seed $/Mtok, 5.754
    where 4.10 / (205.20 tok/s x 0.0036) = 5.550 in the study, did not); the interval is the
    ratio estimator's."""
    base = {"source": "simulator", "deployment": "7b", "arm": "threshold", "gpus": 2}
    seeds = [(0, 1.0e6, 7.2e6, 1000.0), (1, 3.0e6, 9.0e6, 1000.0), (2, 2.0e6, 3.6e6, 1000.0)]
    records = pd.DataFrame(
        [
            {**base, "seed": s, "tokens": t, "energy_j": e, "wall_s": w, "data": "simulated"}
            for s, t, e, w in seeds
        ]
    )
    a = _assumptions()
    arm = arm_costs(records, a, 0.95).iloc[0]
    tokens = 6.0e6
    kwh = (7.2e6 + 9.0e6 + 3.6e6) / 3.6e6 * 1.5  # 8.25 kWh x PUE
    gpu_h = 3 * 2 * 1000.0 / 3600.0
    assert arm["kwh_per_mtok"] == pytest.approx(kwh / 6.0)
    assert arm["energy_usd_per_mtok"] == pytest.approx(kwh / 6.0 * 0.10)
    assert arm["gpu_usd_per_mtok"] == pytest.approx(gpu_h / 6.0 * 4.0)
    tps = tokens / (3 * 2 * 1000.0)  # 1000 tok/s per GPU: here the seeds' mean too
    assert arm["tokens_per_gpu_s"] == pytest.approx(tps)
    assert arm["gpu_usd_per_mtok"] == pytest.approx(4.0 / (tps * 3600 / 1e6))
    # the mean of per-seed ratios differs: (3.0 + 1.25 + 0.75) / 3 x 0.10 kWh-$ per Mtok
    assert arm["energy_usd_per_mtok"] != pytest.approx((3.0 + 1.25 + 0.75) / 3 * 0.10)
    # the fleet-year's energy dollars over its tokens are the per-token figure
    assert arm["annual_energy_usd"] / arm["annual_mtok"] == pytest.approx(
        arm["energy_usd_per_mtok"]
    )
    # the interval: Student-t on d_i = (x_i - R y_i) / mean(y), x the seed's $ and y its Mtok
    r = kwh / 6.0 * 0.10
    x = np.array([7.2, 9.0, 3.6]) / 3.6 * 1.5 * 0.10
    y = np.array([1.0, 3.0, 2.0])
    d = (x - r * y) / y.mean()
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert arm["energy_usd_per_mtok_ci_low"] == pytest.approx(max(r - half, 0.0))
    assert arm["energy_usd_per_mtok_ci_high"] == pytest.approx(r + half)
    one = arm_costs(records.head(1), a, 0.95).iloc[0]
    assert math.isnan(one["energy_usd_per_mtok_ci_low"])  # one seed: no interval


def test_the_headline_leads_with_the_simulated_deployments() -> None:
    """The headline began with the tiny CPU runs (priced as A100s, no intervals): the simulated
    deployments lead, and every tiny-run row says it is not an estimate for GPU runs."""
    rows = []
    for source, deployment, data in (
        ("run", "tiny", "simulated"),
        ("simulator", "7b", "simulated"),
        ("simulator", "72b", "simulated"),
    ):
        for arm, tokens in (("ppo", 2e6), ("fixed", 1e6)):
            rows.append(
                {
                    "source": source,
                    "deployment": deployment,
                    "arm": arm,
                    "seed": 0,
                    "gpus": 1,
                    "tokens": tokens,
                    "energy_j": 3.6e6,
                    "wall_s": 100.0,
                    "data": data,
                }
            )
    capital = pd.DataFrame(
        [
            {
                "scope": "economics fleet",
                "n_gpus": 10,
                "capital_usd_avoided": 1.0,
                "data": "simulated",
                "note": "",
            }
        ]
    )
    table = headline(pd.DataFrame(rows), lambda a: capital, _assumptions(), "ppo", "fixed")
    order = list(dict.fromkeys(zip(table["source"], table["deployment"], strict=True)))
    assert order == [
        ("simulator", "7b"),
        ("simulator", "72b"),
        ("run", "tiny"),
        ("fleet", "10 GPUs"),
    ]
    tiny = table[table["source"] == "run"]
    assert (tiny["note"] == "tiny model on the CPU, not an estimate for GPU runs").all()
    assert (table.loc[table["source"] == "simulator", "note"] == "").all()
    quantities = set(table["quantity"])
    assert "GPU energy $ saved on fixed's fleet-year of tokens, ppo vs fixed" in quantities
    assert "fleet's yearly GPU electricity bill change at equal GPU-hours, ppo vs fixed" in (
        quantities
    )


def test_the_gpu_hour_price_has_a_sensitivity_range(config: Config) -> None:
    """The GPU-time $ rows did not move in the sensitivity (no GPU-hour range): they move with
    the GPU-hour price, and only they among the per-Mtok energy rows. Unless given, the range
    follows the configured price (an H100's $12.29 was refused by a range set for an A100's)."""
    s = config.economics.sensitivity
    gpu_hour = config.economics.gpu_hour_range()
    assert s.gpu_hour_usd is None  # the default config gives none
    assert gpu_hour.low < config.economics.gpu_hour.value == gpu_hour.high
    assert "assumed case" in gpu_hour.source  # the committed price is not sourced offline
    h100 = config.economics.model_copy(
        update={"gpu_hour": config.economics.gpu_hour.model_copy(update={"value": 12.29})}
    )
    assert (h100.gpu_hour_range().low, h100.gpu_hour_range().high) == (
        pytest.approx(12.29 * 0.37),
        12.29,
    )
    # the electricity high case is a high case, not the highest state
    assert "high case" in s.electricity_usd_per_kwh.source
    assert "Hawaii" in s.electricity_usd_per_kwh.source
    base = {"source": "simulator", "deployment": "7b", "seed": 0, "gpus": 1, "wall_s": 3600.0}
    records = pd.DataFrame(
        [
            {**base, "arm": "ppo", "tokens": 2e6, "energy_j": 3.6e6, "data": "simulated"},
            {**base, "arm": "fixed", "tokens": 1e6, "energy_j": 3.6e6, "data": "simulated"},
        ]
    )
    capital = pd.DataFrame(
        [{"scope": "economics fleet", "n_gpus": 10, "capital_usd_avoided": 1.0, "data": "x"}]
    )
    a = _assumptions(gpu_hour_usd=config.economics.gpu_hour.value)
    table = sensitivity(
        lambda at: headline(records, lambda _: capital, at, "ppo", "fixed"), a, config.economics
    )
    gpu = table[table["parameter"] == "GPU-hour price"]
    assert list(gpu["setting"].unique()) == [
        f"{gpu_hour.low:g} $/GPU-h",
        f"{gpu_hour.high:g} $/GPU-h",
    ]
    saved = gpu[gpu["quantity"].str.startswith("GPU-time $ saved")].set_index("setting")
    # fixed's fleet-year of tokens: 10 GPUs x 8760 h x 1e6 / 3600 tok/s; 1 h vs 0.5 h per Mtok
    fixed_mtok = 10 * 8760 * 1e6 / 1e6
    low = f"{gpu_hour.low:g} $/GPU-h"
    assert saved.loc[low, "value"] == pytest.approx(0.5 * gpu_hour.low * fixed_mtok)
    energy = gpu[gpu["quantity"].str.startswith("GPU energy cost per Mtok")]
    assert (energy["change_pct"].abs() < 1e-9).all()  # energy does not move with it
    with pytest.raises(ConfigError, match="gpu_hour_usd"):
        validate_config({"economics": {"sensitivity": {"gpu_hour_usd": {"low": 1, "high": 3}}}})


def test_the_pilots_power_is_finite_at_huge_noncentrality() -> None:
    """scipy's nct gives NaN at large noncentrality (its cdf at df 5, noncentrality 10), and
    ``NaN < power`` ended the seed loop silently: the power there is 1 (the t-test rejects)."""
    assert math.isnan(stats.nct.cdf(-stats.t.ppf(0.975, 5), 5, 10.0))  # what scipy does
    power = paired_t_power(6, 10.0 / math.sqrt(6), 1.0, 0.95)
    # the normal tail at the critical value 2.571 minus 10 standard errors: 1 - 5e-14
    assert power == pytest.approx(1.0 - stats.norm.cdf(-10.0 + stats.t.ppf(0.975, 5)), abs=1e-6)
    assert power == pytest.approx(paired_t_power(6, -10.0 / math.sqrt(6), 1.0, 0.95))
    assert math.isfinite(paired_t_power(51, 40.0 / math.sqrt(51), 1.0, 0.95))
    # a small effect still needs seeds: 3 seeds at effect 1 sd reject with 0.18 (scipy's figure)
    assert paired_t_power(3, 1.0, 1.0, 0.95) == pytest.approx(
        stats.nct.sf(stats.t.ppf(0.975, 2), 2, math.sqrt(3))
        + stats.nct.cdf(-stats.t.ppf(0.975, 2), 2, math.sqrt(3))
    )


def test_monte_carlo_fleets_of_measured_traces_say_so() -> None:
    """The planner's scaling-study and economics-fleet rows read "measured (imported)" though
    they are Monte Carlo draws of the traced GPUs."""
    rows = pd.DataFrame(
        {
            "alignment": ["monte_carlo", "wall_clock", "monte_carlo"],
            "data": ["measured (imported)", "measured (imported)", "simulated"],
        }
    )
    labelled = monte_carlo_labelled(rows, 3)
    assert list(labelled["data"]) == [
        "Monte Carlo from measured traces (3 GPUs; imported)",
        "measured (imported)",  # the traced GPUs themselves, aligned by their clocks
        "simulated",
    ]
    assert monte_carlo_label("measured", 1) == "Monte Carlo from measured traces (1 GPU)"
    assert data_label(labelled["data"][:1]) != "SIMULATED"  # measured inputs, drawn


def test_where_the_planners_nameplate_came_from() -> None:
    """The report said each GPU was provisioned at "the traced GPUs' mean board power" when the
    nameplate came from the config: the import's note says where it came from."""
    notes = (
        "x.csv: no power.default_limit: nameplate 400 W from the config's gpu.nameplate_w | "
        "x.csv: readings reach 499.86 W, above the nameplate 400 W from the config's "
        "gpu.nameplate_w: if the log is of another part, give its nameplate"
    )
    assert nameplate_origin(notes) == "the config's gpu.nameplate_w"
    assert nameplate_origin("x.csv: timestamps read as local time") == FROM_THE_TRACES
    # a DCGM log names its part, not its board power: the part's default (it read "from the
    # traces themselves (the log's power limit, ...)")
    part = (
        "x.csv: no power.default_limit: nameplate 400 W, the default board power of NVIDIA "
        "A100-SXM4-80GB (boards of 500 W exist: give --nameplate-w) | x.csv: 3 gaps"
    )
    assert nameplate_origin(part) == "the default board power of NVIDIA A100-SXM4-80GB"
    enforced = "x.csv: no power.default_limit, and X is neither ...: nameplate 350 W, the highest "
    assert nameplate_origin(enforced + "enforced power limit (...)") == (
        "the highest enforced power limit"
    )


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
        ({"carbon_region": "Atlantis"}, "economics.carbon_region: unknown carbon"),
        ({"carbon_region": "gcp:us-cental1"}, "closest: gcp:us-central1"),
        ({"sensitivity": {"carbon_regions": ["FRA", "XX"]}}, "economics.sensitivity.carbon"),
        ({"electricity_price": {"value": 8.06, "source": "EIA", "year": 2023}}, "in cents?"),
        ({"pue": {"value": 0.9, "source": "x", "year": 2023}}, "economics.pue.value"),
        ({"capacity_cost": {"value": 11.7, "source": "x", "year": 2024}}, "write dollars"),
        ({"pue": {"value": 1.2}}, "economics.pue.source: Field required"),
        ({"gpu_hour": {"value": 4.1, "source": "", "year": 2024}}, "economics.gpu_hour.source"),
        ({"controller_arm": "fixed"}, "both 'fixed'"),
        ({"sensitivity": {"pue": {"low": 2.0, "high": 1.2}}}, "must be below high"),
        ({"sensitivity": {"pue": {"low": 1.58, "high": 1.58}}}, "must be below high"),
        # a range that misses its base value: the price raised, the default range kept
        (
            {"electricity_price": {"value": 0.25, "source": "utility bill", "year": 2025}},
            "sensitivity.electricity_usd_per_kwh: the range 0.0575-0.1864 $/kWh does not hold "
            "electricity_price.value 0.25 $/kWh",
        ),
        ({"host_power": {"value": 0.4125, "source": "x", "year": 2020}}, "is it in kW?"),
        ({"gpu_hour": {"value": 4.1, "source": "  ", "year": 2024}}, "economics.gpu_hour.source"),
        ({"gpu_hour": {"value": 410, "source": "x", "year": 2024}}, "410 c is 4.1 $"),
        (
            {"carbon_intensity": {"value": 0.38, "source": "utility", "year": 2025}},
            "is it in kg/kWh? 0.38 kg is 380 g",
        ),
        (
            {
                "carbon_region": "DEU",
                "carbon_intensity": {"value": 380, "source": "utility", "year": 2025},
            },
            "both given: expected one of them",
        ),
        ({"carbon_region": "Germany"}, "closest: DEU (Germany)"),
        ({"carbon_region": "aws:eu-central-1"}, "has no aws regions (its providers: gcp)"),
        ({"sensitivity": {"pue": {"low": 0.8, "high": 1.2}}}, "pue.low: PUE 0.8 is implausible"),
        # each end of a range is checked as its base value is (they were recomputed at)
        ({"sensitivity": {"pue": {"low": 1.1, "high": 20}}}, "pue.high: PUE 20 is implausible"),
        (
            {"sensitivity": {"electricity_usd_per_kwh": {"low": 5.75, "high": 18.64}}},
            "sensitivity.electricity_usd_per_kwh.low: 5.75 $/kWh is implausible",
        ),
        (
            {"sensitivity": {"capacity_usd_per_mw": {"low": 9.3, "high": 15.0}}},
            "capacity_usd_per_mw.low: 9.3 $/MW is implausible",
        ),
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
    # two deployments that cost the same: one pilot, the first (both were marked smallest)
    twin = [{**row, "deployment": "7b-twin"} for row in rows if row["deployment"] == "7b"]
    tied = pilot_plan(pd.DataFrame(rows + twin), "ppo", "fixed", 16, 30.0, 4.0, pilot)
    assert tied["cost_usd"].iloc[0] == tied["cost_usd"].iloc[2]
    assert list(tied["smallest"]) == [True, False, False]
    plan = plans.iloc[0]
    sd = float(np.std(gains, ddof=1))
    assert plan["sized_by"] == "output_tokens"  # the only metric with a gain
    # the fewest seeds whose paired t-test detects +20 % at 95 % with power 0.8, checked by
    # simulating the test: the normal formula gave 3 seeds, where the t-test's power is 0.4
    z = 1.959963984540054 + 0.8416212335729143
    assert math.ceil((z * sd / 0.2) ** 2) == 3
    rng = np.random.default_rng(0)

    def simulated_power(seeds: int) -> float:
        changes = rng.normal(0.2, sd, size=(20_000, seeds))
        return float(np.mean(stats.ttest_1samp(changes, 0.0, axis=1).pvalue < 0.05))

    seeds = int(plan["seeds_per_arm"])
    assert simulated_power(seeds) > 0.79 and simulated_power(seeds - 1) < 0.81
    assert simulated_power(3) < 0.5
    # a deployment the simulator ran on one seed has no spread to size a pilot by
    one = pilot_plan(pd.DataFrame(rows[:2]), "ppo", "fixed", 16, 30.0, 4.0, pilot).iloc[0]
    assert one["sized_by"] == "one simulated seed: no spread to size by"
    assert math.isinf(one["seeds_per_arm"])
    assert plan["nodes"] == 2 and plan["gpus"] == 16  # the 16-GPU fleet on 8-GPU nodes
    # the file says how the pilot was sized (the effect share, inflation and target were not in
    # it, so a pilot.csv read alone could not be checked)
    sized_by = ["min_effect_share", "sd_inflation", "min_seeds", "exceedance_target"]
    assert plan[sized_by].tolist() == [1.0, 1.0, 2, pilot.exceedance_target]
    run_h = 500 * 10.0 / 3600  # 500 steps of 10 s
    runs_h = math.ceil(2 * plan["seeds_per_arm"] / 16) * run_h
    assert plan["hours"] == pytest.approx(max(runs_h, 2996 * 30 / 3600))
    assert plan["cost_usd"] == pytest.approx(16 * plan["hours"] * 4.0)


def test_oversubscription_from_the_fleet_stage(study: tuple[Config, dict]) -> None:
    config, paths = study
    a = Assumptions.from_config(config.economics)
    table = oversubscription_table(
        FleetRows.read(paths["root"] / "fleet"), config.gpu.nameplate_w, a
    )
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


def _fleet_outputs(folder: Path, fleet_gpus: int, factors: dict[int, float]) -> Path:
    """A fleet stage's outputs at the 30 s window: its own fleet of ``fleet_gpus`` and a
    scaling study, each size's factor as given (peak share = 1 / (factor x 1.1))."""

    def rows(sizes: list[int]) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "n_gpus": sizes,
                "window_s": 30.0,
                "factor": [factors[n] for n in sizes],
                "margin": 0.1,
                "peak_quantile": 0.95,
                "peak_share_sizing": [1 / (factors[n] * 1.1) for n in sizes],
                "data": "measured",
            }
        )

    folder.mkdir()
    info = {"n_gpus": fleet_gpus, "window_s": 30.0, "nameplate_w_per_gpu": 400.0}
    (folder / "summary.json").write_text(json.dumps(info))
    rows([fleet_gpus]).to_csv(folder / "fleet_windows.csv", index=False)
    rows(sorted(n for n in factors if n != fleet_gpus)).to_csv(folder / "scaling.csv", index=False)
    return folder


def test_the_economics_fleet_takes_the_largest_studied_fleet_not_larger(tmp_path: Path) -> None:
    """The traced fleet itself is a studied size: a 24-GPU economics fleet of a 24-GPU trace
    takes its factor, not the 16-GPU draws' below 1; a fleet smaller than any studied takes the
    smallest's and says so; no headroom adds no GPU (it does not take capacity away)."""
    fleet = FleetRows.read(_fleet_outputs(tmp_path / "fleet", 24, {24: 1.19, 16: 0.985, 64: 1.09}))
    table = oversubscription_table(fleet, 400.0, _assumptions(fleet_gpus=24))
    economics_fleet = table[table["scope"] == "economics fleet"].iloc[0]
    assert economics_fleet["factor_from_gpus"] == 24
    assert economics_fleet["factor"] == pytest.approx(1.19)
    assert economics_fleet["extra_gpus"] == math.floor(extra_gpus(24, 1.19, 400.0, 0.0)) == 4
    sixteen = table[table["n_gpus"] == 16].iloc[0]
    assert sixteen["extra_gpus"] == 0 and sixteen["capital_usd_avoided"] == 0
    assert "no headroom" in sixteen["note"] and "101.5 % of nameplate" in sixteen["note"]

    table = oversubscription_table(fleet, 400.0, _assumptions(fleet_gpus=8))
    economics_fleet = table[table["scope"] == "economics fleet"].iloc[0]
    assert economics_fleet["factor_from_gpus"] == 16
    assert "no studied fleet is as small as 8 GPUs" in economics_fleet["note"]
    table = oversubscription_table(fleet, 400.0, _assumptions(fleet_gpus=63))
    assert table.iloc[-1]["factor_from_gpus"] == 24  # 64 is larger; 24 beats 16
    # a traced fleet with no full window of the sizing length has no factor: not a basis
    unsized = FleetRows.read(
        _fleet_outputs(tmp_path / "unsized", 24, {24: float("nan"), 16: 1.1, 64: 1.2})
    )
    table = oversubscription_table(unsized, 400.0, _assumptions(fleet_gpus=30))
    assert table.iloc[-1]["factor_from_gpus"] == 16 and table.iloc[-1]["factor"] == 1.1


def test_the_capital_says_what_fleet_its_factor_comes_from(tmp_path: Path) -> None:
    """The capital headline rests on the fleet stage's fleet, which in the laptop study is
    tiny CPU runs of seconds repeated end to end; its row did not say so."""
    folder = _fleet_outputs(tmp_path / "fleet", 16, {16: 1.2, 64: 1.25})
    info = json.loads((folder / "summary.json").read_text())
    info.update(
        run_ids=["tiny-fixed-seed0", "tiny-ppo-seed0"],
        source_lengths_s=[3.5, 32.0],
        alignment="monte_carlo",
        model_sizes=["tiny"],
    )
    (folder / "summary.json").write_text(json.dumps(info))
    table = oversubscription_table(FleetRows.read(folder), 400.0, _assumptions(fleet_gpus=100))
    note = table[table["scope"] == "economics fleet"].iloc[0]["note"]
    assert note == (
        "factor of the 64-GPU fleet of the fleet stage's 2 run(s) (tiny model on the CPU, not an "
        "estimate for GPU runs), 3.5-32 s long, drawn by Monte Carlo (each run repeated end to end "
        "over the horizon)"
    )
    # real runs of a published size say which; the fleet stage's own fleet is aligned by wall
    # clock, but the 64-GPU fleet the factor comes from is the scaling study's, drawn by Monte
    # Carlo (a planner's note said "aligned by wall clock" of it)
    info.update(model_sizes=["qwen2.5-7b"], alignment="wall_clock")
    (folder / "summary.json").write_text(json.dumps(info))
    table = oversubscription_table(FleetRows.read(folder), 400.0, _assumptions(fleet_gpus=100))
    notes = table.set_index("scope")["note"]
    assert notes["fleet stage"] == (
        "the fleet stage's 2 run(s) of qwen2.5-7b, 3.5-32 s long, aligned by wall clock"
    )
    assert notes["economics fleet"] == (
        "factor of the 64-GPU fleet of the fleet stage's 2 run(s) of qwen2.5-7b, 3.5-32 s long, "
        "drawn by Monte Carlo (each run repeated end to end over the horizon)"
    )


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
    saved = price[price["quantity"].str.startswith("GPU energy $ saved")]
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


def test_a_fleet_of_another_part_is_valued_at_its_own_nameplate(
    study: tuple[Config, dict], tmp_path: Path
) -> None:
    """An H100 fleet (700 W) valued under the default A100 config: each extra GPU was priced at
    the config's 400 W (3,058 extra GPUs, $29.1 M avoided, where 700 W gives 4,272 and $55.6
    M). The fleet stage records its GPUs' nameplate and the economics stage takes it."""
    from grpo_power.analysis.fleet.stage import run_fleet
    from grpo_power.analysis.windows.stage import run_windows

    config, paths = study
    trace = read_trace(paths["runs"][1] / "trace.parquet")
    meta = trace.metadata.model_copy(
        update={"gpu_name": "NVIDIA H100 80GB HBM3", "nameplate_w": 700.0}
    )
    h100 = write_trace(
        tmp_path / "h100.parquet", trace.frame.assign(power_w=2 * trace.frame["power_w"]), meta
    )
    run_windows(h100, tmp_path / "windows", config)
    run_fleet([tmp_path / "windows" / "bins.parquet"], tmp_path / "fleet", config)
    assert (
        json.loads((tmp_path / "fleet" / "summary.json").read_text())["nameplate_w_per_gpu"]
        == 700.0
    )
    result = run_economics(
        config, tmp_path / "economics", [], paths["root"] / "evaluate" / "study", tmp_path / "fleet"
    )
    assert result.summary["nameplate_w"] == 700.0
    stage = result.oversubscription.set_index("scope").loc["fleet stage"]
    host_w = config.economics.host_power.value
    assert stage["extra_gpus"] == math.floor(
        extra_gpus(int(stage["n_gpus"]), stage["factor"], 700.0, host_w)
    )
    assert stage["capital_usd_avoided"] == pytest.approx(
        stage["extra_gpus"] * (700.0 + host_w) / 1e6 * config.economics.capacity_cost.value
    )


def test_the_planners_capital_says_where_its_nameplate_came_from(tmp_path: Path) -> None:
    """The planner report's capital sentence names the nameplate's origin and, where a trace
    reads above it, repeats the warning beside the capital."""
    from grpo_power.planner.report import _above_nameplate, _nameplate_origin
    from grpo_power.report.cells import JsonFile

    path = tmp_path / "summary.json"
    above = [{"run_id": "a", "peak_w": 520.4, "nameplate_w": 400.0}]
    path.write_text(json.dumps({"nameplate_from": ["the config's gpu.nameplate_w"]}))
    summary = JsonFile(path)
    assert _nameplate_origin(summary).endswith("from the config's gpu.nameplate_w")
    assert "board power" not in _nameplate_origin(summary)
    assert _above_nameplate(summary) == []
    path.write_text(json.dumps({"nameplate_from": [], "above_nameplate": above}))
    (warning,) = _above_nameplate(JsonFile(path))
    assert "readings reach 520 W, above the nameplate 400 W (1 trace(s))" in warning


def test_a_study_of_another_part_says_its_economics_are_an_a100s(study: tuple) -> None:
    """An H200 study priced its hosts at a DGX A100's 412.5 W and its GPU-hours at an A100's
    $4.10 ("smallest pilot: ..., $1,638" at the A100's price), with no note anywhere."""
    config, paths = study
    assert paths["result"].summary["part_notes"] == []  # the A100: the defaults are its own
    h200 = config.model_copy(update={"gpu": validate_config({"gpu": {"name": "NVIDIA H200"}}).gpu})
    result = run_economics(
        h200, paths["root"] / "economics-h200", paths["runs"], paths["root"] / "evaluate" / "study",
        paths["root"] / "fleet",
    )  # fmt: skip
    host, price = result.summary["part_notes"]
    assert host.startswith("the capital counts each GPU's host at 412.5 W (economics.host_power")
    assert price.startswith("GPU time is priced at $4.1 a GPU-hour (economics.gpu_hour")
    assert (
        "the study's GPUs are NVIDIA H200" in host and "the study's GPUs are NVIDIA H200" in price
    )
