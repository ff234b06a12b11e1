"""The authority table (stage 2, docs/design.md section 2): which actuators move power, where.

From actuator sweeps (each actuator at each of its levels, the others at their defaults; rows
from ``sim/grpo_sim.py``'s :func:`sweep_deployment` for the simulated deployments, and from
measured runs for the real tiny run), per deployment and actuator:

- authority = (mean per-GPU power at the highest level - at the lowest level)
  / (nameplate - idle);
- retained authority = authority on the deployment / authority on the reference single-GPU
  deployment (``authority.reference``), for the same actuator and data;
- ``selected``: ``|authority| >= authority.threshold``. The controller's action space for a
  deployment is built from the selected actuators that can change between steps
  (``control/env.py``: :class:`ControlSpace`), never from a list of names;
- ``effect``: how the measurement classifies the actuator: ``power`` (selected) or
  ``duration`` (it changes how long phases last, hence energy and time, not power);
- ``hold_level``: the level an unselected online actuator is held at where nothing better is
  known: the swept level with the best reward (the PPO reward's weights, rates relative to the
  default level's), the others at their defaults. A trained controller holds it at its oracle's
  setting instead where the oracle meets the budget (``control/ppo.py``: the sweep moves one
  actuator at a time, and a level its reward prefers by a hair can cost most of the output
  once the driven actuators keep the cap: on the H100 the 7b sweep held concurrency at 4).

The study measured that on the sharded 72B deployment the group-level (volume) actuator loses its
authority and concurrency alone keeps 17-22 % of it (the abstract;
:data:`STUDY_CONCURRENCY_AUTHORITY_72B`): its summary's 72B sweep gives the two concurrency
actuators 22.5 % (generation batch) and 16.9 % (group size as concurrency), so the range is an
authority on 72B, not a share retained from 7B (:data:`STUDY_AUTHORITY_72B`). The table puts its
own numbers beside them. Simulated rows are labelled ``simulated``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_power.atomic import write_csv_atomic, write_json_atomic, write_text_atomic
from grpo_power.config.workload import ONLINE_ACTUATORS
from grpo_power.layout import IDENTIFY
from grpo_power.stage_files import read_json, require_keys

# The abstract's authority of concurrency alone on 72B, % of nameplate - idle (docs/design.md
# section 1): the summary's generation batch and group size as concurrency, rounded.
STUDY_CONCURRENCY_AUTHORITY_72B = (17.0, 22.0)
# The study's 72B authority sweep, % (docs/design.md section 1), by the actuator here that stands
# for it: generation batch, group size as concurrency, completion length, inter-batch pause (the
# training chunk has no study figure).
STUDY_AUTHORITY_72B = {
    "concurrency": ("generation batch", 22.5),
    "num_generations": ("group size as concurrency", 16.9),
    "max_new_tokens": ("completion length", 3.5),
    "pause_s": ("inter-batch pause", 6.3),
}
STUDY_DEPLOYMENT = "72b"  # the deployment the study's figures are put beside
SWEEP_COLUMNS = (
    "deployment",
    "gpus",
    "actuator",
    "level",
    "mean_power_w",
    "tokens_per_s",
    "nameplate_w",
    "idle_w",
    "data",
)


def _hold_level(group: pd.DataFrame, weights: dict[str, float]) -> int:
    """The swept level with the best reward relative to the default level (see the module
    docstring); the best-throughput level when the sweep has no default row."""
    best_throughput = int(group.loc[group["tokens_per_s"].idxmax(), "level"])
    if "default" not in group.columns or not group["default"].fillna(False).any():
        return best_throughput
    base = group[group["default"].fillna(False).astype(bool)].iloc[0]
    reward = (
        weights["tokens_weight"] * group["tokens_per_s"] / base["tokens_per_s"]
        - weights["violation_weight"] * group["violation_rate"]
        - weights["energy_weight"] * group["mean_power_w"] / base["mean_power_w"]
    )
    return int(group.loc[reward.idxmax(), "level"])


def authority_table(
    sweeps: pd.DataFrame, threshold: float, reference: str, weights: dict[str, float]
) -> pd.DataFrame:
    """One row per (data, deployment, actuator) from sweep rows (see the module docstring).

    Args:
        sweeps: sweep rows (:data:`SWEEP_COLUMNS`, plus ``default`` and ``violation_rate``).
        threshold: authority an actuator needs to be selected.
        reference: the single-GPU deployment retained authority is relative to.
        weights: reward weights (``tokens_weight``, ``violation_weight``, ``energy_weight``).

    Raises:
        ValueError: a sweep column is missing, or an actuator was swept at a single level.
    """
    missing = [c for c in SWEEP_COLUMNS if c not in sweeps.columns]
    if missing:
        raise ValueError(f"sweep rows lack column(s) {missing}")
    rows = []
    for (data, deployment, actuator), group in sweeps.groupby(
        ["data", "deployment", "actuator"], sort=False
    ):
        group = group.sort_values("level")
        if group["level"].nunique() < 2:
            raise ValueError(
                f"{data} sweep of {actuator} on {deployment} has one level only: "
                "authority needs its lowest and highest level"
            )
        low, high = group.iloc[0], group.iloc[-1]
        span_w = float(high["nameplate_w"] - high["idle_w"])
        authority = float(high["mean_power_w"] - low["mean_power_w"]) / span_w
        selected = abs(authority) >= threshold
        rows.append(
            {
                "data": data,
                "deployment": deployment,
                "gpus": int(high["gpus"]),
                "actuator": actuator,
                "online": actuator in ONLINE_ACTUATORS,
                "level_low": int(low["level"]),
                "level_high": int(high["level"]),
                "power_low_w": float(low["mean_power_w"]),
                "power_high_w": float(high["mean_power_w"]),
                "authority": authority,
                "selected": selected,
                "effect": "power" if selected else "duration",
                "threshold": threshold,
                "hold_level": _hold_level(group, weights),
            }
        )
    table = pd.DataFrame(rows)
    ref = table[table["deployment"] == reference].set_index(["data", "actuator"])["authority"]
    retained = []
    for _, row in table.iterrows():
        base = ref.get((row["data"], row["actuator"]), float("nan"))
        retained.append(row["authority"] / base if base and math.isfinite(base) else float("nan"))
    table["retained_authority"] = retained
    table["reference"] = reference
    return table


def markdown(table: pd.DataFrame) -> str:
    """The authority table as Markdown, beside the study's retained concurrency authority."""
    low, high = STUDY_CONCURRENCY_AUTHORITY_72B
    lines = [
        "# Actuator authority (simulated rows are SIMULATED)",
        "",
        "authority = (mean per-GPU power at the highest level - at the lowest) / "
        "(nameplate - idle); retained = authority / the reference single-GPU deployment's; "
        f"selected = |authority| >= {table['threshold'].iloc[0]:g} (enters the controller's "
        "action space when the actuator can change between steps).",
        "",
        "| data | deployment | GPUs | actuator | levels | power low -> high (W) | authority | "
        "retained | selected | online | hold level |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        retained = r["retained_authority"]
        lines.append(
            f"| {r['data']} | {r['deployment']} | {r['gpus']} | {r['actuator']} | "
            f"{r['level_low']}-{r['level_high']} | {r['power_low_w']:.1f} -> "
            f"{r['power_high_w']:.1f} | {r['authority']:.3f} | "
            f"{'n/a' if not math.isfinite(retained) else f'{100 * retained:.0f} %'} | "
            f"{'yes' if r['selected'] else 'no'} | {'yes' if r['online'] else 'no'} | "
            f"{r['hold_level'] if r['online'] and not r['selected'] else '-'} |"
        )
    lines += [
        "",
        f"Study: on the sharded 72B deployment concurrency alone keeps {low:g}-{high:g} % "
        "power authority (an authority on 72B, not a share retained from 7B) and the "
        "group-level actuator loses it (docs/design.md section 1).",
    ]
    return "\n".join(lines + study_comparison(table)) + "\n"


def study_comparison(table: pd.DataFrame) -> list[str]:
    """Markdown lines putting the simulated :data:`STUDY_DEPLOYMENT` rows' |authority| beside
    the study's 72B sweep (:data:`STUDY_AUTHORITY_72B`); none without such rows."""
    rows = table[(table["deployment"] == STUDY_DEPLOYMENT) & (table["data"] == "simulated")]
    if rows.empty:
        return []
    lines = [
        "",
        f"## {STUDY_DEPLOYMENT} (SIMULATED) beside the study's 72B authority sweep",
        "",
        "| actuator | study's actuator | |authority| here (simulated) | study |",
        "|---|---|---|---|",
    ]
    for _, r in rows.iterrows():
        name, figure = STUDY_AUTHORITY_72B.get(r["actuator"], ("-", float("nan")))
        study = "n/a" if not math.isfinite(figure) else f"{figure:g} %"
        lines.append(f"| {r['actuator']} | {name} | {100 * abs(r['authority']):.1f} % | {study} |")
    return lines


def write_authority(
    sweeps: pd.DataFrame,
    threshold: float,
    reference: str,
    weights: dict[str, float],
    out: Path | str,
) -> pd.DataFrame:
    """Compute the table and write ``sweeps.csv``, ``authority.csv``, ``authority.md`` and
    ``authority.json`` (rows as records, for the controller stage) into ``out``."""
    out = Path(out)
    table = authority_table(sweeps, threshold, reference, weights)
    write_csv_atomic(out / IDENTIFY.sweeps, sweeps)
    write_csv_atomic(out / IDENTIFY.authority_csv, table)
    write_text_atomic(out / IDENTIFY.authority_md, markdown(table))
    write_json_atomic(out / IDENTIFY.authority_json, {"rows": table.to_dict(orient="records")})
    return table


def read_authority(path: Path | str) -> list[dict[str, Any]]:
    """Rows of an ``authority.json`` written by :func:`write_authority`.

    Raises:
        FileNotFoundError: no such file (the message names the command that writes it).
        ValueError: not an authority table (the message names the file and the field).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no authority table; write it with `grpo-power identify --out {path.parent}`"
        )
    expected = f"an authority table written by `grpo-power identify --out {path.parent}`"
    rows = read_json(path, expected, ("rows",))["rows"]
    needed = ("deployment", "actuator", "data", "authority", "selected")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: rows: expected a list of table rows, got {type(rows).__name__}")
    for i, row in enumerate(rows):
        require_keys(row, needed, f"{path}: rows[{i}]", expected)
    return rows
