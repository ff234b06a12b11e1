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
      unavailable, a submission the cluster refused (``SubmitRefused``; sbatch's reason)
      (one line ``error: ...`` on stderr, one per bad field of a config file,
      never a traceback; see :func:`user_errors`)
3     a submitted run job (submitit / Slurm) failed (``JobFailed``; its id, state, stderr tail)
64    usage error (sysexits EX_USAGE): unknown option or command, invalid choice, missing
      argument or option; also a command group given no arguments (it prints its help)
75    a run stopped by SIGTERM, SIGUSR1 or SIGUSR2 with its checkpoint saved (EX_TEMPFAIL);
      the same command resumes it
130   interrupted (Ctrl-C) or aborted
====  =========================================================================================

``telemetry record`` exits with the recorded command's own exit code (128 + N where signal N
killed it) when the recording itself succeeded.
Modules: ``base`` (the Typer app, exit codes, shared options and error handling) and one module
per group of commands: ``runs`` (run, calibrate, sweep), ``telemetry`` (record, import,
summary), ``analysis`` (windows, fleet, identify), ``study`` (controller train, evaluate,
economics, report), ``config`` (schema), ``planner`` (planner mode).
"""

from grpo_power.cli import analysis, config, planner, runs, study, telemetry
from grpo_power.cli.base import (
    EXIT_ABORTED,
    EXIT_DATA,
    EXIT_JOB_FAILED,
    EXIT_USAGE,
    ExitCodeGroup,
    app,
    user_errors,
)

COMMAND_MODULES = (
    analysis,
    config,
    planner,
    runs,
    study,
    telemetry,
)  # imported to register their commands


def main() -> None:  # pragma: no cover - console entry point
    """The console entry point: ``grpo-power`` and ``python -m grpo_power.cli`` (the Snakefile).

    The exit codes of the module docstring come from :class:`ExitCodeGroup`, which runs the app
    with ``standalone_mode=False``.
    """
    app()


__all__ = [
    "COMMAND_MODULES",
    "EXIT_ABORTED",
    "EXIT_DATA",
    "EXIT_JOB_FAILED",
    "EXIT_USAGE",
    "ExitCodeGroup",
    "app",
    "main",
    "user_errors",
]
