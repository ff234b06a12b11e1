"""The ``planner`` commands: planner mode from the command line.

``planner run`` does everything; ``import``, ``fleet``, ``economics`` and ``report`` are its steps
(with ``grpo-power windows`` for each imported trace), which ``snakemake planner`` runs as
separate jobs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from grpo_power.cli.base import (
    ConfigOption,
    config_from,
    echo_notes,
    planner_app,
    user_errors,
)
from grpo_power.config import DEFAULT_CONFIG_PATH, Config
from grpo_power.layout import PLANNER_TRACES, PlannerLayout
from grpo_power.listing import named_few

TracesArgument = Annotated[
    Path | None,
    typer.Argument(
        help="Folder of traces (nvidia-smi / DCGM CSV, Parquet), searched recursively "
        "(default: the config's planner.traces)."
    ),
]


PlannerCapOption = Annotated[
    float | None,
    typer.Option(
        "--cap-w",
        help="The per-GPU cap to judge every trace and the fleet by, W (default: the config's "
        "planner.cap_w, else its cap_w, set for its gpu).",
    ),
]
PlannerSplitOption = Annotated[
    bool,
    typer.Option(
        "--split-on-clock-jumps",
        help="Where a log's clock repeats or steps back (a clock stepped back, logs "
        "concatenated), split it into segments instead of refusing it (default: the config's "
        "planner.split_on_clock_jumps).",
    ),
]


def _planner_config(
    config: Path, cap_w: float | None = None, split_on_clock_jumps: bool = False
) -> Config:
    """The config file ``config`` with the planner options given over its ``planner``
    section (``--cap-w``: ``planner.cap_w``; ``--split-on-clock-jumps``:
    ``planner.split_on_clock_jumps``)."""
    return config_from(
        config,
        {
            "--cap-w": ("planner.cap_w", cap_w),
            "--split-on-clock-jumps": (
                "planner.split_on_clock_jumps",
                True if split_on_clock_jumps else None,
            ),
        },
    )


def _traces_folder(traces: Path | None, config: Path, cfg: Config) -> Path:
    """The folder of traces: ``traces``, else the config's (``cfg``, read from ``config``)
    ``planner.traces``."""
    folder = traces or cfg.planner.traces
    if folder is None:
        raise ValueError(
            f"{config}: planner.traces: expected a folder of traces (or give it as the argument)"
        )
    return Path(folder)


@planner_app.command("run")
@user_errors
def planner_run(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    traces: TracesArgument = None,
    cap_w: PlannerCapOption = None,
    split_on_clock_jumps: PlannerSplitOption = False,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Import, window, fleet, economics and report in one command."""
    from grpo_power.planner.fleet import fleet_notes
    from grpo_power.planner.stage import run_planner

    cfg = _planner_config(config, cap_w, split_on_clock_jumps)
    folder = _traces_folder(traces, config, cfg)
    result = run_planner(folder, out, cfg, sys.stderr.isatty())
    s, e = result.fleet.summary, result.economics
    label = " (SIMULATED power)" if s["simulated"] else ""
    typer.echo(
        f"planner: {result.traces} trace(s), {e['gpus']} GPU(s) ({len(result.skipped)} file(s) "
        f"skipped){label}; fleet of {s['n_gpus']} GPU{'' if s['n_gpus'] == 1 else 's'} by "
        f"{s['alignment']} alignment"
    )
    typer.echo(
        f"fleet peak {100 * s['peak_share_sizing']:.1f} % of nameplate at {s['window_s']:g} s: "
        f"oversubscription factor {s['factor']:.3g}x (margin {s['margin']:g})"
    )
    value = e["oversubscription"]
    typer.echo(
        f"GPU energy x PUE ({e['pue']:g}) {e['wall_kwh']:.4g} kWh, "
        f"${e['energy_usd']:.4g}, {e['carbon_kg']:.4g} kg CO2eq; capital avoided: "
        f"${value['capital_usd_avoided']:,.0f}, {value['extra_gpus']:,} more GPUs in the power "
        f"of {e['fleet_gpus']:,} (factor {value['factor']:.3g}x of the "
        f"{value['factor_from_gpus']:,}-GPU fleet, {value['data']}"
        + (
            ""
            if value["factor_from_gpus"] == s["n_gpus"]
            else f": the traced GPUs drawn with replacement as if independent; the traced "
            f"fleet's own factor is {s['factor']:.3g}x"
        )
        + ")"
    )
    typer.echo(f"report -> {result.report}")
    skipped = (
        [
            f"skipped: {named_few(result.skipped, sep='; ', more='more skipped')} (every reason: "
            f"{PlannerLayout(Path(out)).traces / PLANNER_TRACES.index})"
        ]
        if result.skipped
        else []
    )
    echo_notes([*result.notes, *fleet_notes(s), *e["part_notes"], *skipped])


@planner_app.command("import")
@user_errors
def planner_import(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder of imported traces.")],
    traces: TracesArgument = None,
    split_on_clock_jumps: PlannerSplitOption = False,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Import every trace of a folder (any of the formats, mixed) into one folder."""
    from grpo_power.planner.discover import INDEX, import_traces

    cfg = _planner_config(config, split_on_clock_jumps=split_on_clock_jumps)
    folder = _traces_folder(traces, config, cfg)
    index = import_traces(folder, out, cfg, sys.stderr.isatty())
    imported = index[index["status"] == "imported"]
    typer.echo(
        f"imported {len(imported)} trace(s), skipped {len(index) - len(imported)} -> {out}/{INDEX}"
    )
    echo_notes([n for n in imported["notes"] if n])


@planner_app.command("fleet")
@user_errors
def planner_fleet(
    window_outputs: Annotated[
        list[Path],
        typer.Argument(
            help="The traces' `grpo-power windows` folders (a folder without bins.parquet: "
            "every one beneath it)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    cap_w: PlannerCapOption = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """The fleet the traces make: wall-clock aligned where their clocks overlap, else Monte
    Carlo; plus the scaling study."""
    from grpo_power.planner.fleet import fleet_notes, fleet_of_traces, window_folders

    cfg = _planner_config(config, cap_w)
    s = fleet_of_traces(window_folders(window_outputs), out, cfg).summary
    typer.echo(f"fleet of {s['n_gpus']} GPUs, {s['alignment']}: factor {s['factor']:.3g}x -> {out}")
    echo_notes(fleet_notes(s))


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

    s = planner_economics(traces, fleet, out, config_from(config))
    typer.echo(
        f"GPU energy x PUE ({s['pue']:g}) {s['wall_kwh']:.4g} kWh, ${s['energy_usd']:.4g} -> {out}"
    )


@planner_app.command("report")
@user_errors
def planner_report_command(
    traces: Annotated[Path, typer.Option("--traces", help="`planner import`'s folder.")],
    fleet: Annotated[Path, typer.Option("--fleet", help="`planner fleet`'s folder.")],
    economics: Annotated[Path, typer.Option("--economics", help="`planner economics`' folder.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (index.html).")],
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """The planner's HTML report and figures."""
    from grpo_power.planner.report import PlannerFolders, planner_report

    index = planner_report(PlannerFolders(traces, fleet, economics), out, config_from(config))
    typer.echo(f"report -> {index}")
