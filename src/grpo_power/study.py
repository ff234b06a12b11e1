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

import numpy as np
import pandas as pd

from grpo_power.config import Config
from grpo_power.layout import (
    CONTROLLER_ARMS,
    FIT_RESIDUALS,
    IDENTIFY,
    RUN,
    ResultsLayout,
    controller_in,
)

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
            read instead of running one here. Each run folder enters the fit once, also one the
            sweep names for two actuators (the default level of both) or one given in ``runs``.

    Raises:
        ValueError: a folder given twice in ``runs``.
    """
    from grpo_power.analysis.authority import write_authority
    from grpo_power.atomic import write_csv_atomic
    from grpo_power.sim.calibration import calibration_for, save_calibration
    from grpo_power.sim.fit import fit_from_runs
    from grpo_power.sim.grpo_sim import sweep_deployment
    from grpo_power.sim.step_model import physics_for

    out = Path(out)
    calibration = calibration_for(config, calibration_path)
    fitted_from = [Path(f).resolve() for f in runs or []]
    twice = sorted({f for f in fitted_from if fitted_from.count(f) > 1})
    if twice:
        raise ValueError(f"--run: {twice[0]} given twice; expected each run folder once")
    data = [_run_data(f) for f in fitted_from]  # read first: a bad folder fails at once
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
            if folder.resolve() not in fitted_from:
                fitted_from.append(folder.resolve())
                data.append(_run_data(folder))
    if data:
        from grpo_power.control.policy import deployment_for_size

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
            physics_for(calibration, prior_name, config).model.steady_power_w,
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
    arm: str = "ppo",
) -> Any:
    """Train one deployment's PPO controller of ``arm`` (``ppo``, or ``ppo+hwcap`` under the
    tuned GPU power limit) into ``out`` (returns the ``TrainResult``)."""
    from grpo_power.analysis.authority import read_authority
    from grpo_power.control.env import ControlSpace
    from grpo_power.control.ppo import train_controller
    from grpo_power.sim.calibration import calibration_for

    config.sim.deployment(deployment)  # a clear error for an unknown name
    calibration = calibration_for(config, calibration_path)
    rows = read_authority(authority_path)
    try:  # the table's space, before the hardware tier is tuned or anything is trained
        ControlSpace.from_authority(rows, deployment, config.workload)
    except ValueError as error:
        raise ValueError(f"{authority_path}: {error}") from None
    return train_controller(
        config,
        calibration,
        deployment,
        rows,
        out,
        cap_w=cap_w,
        total_timesteps=timesteps,
        hardware_tier=arm == "ppo+hwcap",
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
    schedule: list[Any] | None = None,
    changing: bool = False,
) -> Any:
    """Run every arm on every deployment and write the evaluation into ``out``.

    The study's trained controllers (``controllers/<deployment>``, and
    ``controllers/<deployment>+hwcap`` for ``ppo+hwcap``) run as they are. When the evaluation
    is a scenario for a controller (a calibration other than the one it was trained on, or
    another cap) and ``retrain`` is not False, or when ``retrain`` is True, the ``ppo`` one is
    also retrained there (arm ``ppo-retrained``) on an authority table measured in the scenario
    (``out/authority``), and both are reported.

    Args:
        controllers: folder of the study's trained controllers.
        calibration_path: the calibration to evaluate on (default: ``sim.calibration``).
        cap_w: a cap for every deployment evaluated, W (default: each deployment's).
        deployments: deployments to evaluate (default: all).
        retrain: force (True) or forbid (False) retraining; None: retrain in scenarios.
        authority_path: the study's authority table (its existence is checked when retraining).
        schedule: the scenario's schedule segments (None: constant conditions).
        changing: the scenario changes the workload or the cap (its ppo target is 110 %).
    Returns the :class:`~grpo_power.analysis.evaluate.EvaluationResult`.
    """
    from grpo_power.analysis.authority import read_authority, write_authority
    from grpo_power.analysis.evaluate import evaluate_folder
    from grpo_power.control.policy import PPOController
    from grpo_power.control.ppo import train_controller
    from grpo_power.control.rollout import evaluate_deployment
    from grpo_power.sim.calibration import calibration_for
    from grpo_power.sim.grpo_sim import sweep_deployment

    out = Path(out)
    calibration = calibration_for(config, calibration_path)
    names = [config.sim.deployment(n).name for n in deployments or []] or [
        d.name for d in config.sim.deployments
    ]
    arms = list(config.evaluate.arms)
    trained = [arm for arm in CONTROLLER_ARMS if arm in arms]
    folders = {
        name: {arm: controller_in(controllers, name, arm) for arm in trained} for name in names
    }
    scenario = {}
    for name in names:
        cap = cap_w if cap_w is not None else config.deployment_cap_w(name)
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
        evaluate_deployment(
            config, calibration, name, out / name, arms_here, folders[name], cap_w, None, schedule
        )
    return evaluate_folder(
        out,
        names,
        config.evaluate.exceedance_window_s,
        config.evaluate.confidence,
        config.objective,
        changing,
    )


def _trace_run(path: Path, config: Config) -> Any:
    """A trace for the decode fit: its samples with concurrency (from the trace, else from the
    step log beside it), its label, and its metadata; a trace of another GPU is refused."""
    from grpo_power.sim.trace_fit import TraceRun
    from grpo_power.telemetry.steplog import decode_columns, read_step_log
    from grpo_power.telemetry.store import read_trace

    trace = read_trace(path)
    meta = trace.metadata
    if abs(meta.nameplate_w - config.gpu.nameplate_w) > 1e-9:
        raise ValueError(
            f"{path}: nameplate_w: expected {config.gpu.nameplate_w:g} W (the config's "
            f"{config.gpu.name}), got {meta.nameplate_w:g} W ({meta.gpu_name}): a trace of "
            "another GPU; set gpu.name (and gpu.nameplate_w) to its GPU"
        )
    if meta.gpu_name and meta.gpu_name != config.gpu.name:
        raise ValueError(
            f"{path}: gpu_name: expected {config.gpu.name!r} (the config's gpu.name), got "
            f"{meta.gpu_name!r}: a trace of another GPU; set gpu.name to its GPU"
        )
    frame = trace.frame[["t", "power_w", "concurrency", "tokens_per_s", "sm_util"]].copy()
    steps_path = path.parent / RUN.steps
    if frame["concurrency"].isna().all() and steps_path.exists():
        frame["concurrency"], frame["tokens_per_s"] = decode_columns(
            frame["t"].to_numpy(float), read_step_log(steps_path)
        )
    if frame["concurrency"].isna().all():
        raise ValueError(
            f"{path}: concurrency: expected per-sample concurrency (import the power log with "
            f"--engine ENGINE.csv, or keep the run's {RUN.steps} beside it), got none"
        )
    extra = meta.model_extra or {}
    if meta.simulated or meta.source == "simulated":
        label = "simulated"
    else:
        label = "measured (public trace)" if extra.get("origin") else "measured"
    run = TraceRun(meta.run_id, frame, label)
    engine = extra.get("engine_alignment") or {}
    return run, {
        "run_id": meta.run_id,
        "path": str(path),
        "label": label,
        "origin": extra.get("origin"),
        "gpu_name": meta.gpu_name,
        "samples": len(frame),
        "sample_period_s": meta.sample_period_s,
        "start_unix_s": meta.start_unix_s,
        # the engine metrics' period where concurrency came from them (their match tolerance)
        "engine_period_s": engine.get("tolerance_s"),
    }


def _distinct_run_ids(runs: list[Any], paths: list[Path]) -> list[Any]:
    """``runs`` ((TraceRun, info) pairs), a run id that several of them share (runs of other
    settings under one name: ``grpo-power run --concurrency C`` keeps ``SIZE-ARM-seedN``)
    followed by its run folder's name in each, so the tables tell them apart."""
    from dataclasses import replace

    ids = [info["run_id"] for _, info in runs]
    out = []
    for (run, info), path in zip(runs, paths, strict=True):
        if ids.count(info["run_id"]) > 1:
            run_id = f"{info['run_id']} ({path.resolve().parent.name})"
            run, info = replace(run, run_id=run_id), {**info, "run_id": run_id}
        out.append((run, info))
    return out


# Engine metrics scraped less often than this give a fit that is biased without a sign of it
COARSE_ENGINE_PERIOD_S = 1.0


def _coarse_engine_notes(infos: list[dict[str, Any]]) -> list[str]:
    """A note per trace whose concurrency came from engine metrics scraped more coarsely than
    :data:`COARSE_ENGINE_PERIOD_S` and than twice its power samples' period (a Prometheus scrape
    every 5-15 s): each power sample takes the concurrency of a scrape up to half a period
    away, so the changes between scrapes are misattributed and the fitted lines flattened."""
    notes = []
    for info in infos:
        engine_s, power_s = info["engine_period_s"], info["sample_period_s"]
        if engine_s is None or engine_s <= max(COARSE_ENGINE_PERIOD_S, 2 * power_s):
            continue
        notes.append(
            f"{info['path']}: concurrency comes from engine metrics every {engine_s:.3g} s, "
            f"power every {power_s:.3g} s: a power sample takes the concurrency of a scrape up "
            f"to {engine_s / 2:.3g} s away, so changes of concurrency between scrapes are "
            "misattributed and the fitted lines are flattened (biased toward no slope); "
            f"scrape the engine at {COARSE_ENGINE_PERIOD_S:g} s or less (its power log's "
            "period is best) for a fit"
        )
    return notes


def identify_traces(
    config: Config, traces: list[Path], validate: list[Path], out: Path
) -> dict[str, Any]:
    """``grpo-power identify --trace``: the decode power model fitted to ``traces``, validated
    on them and on the held-out ``validate`` traces; writes ``out`` (layout ``TRACE_FIT``) at
    once or not at all.

    Returns:
        the fit (``trace_fit.json``'s content) with the held-out error; its ``data`` names
        every label of the traces (``", "``-separated, as the report reads it).

    Raises:
        ValueError: a run given twice; fit traces without enough decode samples at enough
            concurrency levels (naming the ``--trace`` files); a held-out trace without decode
            samples (naming it).
    """
    from grpo_power.atomic import write_csv_atomic, write_json_atomic
    from grpo_power.config.gpu_models import GPU_MODELS
    from grpo_power.layout import TRACE_FIT
    from grpo_power.sim.defaults import literature_decode_prior
    from grpo_power.sim.trace_fit import (
        concurrency_bin,
        fit_decode_power,
        held_out_error,
        validation_rows,
    )

    given = [("--trace", Path(p)) for p in traces] + [("--validate", Path(p)) for p in validate]
    runs = [_trace_run(path, config) for _, path in given]
    seen: dict[object, str] = {}
    for (option, path), (_, info) in zip(given, runs, strict=True):
        # one run: one file, or one run id started at one time (a run's own trace and an
        # import of its log are the same run)
        for key in (path.resolve(), (info["run_id"], info["start_unix_s"])):
            if key in seen:
                raise ValueError(
                    f"{path}: {option}: the run {info['run_id']!r} is given twice (also as "
                    f"{seen[key]}); expected each run once, a held-out run not one the model is "
                    "fitted to (import runs of the same name with distinct --run-id)"
                )
            seen[key] = f"{option} {path}"
    runs = _distinct_run_ids(runs, [path for _, path in given])
    fit_runs, held_runs = runs[: len(traces)], runs[len(traces) :]
    for (option, path), (run, _) in zip(given[len(traces) :], held_runs, strict=True):
        c = run.frame["concurrency"]
        if not (c >= 1).any():
            raise ValueError(
                f"{path}: concurrency: expected decode samples (concurrency >= 1) in a {option} "
                f"trace to validate the fit on, got none ({len(c)} samples: {int((c == 0).sum())} "
                "at concurrency 0, the rest unknown)"
            )
    # the part's idle range where the simulator knows the part; a part the config describes
    # itself has its idle_w alone
    model = GPU_MODELS.get(config.gpu.name)
    idle_low_w, idle_high_w = model.idle_range_w if model else (config.gpu.idle_w,) * 2
    prior = literature_decode_prior(config)
    prior["idle_w"] = {"value": config.gpu.idle_w, "low": idle_low_w, "high": idle_high_w}
    fit = fit_decode_power(
        [r for r, _ in fit_runs],
        config.gpu.nameplate_w,
        prior,
        where=", ".join(str(path) for _, path in given[: len(traces)]),
    )
    table = pd.concat(
        [validation_rows(fit, [r for r, _ in fit_runs], "fit")]
        + ([validation_rows(fit, [r for r, _ in held_runs], "held-out")] if held_runs else []),
        ignore_index=True,
    )
    fit["held_out_error"] = held_out_error(table)
    fit["fit_runs"] = [info for _, info in fit_runs]
    fit["held_out_runs"] = [info for _, info in held_runs]
    fit["notes"] = _coarse_engine_notes([info for _, info in fit_runs + held_runs])
    fit["gpu_name"] = config.gpu.name
    fit["data"] = ", ".join(sorted({info["label"] for _, info in fit_runs + held_runs}))
    run_labels = {info["run_id"]: info["label"] for _, info in fit_runs + held_runs}
    table.insert(2, "data", [run_labels.get(r, fit["data"]) for r in table["run_id"]])
    points = []
    for (run, info), split in [(r, "fit") for r in fit_runs] + [(r, "held-out") for r in held_runs]:
        decode = run.frame[run.frame["concurrency"].notna()]
        for c, part in decode.groupby("concurrency"):
            points.append(
                {
                    "split": split,
                    "run_id": run.run_id,
                    "data": info["label"],
                    "concurrency": c,
                    "bin": float(concurrency_bin(np.array([c]))[0]),
                    "samples": len(part),
                    "mean_power_w": part["power_w"].mean(),
                    "p95_power_w": part["power_w"].quantile(0.95),
                }
            )

    # everything is computed before the first file is written; each file is written atomically
    write_json_atomic(out / TRACE_FIT.fit, fit)
    write_csv_atomic(out / TRACE_FIT.validation, table)
    write_csv_atomic(out / TRACE_FIT.points, pd.DataFrame(points))
    return fit
