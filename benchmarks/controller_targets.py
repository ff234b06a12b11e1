"""The controller's targets (issue 16) as the study's evaluation computed them (SIMULATED).

The study is the experiment: its ``evaluate`` rule runs every arm on every deployment over the
evaluation seeds, and each ``evaluate_scenario`` rule the configured scenarios (a cap schedule,
completion lengths that drift, derating, another cap: ``config/controller-targets.yaml`` holds
the issue's set). Each evaluation's ``ratios.csv`` carries the target rows
(``analysis/targets.py: budget_targets``, the mean of the per-seed ratios with its interval at
``evaluate.confidence``, 95 % by default): where the budget is feasible, PPO within the budget
with output >= 95 % of the oracle's and >= 100 % of the best classic peer within the budget
(110 % in the changing-workload and cap-schedule scenarios). A target is met when the mean
meets it; the interval is printed beside it, not judged. Where no classic peer keeps the
budget, the target against the best peer is met by the controller keeping it. This module
reads them back, with each evaluation's table; it trains and tunes nothing, so the numbers are
the study's as they came out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_power.layout import EVALUATE, ResultsLayout

SUMMARY_COLUMNS = [
    "deployment",
    "arm",
    "violation_rate",
    "breaker_exceedance",
    "within_budget",
    "tokens_per_s",
    "tokens_per_mj",
    "output_tokens",
]


def evaluations(layout: ResultsLayout) -> dict[str, Path]:
    """The evaluation folders the study wrote: ``study`` and each scenario by name, those with
    a ratios table only."""
    found = {"study": layout.evaluate_study}
    scenarios = layout.evaluate_scenarios
    if scenarios.is_dir():
        found |= {p.name: p for p in sorted(scenarios.iterdir()) if p.is_dir()}
    return {name: p for name, p in found.items() if (p / EVALUATE.ratios).is_file()}


def read_targets(layout: ResultsLayout) -> dict[str, Any]:
    """The target rows and tables of every evaluation under ``layout``.

    Returns:
        ``{"simulated", "scenarios": {name: {markdown, summary, folder}}, "targets": [row]``
        (a row: the ratio row and whether the controller kept the budget, ``within_budget``),
        "targets_met", "targets_total"}``; with no evaluation, ``{"skipped": reason}``.
    """
    found = evaluations(layout)
    if not found:
        where = layout.evaluate_study.parent
        return {"skipped": f"no study evaluation under {where}: run the study first"}
    out: dict[str, Any] = {"simulated": True, "scenarios": {}, "targets": []}
    for name, folder in found.items():
        ratios = pd.read_csv(folder / EVALUATE.ratios)
        rows = ratios[ratios["comparison"].str.startswith("budget_")]
        summary = pd.read_csv(folder / EVALUATE.summary_csv)
        within = summary.set_index(["deployment", "arm"])["within_budget"]
        confidence = json.loads((folder / EVALUATE.summary_json).read_text())["confidence"]
        out["targets"] += [
            {
                "scenario": name,
                "confidence": confidence,  # an older table's rows lack it
                **row,
                "reachable": row.get("reachable") is not False,  # missing: an older table
                "within_budget": bool(within[row["deployment"], row["controller"]]),
            }
            for row in rows.to_dict(orient="records")
        ]
        out["scenarios"][name] = {
            "folder": str(folder),
            "markdown": (folder / EVALUATE.table).read_text(encoding="utf-8"),
            "summary": summary[[c for c in SUMMARY_COLUMNS if c in summary]].to_dict("records"),
        }
    out["targets_met"] = int(sum(bool(t["met"]) for t in out["targets"]))
    out["targets_total"] = len(out["targets"])
    out["targets_beyond_oracle"] = int(
        sum(not t["met"] and not t["reachable"] for t in out["targets"])
    )
    return out


def _value(target: dict[str, Any]) -> str:
    """A target row's mean and interval, %; or why it has none."""
    if target["base"] == "none":
        return "n/a (no classic peer keeps the budget)"
    return f"{target['value']:.1f} % [{target['ci_low']:.1f}, {target['ci_high']:.1f}]"


def _beyond(target: dict[str, Any]) -> str:
    """For a target its arm's oracle misses too, what the oracle makes; else nothing."""
    if target["reachable"]:
        return ""
    return (
        f"; its oracle makes {target['oracle_value']:.1f} % of {target['base']}: the target "
        "lies beyond the limit itself"
    )


def missed_targets(targets: dict[str, Any]) -> list[str]:
    """One line per target row of :func:`read_targets` that is not met, with its numbers."""
    return [
        f"{t['comparison']} ({t['target']}) on {t['scenario']}, {t['deployment']}, "
        f"{t['controller']}: {_value(t)} of "
        f"{t['base']}{'' if t['within_budget'] else ', controller over the budget'}"
        f"{_beyond(t)} (SIMULATED)"
        for t in targets.get("targets", [])
        if not t["met"]
    ]


def print_targets(targets: dict[str, Any]) -> None:
    """Print each evaluation's table, then one line per target."""
    if "skipped" in targets:
        print(f"controller targets skipped: {targets['skipped']}")
        return
    for name, scenario in targets["scenarios"].items():
        print(f"\n### {name} ({scenario['folder']}, SIMULATED)\n{scenario['markdown']}")
    levels = sorted({f"{100 * t['confidence']:g} %" for t in targets["targets"]})
    print(
        f"target | evaluation | deployment | controller | mean over seeds [{', '.join(levels)} "
        "CI] | base | met (the mean meets the target)"
    )
    for t in targets["targets"]:
        print(
            f"{t['comparison']} | {t['scenario']} | {t['deployment']} | {t['controller']} | "
            f"{_value(t)} | {t['base']} | {'met' if t['met'] else 'MISSED'}"
        )
    print(f"targets met: {targets['targets_met']} of {targets['targets_total']} (SIMULATED)")
    if targets["targets_beyond_oracle"]:
        print(
            f"of the missed, {targets['targets_beyond_oracle']} lie beyond what the arm's oracle "
            "reaches (SIMULATED)"
        )
