"""Energy cost, carbon and GPU time per million tokens, per arm, scaled to a fleet-year.

From each run's record (:mod:`grpo_power.economics.records`):

- energy at the wall = GPU energy x PUE (kWh); host CPUs and memory are not in the traces and
  are not counted;
- energy cost per million completion tokens = wall kWh / Mtok x price ($/kWh);
- carbon per million tokens = wall kWh / Mtok x the region's intensity (location-based);
- GPU time per million tokens = GPU-hours / Mtok x the GPU-hour price;
- a fleet-year: ``fleet_gpus`` GPUs running the arm for the year's hours x utilisation, at the
  run's per-GPU throughput and power.

Per arm: means over seeds with Student-t intervals. Savings of an arm against another are for
the same work: the first arm's fleet-year of tokens, produced by either arm.
"""

from __future__ import annotations

import calendar
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_power.config import EconomicsConfig
from grpo_power.config.carbon_region import CarbonIntensity, carbon_intensity
from grpo_power.stats import mean_ci

J_PER_KWH = 3.6e6
PER_RUN = (
    "kwh_per_mtok",  # wall energy, kWh per million tokens
    "energy_usd_per_mtok",
    "carbon_kg_per_mtok",
    "gpu_usd_per_mtok",
    "tokens_per_gpu_s",
    "power_w_per_gpu",  # mean GPU power, W
    "annual_mtok",  # fleet-year output, million tokens
    "annual_mwh",  # fleet-year wall energy, MWh
    "annual_energy_usd",
    "annual_carbon_t",
)
WITH_CI = ("energy_usd_per_mtok", "carbon_kg_per_mtok", "gpu_usd_per_mtok", "tokens_per_gpu_s")
GROUP = ["source", "deployment", "arm"]


def hours_in_year(year: int) -> float:
    """Hours in calendar ``year`` (8784 in leap years)."""
    return 24.0 * (366 if calendar.isleap(year) else 365)


@dataclass(frozen=True)
class Assumptions:
    """The prices and factors of one economics evaluation (one point of the sensitivity)."""

    usd_per_kwh: float
    pue: float
    carbon: CarbonIntensity
    gpu_hour_usd: float
    usd_per_mw: float
    host_w_per_gpu: float
    fleet_gpus: int
    fleet_hours: float  # hours a year the fleet runs (GRPO, in the study)

    @classmethod
    def from_config(cls, economics: EconomicsConfig) -> Assumptions:
        """The configured values (the base case)."""
        return cls(
            usd_per_kwh=economics.electricity_price.value,
            pue=economics.pue.value,
            carbon=own_or_region_intensity(economics),
            gpu_hour_usd=economics.gpu_hour.value,
            usd_per_mw=economics.capacity_cost.value,
            host_w_per_gpu=economics.host_power.value,
            fleet_gpus=economics.fleet_gpus,
            fleet_hours=hours_in_year(economics.year) * economics.utilization,
        )


def own_or_region_intensity(economics: EconomicsConfig) -> CarbonIntensity:
    """The configured ``carbon_intensity`` (a figure of one's own, with its source), else the
    ``carbon_region``'s looked up in CodeCarbon's data."""
    own = economics.carbon_intensity
    if own is None:
        return carbon_intensity(economics.carbon_region)
    name = "economics.carbon_intensity"
    return CarbonIntensity(OWN_REGION, name, own.value, own.source, own.year)


OWN_REGION = "own figure"


def per_run(records: pd.DataFrame, a: Assumptions) -> pd.DataFrame:
    """``records`` with the :data:`PER_RUN` columns added (units in their names)."""
    runs = records.copy()
    mtok = runs["tokens"] / 1e6
    wall_kwh = runs["energy_j"] / J_PER_KWH * a.pue
    runs["kwh_per_mtok"] = wall_kwh / mtok
    runs["energy_usd_per_mtok"] = runs["kwh_per_mtok"] * a.usd_per_kwh
    runs["carbon_kg_per_mtok"] = runs["kwh_per_mtok"] * a.carbon.g_per_kwh / 1000.0
    runs["gpu_usd_per_mtok"] = runs["gpus"] * runs["wall_s"] / 3600.0 / mtok * a.gpu_hour_usd
    runs["tokens_per_gpu_s"] = runs["tokens"] / runs["wall_s"] / runs["gpus"]
    runs["power_w_per_gpu"] = runs["energy_j"] / runs["wall_s"] / runs["gpus"]
    fleet_s = a.fleet_gpus * a.fleet_hours * 3600.0
    runs["annual_mtok"] = runs["tokens_per_gpu_s"] * fleet_s / 1e6
    runs["annual_mwh"] = runs["power_w_per_gpu"] * fleet_s / J_PER_KWH / 1000.0 * a.pue
    runs["annual_energy_usd"] = runs["annual_mwh"] * 1000.0 * a.usd_per_kwh
    runs["annual_carbon_t"] = runs["annual_mwh"] * a.carbon.g_per_kwh / 1000.0
    return runs


def arm_costs(records: pd.DataFrame, a: Assumptions, confidence: float) -> pd.DataFrame:
    """Per (source, deployment, arm): seeds, GPUs per run, data label, the mean of every
    :data:`PER_RUN` column over seeds, and ``<column>_ci_low/high`` for :data:`WITH_CI`."""
    runs = per_run(records, a)
    rows = []
    for (source, deployment, arm), group in runs.groupby(GROUP, sort=False):
        row: dict[str, object] = {
            "source": source,
            "deployment": deployment,
            "arm": arm,
            "seeds": len(group),
            "gpus": int(group["gpus"].iloc[0]),
            "data": ",".join(sorted(set(group["data"]))),
        }
        for column in PER_RUN:
            row[column] = float(group[column].mean())
        for column in WITH_CI:
            _, row[f"{column}_ci_low"], row[f"{column}_ci_high"] = mean_ci(
                group[column].to_numpy(), confidence, (0.0, math.inf)
            )
        rows.append(row)
    return pd.DataFrame(rows)


def savings(arms: pd.DataFrame) -> pd.DataFrame:
    """Every arm against every other arm of the same source and deployment.

    Per pair (arm, versus): the change of energy per token (so of its cost and carbon) and of
    per-GPU throughput, in %, and over the fleet-year of ``arm``'s output: energy dollars, GPU
    dollars and tonnes of CO2eq saved by producing it with ``arm`` rather than ``versus``.
    """
    rows = []
    for (source, deployment), group in arms.groupby(["source", "deployment"], sort=False):
        by_arm = group.set_index("arm")
        for arm, mine in by_arm.iterrows():
            for versus, theirs in by_arm.iterrows():
                if versus == arm:
                    continue
                rows.append(
                    {
                        "source": source,
                        "deployment": deployment,
                        "arm": arm,
                        "versus": versus,
                        "energy_per_token_change_pct": _change_pct(
                            mine["kwh_per_mtok"], theirs["kwh_per_mtok"]
                        ),
                        "throughput_change_pct": _change_pct(
                            mine["tokens_per_gpu_s"], theirs["tokens_per_gpu_s"]
                        ),
                        "energy_usd_saved_per_year": (
                            theirs["energy_usd_per_mtok"] - mine["energy_usd_per_mtok"]
                        )
                        * mine["annual_mtok"],
                        "gpu_usd_saved_per_year": (
                            theirs["gpu_usd_per_mtok"] - mine["gpu_usd_per_mtok"]
                        )
                        * mine["annual_mtok"],
                        "carbon_t_saved_per_year": (
                            theirs["carbon_kg_per_mtok"] - mine["carbon_kg_per_mtok"]
                        )
                        * mine["annual_mtok"]
                        / 1000.0,
                        "data": mine["data"],
                    }
                )
    return pd.DataFrame(rows)


def _change_pct(value: float, base: float) -> float:
    return 100.0 * (value / base - 1.0) if base > 0 else float(np.nan)
