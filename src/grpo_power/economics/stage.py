"""The economics stage (stage 7): energy cost, carbon, oversubscription value and the pilot.

Reads what earlier stages wrote (run folders, the evaluate stage's ``metrics.csv``, the fleet
stage's folder) and writes into ``out``, atomically:

- ``constants.csv``: every constant used, with unit, source and year;
- ``runs.csv``: each run's energy, tokens and per-token economics;
- ``arms.csv``: per source, deployment and arm, ratios of totals over seeds (per-token figures,
  throughput, power) with the ratio estimator's confidence intervals, and the fleet-year totals;
  energy is GPU energy x PUE (hosts not counted);
- ``savings.csv``: every arm against every other (same source and deployment): what making the
  baseline's (``versus``'s) fleet-year of tokens with the arm saves, and the change of the
  fleet's yearly electricity bill and carbon (arm minus baseline);
- ``oversubscription.csv``: extra GPUs and capital avoided, per fleet size;
- ``pilot.csv``: the pilot per simulated deployment, the cheapest marked ``smallest``;
- ``sensitivity.csv``: the headline at the low and high end of each assumption;
- ``summary.json``: the headline (the simulated deployments first; the run stage's tiny CPU
  runs after them, noted as not an estimate for GPU runs) and where every number came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_power.atomic import write_csv_atomic, write_json_atomic
from grpo_power.config import Config, SourcedValue
from grpo_power.economics.cost import Assumptions, arm_costs, part_notes, per_run, savings
from grpo_power.economics.oversubscription import (
    FleetRows,
    oversubscription_table,
    read_fleet_summary,
)
from grpo_power.economics.pilot import pilot_plan
from grpo_power.economics.records import METRICS_FILE, all_records
from grpo_power.economics.sensitivity import headline, sensitivity
from grpo_power.layout import ECONOMICS, EVALUATE
from grpo_power.stage_files import read_csv


@dataclass
class EconomicsResult:
    """Everything the economics stage computed (also written to its folder)."""

    arms: pd.DataFrame
    savings: pd.DataFrame
    oversubscription: pd.DataFrame
    pilot: pd.DataFrame
    sensitivity: pd.DataFrame
    summary: dict[str, Any]


def constants_table(config: Config, a: Assumptions) -> pd.DataFrame:
    """Every constant of the economics section with its unit, source and year, the carbon
    intensity used (looked up for the configured region, or one's own), each end of the
    sensitivity's ranges with its source, and the fleet-year settings."""
    economics = config.economics
    rows = [
        {
            "name": name,
            "value": value.value,
            "unit": value.unit,
            "source": value.source,
            "year": value.year,
        }
        for name in type(economics).model_fields
        if isinstance(value := getattr(economics, name), SourcedValue)
        and name != "carbon_intensity"  # the intensity used, own or looked up, is the next row
    ]
    rows.append(
        {
            "name": "carbon_intensity",
            "value": a.carbon.g_per_kwh,
            "unit": f"gCO2eq/kWh, {a.carbon.region}: {a.carbon.name}",
            "source": a.carbon.source,
            "year": a.carbon.year,
        }
    )
    for name, bounds, unit in (
        ("electricity_usd_per_kwh", economics.sensitivity.electricity_usd_per_kwh, "$/kWh"),
        ("pue", economics.sensitivity.pue, "facility / IT energy"),
        ("capacity_usd_per_mw", economics.sensitivity.capacity_usd_per_mw, "$/MW"),
        ("gpu_hour_usd", economics.gpu_hour_range(), "$ per GPU-hour"),
    ):
        for end in ("low", "high"):
            rows.append(
                {
                    "name": f"sensitivity {name} {end}",
                    "value": getattr(bounds, end),
                    "unit": unit,
                    "source": bounds.source or "not given in the config",
                    "year": None,
                }
            )
    settings = (
        ("fleet_gpus", economics.fleet_gpus, "GPUs"),
        ("year", economics.year, "calendar year of the annual figures"),
        ("utilization", economics.utilization, "share of the year the fleet runs"),
        ("fleet_hours", a.fleet_hours, "hours a year the fleet runs"),
    )
    for name, value, unit in settings:
        rows.append({"name": name, "value": value, "unit": unit, "source": "config", "year": None})
    return pd.DataFrame(rows)


def run_economics(
    config: Config,
    out: Path | str,
    run_folders: list[Path],
    evaluate_dir: Path | str,
    fleet_dir: Path | str,
) -> EconomicsResult:
    """Price every run and arm, value oversubscription, plan the pilot; write ``out``.

    Args:
        config: settings (``economics``, ``fleet`` and ``gpu`` sections).
        out: output folder.
        run_folders: run-stage folders (may be empty).
        evaluate_dir: the evaluate stage's folder (its ``metrics.csv``).
        fleet_dir: the fleet stage's folder (``summary.json``, ``fleet_windows.csv``,
            ``scaling.csv``).
    """
    out, evaluate_dir, fleet_dir = Path(out), Path(evaluate_dir), Path(fleet_dir)
    economics = config.economics
    a = Assumptions.from_config(economics)
    metrics_csv = evaluate_dir / EVALUATE.metrics
    records = all_records(run_folders, metrics_csv)
    confidence = config.evaluate.confidence
    arms = arm_costs(records, a, confidence)
    pairs = savings(arms)

    fleet_summary = read_fleet_summary(fleet_dir)
    nameplate_w = float(fleet_summary["nameplate_w_per_gpu"])  # the fleet's GPUs', not the config's

    fleet = FleetRows.read(fleet_dir)

    def value_of(assumptions: Assumptions) -> pd.DataFrame:
        return oversubscription_table(fleet, nameplate_w, assumptions)

    oversubscription = value_of(a)
    pilot = pilot_plan(
        read_csv(metrics_csv, METRICS_FILE),
        economics.controller_arm,
        economics.baseline_arm,
        int(fleet_summary["n_gpus"]),
        float(fleet_summary["window_s"]),
        a.gpu_hour_usd,
        economics.pilot,
    )
    smallest = pilot[pilot["smallest"]] if len(pilot) else pilot
    table = sensitivity(
        lambda at: headline(
            records, value_of, at, economics.controller_arm, economics.baseline_arm
        ),
        a,
        economics,
    )
    base = table[table["parameter"] == "base"].drop(columns=["parameter", "setting", "change_pct"])
    summary = {
        "data": sorted(set(records["data"])),
        "controller_arm": economics.controller_arm,
        "baseline_arm": economics.baseline_arm,
        "carbon_region": a.carbon.region,
        "carbon_g_per_kwh": a.carbon.g_per_kwh,
        "fleet_gpus": a.fleet_gpus,
        "nameplate_w": nameplate_w,  # per GPU, the fleet stage's GPUs' mean
        "year": economics.year,
        "confidence": confidence,
        "headline": base.to_dict(orient="records"),
        "oversubscription": oversubscription[
            oversubscription["scope"] == "economics fleet"
        ].to_dict(orient="records")[0],
        "pilot": next(iter(smallest.to_dict(orient="records")), None),
        # the study's GPUs are the config's part (the runs simulate it, the simulator models it)
        "part_notes": part_notes([config.gpu.name], economics, "the study's GPUs"),
        "inputs": {
            "runs": [str(f) for f in run_folders],
            "evaluate": str(metrics_csv),
            "fleet": str(fleet_dir),
        },
    }
    write_csv_atomic(out / ECONOMICS.constants, constants_table(config, a))
    write_csv_atomic(out / ECONOMICS.runs, per_run(records, a))
    write_csv_atomic(out / ECONOMICS.arms, arms)
    write_csv_atomic(out / ECONOMICS.savings, pairs)
    write_csv_atomic(out / ECONOMICS.oversubscription, oversubscription)
    write_csv_atomic(out / ECONOMICS.pilot, pilot)
    write_csv_atomic(out / ECONOMICS.sensitivity, table)
    write_json_atomic(out / ECONOMICS.summary, summary)
    return EconomicsResult(arms, pairs, oversubscription, pilot, table, summary)
