"""The evaluate stage's tables in the report: an evaluation's arms and its ratios with targets.

The study's evaluation (``evaluate/study``) is shown with the detailed tables; each scenario the
config evaluates (``evaluate/scenarios/<name>``: another cap, a cap schedule, drifting lengths,
derating) gets the same two tables in the report's "Scenarios" section, so the changing-workload
and cap results the controller's targets are judged on are in the report, not only in the
benchmark's output and Snakemake's report. Every number is a cell of the stage's ``summary.csv``
or ``ratios.csv``; everything here is SIMULATED.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_power.layout import EVALUATE
from grpo_power.report import cells, html
from grpo_power.report import tables as tab
from grpo_power.report.inputs import written_by

RATIO_NOTE = (
    "Each value is the mean over seeds of the per-seed ratios, with its interval; a target is "
    "met when that mean meets it (the interval is shown, not judged). Its oracle's share: the "
    "arm's oracle's share of the same base, where a target is against the best classic peer; a "
    "target the oracle misses too lies beyond the limit the arms are compared with. The study's "
    "figures are its single-node PPO against fixed (the first three comparisons) and its three "
    "72B deployments (against fixed-safe and uncontrolled), shown beside every deployment's row."
)


@dataclass(frozen=True)
class Evaluation:
    """One evaluate-stage folder's files, read with their provenance."""

    folder: Path
    summary: cells.CsvFile  # summary.csv: one row per deployment and arm
    ratios: cells.CsvFile  # ratios.csv: the study's ratios with targets
    summary_json: cells.JsonFile  # summary.json: deployments, confidence, targets met
    metrics: cells.CsvFile  # metrics.csv: one row per deployment, arm and seed


def read_evaluation(folder: Path) -> Evaluation:
    """The evaluate stage's files in ``folder`` (the study's or a scenario's); an absent or
    malformed file is a one-line error naming it and the command that writes it."""
    return Evaluation(
        folder,
        cells.CsvFile(folder / EVALUATE.summary_csv, written_by("evaluate", EVALUATE.summary_csv)),
        cells.CsvFile(folder / EVALUATE.ratios, written_by("evaluate", EVALUATE.ratios)),
        cells.JsonFile(
            folder / EVALUATE.summary_json, written_by("evaluate", EVALUATE.summary_json)
        ),
        cells.CsvFile(
            folder / EVALUATE.metrics,
            written_by("evaluate", EVALUATE.metrics),
            ("deployment", "arm", "seed", "output_tokens", "energy_j"),
        ),
    )


def same_runs(metrics: pd.DataFrame) -> list[str]:
    """Arms of one deployment whose runs are the same on every seed (``metrics``: the evaluate
    stage's ``metrics.csv``): the same tokens and energy, so the same settings throughout, as
    when a learned controller holds its oracle's setting and a power limit does the capping.
    One line per set of such arms, naming the deployments where they coincide."""
    where: dict[tuple[str, ...], list[str]] = {}
    for deployment, runs in metrics.groupby("deployment", sort=False):
        by_arm = {
            arm: tuple(
                arm_runs.sort_values("seed")[["seed", "output_tokens", "energy_j"]].itertuples(
                    index=False
                )
            )
            for arm, arm_runs in runs.groupby("arm", sort=False)
        }
        groups: dict[tuple, list[str]] = {}
        for arm, outcome in by_arm.items():
            groups.setdefault(outcome, []).append(str(arm))
        for arms in groups.values():
            if len(arms) > 1:
                where.setdefault(tuple(arms), []).append(str(deployment))
    return [
        f"{' and '.join(arms)} made the same tokens with the same energy on every seed "
        f"({', '.join(deployments)}): the same settings throughout, so a target one meets, the "
        "other meets by the same run"
        for arms, deployments in where.items()
    ]


def edge_verdicts(evaluation: Evaluation, interval: str) -> list[list[cells.Part]]:
    """Arms whose verdict on the violation budget rests on the mean alone: the interval of their
    violation rate over seeds (the evaluate stage's ``summary.csv``) spans the budget (its
    ``summary.json``), so other seeds may give the other verdict. One note line per deployment
    with such arms, its numbers traceable to the file ([] where every interval is on one side)."""
    summary = evaluation.summary
    budget = float(evaluation.summary_json.get("objective.violation_budget"))
    lines = []
    for deployment, rows in summary.frame.groupby("deployment", sort=False):
        edge = rows[
            (rows["violation_rate_ci_low"] <= budget) & (budget < rows["violation_rate_ci_high"])
        ]
        if edge.empty:
            continue
        line: list[cells.Part] = [
            f"On {deployment} the {interval} interval of the violation rate spans the ",
            evaluation.summary_json.num("objective.violation_budget", "g", 100.0),
            " % budget for ",
        ]
        for i, r in enumerate(edge.itertuples()):
            key = {"deployment": deployment, "arm": r.arm}
            line += [
                f"{'; ' if i else ''}{r.arm} ",
                summary.num("violation_rate", ".3f", 100.0, **key),
                " % [",
                summary.num("violation_rate_ci_low", ".2f", 100.0, **key),
                ", ",
                summary.num("violation_rate_ci_high", ".2f", 100.0, **key),
                "], " + ("within" if cells.is_true(r.within_budget) else "outside"),
            ]
        lines.append([*line, ": the verdict is the mean's, and other seeds may give the other one"])
    return lines


def evaluation_tables(evaluation: Evaluation, key: str, what: str) -> list[cells.Table]:
    """The arm table and the ratio table of one evaluation; ``key`` prefixes the tables' anchors
    and ``what`` names the evaluation in their titles."""
    interval = cells.interval_pct(evaluation.summary_json)
    budget = [  # what "within budget" was judged against, from the evaluation's own file
        "Within budget: at most ",
        evaluation.summary_json.num("objective.violation_budget", "g", 100.0),
        " % of per-GPU samples above the cap and no ",
        evaluation.summary_json.num("objective.breaker_window_s", "g"),
        " s window whose mean is above it (the objective); an arm outside it ranks below every "
        "arm within it. Violation rate: the share of per-GPU power samples above the cap; "
        "exceedance: the share of ",
        evaluation.summary_json.num("exceedance_window_s", "g"),
        " s windows (sliding, per GPU) whose mean is above it; breaker-window exceedance: the "
        "same at the objective's ",
        evaluation.summary_json.num("objective.breaker_window_s", "g"),
        " s.",
    ]
    return [
        cells.csv_table(
            f"{key}evaluation",
            f"Arm evaluation per deployment, {what} (SIMULATED; {interval} intervals over seeds)",
            evaluation.summary,
            tab.EVALUATION_COLS,
            ["deployment", "arm"],
            note=[
                *budget,
                *(p for line in edge_verdicts(evaluation, interval) for p in (" ", *line, ".")),
                *(f" {line}." for line in same_runs(evaluation.metrics.frame)),
            ],
        ),
        cells.csv_table(
            f"{key}ratios",
            f"Ratios with targets, {what} (SIMULATED)",
            evaluation.ratios,
            tab.RATIO_COLS,
            ["deployment", "controller", "comparison"],
            note=RATIO_NOTE,
        ),
    ]


def scenario_setting(evaluation: Evaluation) -> cells.Cell:
    """What a scenario evaluated, per deployment (its cap per GPU and budget), and the targets
    it met, from its ``summary.json``."""
    parts: list[cells.Part] = []
    for name, deployment in evaluation.summary_json.get("deployments").items():
        changing = schedule_phrase(deployment.get("schedule") or [])
        parts += [
            f"{name}: cap ",
            evaluation.summary_json.num(f"deployments.{name}.cap_w", ",.1f"),
            " W per GPU, budget ",
            evaluation.summary_json.num(f"deployments.{name}.budget_s", ",.0f"),
            f" s simulated{changing}; ",
        ]
    return [
        *parts,
        "targets met: ",
        evaluation.summary_json.num("targets_met", ",.0f"),
        " of ",
        evaluation.summary_json.num("targets", ",.0f"),
        ".",
    ]


def scenario_tables(
    scenarios: dict[str, Evaluation],
) -> list[tuple[str, cells.Cell, list[cells.Table]]]:
    """Each scenario's name, setting and tables, in the order given (``scenarios``: each
    scenario's name and evaluation)."""
    shown = []
    for name, evaluation in scenarios.items():
        tables = evaluation_tables(evaluation, f"scenario-{name}-", f"scenario {name}")
        shown.append((name, scenario_setting(evaluation), tables))
    return shown


def scenarios_section(
    scenarios: list[tuple[str, cells.Cell, list[cells.Table]]], base: Path
) -> str:
    """The "Scenarios" section (empty when the config evaluates none)."""
    if not scenarios:
        return ""
    blocks = [
        html.paragraph(
            "The study's deployments evaluated again under other caps or changing conditions "
            "(evaluate.scenarios), each with the same arms, seeds and objective; a scenario that "
            "retrains the controllers adds their arms (-retrained). SIMULATED."
        )
    ]
    for name, setting, tables in scenarios:
        blocks.append(f'<h3 id="scenario-{html.esc(name)}">Scenario {html.esc(name)}</h3>')
        blocks.append(html.bullet_list([setting], base))
        blocks += [html.table_html(t, base) for t in tables]
    return html.section("Scenarios (SIMULATED)", *blocks, key="scenarios")


def schedule_phrase(schedule: list[dict[str, Any]]) -> str:
    """What a deployment's scenario ``schedule`` (its segments: ``cap_frac``,
    ``completion_tokens``, ``slowdown``) does to the run, for the scenario's line: changes over
    the run, a change held over all of it, or nothing (one segment of the deployment's own cap and
    workload)."""
    held = {(s["cap_frac"], s["completion_tokens"], s["slowdown"]) for s in schedule}
    where = ": the schedule is in the evaluate stage's table.md)"
    if len(held) > 1:
        return f" (its cap or workload changes over the run{where}"
    if held and held != {(1.0, None, 1.0)}:
        return f" (a cap fraction, completion length or slowdown held over the run{where}"
    return ""


def answer_in_short(
    evaluation: Evaluation, scenarios: dict[str, Evaluation], controller: str
) -> list[cells.Cell]:
    """The report's answer in short, from the evaluations' files: the targets met in the study
    and in each scenario (``scenarios``: each one's name and evaluation), then per deployment
    what ``controller`` made against its oracle and against the best classic peer within the
    budget, and its violations. Everything it reads is SIMULATED."""
    met = [
        "Controller targets met (SIMULATED): ",
        evaluation.summary_json.num("targets_met", ",.0f"),
        " of ",
        evaluation.summary_json.num("targets", ",.0f"),
        " in the study's evaluation",
    ]
    for name, scenario in scenarios.items():
        summary = scenario.summary_json
        met += ["; ", summary.num("targets_met", ",.0f"), " of ", summary.num("targets", ",.0f")]
        met.append(f" in scenario {name}")
    lines: list[cells.Cell] = [[*met, " (each in the ratio tables below)."]]
    ratios, arms = evaluation.ratios, evaluation.summary
    for deployment in dict.fromkeys(arms.frame["deployment"]):
        mine = {"deployment": deployment, "controller": controller}
        own = {"deployment": deployment, "arm": controller}
        if arms.select(**own).empty:
            continue
        line: list[cells.Part] = [f"{deployment}: {controller} ran at "]
        line += [arms.num("violation_rate", ".2f", 100.0, **own), " % violations"]
        within = cells.is_true(arms.select(**own)["within_budget"].iloc[0])
        line.append(" (within the budget)" if within else " (outside the budget)")
        for comparison, what in (
            ("budget_share_of_oracle", "its oracle's output"),
            ("budget_vs_best_peer", "the output of the best classic peer within the budget"),
        ):
            row = ratios.select(comparison=comparison, **mine)
            if row.empty:
                continue
            # both targets are within the budget: an arm outside it misses them at any output
            verdict = "met" if cells.is_true(row["met"].iloc[0]) else "NOT met"
            verdict += "" if within or verdict == "met" else ", being outside the budget"
            line += ["; ", ratios.num("value", ".1f", comparison=comparison, **mine)]
            line.append(f" % of {what} (target {row['target'].iloc[0]}: {verdict})")
        lines.append([*line, "."])
    return lines
