"""The value of power oversubscription: extra GPUs in the same provisioned power, and the
datacenter capacity (so capital) they would otherwise need.

A fleet of ``n`` GPUs provisioned at nameplate takes ``n x (G + H)`` W, with ``G`` the GPU
nameplate and ``H`` its share of host power (CPUs, memory, network: not oversubscribed). With
the fleet stage's factor ``f`` at the chosen window and margin, each GPU needs ``G / f + H``, so
``n x (G + H) / (G / f + H)`` GPUs fit: the extra GPUs (whole ones) x ``(G + H)`` W is capacity
that need not be built, priced at $ per MW of critical load. With ``H = 0`` the extra share is
``f - 1``; host power dilutes it.

The factor grows with fleet size (statistical multiplexing), so each fleet size of the scaling
study gets its own row, and the economics fleet uses the factor of the largest studied fleet
(the fleet stage's own, or a scaling size) not larger than it (the conservative choice); one
smaller than every studied fleet takes the smallest's, and its note says so. A factor below 1
leaves no headroom: nothing is oversubscribed, so no GPU is added and no capital avoided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.analysis.fleet.stage import fleet_runs
from grpo_power.economics.cost import Assumptions
from grpo_power.layout import FLEET
from grpo_power.stage_files import read_csv, read_json


def extra_gpus(n_gpus: int, factor: float, nameplate_w: float, host_w: float) -> float:
    """GPUs that fit beside ``n_gpus`` in their nameplate-provisioned power at ``factor``
    (fractional; negative when ``factor`` < 1, i.e. the fleet needs more than nameplate)."""
    return n_gpus * (nameplate_w + host_w) / (nameplate_w / factor + host_w) - n_gpus


def value_row(
    scope: str,
    n_gpus: int,
    fleet_row: pd.Series,
    nameplate_w: float,
    a: Assumptions,
    note: str = "",
) -> dict[str, object]:
    """One row of the value table for a fleet of ``n_gpus`` sized by ``fleet_row`` (a row of
    the fleet stage's ``fleet_windows.csv`` or ``scaling.csv``, with its fleet's ``n_gpus``);
    ``note`` says how that fleet was chosen, where it needs saying."""
    factor = float(fleet_row["factor"])
    row: dict[str, object] = {
        "scope": scope,
        "n_gpus": n_gpus,
        "factor_from_gpus": int(fleet_row["n_gpus"]),
        "window_s": float(fleet_row["window_s"]),
        "margin": float(fleet_row["margin"]),
        "peak_quantile": float(fleet_row["peak_quantile"]),
        "peak_share": float(fleet_row["peak_share_sizing"]),
        "factor": factor,
        "data": fleet_row["data"],
    }
    notes = [note] if note else []
    if not math.isfinite(factor):
        extra = float("nan")
        notes.append("no factor: the fleet stage had no full window of this length")
    elif factor < 1:
        extra = 0
        notes.append(
            f"factor below 1: no headroom (the sizing peak with its margin is "
            f"{100.0 / factor:.1f} % of nameplate), nothing to oversubscribe"
        )
    else:
        extra = math.floor(extra_gpus(n_gpus, factor, nameplate_w, a.host_w_per_gpu))
    row["note"] = "; ".join(notes)
    row["extra_gpus"] = extra
    row["extra_share"] = extra / n_gpus
    row["capacity_mw_avoided"] = extra * (nameplate_w + a.host_w_per_gpu) / 1e6
    row["capital_usd_avoided"] = row["capacity_mw_avoided"] * a.usd_per_mw
    return row


FLEET_FILE = "a fleet stage output, written by `grpo-power fleet --out DIR`"
# Columns of the fleet stage's fleet_windows.csv and scaling.csv that a value row reads.
FLEET_ROW_COLUMNS = (
    "n_gpus",
    "window_s",
    "factor",
    "margin",
    "peak_quantile",
    "peak_share_sizing",
    "data",
)


def read_fleet_summary(fleet_dir: Path) -> dict[str, Any]:
    """The fleet stage's ``summary.json`` (with the ``n_gpus``, ``window_s`` and
    ``nameplate_w_per_gpu`` read here)."""
    return read_json(
        fleet_dir / FLEET.summary, FLEET_FILE, ("n_gpus", "window_s", "nameplate_w_per_gpu")
    )


def _at_window(table: pd.DataFrame, window_s: float) -> pd.DataFrame:
    return table[(table["window_s"] - window_s).abs() <= 1e-9 * window_s]


@dataclass(frozen=True)
class FleetRows:
    """The fleet stage's rows at its sizing window that the value table reads: its own fleet's
    (``own``, of ``n_gpus`` GPUs) and the scaling study's (``scaling``, by fleet size)."""

    n_gpus: int
    own: pd.Series
    scaling: pd.DataFrame
    runs: str = ""  # what the fleet stage's runs are (:func:`fleet_runs`)
    alignment: str = "monte_carlo"  # how the fleet stage's own fleet combined them

    @classmethod
    def read(cls, fleet_dir: Path | str) -> FleetRows:
        """Read from the fleet stage's outputs (``summary.json``, ``fleet_windows.csv``,
        ``scaling.csv``) in ``fleet_dir``; read once where several assumptions are valued."""
        fleet_dir = Path(fleet_dir)
        summary = read_fleet_summary(fleet_dir)
        window_s = float(summary["window_s"])
        columns = FLEET_ROW_COLUMNS
        n_gpus = int(summary["n_gpus"])
        fleet, scaling = (
            monte_carlo_labelled(
                _at_window(read_csv(fleet_dir / name, FLEET_FILE, columns), window_s), n_gpus
            )
            for name in (FLEET.fleet_csv, FLEET.scaling_csv)
        )
        if fleet.empty or scaling.empty:
            raise ValueError(f"{fleet_dir}: no fleet rows at the fleet window {window_s:g} s")
        return cls(
            n_gpus,
            fleet.iloc[0],
            scaling.sort_values("n_gpus"),
            fleet_runs(summary),
            str(summary.get("alignment") or "monte_carlo"),
        )

    def made_of(self, own: bool) -> str:
        """What a studied fleet's factor comes from, for the notes of the value rows: the fleet
        stage's runs combined as its own fleet combined them (``own``), or drawn by Monte
        Carlo, as every fleet of the scaling study is (its GPUs draws of the traced ones, as if
        independent); empty where the runs are not known."""
        if not self.runs:
            return ""
        if own and self.alignment == "wall_clock":
            return f"{self.runs}, aligned by wall clock"
        return f"{self.runs}, drawn by Monte Carlo (each run repeated end to end over the horizon)"


def monte_carlo_label(data: str, traced_gpus: int) -> str:
    """The data label of a Monte Carlo fleet drawn from ``traced_gpus`` measured GPUs (``data``
    their label, e.g. ``measured (imported)``): ``Monte Carlo from measured traces (3 GPUs;
    imported)``. Its GPUs are draws of the traced ones, not measured GPUs; the study's report
    calls its own scaling study "a Monte Carlo simulation" the same way. A simulated label is
    kept (it says SIMULATED already)."""
    if "simulated" in data:
        return data
    label = data.strip()
    source = label[len("measured (") : -1] if label.startswith("measured (") else ""
    source = source if source and label.endswith(")") else ""
    gpus = f"{traced_gpus:,} GPU{'' if traced_gpus == 1 else 's'}"
    return f"Monte Carlo from measured traces ({gpus}{'; ' + source if source else ''})"


def monte_carlo_labelled(rows: pd.DataFrame, traced_gpus: int) -> pd.DataFrame:
    """``rows`` (the fleet stage's ``fleet_windows.csv`` or ``scaling.csv``) with the rows of
    a Monte Carlo fleet (``alignment`` ``monte_carlo``; a file without the column is left as
    it is) labelled by :func:`monte_carlo_label`."""
    if "alignment" not in rows.columns:
        return rows
    rows = rows.copy()
    drawn = rows["alignment"] == "monte_carlo"
    rows.loc[drawn, "data"] = [
        monte_carlo_label(str(d), traced_gpus) for d in rows.loc[drawn, "data"]
    ]
    return rows


def oversubscription_table(fleet: FleetRows, nameplate_w: float, a: Assumptions) -> pd.DataFrame:
    """The value of oversubscription at the fleet stage's window and margin (``fleet``:
    :meth:`FleetRows.read`): the fleet stage's fleet, every fleet size of the scaling study, and
    the economics fleet (``fleet_gpus``).

    ``nameplate_w``: the GPU's board power, W (the power each GPU is provisioned at)."""
    own, scaling = fleet.own, fleet.scaling
    rows = [value_row("fleet stage", fleet.n_gpus, own, nameplate_w, a, fleet.made_of(True))]
    rows += [
        value_row("scaling study", int(r["n_gpus"]), r, nameplate_w, a)
        for _, r in scaling.iterrows()
    ]
    # the studied fleets by size, the fleet stage's own first among equal sizes; one without a
    # factor (no full window of the sizing length) is no basis while another has one
    studied = pd.DataFrame([own, *(r for _, r in scaling.iterrows())])
    studied["own"] = [True] + [False] * len(scaling)  # the fleet stage's own fleet, or drawn
    studied = studied.sort_values("n_gpus", kind="stable")
    with_factor = studied[np.isfinite(studied["factor"].astype(float))]
    studied = with_factor if len(with_factor) else studied
    fitting = studied[studied["n_gpus"] <= a.fleet_gpus]
    note = ""
    if len(fitting):
        basis = fitting[fitting["n_gpus"] == fitting["n_gpus"].max()].iloc[0]
    else:
        basis = studied.iloc[0]
        note = (
            f"no studied fleet is as small as {a.fleet_gpus:,} GPUs: the factor of the smallest "
            f"({int(basis['n_gpus']):,} GPUs), which can overstate a smaller fleet's"
        )
    runs = fleet.made_of(bool(basis["own"]))
    made_of = f"factor of the {int(basis['n_gpus']):,}-GPU fleet of {runs}" if runs else ""
    note = "; ".join(n for n in (made_of, note) if n)
    rows.append(value_row("economics fleet", a.fleet_gpus, basis, nameplate_w, a, note))
    return pd.DataFrame(rows)
