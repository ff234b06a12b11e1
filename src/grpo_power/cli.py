"""The ``grpo-power`` command line: one subcommand per stage.

Each subcommand loads the config through :func:`grpo_power.config.load_config`, calls one
package, and turns expected errors (bad config, bad input file, missing hardware) into a message
on stderr and a non-zero exit, never a traceback.

``--config`` defaults to ``config/config.yaml`` in the working folder when it exists, else to the
packaged default (the same file, shipped in the package; a note on stderr says so). A ``--config``
given explicitly must exist.

Exit codes (the same through ``grpo-power``, ``python -m grpo_power.cli`` and ``CliRunner``):

====  =========================================================================================
0     success; also ``--help`` and ``--version``
2     data or config error: bad config or option value, bad or missing input file, a path that
      cannot be read or written (any ``OSError``), a number out of range, telemetry
      unavailable (one line ``error: ...`` on stderr, one per bad field of a config file,
      never a traceback; see :func:`user_errors`)
3     a submitted run job (submitit / Slurm) failed (``JobFailed``; its id, state, stderr tail)
64    usage error (sysexits EX_USAGE): unknown option or command, invalid choice, missing
      argument or option; also a command group given no arguments (it prints its help)
75    a run stopped by SIGTERM, SIGUSR1 or SIGUSR2 with its checkpoint saved (EX_TEMPFAIL);
      the same command resumes it
130   interrupted (Ctrl-C) or aborted
====  =========================================================================================

``telemetry record`` exits with the recorded command's own exit code when the recording itself
succeeded.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer
from typer.core import TyperGroup

from grpo_power import __version__
from grpo_power.config import (
    DEFAULT_CONFIG_PATH,
    ArmName,
    Config,
    ConfigError,
    LauncherName,
    TelemetrySource,
    default_config_path,
    load_config,
    packaged_config_path,
    validate_option,
    validate_setting,
    write_resolved_config,
)

try:  # typer >= 0.2x carries its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - typer on top of the click package
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

EXIT_DATA = 2  # a bad config or input file, missing hardware (the `user_errors` path)
EXIT_JOB_FAILED = 3  # a submitted run job failed
EXIT_USAGE = 64  # sysexits EX_USAGE: the command line itself is wrong
EXIT_ABORTED = 130  # Ctrl-C, or an aborted prompt
# EXIT_INTERRUPTED = 75 (EX_TEMPFAIL) lives in grpo_power.workload.resume.

# Log formats of `telemetry import` (grpo_power.telemetry.importers.ImportFormat; not imported
# from there because that module loads pandas, and every command line would pay for it).
ImportFormat = Literal["nvidia-smi", "dcgm"]


def _leave_file_checks_to_the_commands(command: Any) -> None:
    """Path parameters check nothing while the command line is parsed (typer's default asks
    click to check that an existing path is readable): an unreadable file is then the command's
    own data error, one line and exit 2 like a missing one, never a usage error."""
    for param in command.params:
        # typer >= 0.2x keeps the check in the parameter's info, older typers in click's type
        info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
        for holder in (info, getattr(param, "type", None)):
            if hasattr(holder, "readable"):
                holder.readable = False
    for sub in getattr(command, "commands", {}).values():
        _leave_file_checks_to_the_commands(sub)


class ExitCodeGroup(TyperGroup):
    """The top-level command: runs the app with ``standalone_mode=False`` and maps the outcome to
    the exit codes of the module docstring (click's own default for usage errors is 2, which this
    command line keeps for data errors).

    It lives on the group, not only in :func:`main`, so that in-process runs (``CliRunner``, the
    tests) see the same exit codes as ``grpo-power`` and ``python -m grpo_power.cli``.
    """

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        _leave_file_checks_to_the_commands(self)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            # Returns the exit code of a typer.Exit (ctx.exit for --help / --version: 0).
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click_exceptions.UsageError as error:  # BadParameter, MissingParameter, ...
            error.show()
            sys.exit(EXIT_USAGE)
        except click_exceptions.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(EXIT_ABORTED)
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(
    name="grpo-power",
    cls=ExitCodeGroup,
    help="Measure, cap and provision the GPU power of GRPO post-training runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
telemetry_app = typer.Typer(
    help="Record, import and summarise GPU power traces.", no_args_is_help=True
)
app.add_typer(telemetry_app, name="telemetry")
controller_app = typer.Typer(
    help="Train the PPO meta-controller in the simulator.", no_args_is_help=True
)
app.add_typer(controller_app, name="controller")


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"grpo-power {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_show_version, is_eager=True
        ),
    ] = False,
) -> None:
    pass


def _config_default(ctx: typer.Context, param: typer.CallbackParam, value: Path) -> Path:
    """``--config`` not given: ``config/config.yaml`` here when it exists, else the packaged
    default, with a note on stderr. A path given explicitly is kept (a missing one is an error)."""
    source = ctx.get_parameter_source(param.name or "config")
    if ctx.resilient_parsing or getattr(source, "name", None) != "DEFAULT":
        return value
    path = default_config_path()
    if path == packaged_config_path():
        typer.echo(
            f"note: no {DEFAULT_CONFIG_PATH} in {Path.cwd()}: using the packaged default config "
            f"{path}",
            err=True,
        )
    return path


ConfigOption = Annotated[
    Path,
    typer.Option(
        "--config",
        "-c",
        help="Config file, validated against the schema (no config/config.yaml here: the "
        "packaged default).",
        callback=_config_default,
    ),
]
F = TypeVar("F", bound=Callable[..., Any])
# Commands whose --out is a file (the others write a folder).
FILE_OUTPUT_COMMANDS = {"telemetry_import", "telemetry_record"}


def user_errors(func: F) -> F:
    """Report expected errors as one clear message: exit code 2, or 3 for a failed job.

    The one place where errors that user input causes become ``error: ...`` (one line per
    problem, never a traceback): bad config or option values, bad input files, and any
    ``OSError`` (a folder given as a file, permission denied, disk full, ...) or
    ``OverflowError``. An ``--out`` that cannot be written (a file where a folder is written,
    a folder where a file is, a file among its parents) is refused before any work is done.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from grpo_power.launch.submit import JobFailed
        from grpo_power.telemetry.source import TelemetryUnavailable
        from grpo_power.user_paths import os_error_message, output_problem

        try:
            if kwargs.get("out") is not None:
                kind = "file" if func.__name__ in FILE_OUTPUT_COMMANDS else "folder"
                problem = output_problem(kwargs["out"], kind)
                if problem:
                    raise ValueError(problem)
            return func(*args, **kwargs)
        except JobFailed as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(EXIT_JOB_FAILED) from None
        except (ConfigError, ValueError, TelemetryUnavailable) as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(EXIT_DATA) from None
        except OSError as error:  # FileNotFoundError too: its message, or the path and reason
            typer.echo(f"error: {os_error_message(error)}", err=True)
            raise typer.Exit(EXIT_DATA) from None
        except (OverflowError, RecursionError) as error:
            typer.echo(f"error: a value is out of range ({' '.join(str(error).split())})", err=True)
            raise typer.Exit(EXIT_DATA) from None

    return wrapper  # type: ignore[return-value]


# Numeric options and the config field whose type (finite, range) each has, with its unit.
OPTION_FIELDS: dict[str, tuple[str, str]] = {
    "--cap-w": ("cap_w", "watts"),
    "--nameplate-w": ("gpu.nameplate_w", "watts"),
    "--period": ("telemetry.period_s", "seconds"),
    "--steps": ("workload.steps", "steps"),
    "--concurrency": ("workload.concurrency", "sequences"),
    "--max-new-tokens": ("workload.max_new_tokens", "tokens"),
    "--seed": ("seed", "a seed"),
    "--timesteps": ("controller.total_timesteps", "steps"),
    "--real-sweep-steps": ("authority.real_sweep_steps", "steps"),
}


def _numbers(values: dict[str, Any], cfg: Config | None = None, where: Path | None = None) -> None:
    """Validate numeric options through the config's own types (and, given the config, the
    checks between its fields: a cap above idle and at most the nameplate); ``where`` is the
    input file the options are for, named first in the message."""
    for option, value in values.items():
        if value is None:
            continue
        dotted, unit = OPTION_FIELDS[option]
        for one in value if isinstance(value, list) else [value]:
            try:
                validate_option(option, dotted, one, unit)
                if cfg is not None:
                    validate_setting(cfg, option, dotted, one)
            except ConfigError as error:
                raise ConfigError(f"{where}: {error}" if where else str(error)) from None


def _notes(notes: list[str]) -> None:
    """What a reader inferred or repaired (metadata from the config, gaps, ...), on stderr."""
    for note in notes:
        typer.echo(f"note: {note}", err=True)


SplitOption = Annotated[
    bool,
    typer.Option(
        "--split-on-clock-jumps",
        help="Where t repeats or steps back (a clock stepped back, logs concatenated), split "
        "into segments instead of refusing the trace.",
    ),
]


def _config(path: Path, overrides: dict[str, Any] | None = None) -> Config:
    return load_config(path, overrides)


def _fresh_spec(
    cfg: Config, config_file: Path, arm: str, seed: int, out: Path, steps: int, label: str
) -> Any:
    """The batch spec of a measurement run (calibration candidate, sweep run) that is measured
    anew: its folder is cleared unless a live job of this batch still writes it (a restart)."""
    from grpo_power.launch.batch import live_job, run_spec
    from grpo_power.workload.resume import RunPaths

    if live_job(out) is None:
        RunPaths(out).clear()
    return run_spec(cfg, config_file, arm, seed, out, steps, label)


def _submit(cfg: Config, specs: list[Any], jobs_folder: Path, what: str) -> list[dict[str, Any]]:
    """Submit a batch of runs (one job array, named ``grpo-power-<size>-<what>``) and wait;
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

    cfg = _config(config, {"workload": {"size": size}} if size else None)
    folder = cfg.results_dir / "calibration" / cfg.workload.size
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
        f"{label} -> {folder / 'fixed_safe.json'}"
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
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh", help="Discard an unfinished or other run in --out instead of resuming it."
        ),
    ] = False,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 1: one GRPO run (size x arm x seed) with power telemetry, step log and manifest.

    A run stopped by SIGTERM, SIGUSR1 or SIGUSR2 saves a checkpoint at the end of its step and
    exits with code 75; the same command resumes it, as it does after a kill (from the last
    checkpoint, every `workload.checkpoint_every_steps` steps).
    """
    from grpo_power.workload.distributed import relaunch_needed, relaunch_with_accelerate

    _numbers(
        {
            "--steps": steps,
            "--concurrency": concurrency,
            "--max-new-tokens": max_new_tokens,
            "--seed": seeds,
        }
    )
    overrides: dict[str, Any] = {"workload": {}}
    if size is not None:
        overrides["workload"]["size"] = size
    if steps is not None:
        overrides["workload"]["steps"] = steps
    if concurrency is not None:
        overrides["workload"]["concurrency"] = concurrency
    if max_new_tokens is not None:
        overrides["workload"]["max_new_tokens"] = max_new_tokens
    if launcher is not None:
        overrides["launch"] = {"launcher": launcher}
    cfg = _config(config, overrides)
    seeds = seeds or [cfg.seed]
    if len(seeds) > 1 and "{seed}" not in str(out):
        raise typer.BadParameter("several --seed values need {seed} in --out", param_hint="--out")
    outs = [Path(str(out).replace("{seed}", str(s))) for s in seeds]
    if cfg.launch.launcher == "submitit":
        from grpo_power.launch.batch import run_spec
        from grpo_power.workload.resume import RunPaths

        if fresh:
            for folder in outs:
                RunPaths(folder).clear()
        specs = [run_spec(cfg, config, arm, s, o) for s, o in zip(seeds, outs, strict=True)]
        # one run: its submitit folder is in the run folder; an array: beside the run folders
        jobs = outs[0] / "submitit" if len(outs) == 1 else outs[0].parent / f"submitit-{arm}"
        manifests = _submit(cfg, specs, jobs, arm)
        for spec, manifest in zip(specs, manifests, strict=True):
            typer.echo(f"run {spec.label}: {manifest['status']} -> {spec.folder}")
        return
    if len(seeds) > 1:  # one after another, each as its own `grpo-power run`
        given = {"--size": size, "--steps": steps, "--concurrency": concurrency}
        given["--max-new-tokens"] = max_new_tokens
        options = [str(arg) for name, v in given.items() if v is not None for arg in (name, v)]
        for s, folder in zip(seeds, outs, strict=True):
            command = [sys.executable, "-m", "grpo_power.cli", "run", "--arm", arm]
            command += [*options, *(["--fresh"] if fresh else []), "--launcher", "direct"]
            command += ["--seed", str(s), "--out", str(folder), "--config", str(config)]
            if (code := subprocess.call(command)) != 0:
                raise typer.Exit(code)
        return
    seed, out = seeds[0], outs[0]
    run_size = cfg.run_size(cfg.workload.size)
    if relaunch_needed(run_size):
        raise typer.Exit(relaunch_with_accelerate(run_size, sys.argv[1:], out))

    from grpo_power.workload.arms import controller_for_arm
    from grpo_power.workload.runner import run_grpo

    controller = controller_for_arm(arm, cfg, cfg.results_dir / "calibration" / cfg.workload.size)
    result = run_grpo(
        cfg, arm, seed, out, controller, show_progress=sys.stderr.isatty(), fresh=fresh
    )
    if int(os.environ.get("RANK", "0")) != 0:
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


@telemetry_app.command(
    "record", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
@user_errors
def telemetry_record(
    command: Annotated[list[str], typer.Argument(help="The command to run, after `--`.")],
    period: Annotated[
        float | None, typer.Option("--period", help="Sampling period, s (default: config).")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Trace file (.parquet).")] = None,
    source: Annotated[
        TelemetrySource | None,
        typer.Option(
            "--source",
            help="Default auto: NVML when there is an NVIDIA GPU, else the simulated A100.",
        ),
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Run a command while recording its GPUs' power; print energy, mean and peak power."""
    from grpo_power.telemetry.record import record_command
    from grpo_power.telemetry.store import read_trace
    from grpo_power.telemetry.summary import summarize_trace, summary_table

    _numbers({"--period": period})
    overrides: dict[str, Any] = {"telemetry": {}}
    if period is not None:
        overrides["telemetry"]["period_s"] = period
    # Any command's GPUs: real ones wherever there are (the config's source is the workload's).
    overrides["telemetry"]["source"] = source or "auto"
    cfg = _config(config, overrides)
    out = out or cfg.results_dir / "telemetry" / f"record-{time.strftime('%Y%m%d-%H%M%S')}.parquet"

    def say_source(opened: Any) -> None:
        if opened.kind == "nvml":
            n = len(opened.gpus)
            reason = f"{n} GPU{'s' if n != 1 else ''}"
        elif cfg.telemetry.source == "auto":
            reason = "no NVIDIA GPU found"
        else:
            reason = "--source simulated"
        typer.echo(f"power source: {opened.kind} ({reason})", err=True)

    recording = record_command(
        command, out, cfg, show_progress=sys.stderr.isatty(), on_source=say_source
    )
    trace = read_trace(recording.trace_path)
    _print_summary(
        trace.metadata.source, recording.trace_path, summary_table(summarize_trace(trace))
    )
    if recording.missed_slots:
        typer.echo(f"note: {recording.missed_slots} sample slot(s) missed (sampler fell behind)")
    if recording.exit_code != 0:
        typer.echo(f"the recorded command exited with {recording.exit_code}", err=True)
    raise typer.Exit(recording.exit_code)


@telemetry_app.command("import")
@user_errors
def telemetry_import(
    log: Annotated[Path, typer.Argument(help="nvidia-smi CSV or DCGM CSV log.")],
    fmt: Annotated[ImportFormat, typer.Option("--format", help="The log's format.")] = "nvidia-smi",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Trace file (.parquet).")] = None,
    nameplate_w: Annotated[
        float | None, typer.Option("--nameplate-w", help="GPU board power, W, if not in the log.")
    ] = None,
    gpu_name: Annotated[str | None, typer.Option("--gpu-name", help="GPU model name.")] = None,
    timezone: Annotated[
        str | None,
        typer.Option(
            "--timezone",
            help="IANA time zone of timestamps without one (nvidia-smi writes local time); "
            "default: the machine's. Recorded in the trace.",
        ),
    ] = None,
    split_on_clock_jumps: SplitOption = False,
) -> None:
    """Convert an nvidia-smi or DCGM log into a trace (source: imported)."""
    from grpo_power.telemetry.importers import ImportError_, import_log
    from grpo_power.telemetry.store import write_trace
    from grpo_power.user_paths import output_problem

    _numbers({"--nameplate-w": nameplate_w}, where=log)
    out = out or log.with_suffix(".parquet")
    problem = output_problem(out, "file")
    if problem:
        raise ValueError(problem)
    try:
        frame, metadata = import_log(
            log,
            fmt,
            nameplate_w=nameplate_w,
            gpu_name=gpu_name,
            timezone=timezone,
            split_on_clock_jumps=split_on_clock_jumps,
        )
    except ImportError_ as error:
        raise ValueError(str(error)) from None
    write_trace(out, frame, metadata)
    typer.echo(f"imported {len(frame)} samples of {frame['gpu'].nunique()} GPU(s) into {out}")
    _notes((metadata.model_extra or {}).get("notes", []))


@telemetry_app.command("summary")
@user_errors
def telemetry_summary(
    trace_file: Annotated[
        Path, typer.Argument(help="A trace (.parquet), or one a killed run left.")
    ],
    compare_energy: Annotated[
        bool, typer.Option("--compare-energy", help="Also compare counter and integrated energy.")
    ] = False,
    split_on_clock_jumps: SplitOption = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="Config whose gpu and telemetry.period_s fill metadata a trace lacks "
            "(default: config/config.yaml here, else the packaged default).",
        ),
    ] = None,
) -> None:
    """Print energy, mean and peak power per GPU of a trace (Parquet, or CSV: t, gpu, power_w)."""
    from grpo_power.telemetry.store import TraceDefaults, read_trace
    from grpo_power.telemetry.summary import check_energy, summarize_trace, summary_table

    config_path = config or default_config_path()
    defaults = TraceDefaults.from_config(_config(config_path), f"the config {config_path}")
    trace = read_trace(trace_file, defaults, split_on_clock_jumps)
    if trace.frame.empty:
        raise ValueError(f"{trace_file}: the trace has no samples; expected at least one")
    _print_summary(trace.metadata.source, trace_file, summary_table(summarize_trace(trace)))
    if compare_energy:
        checks = check_energy(trace)
        if not checks:
            typer.echo("no energy counter in this trace: nothing to compare")
        for c in checks:
            typer.echo(
                f"gpu {c.gpu}: energy from counter {c.counter_j:.1f} J, from integrated power "
                f"{c.integrated_j:.1f} J, difference {c.integrated_j - c.counter_j:+.1f} J "
                f"({c.difference_pct:+.2f} %)"
            )
    if not trace.complete:
        typer.echo("note: read from the journal of a recording that did not finish", err=True)
    _notes(trace.notes)


@app.command("windows")
@user_errors
def windows(
    trace_file: Annotated[
        Path,
        typer.Argument(help="A trace (.parquet, or .csv with t, gpu, power_w) or its journal."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder for this trace.")],
    split_on_clock_jumps: SplitOption = False,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Exceedance of the cap by averaging window, per GPU and per run; energy bins for `fleet`."""
    from grpo_power.analysis.windows import run_windows

    cfg = _config(config)
    result = run_windows(trace_file, out, cfg, split_on_clock_jumps)
    label = " (SIMULATED power)" if result.summary["simulated"] else ""
    typer.echo(f"windows of {trace_file}{label}: cap {cfg.cap_w:g} W per GPU")
    shown = result.exceedance[result.exceedance["scope"] != "gpu"]
    shown = shown[["scope", "window_s", "windows", "windows_over", "exceedance", "peak_mean_w"]]
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if result.summary["gaps"]:
        typer.echo(
            f"note: {result.summary['gaps']} gap(s), {result.summary['gap_s']:.3g} s without "
            f"samples (see {out / 'gaps.csv'})"
        )
    typer.echo(f"wrote {out}/exceedance.csv, gaps.csv, bins.parquet, summary.json")
    _notes(result.summary.get("notes", []))


@app.command("fleet")
@user_errors
def fleet(
    window_outputs: Annotated[
        list[Path],
        typer.Argument(help="Outputs of `grpo-power windows`: folders or their bins.parquet."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Fleet peak vs nameplate, exceedance, oversubscription, scaling study and comparison."""
    from grpo_power.analysis.fleet import run_fleet

    cfg = _config(config)
    result = run_fleet(window_outputs, out, cfg)
    s = result.summary
    label = " (SIMULATED power)" if s["simulated"] else ""
    typer.echo(
        f"fleet of {s['n_gpus']} GPUs from {len(s['run_ids'])} run(s), {s['alignment']}{label}"
    )
    shown = result.fleet[
        ["window_s", "exceedance_mean", "peak_share_mean", "peak_share_p95", "factor"]
    ]
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if s["chosen_window_fits"]:
        typer.echo(
            f"oversubscription factor at {s['window_s']:g} s, margin {s['margin']:g}: "
            f"{s['factor']:.3g}x (no margin, mean peak: {s['factor_no_margin_mean_peak']:.3g}x)"
        )
    else:
        typer.echo(
            f"note: no full {s['window_s']:g} s window in the fleet timeline, so no "
            "oversubscription factor (record longer runs, or set fleet.horizon_s)"
        )
    typer.echo(f"wrote {out}/fleet_windows.csv, scaling.csv, comparison.csv, comparison.md")


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

    _numbers({"--steps": steps})
    cfg = _config(config)
    steps = cfg.authority.real_sweep_steps if steps is None else steps
    if steps < 1:
        raise ValueError(f"{config}: authority.real_sweep_steps: expected >= 1 for a sweep, got 0")
    run_all = None
    if cfg.launch.launcher == "submitit":

        def run_all(runs: list[tuple[str, int, Config, Path]]) -> None:
            specs = []
            for actuator, level, run_config, folder in runs:
                run_file = write_resolved_config(run_config, out / "configs")
                label = f"{cfg.workload.size}/sweep/{actuator}-{level}"
                spec = _fresh_spec(run_config, run_file, "fixed", cfg.seed, folder, steps, label)
                specs.append(spec)
            _submit(cfg, specs, out / "submitit", "sweep")

    folders = run_sweep(cfg, out, steps, cfg.seed, run_all)
    typer.echo(f"sweep: {len(folders)} runs of {steps} steps -> {out}/sweep.json")


@app.command("identify")
@user_errors
def identify(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    runs: Annotated[
        list[Path] | None,
        typer.Option("--run", help="A measured run folder to fit from (repeatable)."),
    ] = None,
    calibration: Annotated[
        Path | None, typer.Option("--calibration", help="Calibration to start from.")
    ] = None,
    real_sweep_steps: Annotated[
        int | None,
        typer.Option("--real-sweep-steps", help="Steps per real sweep run; 0 = none (config)."),
    ] = None,
    sweep_dir: Annotated[
        Path | None,
        typer.Option("--sweep", help="A sweep run by `grpo-power sweep` (instead of running one)."),
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 2: actuator sweeps, the authority table, and the simulator's calibration fit."""
    from grpo_power.study import identify as run_identify

    _numbers({"--real-sweep-steps": real_sweep_steps})
    cfg = _config(config)
    result = run_identify(
        cfg, out, calibration, runs, real_sweep_steps, log=typer.echo, sweep=sweep_dir
    )
    shown = result.authority[
        ["data", "deployment", "actuator", "authority", "retained_authority", "selected"]
    ]
    typer.echo("actuator authority (simulated rows are SIMULATED):")
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if result.fit is not None:
        for fit in result.fit["fits"]:
            typer.echo(
                f"fit {fit['target']}: {fit['points']} steps, relative RMS residual "
                f"{fit['relative_rms']:.3f}; held at prior: {sorted(fit['held_at_prior']) or '-'}"
            )
    typer.echo(f"wrote {result.calibration_path}, {out}/authority.csv, authority.md, sweeps.csv")


@controller_app.command("train")
@user_errors
def controller_train(
    deployment: Annotated[str, typer.Option("--deployment", "-d", help="Deployment name.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Controller folder (default: results).")
    ] = None,
    calibration: Annotated[
        Path | None, typer.Option("--calibration", help="Calibration file (default: config).")
    ] = None,
    authority: Annotated[
        Path | None,
        typer.Option("--authority", help="authority.json (default: results/identify)."),
    ] = None,
    cap_w: Annotated[
        float | None, typer.Option("--cap-w", help="Cap to train for, W (default: config).")
    ] = None,
    timesteps: Annotated[
        int | None, typer.Option("--timesteps", help="PPO steps (default: config).")
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 3: train a deployment's PPO meta-controller in the simulator (SIMULATED)."""
    from grpo_power.control.ppo import controller_folder
    from grpo_power.study import train

    _numbers({"--cap-w": cap_w, "--timesteps": timesteps})
    cfg = _config(config)
    _numbers({"--cap-w": cap_w}, cfg)
    out = out or controller_folder(cfg, deployment)
    authority = authority or cfg.results_dir / "identify" / "authority.json"
    result = train(cfg, deployment, out, calibration, authority, cap_w, timesteps)
    e = result.evaluation
    typer.echo(
        f"PPO controller for {deployment} (SIMULATED): drives {'+'.join(result.space.actuators)}"
        f"{' (fallback: no actuator cleared the threshold)' if result.space.fallback else ''}; "
        f"{result.timesteps} steps in {result.train_s:.1f} s"
    )
    typer.echo(
        f"  nominal episodes: return {e['trained_return']:.2f} (random policy "
        f"{e['random_return']:.2f}), violation rate {100 * e['trained_violation_rate']:.2f} % "
        f"(random {100 * e['random_violation_rate']:.2f} %)"
    )
    typer.echo(f"wrote {out}/controller.json, policy.npz, policy.zip, vecnormalize.pkl")


@app.command("evaluate")
@user_errors
def evaluate(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    controllers: Annotated[
        Path | None,
        typer.Option("--controllers", help="Trained controllers (default: results/controller)."),
    ] = None,
    calibration: Annotated[
        Path | None, typer.Option("--calibration", help="Calibration file (default: config).")
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
        typer.Option("--authority", help="authority.json (default: results/identify)."),
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 4: every arm on every deployment over seeds, 95 % CIs and ratios (SIMULATED).

    With --calibration F and/or --cap-w W (or --scenario NAME) the study's controllers are
    evaluated as they are and after retraining in that scenario.
    """
    from grpo_power.study import evaluate as run_evaluate

    _numbers({"--cap-w": cap_w})
    cfg = _config(config)
    _numbers({"--cap-w": cap_w}, cfg)
    deployments = None
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
    result = run_evaluate(
        cfg,
        out,
        controllers or cfg.results_dir / "controller",
        calibration,
        cap_w,
        deployments,
        retrain,
        authority or cfg.results_dir / "identify" / "authority.json",
        log=typer.echo,
    )
    typer.echo(result.markdown)
    met = int(result.ratios["met"].sum()) if len(result.ratios) else 0
    typer.echo(f"targets met: {met} of {len(result.ratios)} (SIMULATED)")
    typer.echo(f"wrote {out}/table.md, summary.csv, ratios.csv, metrics.csv, summary.json")


@app.command("economics")
@user_errors
def economics(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    runs: Annotated[
        list[Path] | None,
        typer.Option("--run", help="A run folder to price (repeatable)."),
    ] = None,
    evaluate_dir: Annotated[
        Path | None,
        typer.Option("--evaluate", help="The evaluate stage's folder (default: results)."),
    ] = None,
    fleet_dir: Annotated[
        Path | None, typer.Option("--fleet", help="The fleet stage's folder (default: results).")
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 7: energy cost, carbon, oversubscription value and the pilot plan."""
    from grpo_power.economics.stage import run_economics

    cfg = _config(config)
    result = run_economics(
        cfg,
        out,
        runs or [],
        evaluate_dir or cfg.results_dir / "evaluate" / "study",
        fleet_dir or cfg.results_dir / "fleet",
    )
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


@app.command("report")
@user_errors
def report(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (index.html).")],
    runs: Annotated[
        list[Path] | None, typer.Option("--run", help="A run folder (repeatable).")
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
        Path | None, typer.Option("--fleet", help="The fleet stage's folder (default: results).")
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
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 8: publication figures (PDF + PNG) and the HTML report."""
    from grpo_power.report.inputs import ReportInputs
    from grpo_power.report.stage import run_report

    cfg = _config(config)
    results = cfg.results_dir
    inputs = ReportInputs(
        runs=runs or [],
        exceedance=exceedance or [],
        fleet=fleet_dir or results / "fleet",
        identify=identify_dir or results / "identify",
        controllers=controllers or [results / "controller" / d.name for d in cfg.sim.deployments],
        evaluate=evaluate_dir or results / "evaluate" / "study",
        economics=economics_dir or results / "economics",
    )
    result = run_report(cfg, inputs, out)
    typer.echo(
        f"report: {len(result.figures) // 2} figures (PDF + PNG), {result.numbers} traceable "
        f"numbers -> {result.index}"
    )


def _print_summary(source: str, path: Path, table: Any) -> None:
    label = " (SIMULATED power)" if source == "simulated" else ""
    typer.echo(f"trace {path}{label}")
    shown = table.assign(
        energy_wh=table["energy_j"] / 3600.0,
    )[
        [
            "gpu",
            "samples",
            "duration_s",
            "energy_j",
            "energy_wh",
            "energy_source",
            "mean_power_w",
            "peak_power_w",
        ]
    ]
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.2f}"))


# Planner mode's commands, beside the stages (they share this module's error handling).
from grpo_power.planner.cli import register as _register_planner  # noqa: E402

_register_planner(app, user_errors, ConfigOption, _notes)


def main() -> None:  # pragma: no cover - console entry point
    """The console entry point: ``grpo-power`` and ``python -m grpo_power.cli`` (the Snakefile).

    The exit codes of the module docstring come from :class:`ExitCodeGroup`, which runs the app
    with ``standalone_mode=False``.
    """
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
