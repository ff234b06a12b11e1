"""The controller's targets (issue 16) as the study's evaluation computed them (SIMULATED).

The study is the experiment: its ``evaluate`` rule runs every arm on every deployment over the
evaluation seeds, and each ``evaluate_scenario`` rule the configured scenarios (a cap schedule,
completion lengths that drift, derating, another cap: ``config/controller-targets.yaml`` holds
the issue's set). Each evaluation's ``ratios.csv`` carries the target rows
(``analysis/evaluate.py: budget_targets``, 95 % CIs over seeds): where the budget is feasible,
PPO within the budget with output >= 95 % of the oracle's and >= 100 % of the best classic
peer within the budget (110 % in the changing-workload and cap-schedule scenarios). This module
reads them back, with each evaluation's table; it trains and tunes nothing, so the numbers are
the study's as they came out.
"""

from __future__ import annotations

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
    "throughput",
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
        out["targets"] += [
            {
                "scenario": name,
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
        f"{t['controller']}: {t['value']:.1f} % [{t['ci_low']:.1f}, {t['ci_high']:.1f}] of "
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
    print("target | evaluation | deployment | controller | value % [95 % CI] | base | met")
    for t in targets["targets"]:
        print(
            f"{t['comparison']} | {t['scenario']} | {t['deployment']} | {t['controller']} | "
            f"{t['value']:.1f} [{t['ci_low']:.1f}, {t['ci_high']:.1f}] | {t['base']} | "
            f"{'met' if t['met'] else 'MISSED'}"
        )
    print(f"targets met: {targets['targets_met']} of {targets['targets_total']} (SIMULATED)")
    if targets["targets_beyond_oracle"]:
        print(
            f"of the missed, {targets['targets_beyond_oracle']} lie beyond what the arm's oracle "
            "reaches (SIMULATED)"
        )
