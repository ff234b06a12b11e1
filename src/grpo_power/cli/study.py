"""Commands of the controller and what follows it: ``controller train``, ``evaluate``,
``economics`` and ``report``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

import typer

from grpo_power.cli.base import (
    ConfigOption,
    app,
    check_numbers,
    config_from,
    controller_app,
    echo_notes,
    user_errors,
)
from grpo_power.config import DEFAULT_CONFIG_PATH, Config
from grpo_power.config.notes import config_notes
from grpo_power.layout import CONTROLLER, EVALUATE, IDENTIFY

ControllerArm = Literal["ppo", "ppo+hwcap"]  # layout.CONTROLLER_ARMS


@controller_app.command("train")
@user_errors
def controller_train(
    deployment: Annotated[str, typer.Option("--deployment", "-d", help="Deployment name.")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Controller folder (default: RESULTS_DIR/controller/DEPLOYMENT, "
            "+hwcap for the ppo+hwcap arm).",
        ),
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            help="Calibration file (default: RESULTS_DIR/identify/calibration.json where "
            "identify wrote it, as the study's rule passes it; else the config's).",
        ),
    ] = None,
    authority: Annotated[
        Path | None,
        typer.Option("--authority", help="authority.json (default: RESULTS_DIR/identify)."),
    ] = None,
    cap_w: Annotated[
        float | None, typer.Option("--cap-w", help="Cap to train for, W (default: config).")
    ] = None,
    timesteps: Annotated[
        int | None,
        typer.Option(
            "--timesteps",
            help="PPO steps, times the deployment's sim.deployments[].training_steps_factor "
            "(default: config's controller.total_timesteps).",
        ),
    ] = None,
    arm: Annotated[
        ControllerArm,
        typer.Option(
            "--arm",
            help="ppo, or ppo+hwcap: trained under the GPU power limit, tuned first (the "
            "hardware tier).",
        ),
    ] = "ppo",
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 3: train a deployment's PPO meta-controller in the simulator (SIMULATED)."""
    from grpo_power.control.policy import controller_folder
    from grpo_power.study import train

    check_numbers({"--cap-w": cap_w, "--timesteps": timesteps})
    cfg = config_from(config)
    check_numbers({"--cap-w": cap_w}, cfg)
    echo_notes(config_notes(cfg) if cap_w is None else [])
    out = out or controller_folder(cfg, deployment, arm)
    authority = authority or cfg.layout.identify / IDENTIFY.authority_json
    calibration = _study_calibration(cfg, calibration)
    replaced = (out / CONTROLLER.controller).exists()
    result = train(cfg, deployment, out, calibration, authority, cap_w, timesteps, arm)
    e = result.evaluation
    if replaced:
        echo_notes([f"{out}: the controller trained there before was replaced"])
    typer.echo(
        f"{arm} controller for {deployment} (SIMULATED): drives "
        f"{'+'.join(result.space.actuators)}"
        f"{' (fallback: no actuator cleared the threshold)' if result.space.fallback else ''}; "
        f"{result.timesteps} steps in {result.train_s:.1f} s"
    )
    if result.power_limit_w is not None:
        typer.echo(f"  under the GPU power limit {result.power_limit_w:.0f} W (hardware tier)")
    typer.echo(
        f"  nominal episodes: return {e['trained_return']:.2f} (random policy "
        f"{e['random_return']:.2f}), violation rate {100 * e['trained_violation_rate']:.2f} % "
        f"(random {100 * e['random_violation_rate']:.2f} %)"
    )
    meta = json.loads((out / CONTROLLER.controller).read_text())
    if not meta["oracle"]["feasible"]:
        typer.echo(
            f"warning: cap infeasible for {deployment} with these actuators (SIMULATED): no "
            f"setting the oracle searched keeps the violation budget at {meta['cap_w']:g} W per "
            "GPU; the controller was trained all the same, and the evaluation will not rank "
            "its arms on violations",
            err=True,
        )
    if e["trained_return"] <= e["random_return"]:
        typer.echo(
            f"warning: the trained policy's return ({e['trained_return']:.2f}) is not above a "
            f"random policy's ({e['random_return']:.2f}): it has not learnt this deployment; "
            "train longer (--timesteps) before using it",
            err=True,
        )
    typer.echo(
        f"wrote {out}/controller.json, policy.npz, policy.zip, vecnormalize.pkl, learning_curve.csv"
    )


@app.command("evaluate")
@user_errors
def evaluate(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    controllers: Annotated[
        Path | None,
        typer.Option(
            "--controllers", help="Trained controllers (default: RESULTS_DIR/controller)."
        ),
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            help="Calibration file (default: a scenario's own, else RESULTS_DIR/identify/"
            "calibration.json where identify wrote it, as the study's rules pass it; else the "
            "config's).",
        ),
    ] = None,
    cap_w: Annotated[
        float | None, typer.Option("--cap-w", help="A cap for every deployment evaluated, W.")
    ] = None,
    scenario: Annotated[
        str | None,
        typer.Option("--scenario", help="A scenario of evaluate.scenarios (sets the others)."),
    ] = None,
    retrain: Annotated[
        bool | None,
        typer.Option(
            "--retrain/--no-retrain",
            help="Retrain PPO in the evaluated setting (default: when it is a scenario).",
        ),
    ] = None,
    authority: Annotated[
        Path | None,
        typer.Option("--authority", help="authority.json (default: RESULTS_DIR/identify)."),
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 4: every arm on every deployment over seeds, intervals and ratios (SIMULATED).

    With --calibration F and/or --cap-w W (or --scenario NAME) the study's controllers are
    evaluated as they are and after retraining in that scenario.
    """
    from grpo_power.study import evaluate as run_evaluate

    check_numbers({"--cap-w": cap_w})
    cfg = config_from(config)
    check_numbers({"--cap-w": cap_w}, cfg)
    echo_notes(config_notes(cfg) if cap_w is None else [])
    deployments = None
    schedule, changing = None, False
    if scenario is not None:
        named = {s.name: s for s in cfg.evaluate.scenarios}
        if scenario not in named:
            raise ValueError(
                f"{config}: evaluate.scenarios: expected one of {sorted(named)} for --scenario, "
                f"got {scenario!r}"
            )
        chosen = named[scenario]
        calibration = chosen.calibration or calibration
        cap_w = chosen.cap_w if cap_w is None else cap_w
        deployments = chosen.deployments
        retrain = chosen.retrain if retrain is None else retrain
        schedule, changing = chosen.schedule, chosen.changing
    calibration = _study_calibration(cfg, calibration)
    result = run_evaluate(
        cfg,
        out,
        controllers or cfg.layout.controllers,
        calibration,
        cap_w,
        deployments,
        retrain,
        authority or cfg.layout.identify / IDENTIFY.authority_json,
        log=typer.echo,
        schedule=schedule,
        changing=changing,
    )
    typer.echo(result.markdown)
    met = int(result.ratios["met"].sum()) if len(result.ratios) else 0
    typer.echo(f"targets met: {met} of {len(result.ratios)} (SIMULATED)")
    typer.echo(f"wrote {out}/table.md, summary.csv, ratios.csv, metrics.csv, summary.json")


def _study_calibration(cfg: Config, calibration: Path | None) -> Path | None:
    """The calibration a stage command runs on: ``calibration`` where given; else identify's
    (``RESULTS_DIR/identify/calibration.json``) where identify wrote it and the config names none,
    as the study's rules pass it (said as a note); else None, the config's. Without it the
    README's stage commands ran on another physics than the study's controllers were trained on:
    ``evaluate`` then took every controller for a scenario's and retrained it."""
    identified = cfg.layout.identify / IDENTIFY.calibration
    if calibration is None and cfg.sim.calibration is None and identified.exists():
        echo_notes([f"calibration {identified} (identify's; --calibration to give another)"])
        return identified
    return calibration


@contextmanager
def _study_beside_runs(runs: list[Path] | None, study: Path, command: str) -> Iterator[None]:
    """``command --run`` without the study it sets the runs beside: the stage's error on a file
    of the evaluate stage's ``study`` folder says what prices measured runs alone (the
    planner)."""
    try:
        yield
    except FileNotFoundError as error:
        if not runs or not str(error).startswith(f"{study}/"):
            raise
        raise FileNotFoundError(
            f"{error}; `{command} --run` sets the runs beside the study's simulated arms (run "
            f"the study first); for measured runs alone: `grpo-power planner run "
            f"{Path(runs[0]).parent} --out DIR`"
        ) from None


@app.command("economics")
@user_errors
def economics(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    runs: Annotated[
        list[Path] | None,
        typer.Option(
            "--run",
            help="A run folder to price beside the study's simulated arms (repeatable; the "
            "evaluate and fleet stages' outputs are read too). Measured runs alone: "
            "`grpo-power planner run FOLDER`.",
        ),
    ] = None,
    evaluate_dir: Annotated[
        Path | None,
        typer.Option(
            "--evaluate",
            help="The evaluate stage's study folder (default: RESULTS_DIR/evaluate/study).",
        ),
    ] = None,
    fleet_dir: Annotated[
        Path | None,
        typer.Option("--fleet", help="The fleet stage's folder (default: RESULTS_DIR/fleet)."),
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 7: energy cost, carbon, oversubscription value and the pilot plan."""
    from grpo_power.economics.stage import run_economics

    cfg = config_from(config)
    evaluate_dir = evaluate_dir or cfg.layout.evaluate_study
    with _study_beside_runs(runs, evaluate_dir, "economics"):
        result = run_economics(cfg, out, runs or [], evaluate_dir, fleet_dir or cfg.layout.fleet)
    s = result.summary
    typer.echo(
        f"economics ({', '.join(s['data'])} data): {s['fleet_gpus']} GPUs in {s['year']}, "
        f"carbon {s['carbon_region']} {s['carbon_g_per_kwh']:g} g/kWh"
    )
    base = result.sensitivity[result.sensitivity["parameter"] == "base"]
    shown = base[["source", "deployment", "quantity", "value", "unit"]]
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if s["pilot"]:
        p = s["pilot"]
        typer.echo(
            f"smallest pilot: {p['deployment']}, {p['nodes']} node(s), {p['weeks']:.2f} weeks, "
            f"${p['cost_usd']:,.0f} (sized by {p['sized_by']})"
        )
    typer.echo(f"wrote {out}/constants.csv, arms.csv, savings.csv, oversubscription.csv, ...")
    echo_notes(s["part_notes"])


def _evaluated_scenarios(cfg: Config) -> tuple[list[Path], list[str]]:
    """The evaluate folders of the config's scenarios that have been evaluated, and a note for
    each one left out for not being evaluated yet, saying how to add it."""
    folders, notes = [], []
    for scenario in cfg.evaluate.scenarios:
        folder = cfg.layout.evaluate_scenario(scenario.name)
        if (folder / EVALUATE.summary_csv).exists():
            folders.append(folder)
        else:
            notes.append(
                f"note: scenario {scenario.name!r} is not in the report: {folder} holds no "
                f"{EVALUATE.summary_csv} (run `grpo-power evaluate --scenario {scenario.name} "
                f"--out {folder}`)"
            )
    return folders, notes


@app.command("report")
@user_errors
def report(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (index.html).")],
    runs: Annotated[
        list[Path] | None,
        typer.Option(
            "--run",
            help="A run folder to report beside the study (repeatable; the study's stages' "
            "outputs are read too). Measured runs alone: `grpo-power planner run FOLDER`.",
        ),
    ] = None,
    exceedance: Annotated[
        list[Path] | None,
        typer.Option("--exceedance", help="A run's exceedance.csv from `windows` (repeatable)."),
    ] = None,
    controllers: Annotated[
        list[Path] | None,
        typer.Option("--controller", help="A controller folder (default: every deployment's)."),
    ] = None,
    fleet_dir: Annotated[
        Path | None,
        typer.Option("--fleet", help="The fleet stage's folder (default: RESULTS_DIR/fleet)."),
    ] = None,
    identify_dir: Annotated[
        Path | None, typer.Option("--identify", help="The identify stage's folder.")
    ] = None,
    evaluate_dir: Annotated[
        Path | None, typer.Option("--evaluate", help="The evaluate stage's study folder.")
    ] = None,
    economics_dir: Annotated[
        Path | None, typer.Option("--economics", help="The economics stage's folder.")
    ] = None,
    real_traces_dir: Annotated[
        Path | None,
        typer.Option(
            "--real-traces",
            help="`grpo-power real-traces`' folder (default: the results' when the config sets "
            "real_traces.folder).",
        ),
    ] = None,
    study_fleet_dir: Annotated[
        Path | None,
        typer.Option(
            "--study-fleet",
            help="`grpo-power study-fleet`'s folder (default: the results' when the config sets "
            "fleet.study_mix).",
        ),
    ] = None,
    scenarios: Annotated[
        list[Path] | None,
        typer.Option(
            "--scenario",
            help="A scenario's evaluate folder (repeatable; default: every scenario of "
            "evaluate.scenarios evaluated into the results' evaluate/scenarios/NAME).",
        ),
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 8: publication figures (PDF + PNG) and the HTML report."""
    from grpo_power.report.inputs import ReportInputs
    from grpo_power.report.stage import run_report

    cfg = config_from(config)
    layout = cfg.layout
    evaluated, notes = ([], []) if scenarios else _evaluated_scenarios(cfg)
    inputs = ReportInputs(
        runs=runs or [],
        exceedance=exceedance or [],
        fleet=fleet_dir or layout.fleet,
        identify=identify_dir or layout.identify,
        controllers=controllers or [layout.controller(d.name) for d in cfg.sim.deployments],
        evaluate=evaluate_dir or layout.evaluate_study,
        economics=economics_dir or layout.economics,
        real_traces=real_traces_dir
        or (layout.real_traces if cfg.real_traces.folder is not None else None),
        study_fleet=study_fleet_dir or (layout.study_fleet if cfg.fleet.study_mix else None),
        scenarios=scenarios or evaluated,
    )
    with _study_beside_runs(runs, inputs.evaluate, "report"):
        result = run_report(cfg, inputs, out)
    typer.echo(
        f"report: {len(result.figures) // 2} figures (PDF + PNG), {result.numbers} traceable "
        f"numbers -> {result.index}"
    )
    for note in notes:
        typer.echo(note, err=True)
