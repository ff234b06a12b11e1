"""The ``grpo-power planner`` commands: planner mode from the command line.

``planner run`` does everything; ``import``, ``fleet``, ``economics`` and ``report`` are its steps
(with ``grpo-power windows`` for each imported trace), which ``snakemake planner`` runs as
separate jobs. :func:`register` adds them to the main app of :mod:`grpo_power.cli`, whose error
handling (``user_errors``: one line, exit code 2) and ``--config`` option it hands over (so this
module never imports the command line, which ``python -m grpo_power.cli`` runs as ``__main__``).
No ``from __future__ import annotations`` here: typer reads the commands' annotations, which
name the handed-over option type.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from grpo_power.config import DEFAULT_CONFIG_PATH, Config, load_config

TracesArgument = Annotated[
    Path | None,
    typer.Argument(
        help="Folder of traces (nvidia-smi / DCGM CSV, Parquet), searched recursively "
        "(default: the config's planner.traces)."
    ),
]


def _traces_folder(traces: Path | None, config: Path) -> tuple[Path, Config]:
    cfg = load_config(config)
    folder = traces or cfg.planner.traces
    if folder is None:
        raise ValueError(
            f"{config}: planner.traces: expected a folder of traces (or give it as the argument)"
        )
    return Path(folder), cfg


def register(
    app: typer.Typer,
    user_errors: Callable[[Any], Any],
    ConfigOption: Any,  # the type alias of grpo_power.cli, used as an annotation
    notes: Callable[[list[str]], None],
) -> None:
    """Add the ``planner`` command group to ``app``."""
    planner_app = typer.Typer(
        help="Planner mode: a folder of traces to fleet, economics and a report (no GRPO run).",
        no_args_is_help=True,
    )
    app.add_typer(planner_app, name="planner")

    @planner_app.command("run")
    @user_errors
    def planner_run(
        out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
        traces: TracesArgument = None,
        config: ConfigOption = DEFAULT_CONFIG_PATH,
    ) -> None:
        """Import, window, fleet, economics and report in one command."""
        from grpo_power.planner.stage import run_planner

        folder, cfg = _traces_folder(traces, config)
        result = run_planner(folder, out, cfg, sys.stderr.isatty())
        s, e = result.fleet.summary, result.economics
        label = " (SIMULATED power)" if s["simulated"] else ""
        typer.echo(
            f"planner: {result.traces} trace(s), {e['gpus']} GPU(s) ({result.skipped} file(s) "
            f"skipped){label}; fleet of {s['n_gpus']} GPUs by {s['alignment']} alignment"
        )
        typer.echo(
            f"fleet peak {100 * s['peak_share_sizing']:.1f} % of nameplate at {s['window_s']:g} s: "
            f"oversubscription factor {s['factor']:.3g}x (margin {s['margin']:g})"
        )
        typer.echo(
            f"energy at the wall {e['wall_kwh']:.4g} kWh, ${e['energy_usd']:.4g}, "
            f"{e['carbon_kg']:.4g} kg CO2eq; capital avoided for {e['fleet_gpus']:,} GPUs: "
            f"${e['oversubscription']['capital_usd_avoided']:,.0f}"
        )
        typer.echo(f"report -> {result.report}")

    @planner_app.command("import")
    @user_errors
    def planner_import(
        out: Annotated[Path, typer.Option("--out", "-o", help="Folder of imported traces.")],
        traces: TracesArgument = None,
        config: ConfigOption = DEFAULT_CONFIG_PATH,
    ) -> None:
        """Import every trace of a folder (any of the formats, mixed) into one folder."""
        from grpo_power.planner.discover import INDEX, import_traces

        folder, cfg = _traces_folder(traces, config)
        index = import_traces(folder, out, cfg, sys.stderr.isatty())
        imported = index[index["status"] == "imported"]
        typer.echo(
            f"imported {len(imported)} trace(s), skipped {len(index) - len(imported)} -> "
            f"{out}/{INDEX}"
        )
        notes([n for n in imported["notes"] if n])

    @planner_app.command("fleet")
    @user_errors
    def planner_fleet(
        window_outputs: Annotated[
            list[Path], typer.Argument(help="The traces' `grpo-power windows` folders.")
        ],
        out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
        config: ConfigOption = DEFAULT_CONFIG_PATH,
    ) -> None:
        """The fleet the traces make: wall-clock aligned where their clocks overlap, else Monte
        Carlo; plus the scaling study."""
        from grpo_power.planner.fleet import fleet_of_traces

        s = fleet_of_traces(window_outputs, out, load_config(config)).summary
        typer.echo(
            f"fleet of {s['n_gpus']} GPUs, {s['alignment']}: factor {s['factor']:.3g}x -> {out}"
        )

    @planner_app.command("economics")
    @user_errors
    def planner_economics_command(
        traces: Annotated[Path, typer.Option("--traces", help="`planner import`'s folder.")],
        fleet: Annotated[Path, typer.Option("--fleet", help="`planner fleet`'s folder.")],
        out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
        config: ConfigOption = DEFAULT_CONFIG_PATH,
    ) -> None:
        """Energy, cost, carbon and the value of oversubscription of the traces."""
        from grpo_power.planner.economics import planner_economics

        s = planner_economics(traces, fleet, out, load_config(config))
        typer.echo(f"energy at the wall {s['wall_kwh']:.4g} kWh, ${s['energy_usd']:.4g} -> {out}")

    @planner_app.command("report")
    @user_errors
    def planner_report_command(
        traces: Annotated[Path, typer.Option("--traces", help="`planner import`'s folder.")],
        fleet: Annotated[Path, typer.Option("--fleet", help="`planner fleet`'s folder.")],
        economics: Annotated[
            Path, typer.Option("--economics", help="`planner economics`' folder.")
        ],
        out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (index.html).")],
        config: ConfigOption = DEFAULT_CONFIG_PATH,
    ) -> None:
        """The planner's HTML report and figures."""
        from grpo_power.planner.report import PlannerFolders, planner_report

        index = planner_report(PlannerFolders(traces, fleet, economics), out, load_config(config))
        typer.echo(f"report -> {index}")
