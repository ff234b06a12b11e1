"""Headline economics, and how they move with price, PUE, carbon intensity, capacity cost and
the GPU-hour price.

The study's headline, per source and deployment where both arms ran, the simulated deployments
(7b, 14b, 72b) first and the run stage's real runs after them (a tiny model on the CPU,
priced as if on the configured GPUs: not an estimate for GPU runs, as their ``note`` says): the
controller's and the baseline's energy cost and carbon per million tokens, the energy dollars,
GPU dollars and tonnes of CO2eq the controller saves making the baseline's fleet-year of tokens,
the change of the fleet's yearly electricity bill and carbon, and the capital that
oversubscription avoids for the economics fleet (the planner's: its traces' own cost and
carbon, :mod:`grpo_power.planner.economics`). The sensitivity recomputes a headline one
assumption at a time at the low and high ends of the configured ranges (and at each listed
carbon region).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd

from grpo_power.analysis.fleet.stage import TINY_RUN_NOTE
from grpo_power.config import EconomicsConfig
from grpo_power.config.carbon_region import carbon_intensity
from grpo_power.economics.cost import Assumptions, arm_costs, savings

HEADLINE_COLUMNS = ("source", "deployment", "quantity", "unit", "value", "data", "note")
# The note of a headline row from a run-stage run with simulated power (the CPU's tiny model).


def row_note(source: str, data: str) -> str:
    """The headline's note for rows of ``source`` with ``data`` label: a run-stage run whose
    power is simulated ran a tiny model on the CPU (:data:`TINY_RUN_NOTE`); others none."""
    if source == "run" and "simulated" in str(data):
        return TINY_RUN_NOTE
    if source == "run":
        return "the run stage's own model on its own GPUs, not a simulated deployment"
    return ""


def headline(
    records: pd.DataFrame,
    oversubscription: Callable[[Assumptions], pd.DataFrame],
    a: Assumptions,
    controller: str,
    baseline: str,
) -> pd.DataFrame:
    """The headline numbers under assumptions ``a`` (rows of :data:`HEADLINE_COLUMNS`).

    ``oversubscription(a)`` is the value table of
    :func:`grpo_power.economics.oversubscription.oversubscription_table` under ``a``.
    """
    arms = arm_costs(records, a, confidence=0.95)
    pairs = savings(arms)
    pairs = pairs[(pairs["arm"] == controller) & (pairs["versus"] == baseline)]
    # the simulated deployments lead; the run stage's runs follow (stable: deployments in order)
    pairs = pairs.sort_values("source", key=lambda s: s != "simulator", kind="stable")
    rows = []
    for _, pair in pairs.iterrows():
        key = {
            "source": pair["source"],
            "deployment": pair["deployment"],
            "data": pair["data"],
            "note": row_note(pair["source"], pair["data"]),
        }
        mine = arms[(arms["source"] == pair["source"]) & (arms["deployment"] == pair["deployment"])]
        per_arm = mine.set_index("arm")

        def add(quantity: str, unit: str, value: float, key: dict[str, str] = key) -> None:
            rows.append({**key, "quantity": quantity, "unit": unit, "value": float(value)})

        for arm in (controller, baseline):
            add(f"GPU energy cost per Mtok, {arm}", "$", per_arm.loc[arm, "energy_usd_per_mtok"])
            add(f"carbon per Mtok, {arm}", "kgCO2eq", per_arm.loc[arm, "carbon_kg_per_mtok"])
        versus = f"{controller} vs {baseline}"
        work = f"{baseline}'s fleet-year of tokens"
        add(f"GPU energy $ saved on {work}, {versus}", "$", pair["energy_usd_saved_per_year"])
        add(f"GPU-time $ saved on {work}, {versus}", "$", pair["gpu_usd_saved_per_year"])
        add(f"carbon saved on {work}, {versus}", "tCO2eq", pair["carbon_t_saved_per_year"])
        bill = pair["fleet_energy_usd_change_per_year"]
        add(f"fleet's yearly GPU electricity bill change at equal GPU-hours, {versus}", "$", bill)
        carbon = pair["fleet_carbon_t_change_per_year"]
        add(f"fleet's yearly carbon change, {versus}", "tCO2eq", carbon)
    rows.append(capital_row(oversubscription(a)))
    return pd.DataFrame(rows, columns=list(HEADLINE_COLUMNS))


def capital_row(oversubscription: pd.DataFrame) -> dict[str, object]:
    """The headline row of the capital oversubscription avoids for the economics fleet, from
    a value table of :func:`grpo_power.economics.oversubscription.oversubscription_table`."""
    fleet = oversubscription[oversubscription["scope"] == "economics fleet"].iloc[0]
    return {
        "source": "fleet",
        "deployment": f"{int(fleet['n_gpus']):,} GPUs",
        "quantity": "capital avoided by oversubscription",
        "unit": "$ (one-time)",
        "value": fleet["capital_usd_avoided"],
        "data": fleet["data"],
        "note": fleet["note"] if isinstance(fleet.get("note"), str) else "",
    }


def sensitivity_points(
    base: Assumptions, economics: EconomicsConfig
) -> list[tuple[str, str, Assumptions]]:
    """(parameter, setting, assumptions): the base case, then one assumption changed at a time."""
    s = economics.sensitivity
    points = [("base", "as configured", base)]
    for value in (s.electricity_usd_per_kwh.low, s.electricity_usd_per_kwh.high):
        points.append(("electricity price", f"{value:g} $/kWh", replace(base, usd_per_kwh=value)))
    for value in (s.pue.low, s.pue.high):
        points.append(("PUE", f"{value:g}", replace(base, pue=value)))
    for region in s.carbon_regions:
        intensity = carbon_intensity(region)
        setting = f"{intensity.region} ({intensity.g_per_kwh:g} g/kWh)"
        points.append(("carbon intensity", setting, replace(base, carbon=intensity)))
    for value in (s.capacity_usd_per_mw.low, s.capacity_usd_per_mw.high):
        points.append(("capacity cost", f"{value / 1e6:g} M$/MW", replace(base, usd_per_mw=value)))
    gpu_hour = economics.gpu_hour_range()
    for value in (gpu_hour.low, gpu_hour.high):
        points.append(("GPU-hour price", f"{value:g} $/GPU-h", replace(base, gpu_hour_usd=value)))
    return points


def sensitivity(
    headline_at: Callable[[Assumptions], pd.DataFrame],
    base: Assumptions,
    economics: EconomicsConfig,
) -> pd.DataFrame:
    """The headline (``headline_at(assumptions)``: rows of :data:`HEADLINE_COLUMNS`; the
    study's :func:`headline`, or the planner's) at every point of :func:`sensitivity_points`,
    with ``parameter`` and ``setting`` columns, and ``change_pct`` against the base case."""
    frames = []
    for parameter, setting, a in sensitivity_points(base, economics):
        frames.append(headline_at(a).assign(parameter=parameter, setting=setting))
    table = pd.concat(frames, ignore_index=True)
    keys = ["source", "deployment", "quantity"]
    base_values = table[table["parameter"] == "base"].set_index(keys)["value"]
    base_of_row = table.set_index(keys).index.map(base_values).to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = 100.0 * (table["value"].to_numpy(dtype=float) / base_of_row - 1.0)
    table["change_pct"] = np.where(base_of_row != 0, change, np.nan)
    return table
