"""The identify, controller and evaluate stages, wired from the packages (called by the
``cli`` package).

- :func:`identify`: actuator sweeps on every simulated deployment (and on the real workload,
  ``authority.real_sweep_steps`` steps per run), the authority table, and the calibration file
  (sourced defaults, plus a fit of the real runs' phase times and power with residuals);
- :func:`train`: the PPO meta-controller of one deployment in the calibrated simulator;
- :func:`evaluate`: every arm on every deployment over the evaluation seeds, then metrics,
  intervals and ratios; in a scenario (another calibration or cap) the study's controllers run
  as they are and retrained in the scenario, both reported.

Simulated outputs are labelled simulated in every file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_power.config import Config
from grpo_power.layout import FIT_RESIDUALS, IDENTIFY, RUN, ResultsLayout

Log = Callable[[str], None]


@dataclass(frozen=True)
class IdentifyResult:
    """Files and tables the identify stage wrote."""

    calibration_path: Path
    authority: pd.DataFrame
    fit: dict[str, Any] | None


def _run_data(folder: Path) -> Any:
    from grpo_power.sim.fit import RunData
    from grpo_power.telemetry.steplog import read_step_log
    from grpo_power.telemetry.store import read_trace

    trace = read_trace(folder / RUN.trace)  # checked: power, time unit, clock jumps
    return RunData(
        run_id=trace.metadata.run_id,
        steps=read_step_log(folder / RUN.steps),
        t_s=trace.frame["t"].to_numpy(float),
        power_w=trace.frame["power_w"].to_numpy(float),
        simulated_power=trace.metadata.simulated or trace.metadata.source == "simulated",
    )


def identify(
    config: Config,
    out: Path,
    calibration_path: Path | None = None,
    runs: list[Path] | None = None,
    real_sweep_steps: int | None = None,
    log: Log = print,
    sweep: Path | None = None,
) -> IdentifyResult:
    """The identify stage: sweeps, authority table and calibration file in ``out``.

    Args:
        config: settings.
        out: output folder (``calibration.json``, ``fit_residuals.csv``, ``sweeps.csv``,
            ``authority.{csv,json,md}``, ``real-sweep/`` run folders).
        calibration_path: a calibration to start from (default: ``sim.calibration`` or the
            sourced defaults).
        runs: extra measured run folders (trace + step log) to fit from.
        real_sweep_steps: overrides ``authority.real_sweep_steps``.
        sweep: a real-workload sweep already run (``grpo-power sweep --out DIR``): its runs are
            read instead of running one here.
    """
    from grpo_power.analysis.authority import write_authority
    from grpo_power.atomic import write_csv_atomic
    from grpo_power.sim.calibration import calibration_for, save_calibration
    from grpo_power.sim.fit import fit_from_runs
    from grpo_power.sim.grpo_sim import sweep_deployment

    out = Path(out)
    calibration = calibration_for(config, calibration_path)
    data = [_run_data(Path(f)) for f in runs or []]  # read first: a bad folder fails at once
    rows: list[dict[str, Any]] = []
    for deployment in config.sim.deployments:
        rows += sweep_deployment(calibration, deployment.name, config, config.seed)
    steps = config.authority.real_sweep_steps if real_sweep_steps is None else real_sweep_steps
    fit: dict[str, Any] | None = None
    from grpo_power.workload.sweep import measured_sweep_row, read_sweep_index, run_sweep

    if sweep is None and steps > 0:
        log(f"real-workload sweep: runs of {steps} steps")
        run_sweep(config, out / "real-sweep", steps, config.seed)
        sweep = out / "real-sweep"
    if sweep is not None:
        label = f"{config.workload.size}-run"
        for actuator, level, folder in read_sweep_index(sweep):
            rows.append(measured_sweep_row(folder, actuator, level, label, config))
            data.append(_run_data(folder))
    if data:
        from grpo_power.control.ppo import deployment_for_size

        try:  # the fit starts from the deployment the runs' size stands for
            prior_name = deployment_for_size(config, config.workload.size)
        except ValueError:
            prior_name = config.authority.reference
        fitted, fitted_power, summary, residuals = fit_from_runs(
            data,
            calibration.deployment_parameters(prior_name),
            calibration.power,
            calibration.gpu,
            config.workload.train_micro_batch,
        )
        name = f"{config.workload.size}-fit"
        calibration.deployments[name] = {
            **{k: v for k, v in calibration.deployments[prior_name].items() if k != "parameters"},
            "parameters": fitted,
        }
        if summary["power_source"] == "measured":  # never refit power from simulated readings
            calibration.power = fitted_power
        calibration.fits = {**(calibration.fits or {}), name: {**summary, "prior": prior_name}}
        calibration.origin = "identify"
        write_csv_atomic(out / FIT_RESIDUALS, residuals)
        fit = summary
    path = save_calibration(calibration, out / IDENTIFY.calibration)
    table = write_authority(
        pd.DataFrame(rows),
        config.authority.threshold,
        config.authority.reference,
        config.controller.reward.model_dump(),
        out,
    )
    return IdentifyResult(path, table, fit)


def train(
    config: Config,
    deployment: str,
    out: Path,
    calibration_path: Path | None,
    authority_path: Path,
    cap_w: float | None = None,
    timesteps: int | None = None,
) -> Any:
    """Train one deployment's PPO controller into ``out`` (returns the ``TrainResult``)."""
    from grpo_power.analysis.authority import read_authority
    from grpo_power.control.ppo import train_controller
    from grpo_power.sim.calibration import calibration_for

    config.sim.deployment(deployment)  # a clear error for an unknown name
    return train_controller(
        config,
        calibration_for(config, calibration_path),
        deployment,
        read_authority(authority_path),
        out,
        cap_w=cap_w,
        total_timesteps=timesteps,
    )


def evaluate(
    config: Config,
    out: Path,
    controllers: Path,
    calibration_path: Path | None = None,
    cap_w: float | None = None,
    deployments: list[str] | None = None,
    retrain: bool | None = None,
    authority_path: Path | None = None,
    log: Log = print,
) -> Any:
    """Run every arm on every deployment and write the evaluation into ``out``.

    The study's trained controllers (``controllers/<deployment>``) run as they are (arm
    ``ppo``). When the evaluation is a scenario for a controller (a calibration other than the
    one it was trained on, or another cap) and ``retrain`` is not False, or when ``retrain`` is
    True, it is also retrained there (arm ``ppo-retrained``) on an authority table measured in
    the scenario (``out/authority``), and both are reported.

    Args:
        controllers: folder of the study's trained controllers.
        calibration_path: the calibration to evaluate on (default: ``sim.calibration``).
        cap_w: a cap for every deployment evaluated, W (default: each deployment's).
        deployments: deployments to evaluate (default: all).
        retrain: force (True) or forbid (False) retraining; None: retrain in scenarios.
        authority_path: the study's authority table (its existence is checked when retraining).
    Returns the :class:`~grpo_power.analysis.evaluate.EvaluationResult`.
    """
    from grpo_power.analysis.authority import read_authority, write_authority
    from grpo_power.analysis.evaluate import evaluate_folder
    from grpo_power.control.env import deployment_cap_w
    from grpo_power.control.ppo import PPOController, train_controller
    from grpo_power.control.rollout import evaluate_deployment
    from grpo_power.sim.calibration import calibration_for
    from grpo_power.sim.grpo_sim import sweep_deployment

    out = Path(out)
    calibration = calibration_for(config, calibration_path)
    names = [config.sim.deployment(n).name for n in deployments or []] or [
        d.name for d in config.sim.deployments
    ]
    arms = list(config.evaluate.arms)
    folders = {name: {"ppo": Path(controllers) / name} for name in names}
    scenario = {}
    for name in names:
        cap = cap_w if cap_w is not None else deployment_cap_w(config, name)
        if "ppo" in arms:
            meta = PPOController.load(folders[name]["ppo"], name).meta
            scenario[name] = (
                meta["calibration_digest"] != calibration.digest() or meta["cap_w"] != cap
            )
        else:
            scenario[name] = False
    to_retrain = [n for n in names if retrain or (retrain is None and scenario[n])]
    if to_retrain:
        if authority_path is not None:
            read_authority(authority_path)  # the study's table must exist (clear error)
        rows = []
        for name in to_retrain:
            rows += sweep_deployment(calibration, name, config, config.seed)
        reference = config.authority.reference
        table = write_authority(
            pd.DataFrame(rows),
            config.authority.threshold,
            reference if reference in to_retrain else to_retrain[0],
            config.controller.reward.model_dump(),
            out / "authority",
        )
        for name in to_retrain:
            folders[name]["ppo-retrained"] = ResultsLayout(out).controller(name)
            log(f"retraining the {name} controller in the scenario (SIMULATED)")
            train_controller(
                config,
                calibration,
                name,
                table.to_dict(orient="records"),
                folders[name]["ppo-retrained"],
                cap_w,
            )
    for name in names:
        arms_here = arms + (["ppo-retrained"] if name in to_retrain else [])
        log(f"evaluating {len(arms_here)} arms on {name} ({len(config.evaluate.seeds)} seeds)")
        evaluate_deployment(config, calibration, name, out / name, arms_here, folders[name], cap_w)
    return evaluate_folder(
        out, names, config.evaluate.exceedance_window_s, config.evaluate.confidence
    )
