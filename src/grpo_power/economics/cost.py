"""Energy cost, carbon and GPU time per million tokens, per arm, scaled to a fleet-year.

From each run's record (:mod:`grpo_power.economics.records`):

- energy = GPU energy x PUE (kWh): the GPUs' share of the facility's energy, not the wall's;
  host CPUs, memory and network are not in the traces and are not counted here (their power
  is counted in the capital, :mod:`grpo_power.economics.oversubscription`);
- energy cost per million completion tokens = GPU kWh x PUE / Mtok x price ($/kWh);
- carbon per million tokens = GPU kWh x PUE / Mtok x the region's intensity (location-based);
- GPU time per million tokens = GPU-hours / Mtok x the GPU-hour price;
- a fleet-year: ``fleet_gpus`` GPUs running the arm for the year's hours x utilisation, at the
  run's per-GPU throughput and power.

Per arm: ratios of totals over seeds (all seeds' energy, GPU time or cost over all their tokens),
so that the per-token figures, the throughput and the fleet-year columns agree (a fleet-year's
energy dollars over its tokens is the energy $ per Mtok); the intervals are the ratio
estimator's (delta method): Student-t on the per-seed residuals ``x_i - R y_i`` over the mean
``y``, centred on the ratio ``R``.

Savings of an arm against another (``versus``, the baseline) are for the same work: the
baseline's fleet-year of tokens, made by the arm instead, so a saving is bounded by the
baseline's own yearly spend. Beside them, the change of the fleet's yearly bill (the arm's
fleet-year energy dollars and carbon minus the baseline's: the same GPUs for the same hours,
each arm making its own tokens), which can differ in sign from the saving.
"""

from __future__ import annotations

import calendar
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.config import EconomicsConfig
from grpo_power.config.carbon_region import CarbonIntensity, carbon_intensity
from grpo_power.stats import mean_ci

J_PER_KWH = 3.6e6
PER_RUN = (
    "kwh_per_mtok",  # GPU energy x PUE, kWh per million tokens (hosts not counted)
    "energy_usd_per_mtok",
    "carbon_kg_per_mtok",
    "gpu_usd_per_mtok",
    "tokens_per_gpu_s",
    "power_w_per_gpu",  # mean GPU power, W
    "annual_mtok",  # fleet-year output, million tokens
    "annual_mwh",  # fleet-year GPU energy x PUE, MWh (hosts not counted)
    "annual_energy_usd",
    "annual_carbon_t",
)
WITH_CI = ("energy_usd_per_mtok", "carbon_kg_per_mtok", "gpu_usd_per_mtok", "tokens_per_gpu_s")
GROUP = ["source", "deployment", "arm"]


def part_notes(parts: Iterable[str], economics: EconomicsConfig, whose: str) -> list[str]:
    """What the capital and the GPU-time $ rest on where they are the packaged defaults, a DGX
    A100's host power and an A100's rental price, and the GPUs priced (``parts``: their names;
    ``whose``: what they are, e.g. "the traces") are of another part: a note each, naming the
    key to give ([] where every part is an A100 or the config gives its own)."""
    others = sorted({p for p in parts if not p.startswith("NVIDIA A100")})
    if not others:
        return []
    fields = EconomicsConfig.model_fields
    notes = []
    host = fields["host_power"].default_factory()  # type: ignore[misc]
    if economics.host_power == host:
        notes.append(
            f"the capital counts each GPU's host at {host.value:g} W (economics.host_power, the "
            f"packaged default: {host.source}), and {whose} are {', '.join(others)}: give "
            "economics.host_power for their hosts (config/h100.yaml gives a DGX H100's, 575 W)"
        )
    price = fields["gpu_hour"].default_factory()  # type: ignore[misc]
    if economics.gpu_hour == price:
        notes.append(
            f"GPU time is priced at ${price.value:g} a GPU-hour (economics.gpu_hour, the packaged "
            f"default: {price.source}), and {whose} are {', '.join(others)}: give "
            "economics.gpu_hour for them (config/h100.yaml gives an H100's)"
        )
    return notes


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
    kwh = runs["energy_j"] / J_PER_KWH * a.pue  # GPU energy x PUE
    runs["kwh_per_mtok"] = kwh / mtok
    runs["energy_usd_per_mtok"] = runs["kwh_per_mtok"] * a.usd_per_kwh
    runs["carbon_kg_per_mtok"] = runs["kwh_per_mtok"] * a.carbon.g_per_kwh / 1000.0
    runs["gpu_usd_per_mtok"] = runs["gpus"] * runs["wall_s"] / 3600.0 / mtok * a.gpu_hour_usd
    runs["tokens_per_gpu_s"] = runs["tokens"] / runs["wall_s"] / runs["gpus"]
    runs["power_w_per_gpu"] = runs["energy_j"] / runs["wall_s"] / runs["gpus"]
    for column, value in fleet_year(runs["tokens_per_gpu_s"], runs["power_w_per_gpu"], a).items():
        runs[column] = value
    return runs


def fleet_year(tokens_per_gpu_s: Any, power_w_per_gpu: Any, a: Assumptions) -> dict[str, Any]:
    """The fleet-year columns (``annual_mtok``, ``annual_mwh``: GPU energy x PUE,
    ``annual_energy_usd``, ``annual_carbon_t``) of ``fleet_gpus`` GPUs running ``fleet_hours``
    at a per-GPU throughput and power (floats, or Series of runs)."""
    fleet_s = a.fleet_gpus * a.fleet_hours * 3600.0
    mwh = power_w_per_gpu * fleet_s / J_PER_KWH / 1000.0 * a.pue
    return {
        "annual_mtok": tokens_per_gpu_s * fleet_s / 1e6,
        "annual_mwh": mwh,
        "annual_energy_usd": mwh * 1000.0 * a.usd_per_kwh,
        "annual_carbon_t": mwh * a.carbon.g_per_kwh / 1000.0,
    }


def arm_costs(records: pd.DataFrame, a: Assumptions, confidence: float) -> pd.DataFrame:
    """Per (source, deployment, arm): seeds, GPUs per run, data label, every :data:`PER_RUN`
    column as a ratio of totals over seeds, and ``<column>_ci_low/high`` for :data:`WITH_CI`.

    Totals over seeds: tokens ``T``, GPU energy ``E`` and GPU-seconds ``G`` (GPUs x wall time).
    Per Mtok: ``E x PUE / T`` (then x price, x intensity) and ``G / T`` x the GPU-hour price;
    per GPU: throughput ``T / G`` and power ``E / G``; the fleet-year columns scale those, so
    ``annual_energy_usd / annual_mtok`` is ``energy_usd_per_mtok`` exactly (a mean of per-seed
    ratios was not: a noisy arm's mean $/Mtok differed from its mean throughput's). With equal
    seeds' wall time and GPUs, throughput and power are the seeds' means.

    Intervals (:func:`ratio_ci`): the ratio estimator's, from the seeds' spread about the
    ratio; NaN with one seed."""
    runs = per_run(records, a)
    runs["gpu_s"] = runs["gpus"] * runs["wall_s"]
    kwh = runs["energy_j"] / J_PER_KWH * a.pue
    # (column, numerator per seed, denominator per seed, scale): column = scale x sum / sum
    ratios = {
        "kwh_per_mtok": (kwh, runs["tokens"] / 1e6, 1.0),
        "energy_usd_per_mtok": (kwh, runs["tokens"] / 1e6, a.usd_per_kwh),
        "carbon_kg_per_mtok": (kwh, runs["tokens"] / 1e6, a.carbon.g_per_kwh / 1000.0),
        "gpu_usd_per_mtok": (runs["gpu_s"] / 3600.0, runs["tokens"] / 1e6, a.gpu_hour_usd),
        "tokens_per_gpu_s": (runs["tokens"], runs["gpu_s"], 1.0),
        "power_w_per_gpu": (runs["energy_j"], runs["gpu_s"], 1.0),
    }
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
        for column, (num, den, scale) in ratios.items():
            num, den = num.loc[group.index].to_numpy(float), den.loc[group.index].to_numpy(float)
            ratio, low, high = ratio_ci(num, den, confidence, (0.0, math.inf))
            row[column] = scale * ratio
            if column in WITH_CI:
                row[f"{column}_ci_low"], row[f"{column}_ci_high"] = scale * low, scale * high
        row.update(fleet_year(row["tokens_per_gpu_s"], row["power_w_per_gpu"], a))
        rows.append(row)
    columns = ["source", "deployment", "arm", "seeds", "gpus", "data", *PER_RUN]
    columns += [f"{c}_ci_{end}" for c in WITH_CI for end in ("low", "high")]
    return pd.DataFrame(rows, columns=columns)


def ratio_ci(
    num: np.ndarray, den: np.ndarray, confidence: float, support: tuple[float, float]
) -> tuple[float, float, float]:
    """Ratio of totals ``R = sum(num) / sum(den)`` over seeds and its two-sided confidence
    interval, the ratio estimator's (delta method): :func:`~grpo_power.stats.mean_ci`'s
    Student-t interval of ``R + d_i``, where the residuals ``d_i = (num_i - R den_i) /
    mean(den)`` sum to 0, cut to ``support``. Returns ``(R, low, high)``; the interval is NaN
    with one seed."""
    ratio = float(num.sum() / den.sum())
    _, low, high = mean_ci(ratio + (num - ratio * den) / den.mean(), confidence, support)
    return ratio, low, high


def savings(arms: pd.DataFrame) -> pd.DataFrame:
    """Every arm against every other arm of the same source and deployment.

    Per pair (arm, versus): the change of energy per token (so of its cost and carbon) and of
    per-GPU throughput, in %; what producing the baseline's (``versus``'s) fleet-year of tokens
    with ``arm`` instead saves (``*_saved_per_year``: ``versus.annual_mtok x (versus's - arm's
    cost per Mtok)``, the same work, so never more than the baseline's own yearly spend; a
    loss where negative); and the change of the fleet's yearly bill, ``arm``'s fleet-year energy
    dollars and carbon minus ``versus``'s (``fleet_*_change_per_year``: the same GPUs for the
    same hours, each arm making its own tokens; positive = the arm's bill is higher). The two
    can differ in sign: an arm drawing less power but making fewer tokens has a lower bill and
    a dearer token.
    """
    rows = []
    for (source, deployment), group in arms.groupby(["source", "deployment"], sort=False):
        by_arm = group.set_index("arm")
        for arm, mine in by_arm.iterrows():
            for versus, theirs in by_arm.iterrows():
                if versus == arm:
                    continue
                work = theirs["annual_mtok"]  # the baseline's fleet-year of tokens
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
                        * work,
                        "gpu_usd_saved_per_year": (
                            theirs["gpu_usd_per_mtok"] - mine["gpu_usd_per_mtok"]
                        )
                        * work,
                        "carbon_t_saved_per_year": (
                            theirs["carbon_kg_per_mtok"] - mine["carbon_kg_per_mtok"]
                        )
                        * work
                        / 1000.0,
                        "fleet_energy_usd_change_per_year": (
                            mine["annual_energy_usd"] - theirs["annual_energy_usd"]
                        ),
                        "fleet_carbon_t_change_per_year": (
                            mine["annual_carbon_t"] - theirs["annual_carbon_t"]
                        ),
                        "data": mine["data"],
                    }
                )
    return pd.DataFrame(rows)


def _change_pct(value: float, base: float) -> float:
    return 100.0 * (value / base - 1.0) if base > 0 else float(np.nan)
