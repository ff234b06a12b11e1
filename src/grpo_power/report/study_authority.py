"""The report's 72B authority table: the study's four 72B actuator figures beside this run's.

The study's secondary summary gives its 72B authority sweep (``analysis/authority.py:
STUDY_AUTHORITY_72B``): generation batch 22.5 %, group size as concurrency 16.9 %, completion
length 3.5 %, inter-batch pause 6.3 %; its abstract gives only concurrency's 17-22 %. This table
puts the identify stage's simulated 72B rows (``authority.csv``) beside them, one row per study
actuator, each saying how and why this run's figure differs. It sits with ``live_arms`` under
``report/stage.py``; every number is a :class:`~grpo_power.report.cells.Num` from the file.
"""

from __future__ import annotations

from grpo_power.analysis.authority import STUDY_AUTHORITY_72B, STUDY_DEPLOYMENT
from grpo_power.analysis.reference import SUMMARY
from grpo_power.config import Config
from grpo_power.report.cells import Cell, CsvFile, Table
from grpo_power.report.tables import SHARDED_CONCURRENCY_REASON, against_study

NEAR_POINTS = 2.0  # within this many points of the study's figure, the shares are "near" it
AUTHORITY_AGAINST = ("smaller", "near the study's", "larger")


def study_authority_table(authority: CsvFile, config: Config) -> Table | None:
    """The simulated :data:`STUDY_DEPLOYMENT` deployment's authority per study actuator, beside
    the study's figure; None when ``authority`` has no simulated rows of that deployment.

    Args:
        authority: the identify stage's ``authority.csv``.
        config: the study's config (the workload's prompts per step and concurrency, which set
            how far group size moves the decode batch).
    """
    rows = authority.select(data="simulated", deployment=STUDY_DEPLOYMENT)
    if rows.empty:
        return None
    table = Table(
        "study-authority",
        f"Actuator authority on {STUDY_DEPLOYMENT} (SIMULATED) beside the study's 72B sweep",
        [
            "actuator",
            "study's actuator",
            "study authority %",
            "study figure from",
            f"{STUDY_DEPLOYMENT} levels",
            f"{STUDY_DEPLOYMENT} authority % (simulated)",
            "how it differs, and why",
        ],
        sources=[authority.path],
        note="Authority here: the change of mean per-GPU power from an actuator's lowest to its "
        "highest level, others at their defaults, as a share of nameplate - idle, signed (a "
        "pause lowers power); the study's figures are magnitudes and its definition is not in "
        "the summary. Shared causes of the differences: the power is the calibrated simulator's "
        "on the measured (flat) decode line, and the 72b deployment decodes sharded (ZeRO-3, "
        "decode waits on parameter gathers) where the study generated with an AWQ proxy.",
    )
    for actuator, (study_name, study_pct) in STUDY_AUTHORITY_72B.items():
        found = rows[rows["actuator"] == actuator]
        if found.empty:
            table.rows.append(
                [actuator, study_name, f"{study_pct:g}", SUMMARY, "-", "not swept", "not swept"]
            )
            continue
        row = found.iloc[0]
        keys = {"data": "simulated", "deployment": STUDY_DEPLOYMENT, "actuator": actuator}
        here_pct = 100.0 * abs(float(row["authority"]))
        cells: list[Cell] = [
            actuator,
            study_name,
            f"{study_pct:g}",
            SUMMARY,
            [
                authority.num("level_low", ".0f", **keys),
                "-",
                authority.num("level_high", ".0f", **keys),
            ],
            authority.num("authority", ".1f", 100.0, **keys),
            f"{against_study(here_pct, study_pct, study_pct, NEAR_POINTS, AUTHORITY_AGAINST)}: "
            + _why(actuator, int(row["level_low"]), int(row["level_high"]), config),
        ]
        table.rows.append(cells)
    return table


def _why(actuator: str, low: int, high: int, config: Config) -> str:
    """Why this actuator's authority here differs from the study's, from its swept levels."""
    w = config.workload
    if actuator == "concurrency":
        return SHARDED_CONCURRENCY_REASON
    if actuator == "num_generations":
        batch_low = min(w.concurrency, w.prompts_per_step * low)
        batch_high = min(w.concurrency, w.prompts_per_step * high)
        return (
            f"group size sets the decode batch only up to the concurrency default: {batch_low} "
            f"to {batch_high} sequences here ({w.prompts_per_step} prompts x {low} to {high}), "
            "fewer doublings than the concurrency sweep"
        )
    if actuator == "max_new_tokens":
        return "completion length changes how long decode lasts, not its occupancy, in both"
    return (
        f"a pause of {low} to {high} s per step idles the GPU between steps: its share of "
        "mean power depends on the pause against the step's length, which differs with the model "
        "and the proxy"
    )
