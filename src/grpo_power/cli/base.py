"""The Typer app every command registers on, its exit codes, and what the commands share:
the ``--config`` option, the one-line error handling (:func:`user_errors`), notes on stderr."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer
import yaml
from typer.core import TyperGroup

from grpo_power.config import (
    DEFAULT_CONFIG_PATH,
    Config,
    ConfigError,
    default_config_path,
    load_config,
    packaged_config_path,
    validate_option,
    validate_setting,
)
from grpo_power.signal_handlers import exiting_on_sigterm
from grpo_power.version import __version__

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
ImportFormat = Literal["nvidia-smi", "nvidia-smi-dmon", "dcgm", "prometheus", "grafana"]
# ... and its --format choices: "auto" tells it from the file (grpo_power.telemetry.formats).
ImportFormatChoice = Literal[
    "auto", "nvidia-smi", "nvidia-smi-dmon", "dcgm", "prometheus", "grafana"
]
# Engines whose metrics `telemetry import --engine` reads (grpo_power.telemetry.engine).
EngineFormat = Literal["vllm", "sglang", "tgi"]


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
            with exiting_on_sigterm():  # a stopped command removes what it built aside
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


# Help as Markdown: Typer's default (rich) keeps a docstring's line breaks in the command list.
HELP_MARKUP = "markdown"
app = typer.Typer(
    name="grpo-power",
    cls=ExitCodeGroup,
    help="Measure, cap and provision the GPU power of GRPO post-training runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=HELP_MARKUP,
)
telemetry_app = typer.Typer(
    help="Record, import and summarise GPU power traces.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(telemetry_app, name="telemetry")
controller_app = typer.Typer(
    help="Train the PPO meta-controller in the simulator.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(controller_app, name="controller")
config_app = typer.Typer(
    help="The config's JSON schema.", no_args_is_help=True, rich_markup_mode=HELP_MARKUP
)
app.add_typer(config_app, name="config")
planner_app = typer.Typer(
    help="Planner mode: a folder of traces to fleet, economics and a report (no GRPO run).",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(planner_app, name="planner")


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
        help="Config file, validated against the schema (default: config/config.yaml in the "
        "working folder, else the packaged default).",
        callback=_config_default,
    ),
]
F = TypeVar("F", bound=Callable[..., Any])
# Commands whose --out is a file (the others write a folder).
FILE_OUTPUT_COMMANDS = {"telemetry_import", "telemetry_record", "config_schema"}


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
        from grpo_power.user_paths import one_line, os_error_message, output_problem
        from grpo_power.workload.resume import EXIT_INTERRUPTED, RunStopped

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
        except RunStopped as stop:
            typer.echo(str(stop), err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except (ConfigError, ValueError, TelemetryUnavailable) as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(EXIT_DATA) from None
        except OSError as error:  # FileNotFoundError too: its message, or the path and reason
            typer.echo(f"error: {os_error_message(error)}", err=True)
            raise typer.Exit(EXIT_DATA) from None
        except (OverflowError, RecursionError) as error:
            typer.echo(f"error: a value is out of range ({one_line(error)})", err=True)
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
    "--train-micro-batch": ("workload.train_micro_batch", "sequences"),
    "--seed": ("seed", "a seed"),
    "--timesteps": ("controller.total_timesteps", "steps"),
    "--real-sweep-steps": ("authority.real_sweep_steps", "steps"),
}


def check_numbers(
    values: dict[str, Any], cfg: Config | None = None, where: Path | None = None
) -> None:
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


def echo_notes(notes: list[str]) -> None:
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


def _another_tools_config(path: Path) -> bool:
    """Whether ``path`` is a mapping with a top-level key no grpo-power config has (a Hydra
    project's ``defaults:``): another tool's config, not a grpo-power one with a bad value."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and any(key not in Config.model_fields for key in data)


def config_from(path: Path, options: dict[str, tuple[str, Any]] | None = None) -> Config:
    """The config file ``path`` validated alone (its errors name the file: a section the file
    gives as a scalar was replaced by an option's mapping and never reported), then with the
    command's ``options`` over it (option -> (dotted config field, value); a value of None was
    not given), whose errors name the options given (``--concurrency 64 over config.yaml:
    ...``): the file alone was valid, so they are the options'. A ``config/config.yaml`` of
    the working folder that is not a grpo-power config (a Hydra project's) says it was read
    because it is there."""
    try:
        cfg = load_config(path)
    except ConfigError as error:
        here = Path(path).resolve() == Path(DEFAULT_CONFIG_PATH).resolve()
        if not here or not _another_tools_config(Path(path)):
            raise
        raise ConfigError(
            f"{error} ({path} is read as the config when no --config is given, being in the "
            f"working folder: give --config FILE, e.g. the packaged default "
            f"{packaged_config_path()})"
        ) from None
    given = {option: pair for option, pair in (options or {}).items() if pair[1] is not None}
    if not given:
        return cfg
    overrides: dict[str, Any] = {}
    for dotted, value in given.values():
        *sections, name = dotted.split(".")
        node = overrides
        for section in sections:
            node = node.setdefault(section, {})
        node[name] = value
    try:
        return load_config(path, overrides)
    except ConfigError as error:
        said = " ".join(f"{option} {value}" for option, (_, value) in given.items())
        raise ConfigError(str(error).replace(f"{path}: ", f"{said} over {path}: ")) from None
