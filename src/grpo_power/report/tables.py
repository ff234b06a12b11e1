"""The study report's tables: the evaluation against the study, and each stage's table columns.

Every number is a :class:`~grpo_power.report.cells.Num` read from the file a stage wrote
(``report/cells.py``), so the HTML can trace it back to that file. Study figures come
from :mod:`grpo_power.analysis.reference`, the evaluate stage's ``study`` column and
:data:`grpo_power.analysis.authority.STUDY_CONCURRENCY_AUTHORITY_72B`; nothing is typed in.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from grpo_power.analysis.authority import STUDY_AUTHORITY_72B, STUDY_CONCURRENCY_AUTHORITY_72B
from grpo_power.analysis.reference import ABSTRACT, STUDY_LIVE_ARMS, STUDY_SOURCE
from grpo_power.report.cells import (
    Cell,
    Col,
    CsvFile,
    JsonFile,
    Part,
    Table,
    data_label,
    interval_pct,
    is_true,
    with_unit,
)


def _pct_change(
    file: CsvFile, deployment: str, controller: str, comparison: str, why: list[Part]
) -> list[Cell]:
    """This run's ratio (with interval) and the study's figure from the evaluate ratios, and
    ``why`` it may differ."""
    keys = {"deployment": deployment, "controller": controller, "comparison": comparison}
    rows = file.select(**keys)
    if rows.empty:
        return ["not evaluated", ABSTRACT, "", ""]
    value = file.num("value", "+,.1f", **keys)
    low, high = file.num("ci_low", "+,.1f", **keys), file.num("ci_high", "+,.1f", **keys)
    row = rows.iloc[0]
    study = file.num("study", "+,.1f", **keys)
    met = "met" if is_true(row["met"]) else "NOT met"
    return [
        with_unit(study, row["unit"]),
        ABSTRACT,
        [*with_unit(value, row["unit"]), " [", low, ", ", high, "]"],
        [f"{data_label([row['data']])}; target {row['target']}: {met}; ", *why],
    ]


def _ratio_reasons(
    summary: CsvFile, evaluation: JsonFile, single_gpu: str, sharded: str
) -> dict[str, list[Part]]:
    """Per study ratio, what in this run's baselines sets how it compares with the study's:
    the baselines' own violations and settings, and the study's live arms (its summary)."""
    batch8, _, _, ppo = STUDY_LIVE_ARMS

    def violations(deployment: str, arm: str) -> list[Part]:
        keys = {"deployment": deployment, "arm": arm}
        if summary.select(**keys).empty:
            return ["not evaluated"]
        return [summary.num("violation_rate", ".2f", 100.0, **keys), " %"]

    change = ppo.tokens / batch8.tokens - 1.0
    largest = "this run's fixed arm is its largest static batch; "
    unsaid = "the abstract does not say what its fixed baseline was"
    safe = f"deployments.{sharded}.arms.fixed-safe.concurrency"
    return {
        "violations_vs_fixed": [
            "the cut depends on the baseline: this run's fixed arm violates ",
            *violations(single_gpu, "fixed"),
            f" of samples, the study's {batch8.arm}: {batch8.violation_pct:g} % (summary)",
        ],
        "output_vs_fixed": [
            f"{largest}against the study's largest ({batch8.arm}) the study's live PPO also "
            f"made {abs(change):.1%} {'fewer' if change < 0 else 'more'} tokens (summary); "
            f"{unsaid}"
        ],
        "tokens_per_mj_vs_fixed": [
            f"{largest}the study's summary gives no energy of its live arms; {unsaid}"
        ],
        "output_vs_fixed_safe": [
            "this run's fixed-safe holds concurrency ",
            evaluation.num(safe, ".0f") if evaluation.has(safe) else "n/a",
            " (the highest static setting whose tuned p99 stays under the cap); the abstract "
            "does not give the study's",
        ],
        "violations_vs_uncontrolled": [
            "the cut depends on the baseline: this run's uncontrolled arm violates ",
            *violations(sharded, "uncontrolled"),
            " of samples; the abstract does not give the study's",
        ],
    }


def _comparison_rows(
    table: Table, comparison: CsvFile, rows: pd.DataFrame, keys: Sequence[str], prefix: str = ""
) -> None:
    """Rows of a comparison file (the fleet stage's or the study fleet's) in the study table:
    the study's figure, where it comes from (abstract or summary), this run's, and the note
    (the evidence, and where and why this run differs)."""
    for _, row in rows.iterrows():
        spec = ".2f" if row["unit"] in ("x", "kW") else ".1f"
        select = {k: row[k] for k in keys}
        table.rows.append(
            [
                f"{prefix}{row['quantity']}",
                str(row["reference_value"]),
                str(row["study_origin"]),
                with_unit(comparison.num("this_run", spec, **select), row["unit"]),
                f"{row['data']}; {row['note']}",
            ]
        )


def study_table(
    ratios: CsvFile,
    summary: CsvFile,
    evaluation: JsonFile,
    authority: CsvFile,
    comparison: CsvFile,
    headline: CsvFile,
    controller: str,
    single_gpu: str,
    sharded: str,
    setup: str,
    study_fleet: CsvFile | None = None,
    study_arms: Sequence[str] = (),
) -> Table:
    """The study's findings (docs/design.md section 1) and this run's, side by side.

    Args:
        ratios, summary, evaluation: the evaluate stage's ``ratios.csv``, ``summary.csv`` and
            ``summary.json`` (the baselines' violations and settings); authority: the identify
            stage's ``authority.csv``; comparison: the fleet stage's ``comparison.csv``;
            headline: the economics stage's ``sensitivity.csv`` (its base rows).
        controller: the controller arm; single_gpu, sharded: the single-node deployment and the
            sharded one the study's 72B rows compare with.
        setup: what this run measured and simulated (text).
        study_fleet: the study fleet's ``comparison.csv`` (the simulated 72B windows and the
            study's fleet mix per arm), shown for ``study_arms``.
    """
    read = (ratios, summary, evaluation, authority, comparison, headline, study_fleet)
    table = Table(
        "study",
        "The study's findings and this run's, side by side",
        ["finding", "study", "study figure from", "this run", "note"],
        sources=[f.path for f in read if f is not None],
        note=f"Study: {STUDY_SOURCE}. 'Study figure from' says whether the paper's abstract or "
        "the secondary summary gives it. Simulator rows are SIMULATED; intervals are "
        f"{interval_pct(evaluation)} over seeds. Differences are kept, not tuned away.",
    )
    table.rows.append(
        [
            "GRPO runs",
            "7B, 14B, 72B on 1-4 A100s, power every 0.5 s",
            ABSTRACT,
            setup,
            "differs: the real runs' power is measured only where telemetry is nvml; the "
            "deployments are the calibrated simulator's, not measured runs",
        ]
    )
    why = _ratio_reasons(summary, evaluation, single_gpu, sharded)
    for comparison_key, finding in (
        ("violations_vs_fixed", f"cap violations, {controller} vs fixed ({single_gpu})"),
        ("output_vs_fixed", f"tokens, {controller} vs fixed ({single_gpu})"),
        ("tokens_per_mj_vs_fixed", f"tokens per MJ, {controller} vs fixed ({single_gpu})"),
    ):
        changed = _pct_change(ratios, single_gpu, controller, comparison_key, why[comparison_key])
        table.rows.append([finding, *changed])
    group = authority.select(data="simulated", deployment=sharded, actuator="num_generations")
    concurrency = authority.select(data="simulated", deployment=sharded, actuator="concurrency")
    if len(group) and len(concurrency):
        keys = {"data": "simulated", "deployment": sharded}
        table.rows.append(
            [
                f"group size (volume) authority, {sharded} sharded",
                "loses its authority",
                ABSTRACT,
                [
                    authority.num("authority", ".1f", 100.0, actuator="num_generations", **keys),
                    " % (retained ",
                    authority.num(
                        "retained_authority", ".0f", 100.0, actuator="num_generations", **keys
                    ),
                    " %)",
                ],
                "SIMULATED; authority as a share of nameplate - idle; the study gives no "
                "figure for the volume actuator, only that it loses its authority",
            ]
        )
        low, high = STUDY_CONCURRENCY_AUTHORITY_72B
        batch, group = STUDY_AUTHORITY_72B["concurrency"], STUDY_AUTHORITY_72B["num_generations"]
        compared = against_study(
            100 * abs(concurrency["authority"].iloc[0]),
            low,
            high,
            0.0,
            (
                f"smaller than the study's: {SHARDED_CONCURRENCY_REASON}",
                "within the study's range",
                "larger than the study's",
            ),
        )
        table.rows.append(
            [
                f"concurrency alone, {sharded} sharded: authority",
                f"{low:g}-{high:g} %",
                ABSTRACT,
                [
                    authority.num("authority", ".1f", 100.0, actuator="concurrency", **keys),
                    " % (group size as concurrency ",
                    authority.num("authority", ".1f", 100.0, actuator="num_generations", **keys),
                    " %; concurrency retains ",
                    authority.num(
                        "retained_authority", ".0f", 100.0, actuator="concurrency", **keys
                    ),
                    " % of its single-GPU authority)",
                ],
                f"SIMULATED; {compared}; the study's range is its summary's {batch[0]} "
                f"({batch[1]:g} %) and "
                f"{group[0]} ({group[1]:g} %): see the 72B authority table",
            ]
        )
    for comparison_key, finding in (
        ("output_vs_fixed_safe", f"output, {controller} vs fixed-safe ({sharded})"),
        ("violations_vs_uncontrolled", f"violations, {controller} vs uncontrolled ({sharded})"),
    ):
        changed = _pct_change(ratios, sharded, controller, comparison_key, why[comparison_key])
        table.rows.append([finding, *changed])
    if study_fleet is not None:
        shown = study_fleet.frame[study_fleet.frame["arm"].isin(list(study_arms))]
        _comparison_rows(table, study_fleet, shown, ("key", "arm"))
    fleet_stage = comparison.select(reference="study")
    # The fleet stage's 72B rows count only runs labelled 72B: none among the tiny runs, whose
    # rows then say so in the fleet table; the simulated 72B deployment's rows are above.
    measured_72b = (
        fleet_stage["key"].str.startswith("exceedance_72b") & fleet_stage["this_run"].notna()
    )
    kept = fleet_stage[measured_72b | ~fleet_stage["key"].str.startswith("exceedance_72b")]
    _comparison_rows(
        table, comparison, kept, ("reference", "quantity", "note"), "the real runs' fleet: "
    )
    for _, row in headline.select(parameter="base").iterrows():
        wanted = ("GPU energy $ saved", "carbon saved", "fleet's yearly", "capital avoided")
        if not row["quantity"].startswith(wanted):
            continue
        caution = row["note"] if "note" in row and isinstance(row["note"], str) else ""
        keys = {
            "parameter": "base",
            "source": row["source"],
            "deployment": row["deployment"],
            "quantity": row["quantity"],
        }
        table.rows.append(
            [
                f"{row['quantity']} ({row['source']} {row['deployment']})",
                "savings of the controller and of oversubscription",
                ABSTRACT,
                with_unit(headline.num("value", ",.0f", **keys), row["unit"]),
                f"{row['data']}; "
                + (f"{caution}; " if caution else "")
                + (SIGNS["saved"] if " saved " in row["quantity"] else "")
                + (SIGNS["change"] if "yearly" in row["quantity"] else "")
                + (SIGNS["capital"] if row["quantity"].startswith("capital") else "")
                + "the abstract names these savings without a figure; see the economics "
                "section for assumptions",
            ]
        )
    return table


# What a saving's or a yearly change's sign means, in the study table's notes: the two sit
# side by side there with opposite signs for the same direction.
SIGNS = {
    "saved": "a saving for the same work: positive, the controller saves; negative, it costs "
    "more; ",
    "change": "a change of the fleet's year: negative, a lower bill or less carbon than the "
    "baseline's fleet; ",
    # the fleet stage's fleet is of every arm's runs: the capital is not the controller's
    "capital": "a one-time cost, of oversubscribing the fleet of every arm's runs, not a saving "
    "of the controller; ",
}


# Why concurrency moves a sharded deployment's power less here than in the study.
SHARDED_CONCURRENCY_REASON = (
    "the measured decode line gains little power per doubling of the batch, and sharded decode "
    "waits on parameter gathers, where the study generated with an AWQ proxy"
)


def against_study(
    value: float, low: float, high: float, near: float, words: tuple[str, str, str]
) -> str:
    """One of ``words`` (under, near, over): where ``value`` lies against a study figure or
    range ``[low, high]``, counting anything within ``near`` of it as near."""
    if value < low - near:
        return words[0]
    if value > high + near:
        return words[2]
    return words[1]


EVALUATION_COLS = (
    Col("deployment", "deployment"),
    Col("arm", "arm"),
    Col("seeds", "seeds"),
    Col("violation rate %", "violation_rate", ".2f", 100.0, ci=True),
    Col("exceedance %", "exceedance", ".2f", 100.0, ci=True),
    Col("breaker-window exceedance %", "breaker_exceedance", ".2f", 100.0, ci=True),
    Col("within budget", "within_budget"),
    Col("output (tokens)", "output_tokens", ",.0f", ci=True),
    Col("throughput (tokens/s)", "tokens_per_s", ",.1f", ci=True),
    Col("tokens per MJ", "tokens_per_mj", ",.0f", ci=True),
    # what each arm did: a controller's settings over its steps (a constant policy shows as one)
    Col("mean concurrency", "mean_concurrency", ".1f", ci=True),
    Col("mean max new tokens", "mean_max_new_tokens", ".1f", ci=True),
    Col("share of its oracle %", "share_of_oracle", ".1f"),
)
RATIO_COLS = (
    Col("deployment", "deployment"),
    Col("controller", "controller"),
    Col("comparison", "comparison"),
    Col("base", "base"),
    Col("value", "value", ",.1f", ci=True, ci_prefix=""),
    Col("unit", "unit"),
    Col("target", "target"),
    Col("met", "met"),
    Col("its oracle's share of the base %", "oracle_value", ".1f"),
    Col("study", "study", "+,.1f"),
)
COMPARISON_COLS = (
    Col("reference", "reference"),
    Col("quantity", "quantity"),
    Col("reference value", "reference_value"),
    Col("study figure from", "study_origin"),
    Col("this run", "this_run", ",.2f"),
    Col("difference", "difference", "+,.2f"),
    Col("unit", "unit"),
    Col("data", "data"),
    Col("note", "note"),
)
STUDY_FLEET_COLS = (
    Col("arm", "arm"),
    Col("quantity", "quantity"),
    Col("study", "reference_value"),
    Col("study figure from", "study_origin"),
    Col("this run", "this_run", ",.2f"),
    Col("difference", "difference", "+,.2f"),
    Col("unit", "unit"),
    Col("data", "data"),
    Col("note", "note"),
)
AUTHORITY_COLS = (
    Col("data", "data"),
    Col("deployment", "deployment"),
    Col("GPUs", "gpus"),
    Col("actuator", "actuator"),
    Col("power at lowest level (W)", "power_low_w", ".1f"),
    Col("power at highest level (W)", "power_high_w", ".1f"),
    Col("authority", "authority", ".3f"),
    Col("retained %", "retained_authority", ".0f", 100.0),
    Col("above threshold", "selected"),
    Col("online", "online"),
)
# What the authority table's two flags mean together (a group size "selected" read as driven).
AUTHORITY_NOTE = (
    "Above threshold: |authority| at least the config's authority.threshold. An actuator enters "
    "a deployment's action space only where it is above threshold and online (it can change "
    "between steps); an offline one (num_generations, the group size) is a run's setting."
)
CONSTANT_COLUMNS = ["constant", "value", "unit", "source", "year"]
# Constants whose value is a calendar year, shown without a thousands separator.
YEAR_CONSTANTS = ("year",)
COST_COLS = (
    Col("source", "source"),
    Col("deployment", "deployment"),
    Col("arm", "arm"),
    Col("data", "data"),
    Col("seeds", "seeds"),
    # three significant figures: a tiny CPU run's 0.0121 and 0.0299 kWh read 0.01 and 0.03 at two
    # decimals, a ratio of 3 for one of 2.5
    Col("kWh per M tokens (GPU energy x PUE)", "kwh_per_mtok", ",.3g"),
    Col("energy $ per M tokens", "energy_usd_per_mtok", ",.3g", ci=True),
    Col("kgCO2eq per M tokens", "carbon_kg_per_mtok", ",.3g", ci=True),
    Col("GPU-time $ per M tokens", "gpu_usd_per_mtok", ",.2f", ci=True),
    Col("fleet-year energy, GPU x PUE (MWh)", "annual_mwh", ",.0f"),
    Col("fleet-year energy ($)", "annual_energy_usd", ",.0f"),
    Col("fleet-year carbon (tCO2eq)", "annual_carbon_t", ",.0f"),
)
SAVINGS_COLS = (
    Col("source", "source"),
    Col("deployment", "deployment"),
    Col("arm", "arm"),
    Col("versus", "versus"),
    Col("energy per token %", "energy_per_token_change_pct", "+,.1f"),
    Col("throughput %", "throughput_change_pct", "+,.1f"),
    # what making the baseline's (versus's) fleet-year of tokens with the arm saves
    Col("GPU energy $ saved on versus's fleet-year of tokens", "energy_usd_saved_per_year", ",.0f"),
    Col("GPU-time $ saved on versus's fleet-year of tokens", "gpu_usd_saved_per_year", ",.0f"),
    Col("tCO2eq saved on versus's fleet-year of tokens", "carbon_t_saved_per_year", ",.1f"),
    # the fleet's yearly bill: the arm's minus the baseline's, the same GPUs and hours
    Col(
        "fleet's yearly GPU electricity bill change at equal GPU-hours ($; negative: lower)",
        "fleet_energy_usd_change_per_year",
        "+,.0f",
    ),
    Col(
        "fleet's yearly carbon change (tCO2eq; negative: lower)",
        "fleet_carbon_t_change_per_year",
        "+,.1f",
    ),
    Col("data", "data"),
)
OVERSUBSCRIPTION_COLS = (
    Col("scope", "scope"),
    Col("GPUs", "n_gpus", ",.0f"),
    Col("factor from fleet of", "factor_from_gpus", ",.0f"),
    Col("window (s)", "window_s", "g"),
    Col("margin", "margin", "g"),
    Col("peak share %", "peak_share", ".1f", 100.0),
    Col("factor (x)", "factor", ".3f"),
    Col("extra GPUs", "extra_gpus", ",.0f"),
    Col("capacity avoided (MW)", "capacity_mw_avoided", ",.4f"),
    Col("capital avoided ($)", "capital_usd_avoided", ",.0f"),
    Col("data", "data"),
    Col("note", "note"),
)
PILOT_COLS = (
    Col("deployment", "deployment"),
    Col("data", "data"),
    Col("cheapest (the pilot to run)", "smallest"),
    Col("sized by", "sized_by"),
    Col("simulated change %", "simulated_change_pct", "+,.1f"),
    Col("detectable change %", "detectable_change_pct", "+,.1f"),
    Col("seeds per arm", "seeds_per_arm", ",.0f"),
    Col("nodes", "nodes", ",.0f"),
    Col("GPUs", "gpus", ",.0f"),
    Col("hours", "hours", ",.2f"),
    Col("weeks", "weeks", ",.2f"),
    Col("GPU-hours", "gpu_hours", ",.0f"),
    Col("cost ($)", "cost_usd", ",.0f"),
)


def constants_table(key: str, title: str, source: CsvFile) -> Table:
    """The economics stage's ``constants.csv``: each constant's value, unit, source and year
    (a year as ``2025``, not ``2,025``; a setting's empty year left empty)."""
    table = Table(key, title, CONSTANT_COLUMNS, sources=[source.path])
    for _, row in source.frame.iterrows():
        ident = {"name": row["name"]}
        spec = ".0f" if row["name"] in YEAR_CONSTANTS else ",.8g"
        year = source.num("year", ".0f", **ident) if pd.notna(row["year"]) else ""
        table.rows.append(
            [row["name"], source.num("value", spec, **ident), row["unit"], row["source"], year]
        )
    return table


SENSITIVITY_NOTE = (
    "One assumption changed at a time; the others as configured. The simulated deployments "
    "first; savings are for the baseline's fleet-year of tokens made by the controller, the "
    "bill change is the controller's fleet-year minus the baseline's. Energy: GPU energy x PUE, "
    "the hosts' not counted (the capital counts their power). GPU-time $ is a renter's price, "
    "which holds the provider's power and capital: not to be added to the energy $ or the "
    "capital avoided. The capital is a one-time cost, not a yearly one."
)


def sensitivity_table(
    source: CsvFile, note: str = SENSITIVITY_NOTE, left_out: tuple[str, ...] = ()
) -> Table:
    """The economics stage's ``sensitivity.csv`` pivoted: one row per headline quantity, one
    column per setting (the base case, then each assumption at each end), but for the
    parameters ``left_out`` (those that move none of the rows, as the GPU-hour price in planner
    mode); the title carries the rows' data label (SIMULATED where they are) and ``note`` is
    said under it."""
    frame = source.frame
    frame = frame[~frame["parameter"].isin(left_out)]
    settings = list(dict.fromkeys(zip(frame["parameter"], frame["setting"], strict=True)))
    quantities = frame[frame["parameter"] == "base"]
    varied = [p for p in dict.fromkeys(frame["parameter"]) if p != "base"]
    table = Table(
        "sensitivity",
        f"Sensitivity of the headline to {', '.join(varied[:-1])} and {varied[-1]} "
        f"({data_label(frame['data'])})",
        [
            "source",
            "deployment",
            "quantity",
            "unit",
            "data",
            "note",
            *(f"{p}: {s}" for p, s in settings),
        ],
        sources=[source.path],
        note=note,
    )
    for _, q in quantities.iterrows():
        keys = {"source": q["source"], "deployment": q["deployment"], "quantity": q["quantity"]}
        spec = ",.4f" if "per Mtok" in q["quantity"] or abs(q["value"]) < 1000 else ",.0f"
        note = q["note"] if "note" in q and isinstance(q["note"], str) else ""
        row: list[Cell] = [q["source"], q["deployment"], q["quantity"], q["unit"], q["data"], note]
        for parameter, setting in settings:
            found = source.select(parameter=parameter, setting=setting, **keys)
            row.append(
                source.num("value", spec, parameter=parameter, setting=setting, **keys)
                if len(found)
                else ""
            )
        table.rows.append(row)
    return table
