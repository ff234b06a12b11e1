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
    )


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
        "arm within it.",
    ]
    return [
        cells.csv_table(
            f"{key}evaluation",
            f"Arm evaluation per deployment, {what} (SIMULATED; {interval} intervals over seeds)",
            evaluation.summary,
            tab.EVALUATION_COLS,
            ["deployment", "arm"],
            note=budget,
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
        changing = (
            " (its cap or workload changes over the run: the schedule is in the evaluate "
            "stage's table.md)"
            if deployment.get("schedule")
            else ""
        )
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


def scenario_tables(folders: list[Path]) -> list[tuple[str, cells.Cell, list[cells.Table]]]:
    """Each scenario's name, setting and tables, in the order given."""
    shown = []
    for folder in folders:
        evaluation = read_evaluation(folder)
        name = folder.name
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
