"""The report stage (stage 8): publication figures and ``index.html``, read top to bottom.

Order of the page: the question; the setup (hardware, models, package versions from the run
manifests, what was simulated); the study's findings and this run's side by side; the figures;
the detailed tables; each evaluated scenario's tables; the measured traces; the economics; the
cautions of docs/design.md section 1 with this run's evidence. Every number comes from a file
an earlier stage wrote (tables carry provenance, see :mod:`grpo_power.report.tables`);
everything simulated says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_power.analysis.authority import STUDY_CONCURRENCY_AUTHORITY_72B
from grpo_power.analysis.evaluate import infeasible_why
from grpo_power.analysis.fleet.stage import fleet_runs
from grpo_power.analysis.reference import PUBLISHED_OVERSUBSCRIPTION, STUDY_SAMPLE_PERIOD_S
from grpo_power.atomic import merge_folder_atomic, write_text_atomic
from grpo_power.config import Config, static_setting
from grpo_power.layout import (
    ECONOMICS,
    EVALUATE,
    FLEET,
    IDENTIFY,
    REPORT,
    REPORT_FIGURES,
    RUN,
    STUDY_FLEET,
    WINDOWS,
)
from grpo_power.report import cells, html
from grpo_power.report import figures as fig
from grpo_power.report import tables as tab
from grpo_power.report.evaluation import (
    answer_in_short,
    evaluation_tables,
    read_evaluation,
    scenario_tables,
    scenarios_section,
)
from grpo_power.report.inputs import (
    ReportInputs,
    RunInfo,
    controller_info,
    learning_curve,
    run_infos,
    run_power,
    same_settings,
    sim_power,
    written_by,
)
from grpo_power.report.live_arms import first_run_exceedance, live_arm_table
from grpo_power.report.real_traces import real_traces_section
from grpo_power.report.study_authority import study_authority_table
from grpo_power.stage_files import read_csv
from grpo_power.version import __version__

QUESTION = (
    "How much GPU power does GRPO post-training draw, and how does it swing? Can a "
    "meta-controller that acts on generation occupancy keep it under a per-GPU cap while "
    "producing more tokens per second and per joule than fixed settings? Which actuators keep "
    "their authority when a model is sharded? How far can a fleet running GRPO be "
    "oversubscribed, and what are the controller and the oversubscription worth in money and "
    "carbon?"
)


@dataclass(frozen=True)
class ReportResult:
    """What the report stage wrote."""

    index: Path
    figures: list[Path]
    numbers: int  # traceable numbers in the page's tables


def _exceedance_rows(paths: list[Path], infos: list[RunInfo]) -> pd.DataFrame:
    """The windows stage's per-run (``run_pooled``) exceedance rows, with each run's arm.

    Raises:
        ValueError: an exceedance file belongs to none of the report's runs.
    """
    arms = {i.metadata["run_id"]: i.manifest["arm"] for i in infos}
    frames = []
    for path in paths:
        columns = ("scope", "run_id", "window_s", "exceedance", "data")
        frame = read_csv(path, written_by("windows", WINDOWS.exceedance_csv), columns)
        frame = frame[frame["scope"] == "run_pooled"]
        unknown = set(frame["run_id"]) - set(arms)
        if unknown:
            raise ValueError(f"{path}: run(s) {sorted(unknown)} are not among the report's runs")
        frames.append(frame.assign(arm=frame["run_id"].map(arms)))
    columns = ["run_id", "arm", "window_s", "exceedance", "data"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def gpu_names(infos: list[RunInfo]) -> str:
    """The GPUs the real runs' traces name (their metadata's ``gpu_name``), as text; ``GPU``
    without a run."""
    return ", ".join(sorted({i.metadata["gpu_name"] for i in infos})) or "GPU"


def make_figures(
    config: Config,
    inputs: ReportInputs,
    infos: list[RunInfo],
    out: Path,
    evaluate_json: cells.JsonFile,
    fleet_json: cells.JsonFile,
    controller_arm: str,
) -> list[tuple[str, str, str, Path, Path]]:
    """Draw and save every figure; (name, title, caption, png, pdf) per figure.

    ``evaluate_json``, ``fleet_json``: the evaluate and fleet stages' ``summary.json`` (the
    evaluation's exceedance window, the fleet's sizing window); ``controller_arm``: the arm the
    economics stage priced as the controller (drawn beside uncontrolled in the study fleet).
    """
    r = config.report
    fig.apply_style()
    run_traces, run_samples = run_power(inputs.runs, r.trace_s, r.max_points, config.cap_w)
    sim_traces, sim_samples = sim_power(inputs.evaluate, r.trace_s, r.max_points)
    summary = read_csv(
        inputs.evaluate / EVALUATE.summary_csv,
        written_by("evaluate", EVALUATE.summary_csv),
        fig.SUMMARY_COLUMNS,
    )
    fleet_windows = read_csv(
        inputs.fleet / FLEET.fleet_csv,
        written_by("fleet", FLEET.fleet_csv),
        fig.FLEET_WINDOWS_COLUMNS,
    )
    fleet_window_s = float(fleet_json.get("window_s"))
    authority = read_csv(
        inputs.identify / IDENTIFY.authority_csv,
        written_by("identify", IDENTIFY.authority_csv),
        fig.AUTHORITY_COLUMNS,
    )
    controllers = {f.name: controller_info(f) for f in inputs.controllers}
    curves = {f.name: learning_curve(f) for f in inputs.controllers}
    exceedance = _exceedance_rows(inputs.exceedance, infos)
    traces = pd.concat([run_traces, sim_traces])
    samples = pd.concat([run_samples, sim_samples])
    arms = read_csv(
        inputs.economics / ECONOMICS.arms, written_by("economics", ECONOMICS.arms), fig.ARMS_COLUMNS
    )
    scaling = read_csv(
        inputs.fleet / FLEET.scaling_csv,
        written_by("fleet", FLEET.scaling_csv),
        fig.SCALING_COLUMNS,
    )
    sim_72b = None
    if inputs.study_fleet is not None:
        rows = read_csv(
            inputs.study_fleet / STUDY_FLEET.comparison_csv,
            written_by("study fleet", STUDY_FLEET.comparison_csv),
            ("key", "arm", "window_s", "this_run", "data"),
        )
        shown = ("uncontrolled", controller_arm)
        sim_72b = rows[rows["key"].str.startswith("exceedance_72b") & rows["arm"].isin(shown)]
    # name -> (draw the figure, the data labels it shows)
    drawn = {
        "power_traces": (lambda: fig.power_traces(traces), traces["data"]),
        "power_distributions": (lambda: fig.power_distributions(samples), samples["data"]),
        "exceedance_windows": (
            lambda: fig.exceedance_windows(
                exceedance,
                fleet_windows,
                summary,
                float(evaluate_json.get("exceedance_window_s")),
                sim_72b,
            ),
            [
                *exceedance["data"],
                *fleet_windows["data"],
                *summary["data"],
                *([] if sim_72b is None else sim_72b["data"]),
            ],
        ),
        "authority": (
            lambda: fig.authority(
                authority, float(authority["threshold"].iloc[0]), STUDY_CONCURRENCY_AUTHORITY_72B
            ),
            authority["data"],
        ),
        "fleet": (
            lambda: fig.fleet(fleet_windows, scaling, fleet_window_s),
            [*fleet_windows["data"], *scaling["data"]],
        ),
        "ppo_learning": (
            lambda: fig.ppo_learning(controllers, curves),
            ["simulated" if c["simulated"] else "measured" for c in controllers.values()],
        ),
        "throughput_violations": (lambda: fig.throughput_violations(summary), summary["data"]),
        "cost_carbon": (lambda: fig.cost_carbon(arms), arms["data"]),
    }
    made = []
    for name, title in REPORT_FIGURES.items():
        draw, data = drawn[name]
        pdf, png = fig.save_figure(draw(), out / "figures", name, r.dpi)
        caption = fig.CAPTIONS[name].format(
            gpu=gpu_names(infos), fleet_runs=fleet_runs(fleet_json.data), **fig.CAPTION_FIGURES
        )
        made.append((name, title, f"{fig.data_label(data)}. {caption}", png, pdf))
    return made


def infeasible_verdict(oracle: dict[str, Any], lowest_cap_w: float) -> str:
    """The deployments table's verdict on a cap no setting keeps within the budget (``oracle``:
    the evaluation's oracle arm), with its lowest achievable mean power per GPU and what that
    says (:func:`~grpo_power.analysis.evaluate.infeasible_why`)."""
    lowest_w = float(oracle["lowest_power_w"])
    return (
        f"{oracle['verdict']} (lowest achievable mean power {lowest_w:.0f} W per GPU under the "
        f"run's lowest cap, {lowest_cap_w:g} W: {infeasible_why(lowest_w, lowest_cap_w)})"
    )


def _setup(
    infos: list[RunInfo],
    evaluate: cells.JsonFile,
    fleet: cells.JsonFile,
    out: Path,
    study_fleet: cells.JsonFile | None = None,
) -> str:
    """Hardware, models, versions and what was simulated (``study_fleet``: the study fleet's
    summary.json, when there is one)."""
    hardware = cells.Table(
        "hardware",
        "Real runs: hardware and telemetry (from the run manifests and trace metadata)",
        [
            "run",
            "host",
            "platform",
            "CPUs",
            "CUDA devices",
            "GPU",
            "power",
            "period (s)",
            "samples",
        ],
        sources=[i.folder / RUN.manifest for i in infos],
    )
    for i in infos:
        hw = i.manifest.get("hardware", {})
        hardware.rows.append(
            [
                i.metadata["run_id"],
                i.metadata.get("host", ""),
                hw.get("platform", ""),
                str(hw.get("cpu_count", "")),
                ", ".join(hw.get("cuda_devices", [])) or "none",
                i.metadata["gpu_name"]
                + (" (SIMULATED)" if i.metadata["source"] == "simulated" else ""),
                "SIMULATED" if i.metadata["source"] == "simulated" else i.metadata["source"],
                f"{i.metadata['sample_period_s']:g}",
                f"{i.samples:,}",
            ]
        )
    versions: dict[str, set[str]] = {}
    for i in infos:
        for package, version in {
            **i.manifest.get("packages", {}),
            "python": i.manifest.get("python"),
        }.items():
            versions.setdefault(package, set()).add(str(version))
    packages = cells.Table(
        "packages",
        "Package versions (from the run manifests)",
        ["package", "version"],
        [[p, ", ".join(sorted(v))] for p, v in sorted(versions.items())],
        sources=hardware.sources,
    )
    deployments = cells.Table(
        "deployments",
        "Simulated deployments (SIMULATED; the evaluate stage's summary.json)",
        ["deployment", "GPUs", "cap per GPU (W)", "time budget (s)", "seeds", "arms", "cap"],
        sources=[evaluate.path],
    )
    for name, info in evaluate.get("deployments").items():
        oracle = info["arms"].get("oracle", {})
        verdict = (
            infeasible_verdict(oracle, oracle.get("lowest_power_cap_w", info["cap_w"]))
            if oracle.get("feasible") is False
            else "feasible"
            if oracle
            else "no oracle arm"
        )
        deployments.rows.append(
            [
                name,
                evaluate.num(f"deployments.{name}.gpus", ",.0f"),
                evaluate.num(f"deployments.{name}.cap_w", ",.0f"),
                evaluate.num(f"deployments.{name}.budget_s", ",.0f"),
                str(len(info["seeds"])),
                ", ".join(info["arms"]),
                verdict,
            ]
        )
    sizes = sorted({i.manifest["size"] for i in infos})
    simulated = [
        f"Real GRPO runs ({', '.join(sizes) or 'none'}) ran TRL on "
        f"{', '.join(sorted({i.manifest['hardware'].get('platform', '?') for i in infos}))}; "
        f"their power source: {', '.join(sorted({i.metadata['source'] for i in infos}))} "
        f"(simulated = the calibrated {gpu_names(infos)} power model driven by the run's real "
        "phases and actuators).",
        "The 7B/14B/72B deployments, the PPO controller's training and the arm evaluation are "
        "SIMULATED (the GRPO step simulator, its deployments' parameters from sourced ranges, "
        "docs/calibration.md; the identify stage fits the real runs' phase times as a "
        "deployment of their own, and refits the power model only from measured readings).",
        f"The fleet is built by {fleet.get('alignment')} alignment of the runs' energy bins "
        f"({fleet.get('data')} power); the scaling study is a Monte Carlo simulation.",
        "Economics multiply these energies and throughputs by sourced constants; they inherit "
        "every simulated label.",
    ]
    if study_fleet is not None:
        simulated.insert(
            -1,
            f"The study's fleet mix ({study_fleet.get('mix_text')}: "
            f"{study_fleet.get('n_gpus')} GPUs) is SIMULATED: the deployments' evaluation runs, "
            f"{study_fleet.get('draws')} draws of seeds and random start offsets per arm; its "
            f"72B windows are the {study_fleet.get('windows_72b_from')} deployment's runs.",
        )
    return html.section(
        "Setup",
        html.table_html(hardware, out),
        html.table_html(packages, out),
        html.table_html(deployments, out),
        "<h3>What was simulated</h3>",
        html.bullet_list(simulated, out, "simulated"),
        key="setup",
    )


def _fleet_basis(row: pd.Series) -> str:
    """``; `` and what the fleet stage's fleet is made of, from its oversubscription row's
    note (``FleetRows.made_of``), or nothing where the row has none."""
    note = row.get("note")
    return f"; {note}" if isinstance(note, str) and note else ""


def _cautions(
    oversub: cells.CsvFile,
    fleet: cells.JsonFile,
    economics: cells.JsonFile,
    infos: list[RunInfo],
    out: Path,
) -> str:
    """docs/design.md section 1's cautions, each with this run's evidence, and the economics'
    notes on a part priced at the packaged A100 figures."""
    stage = oversub.select(scope="fleet stage").iloc[0]
    scaling = oversub.select(scope="scaling study")
    smallest, largest = scaling.iloc[0], scaling.iloc[-1]
    periods = sorted({i.metadata["sample_period_s"] for i in infos})
    items: list[cells.Cell] = [
        [
            f"Published oversubscription results are far lower than the study's "
            f"{fig.STUDY_OVERSUBSCRIPTION_TEXT}: "
            f"{'; '.join(f.quantity for f in PUBLISHED_OVERSUBSCRIPTION)}. This run's evidence: "
            "a fleet of ",
            oversub.num("n_gpus", ",.0f", scope="fleet stage"),
            " GPUs at the ",
            oversub.num("window_s", "g", scope="fleet stage"),
            " s window with margin ",
            oversub.num("margin", "g", scope="fleet stage"),
            f" ({stage['data']}{_fleet_basis(stage)}) gives a factor of ",
            oversub.num("factor", ".3f", scope="fleet stage"),
            " x; across fleet sizes it goes from ",
            oversub.num("factor", ".3f", scope="scaling study", n_gpus=smallest["n_gpus"]),
            f" x at {int(smallest['n_gpus']):,} GPUs to ",
            oversub.num("factor", ".3f", scope="scaling study", n_gpus=largest["n_gpus"]),
            f" x at {int(largest['n_gpus']):,} GPUs (Monte Carlo, alignment "
            f"{fleet.get('alignment')}).",
        ],
        "NVML semantics: nvmlDeviceGetPowerUsage is instantaneous on A100 (GA100) and a 1 s "
        "average on H100 and newer; NVML_FI_DEV_POWER_INSTANT / NVML_FI_DEV_POWER_AVERAGE ask "
        "for each explicitly. NVML samples only part of the runtime, so window means here come "
        "from the total-energy counter (nvmlDeviceGetTotalEnergyConsumption) where the trace "
        "has one, else from integrated power.",
        f"Sampling: the study's {STUDY_SAMPLE_PERIOD_S:g} s cannot see the 0.2-3 Hz swings of "
        "synchronous training; this run "
        f"sampled every {', '.join(f'{p:g}' for p in periods) or 'n/a'} s.",
        "Simulated is not measured: every number labelled SIMULATED comes from the power model "
        "or the GRPO step simulator, whose 7B/14B/72B parameters come from sourced ranges "
        "(docs/calibration.md), not from the runs here (identify fits their phase times as a "
        "deployment of their own, and the power model only from measured readings); confirm on "
        "GPUs (see the pilot) before acting on them.",
    ]
    items += ["Economics: " + note + "." for note in economics.data.get("part_notes", [])]
    timed = [i for i in infos if i.metadata.get("simulated")]
    if timed:
        items.append(
            f"Reruns: the {len(timed)} real run(s) here ran a model on this machine with "
            "simulated power, so each phase lasts as long as it took on this machine: their "
            "traces, tokens/s and what is computed from them (the identify fit, the fleet of "
            "their traces, the economics rows of source run) come out otherwise on a rerun, "
            "more so on a busier machine. The simulator's evaluations (the SIMULATED arms of "
            "each deployment, their windows and fleet mix) are the same numbers for the same "
            "seeds."
        )
    return html.section("Cautions", html.bullet_list(items, out, "caution"), key="cautions")


def _live_arms(
    config: Config,
    inputs: ReportInputs,
    infos: list[RunInfo],
    summary: cells.CsvFile,
    run_arms: cells.CsvFile,
    single: list[str],
    evaluate_json: cells.JsonFile,
) -> cells.Table:
    """The live-arm table on the first single-GPU deployment and the first real run size that
    stands for it (``sim.deployments[].sizes``; the first run size when none does); the
    deployment's cap and the static arms' concurrency are the evaluation's
    (``evaluate_json``: its ``summary.json``)."""
    deployment = next(
        (d for d in config.sim.deployments if d.name in single), config.sim.deployments[0]
    )
    evaluated = evaluate_json.get("deployments")[deployment.name]
    w = config.workload  # the static arms' settings where the evaluation ran no such arm
    sizes = [s.size for s in config.run_sizes]
    size = next((s for s in sizes if s in deployment.sizes), sizes[0])
    arms = {i.metadata["run_id"]: i.manifest["arm"] for i in infos if i.manifest["size"] == size}
    return live_arm_table(
        summary,
        run_arms,
        first_run_exceedance(inputs.exceedance, arms),
        deployment.name,
        size,
        float(evaluated["cap_w"]),
        {
            arm: int(evaluated["arms"].get(arm, {}).get("concurrency", static_setting(arm, w)[0]))
            for arm in ("fixed", "fixed-half")
        },
        min(config.windows.windows_s),
        gpu_names(infos),
        cells.interval_pct(evaluate_json),
        cells.data_label(i.metadata["source"] for i in infos),
        same_settings([i for i in infos if i.manifest["size"] == size]),
    )


def _fleet_year_note(constants: cells.CsvFile) -> cells.Cell:
    """The costs table's note: the fleet-year the economics stage priced (its
    ``constants.csv`` settings ``fleet_gpus``, ``year`` and ``utilization``)."""
    gpus = constants.num("value", ",.0f", name="fleet_gpus")
    return [
        "Fleet-year: ",
        gpus,
        f" GPU{'' if gpus.value == 1 else 's'} in ",
        constants.num("value", ".0f", name="year"),
        " at utilisation ",
        constants.num("value", "g", name="utilization"),
        ". Energy = GPU energy x PUE, not the wall's (host power is not in the traces and is "
        "not counted here; the capital counts it, at nameplate). Per-token figures and "
        "throughput are ratios of totals over seeds (all seeds' energy, cost or GPU time over "
        "all their tokens), consistent with the fleet-year columns; intervals are the ratio "
        "estimator's (Student-t on the seeds' residuals about the ratio). Source run: tiny "
        "model on the CPU, not an estimate for GPU runs.",
    ]


def _pilot_note(pilot: cells.CsvFile, economics: cells.JsonFile) -> cells.Cell:
    """The pilot table's note from the economics stage's ``pilot.csv`` (the settings it was
    sized by and the headroom windows, the same on every row) and ``summary.json`` (the fleet
    window the headroom is counted in)."""
    first = {"deployment": pilot.frame["deployment"].iloc[0]}
    return [
        "Confidence ",
        pilot.num("confidence", "g", **first),
        ", power ",
        pilot.num("power", "g", **first),
        "; each deployment's pilot is sized for a two-sided paired t-test to detect its "
        "detectable change (",
        pilot.num("min_effect_share", "g", **first),
        " of the simulated change) against the simulator's spread across seeds, inflated ",
        pilot.num("sd_inflation", "g", **first),
        " x, at least ",
        pilot.num("min_seeds", ".0f", **first),
        " seeds per arm; headroom: no exceedance in ",
        pilot.num("headroom_windows", ",.0f", **first),
        " independent ",
        economics.num("oversubscription.window_s", "g"),
        " s windows (the fleet's sizing window), which bounds the exceedance rate below ",
        pilot.num("exceedance_target", "g", **first),
        ".",
    ]


def run_report(config: Config, inputs: ReportInputs, out: Path | str) -> ReportResult:
    """Draw the figures and write ``out/index.html`` (and ``out/figures/*.pdf|png``), built in
    a folder beside ``out`` whose files take their places only when all are written: a bad
    input found while drawing leaves ``out`` as it was."""
    out = Path(out)
    built = merge_folder_atomic(out, lambda folder: _write_report(config, inputs, folder))
    return ReportResult(out / built.index, [out / p for p in built.figures], built.numbers)


def _write_report(config: Config, inputs: ReportInputs, out: Path) -> ReportResult:
    """Write the report into ``out``; its paths relative to ``out``."""
    infos = run_infos(inputs.runs)
    evaluation = read_evaluation(inputs.evaluate)
    ratios, summary, evaluate_json = evaluation.ratios, evaluation.summary, evaluation.summary_json
    by_scenario = {folder.name: read_evaluation(folder) for folder in inputs.scenarios}
    scenarios = scenario_tables(by_scenario)
    authority = cells.CsvFile(
        inputs.identify / IDENTIFY.authority_csv, written_by("identify", IDENTIFY.authority_csv)
    )
    comparison = cells.CsvFile(
        inputs.fleet / FLEET.comparison_csv, written_by("fleet", FLEET.comparison_csv)
    )
    fleet_json = cells.JsonFile(inputs.fleet / FLEET.summary, written_by("fleet", FLEET.summary))
    e = {
        name: cells.CsvFile(
            inputs.economics / f"{name}.csv", written_by("economics", f"{name}.csv")
        )
        for name in ("constants", "arms", "savings", "oversubscription", "sensitivity", "pilot")
    }
    economics_json = cells.JsonFile(
        inputs.economics / ECONOMICS.summary, written_by("economics", ECONOMICS.summary)
    )
    controller_arm = economics_json.get("controller_arm")
    deployments = evaluate_json.get("deployments")
    single = [n for n, d in deployments.items() if d["gpus"] == 1]
    sharded = [n for n, d in deployments.items() if d["gpus"] > 1]
    setup_text = (
        f"{len(infos)} real tiny GRPO run(s) "
        f"({', '.join(sorted({i.metadata['source'] for i in infos}))} power); "
        f"{len(deployments)} SIMULATED deployments ({', '.join(deployments)})"
    )
    study_fleet: cells.CsvFile | None = None
    study_fleet_json: cells.JsonFile | None = None
    if inputs.study_fleet is not None:
        study_fleet = cells.CsvFile(
            inputs.study_fleet / STUDY_FLEET.comparison_csv,
            written_by("study fleet", STUDY_FLEET.comparison_csv),
        )
        study_fleet_json = cells.JsonFile(
            inputs.study_fleet / STUDY_FLEET.summary,
            written_by("study fleet", STUDY_FLEET.summary),
        )
    study = tab.study_table(
        ratios,
        summary,
        evaluate_json,
        authority,
        comparison,
        e["sensitivity"],
        controller_arm,
        single[0] if single else next(iter(deployments)),
        sharded[-1] if sharded else next(iter(deployments)),
        setup_text,
        study_fleet,
        ("uncontrolled", controller_arm),
    )
    live = _live_arms(config, inputs, infos, summary, e["arms"], single, evaluate_json)
    controller_savings = e["savings"].select(arm=controller_arm)
    tables = [
        *evaluation_tables(evaluation, "", "the study"),
        cells.csv_table(
            "authority",
            "Actuator authority (simulated rows are SIMULATED)",
            authority,
            tab.AUTHORITY_COLS,
            ["data", "deployment", "actuator"],
            note=tab.AUTHORITY_NOTE,
        ),
        *filter(None, [study_authority_table(authority, config)]),
        cells.csv_table(
            "fleet",
            "Fleet and windowed exceedance: reference figures vs this run "
            f"({fig.data_label(comparison.frame['data'])})",
            comparison,
            tab.COMPARISON_COLS,
            ["reference", "quantity", "note"],
        ),
    ]
    if study_fleet is not None:
        tables.append(
            cells.csv_table(
                "study_fleet",
                "The study's fleet mix and the 72B windows, every arm (SIMULATED deployments)",
                study_fleet,
                tab.STUDY_FLEET_COLS,
                ["key", "arm"],
            )
        )
    economics = [
        tab.constants_table("constants", "Constants, with source and year", e["constants"]),
        cells.csv_table(
            "costs",
            f"Energy, cost and carbon per arm ({fig.data_label(e['arms'].frame['data'])}; "
            f"ratios of totals over seeds, {cells.interval_pct(economics_json)} intervals)",
            e["arms"],
            tab.COST_COLS,
            ["source", "deployment", "arm"],
            note=_fleet_year_note(e["constants"]),
        ),
        cells.csv_table(
            "savings",
            f"Savings of {controller_arm} against every other arm "
            f"({fig.data_label(controller_savings['data'])})",
            e["savings"],
            tab.SAVINGS_COLS,
            ["source", "deployment", "arm", "versus"],
            controller_savings,
            note="Saved: for the same work, the baseline's (versus's) fleet-year of tokens made "
            "by the controller instead, so never more than the baseline's own yearly spend; "
            "negative: the controller costs more. "
            "Bill change: the fleet's yearly electricity bill and carbon, the controller's "
            "fleet-year minus the baseline's (the same GPUs and hours, each arm making its own "
            "tokens); the two can differ in sign. Energy per token and throughput % are ratios "
            "of totals over seeds, as the fleet-year is (the ratios table's are means of per-seed "
            "ratios, so the two differ a little). Source run: tiny model on the CPU, not an "
            "estimate for GPU runs.",
        ),
        cells.csv_table(
            "oversubscription",
            "Oversubscription value: extra GPUs and capital avoided "
            f"({fig.data_label(e['oversubscription'].frame['data'])})",
            e["oversubscription"],
            tab.OVERSUBSCRIPTION_COLS,
            ["scope", "n_gpus"],
            note="Host power per GPU is provisioned at nameplate (not oversubscribed); see the "
            "constants.",
        ),
        tab.sensitivity_table(e["sensitivity"]),
        cells.csv_table(
            "pilot",
            "Low-cost pilot: smallest deployment confirming the gain and the headroom (sized from "
            f"{fig.data_label(e['pilot'].frame['data'])} inputs)",
            e["pilot"],
            tab.PILOT_COLS,
            ["deployment"],
            note=_pilot_note(e["pilot"], economics_json),
        ),
    ]
    measured, measured_figures = real_traces_section(inputs.real_traces, out, config.report.dpi)
    made = make_figures(config, inputs, infos, out, evaluate_json, fleet_json, controller_arm)
    sections = [
        html.section("The question", html.paragraph(QUESTION), key="question"),
        html.section(
            "The answer in short (SIMULATED)",
            html.bullet_list(answer_in_short(evaluation, by_scenario, controller_arm), out),
            key="answer",
        ),
        _setup(infos, evaluate_json, fleet_json, out, study_fleet_json),
        html.section("The study and this run", html.table_html(study, out), key="study"),
        html.section("The study's live arms", html.table_html(live, out), key="live-arms"),
        html.section(
            "Figures",
            *(
                html.figure_html(title, caption, png, pdf, out)
                for _, title, caption, png, pdf in made
            ),
            key="figures",
        ),
        html.section("Tables", *(html.table_html(t, out) for t in tables), key="tables"),
        scenarios_section(scenarios, out),
        measured,
        html.section("Economics", *(html.table_html(t, out) for t in economics), key="economics"),
        _cautions(e["oversubscription"], fleet_json, economics_json, infos, out),
    ]
    subtitle = (
        f"grpo-power {__version__}. Every number below comes from a file an earlier stage wrote; "
        "numbers labelled SIMULATED come from the power model or the GRPO step simulator."
    )
    index = write_text_atomic(out / REPORT.page, html.page(config.report.title, subtitle, sections))
    numbers = sum(
        isinstance(part, cells.Num)
        for t in [study, live, *tables, *(t for *_, shown in scenarios for t in shown), *economics]
        for row in t.rows
        for cell in row
        for part in (cell if isinstance(cell, list) else [cell])
    )
    figures = [p.relative_to(out) for *_, png, pdf in made for p in (pdf, png)]
    figures += [p.relative_to(out) for p in measured_figures]
    return ReportResult(index.relative_to(out), figures, numbers)
