"""The fleet's figures beside the study's and published oversubscription results."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.analysis import reference
from grpo_power.analysis.fleet.inputs import RunBins
from grpo_power.config import Config


def _pooled_run_exceedance(
    exceedance_files: Sequence[Path],
) -> tuple[pd.DataFrame, str]:
    """Run-level exceedance pooled over runs (72B runs only when the metadata names some)."""
    frames = [pd.read_parquet(p) for p in exceedance_files if p.exists()]
    if not frames:
        return pd.DataFrame(columns=["window_s", "windows", "windows_over"]), "no exceedance files"
    table = pd.concat(frames, ignore_index=True)
    pooled = table[table["scope"] == "run_pooled"]
    note = f"pooled over {pooled['run_id'].nunique()} run(s)"
    return pooled, note


def comparison_table(
    fleet_table: pd.DataFrame,
    runs: Sequence[RunBins],
    exceedance_files: Sequence[Path],
    config: Config,
    label: str,
    runs_repeated: bool = False,
    horizon_s: float | None = None,
) -> pd.DataFrame:
    """The study's figures, this run's, and the difference, with published results beside
    (``runs_repeated``: every run is shorter than ``fleet.window_s``, so a Monte Carlo fleet's
    figures at that window repeat them end to end, which the notes say; ``horizon_s``: a Monte
    Carlo fleet's timeline, s, over which each draw's peak is taken)."""
    pooled, pooled_note = _pooled_run_exceedance(exceedance_files)
    sizes = {r.run_id: r.info.get("model_size") for r in runs}
    big = [rid for rid, size in sizes.items() if size and "72" in str(size)]
    if big:
        pooled = pooled[pooled["run_id"].isin(big)]
        pooled_note = f"72B runs only: {', '.join(sorted(big))}"
    else:  # the tiny runs are no 72B: the simulated 72B deployment's rows are the study fleet's
        pooled = pooled.iloc[0:0]
        pooled_note = (
            "no input run is labelled 72B (metadata model_size); the simulated 72B deployment's "
            "shares are in fleet/study-mix (rule study_fleet)"
        )
    rows: list[dict[str, Any]] = []

    def add(fig: reference.ReferenceFigure, value: float, note: str, ref: str = "study") -> None:
        rows.append(
            {
                "reference": ref,
                "key": fig.key,
                "quantity": fig.quantity,
                "reference_value": fig.shown(),
                "this_run": value,
                "difference": fig.difference(value),
                "unit": fig.unit,
                "data": label,
                "study_origin": fig.origin,
                "note": note,
                "source": fig.source,
            }
        )

    for fig in reference.STUDY_EXCEEDANCE_72B:
        at = pooled[np.isclose(pooled["window_s"], fig.window_s)] if len(pooled) else pooled
        windows = float(at["windows"].sum()) if len(at) else 0.0
        value = 100.0 * float(at["windows_over"].sum()) / windows if windows else math.nan
        note = (
            pooled_note
            if windows or not big
            else (
                f"{fig.window_s:g} s is not in windows.windows_s"
                if not len(at)
                else f"no full {fig.window_s:g} s window in the input runs"
            )
        )
        add(fig, value, note)

    alignment = str(fleet_table["alignment"].iloc[0])
    n_gpus = int(fleet_table["n_gpus"].iloc[0])
    fleet_desc = f"{n_gpus}-GPU fleet, {alignment}"
    if alignment == "monte_carlo":
        fleet_desc += f", {int(fleet_table['draws'].iloc[0])} draws"
    named = sorted({str(s) for s in sizes.values() if s})
    fleet_desc += (
        f" of {len(runs)} run(s) ({', '.join(named) or 'size not in the metadata'}); differs: "
        "these runs, not the study's mix of 72B, 14B and 7B runs (the simulated mix: "
        "fleet/study-mix)"
    )
    long = fleet_table[fleet_table["window_s"] >= 30.0]
    long = long[np.isfinite(long["exceedance_mean"])]
    mc = alignment == "monte_carlo"
    if len(long):
        worst = long.loc[long["exceedance_mean"].idxmax()]
        spread = (
            f" (mean over draws; worst draw {100.0 * float(worst['exceedance_max']):.3g} %)"
            if mc
            else ""
        )
        add(
            reference.STUDY_FLEET_EXCEEDANCE,
            100.0 * float(worst["exceedance_mean"]),
            f"{fleet_desc}; worst window {worst['window_s']:g} s{spread}",
        )
    else:
        add(reference.STUDY_FLEET_EXCEEDANCE, math.nan, f"{fleet_desc}; no full window >= 30 s")

    chosen = fleet_table[np.isclose(fleet_table["window_s"], config.fleet.window_s)].iloc[0]
    window_note = f"{fleet_desc}; window {config.fleet.window_s:g} s"
    if chosen["windows_per_draw"] == 0:
        window_note += (
            f"; NO full {config.fleet.window_s:g} s window: the fleet timeline is shorter "
            "(record longer runs, or set fleet.horizon_s to repeat them)"
        )
    elif runs_repeated:
        window_note += (
            f"; every run is shorter than {config.fleet.window_s:g} s: the fleet repeats them "
            "end to end (each run periodic), an assumption, not a measurement"
        )
    spread = (
        f"; mean over draws, p5-p95 {100 * chosen['peak_share_p5']:.3g}-"
        f"{100 * chosen['peak_share_p95']:.3g} %"
        if mc and chosen["windows_per_draw"]
        else ("" if mc else "; the real fleet")
    )
    add(reference.STUDY_FLEET_PEAK, 100.0 * float(chosen["peak_share_mean"]), window_note + spread)
    one = "1 / mean peak share" if mc else "1 / peak share"
    add(
        reference.STUDY_OVERSUBSCRIPTION,
        float(chosen["factor_no_margin_mean_peak"]),
        f"{window_note}; {one}, no margin (the study's reading)",
    )
    per_draw = (
        "" if horizon_s is None else f" over its {horizon_s:g} s: the factor holds per that long"
    )
    sized = (
        f"{window_note}; peak (each draw's highest window{per_draw}) at the "
        f"{config.fleet.peak_quantile:g} quantile of draws, margin {config.fleet.margin:g}"
        if mc
        else f"{window_note}; measured peak, margin {config.fleet.margin:g}"
    )
    add(reference.STUDY_OVERSUBSCRIPTION, float(chosen["factor"]), sized)
    for fig in reference.PUBLISHED_OVERSUBSCRIPTION:
        add(fig, float(chosen["factor"]), f"{sized}; published setting: {fig.setting}", ref=fig.key)
    return pd.DataFrame(rows)


def comparison_markdown(
    table: pd.DataFrame,
    label: str,
    summary: dict[str, Any],
    title: str = "Fleet and windowed exceedance: reference figures vs this run",
) -> str:
    """A comparison table as Markdown, with its data label in the title."""
    if label == "simulated":
        title += " (SIMULATED power)"
    lines = [f"# {title}", ""]
    lines.append(
        f"Fleet: {summary['n_gpus']} GPUs, alignment {summary['alignment']}, window "
        f"{summary['window_s']:g} s, margin {summary['margin']:g}. Data: {label}."
    )
    lines += [
        "",
        "| reference | quantity | reference value | this run | difference | note |",
        "|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        value = "n/a" if not np.isfinite(row.this_run) else f"{row.this_run:.3g} {row.unit}"
        diff = "n/a" if not np.isfinite(row.difference) else f"{row.difference:+.3g} {row.unit}"
        lines.append(
            f"| {row.reference} | {row.quantity} | {row.reference_value} | {value} | {diff} | "
            f"{row.note} |"
        )
    lines += [
        "",
        "Differences against a range are 0 inside it, else the distance to its nearer "
        "end. Published results are production or inference settings, not GRPO training.",
        "",
        "Sources:",
    ]
    for source in dict.fromkeys(table["source"]):
        lines.append(f"- {source}")
    return "\n".join(lines) + "\n"
