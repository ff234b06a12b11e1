"""Commands that run GRPO: ``run``, ``calibrate`` (the fixed-safe arm) and ``sweep`` (the
real-workload actuator sweep), directly or as submitit job arrays."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from grpo_power.cli.base import (
    ConfigOption,
    app,
    check_numbers,
    config_from,
    user_errors,
)
from grpo_power.config import (
    DEFAULT_CONFIG_PATH,
    ArmName,
    Config,
    LauncherName,
    write_resolved_config,
)
from grpo_power.layout import ResultsLayout


def _fresh_spec(
    cfg: Config, config_file: Path, arm: str, seed: int, out: Path, steps: int, label: str
) -> Any:
    """The batch spec of a measurement run (calibration candidate, sweep run) that is measured
    anew: its folder is cleared unless a live job of this batch still writes it, or completed it
    while no workflow waited (a restart)."""
    from grpo_power.launch.batch import live_job, run_spec, uncollected

    spec = run_spec(cfg, config_file, arm, seed, out, steps, label)
    if live_job(out) is None and not uncollected(spec):
        _clear(out)
    return spec


def _clear(folder: Path) -> None:
    """Clear a run folder under its lock: refused, naming it, while an attempt writes the run."""
    from grpo_power.workload.lock import RunLock
    from grpo_power.workload.resume import RunPaths

    with RunLock(folder):
        RunPaths(folder).clear()


def _submit(cfg: Config, specs: list[Any], jobs_folder: Path, what: str) -> list[dict[str, Any]]:
    """Submit a batch of runs (one job array, named ``grpo-power-SIZE-WHAT``) and wait;
    an interrupt exits with code 75."""
    from grpo_power.launch.batch import RunsInterrupted, submit_batch
    from grpo_power.workload.resume import EXIT_INTERRUPTED

    try:
        name = f"grpo-power-{cfg.workload.size}-{what}"
        return submit_batch(cfg, specs, jobs_folder, name, log=typer.echo)
    except RunsInterrupted as stop:
        typer.echo(str(stop), err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


@app.command("calibrate")
@user_errors
def calibrate(
    size: Annotated[
        str | None, typer.Option("--size", help="Model preset (default: config).")
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 1: calibrate the fixed-safe arm (highest concurrency whose p99 power < cap)."""
    from grpo_power.workload.fixed_safe import calibrate_fixed_safe

    cfg = config_from(config, {"--size": ("workload.size", size)})
    folder = cfg.layout.calibration(cfg.workload.size)
    run_candidates = None
    if cfg.launch.launcher == "submitit":  # on a cluster the candidates are one job array

        def run_candidates(candidates: list[tuple[int, Path]]) -> None:
            steps = cfg.arms.fixed_safe.calibration_steps
            specs = []
            for concurrency, run_folder in candidates:
                candidate = cfg.model_copy(deep=True)
                candidate.workload.concurrency = concurrency
                label = f"{cfg.workload.size}/calibration/concurrency-{concurrency}"
                spec = _fresh_spec(candidate, config, "fixed", cfg.seed, run_folder, steps, label)
                specs.append(spec)
            _submit(cfg, specs, folder / "submitit", "calibration")

    result = calibrate_fixed_safe(cfg, folder, sys.stderr.isatty(), run_candidates)
    label = " (SIMULATED power)" if result["simulated_power"] else ""
    typer.echo(
        f"fixed-safe concurrency for {cfg.workload.size}: {result['concurrency']}"
        f"{'' if result['under_cap'] else ' (no candidate stayed under the cap: the lowest)'}"
        f"{label} -> {cfg.layout.fixed_safe(cfg.workload.size)}"
    )


@app.command("run", context_settings={"allow_extra_args": False})
@user_errors
def run(
    arm: Annotated[ArmName, typer.Option("--arm", help="The arm: which controller, if any.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder (trace, steps, manifest).")],
    size: Annotated[
        str | None, typer.Option("--size", help="Model preset (default: config).")
    ] = None,
    seeds: Annotated[
        list[int] | None,
        typer.Option(
            "--seed",
            help="Seed (default: config); repeat it for several runs, with {seed} in --out.",
        ),
    ] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="Steps (default: config).")] = None,
    launcher: Annotated[
        LauncherName | None,
        typer.Option("--launcher", help="In this process, or as a job (default: config)."),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="The fixed arm's concurrency (config).")
    ] = None,
    max_new_tokens: Annotated[
        int | None, typer.Option("--max-new-tokens", help="The fixed arm's max new tokens.")
    ] = None,
    train_micro_batch: Annotated[
        int | None,
        typer.Option(
            "--train-micro-batch",
            help="Sequences per training forward/backward chunk, the fixed arm's (config).",
        ),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh", help="Discard an unfinished or other run in --out instead of resuming it."
        ),
    ] = False,
    replace_other: Annotated[
        bool,
        typer.Option(
            "--replace-other",
            help="Discard a run of other settings in --out (a note says what differed) instead "
            "of refusing it; the same run still resumes. The workflow's run rule passes it: its "
            "folders are its outputs.",
        ),
    ] = False,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 1: one GRPO run (size x arm x seed) with power telemetry, step log and manifest.

    A run stopped by SIGTERM, SIGUSR1 or SIGUSR2 saves a checkpoint at the end of its step and
    exits with code 75; the same command resumes it, as it does after a kill (from the last
    checkpoint, every `workload.checkpoint_every_steps` steps).
    """
    from grpo_power.workload.distributed import (
        process_ranks,
        relaunch_needed,
        relaunch_with_accelerate,
        run_passing_stops,
    )

    check_numbers(
        {
            "--steps": steps,
            "--concurrency": concurrency,
            "--max-new-tokens": max_new_tokens,
            "--train-micro-batch": train_micro_batch,
            "--seed": seeds,
        }
    )
    cfg = config_from(
        config,
        {
            "--size": ("workload.size", size),
            "--steps": ("workload.steps", steps),
            "--concurrency": ("workload.concurrency", concurrency),
            "--max-new-tokens": ("workload.max_new_tokens", max_new_tokens),
            "--train-micro-batch": ("workload.train_micro_batch", train_micro_batch),
            "--launcher": ("launch.launcher", launcher),
        },
    )
    seeds = seeds or [cfg.seed]
    if len(seeds) > 1 and "{seed}" not in str(out):
        raise typer.BadParameter("several --seed values need {seed} in --out", param_hint="--out")
    outs = [Path(str(out).replace("{seed}", str(s))) for s in seeds]
    if cfg.launch.launcher == "submitit":
        from grpo_power.launch.batch import run_spec

        if fresh:
            for folder in outs:
                _clear(folder)
        specs = [
            run_spec(cfg, config, arm, s, o, replace_other=replace_other)
            for s, o in zip(seeds, outs, strict=True)
        ]
        # one run: its submitit folder is in the run folder; an array: beside the run folders
        jobs = outs[0] / "submitit" if len(outs) == 1 else outs[0].parent / f"submitit-{arm}"
        manifests = _submit(cfg, specs, jobs, arm)
        for spec, manifest in zip(specs, manifests, strict=True):
            typer.echo(f"run {spec.label}: {manifest['status']} -> {spec.folder}")
        return
    if len(seeds) > 1:  # one after another, each as its own `grpo-power run`
        given = {"--size": size, "--steps": steps, "--concurrency": concurrency}
        given["--max-new-tokens"] = max_new_tokens
        given["--train-micro-batch"] = train_micro_batch
        options = [str(arg) for name, v in given.items() if v is not None for arg in (name, v)]
        for k, (s, folder) in enumerate(zip(seeds, outs, strict=True)):
            command = [sys.executable, "-m", "grpo_power.cli", "run", "--arm", arm]
            command += [*options, *(["--fresh"] if fresh else [])]
            command += [*(["--replace-other"] if replace_other else []), "--launcher", "direct"]
            command += ["--seed", str(s), "--out", str(folder), "--config", str(config)]
            # a stop signal to this command reaches the seed running: it checkpoints, exits 75
            child = run_passing_stops(command)
            if child.returncode != 0:
                raise typer.Exit(child.returncode)
            if child.stopped_by is not None and k + 1 < len(seeds):  # it came as seed s ended
                from grpo_power.workload.resume import EXIT_INTERRUPTED

                typer.echo(
                    f"run {cfg.workload.size}/{arm}: stopped by {child.stopped_by} as seed {s} "
                    f"completed; run the same command to go on with seed {seeds[k + 1]}",
                    err=True,
                )
                raise typer.Exit(EXIT_INTERRUPTED)
        return
    seed, out = seeds[0], outs[0]
    run_size = cfg.run_size(cfg.workload.size)
    if relaunch_needed(run_size):
        raise typer.Exit(relaunch_with_accelerate(run_size, sys.argv[1:], out))

    from grpo_power.workload.arms import controller_for_arm
    from grpo_power.workload.runner import run_grpo

    controller = controller_for_arm(arm, cfg, cfg.layout.calibration(cfg.workload.size))
    result = run_grpo(
        cfg,
        arm,
        seed,
        out,
        controller,
        show_progress=sys.stderr.isatty(),
        fresh=fresh,
        replace_other=replace_other,
    )
    if process_ranks()[0] != 0:
        return
    label = f"run {cfg.workload.size}/{arm}/seed{seed}"
    if result.status == "interrupted":
        from grpo_power.workload.resume import EXIT_INTERRUPTED

        typer.echo(
            f"{label}: stopped by {result.stopped_by} after step {result.steps}, checkpoint "
            f"saved; run the same command to resume -> {out}",
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED)
    typer.echo(
        f"{label}: {result.steps} steps, {result.completion_tokens} completion tokens in "
        f"{result.wall_s:.1f} s -> {out}"
    )


@app.command("sweep")
@user_errors
def sweep(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (one run each).")],
    steps: Annotated[
        int | None, typer.Option("--steps", help="Steps per run (default: config).")
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 2a: the real-workload actuator sweep (GRPO runs at each actuator's bounds) for
    `identify --sweep`; on a cluster (launch.launcher: submitit) one GPU job array."""
    from grpo_power.workload.sweep import run_sweep

    check_numbers({"--steps": steps})
    cfg = config_from(config)
    steps = cfg.authority.real_sweep_steps if steps is None else steps
    if steps < 1:
        raise ValueError(f"{config}: authority.real_sweep_steps: expected >= 1 for a sweep, got 0")
    run_all = None
    if cfg.launch.launcher == "submitit":

        def run_all(runs: list[tuple[str, int, Config, Path]]) -> None:
            specs = []
            for actuator, level, run_config, folder in runs:
                run_file = write_resolved_config(run_config, ResultsLayout(out).configs)
                label = f"{cfg.workload.size}/sweep/{actuator}-{level}"
                spec = _fresh_spec(run_config, run_file, "fixed", cfg.seed, folder, steps, label)
                specs.append(spec)
            _submit(cfg, specs, out / "submitit", "sweep")

    folders = run_sweep(cfg, out, steps, cfg.seed, run_all)
    typer.echo(f"sweep: {len(folders)} runs of {steps} steps -> {out}/sweep.json")
