"""The ``telemetry`` commands: ``record`` a command's power, ``import`` nvidia-smi or DCGM
logs, ``summary`` of a trace."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from grpo_power.cli.base import (
    ConfigOption,
    EngineFormat,
    ImportFormatChoice,
    SplitOption,
    check_numbers,
    config_from,
    echo_notes,
    telemetry_app,
    user_errors,
)
from grpo_power.config import (
    DEFAULT_CONFIG_PATH,
    TelemetrySource,
    default_config_path,
)

# --engine-format's choices: an engine, or auto (told from the log's header line)
EngineFormatChoice = Literal["auto", EngineFormat]


@telemetry_app.command(
    "record", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
@user_errors
def telemetry_record(
    command: Annotated[list[str], typer.Argument(help="The command to run, after `--`.")],
    period: Annotated[
        float | None, typer.Option("--period", help="Sampling period, s (default: config).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Trace file (.parquet; where one, or a killed recording's journal, is there "
            "the next free STEM-2.parquet, -3, ... is taken; default "
            "RESULTS_DIR/telemetry/record-TIME-PID.parquet).",
        ),
    ] = None,
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
    from grpo_power.telemetry.store import free_trace_path, read_trace, trace_output_problem
    from grpo_power.telemetry.summary import summary_table

    check_numbers({"--period": period})
    # Any command's GPUs: real ones wherever there are (the config's source is the workload's).
    cfg = config_from(
        config,
        {
            "--period": ("telemetry.period_s", period),
            "--source": ("telemetry.source", source or "auto"),
        },
    )
    # the default name holds the process id: recordings started in the same second differ
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    given = out or cfg.results_dir / "telemetry" / f"record-{stamp}.parquet"
    problem = trace_output_problem(given)
    if problem:  # before the command runs, not after
        raise ValueError(problem)
    out = free_trace_path(given)  # a recording, or a killed one's journal, is never written over
    if out != given:
        typer.echo(f"note: {given} exists; this recording goes to {out}", err=True)

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
    # on stderr, as `time` prints: the recorded command's stdout stays its own (a JSON stream)
    table = summary_table(trace)
    _print_summary(trace.metadata.source, recording.trace_path, table, err=True)
    if recording.missed_slots:
        typer.echo(
            f"note: {recording.missed_slots} sample slot(s) missed (sampler fell behind)", err=True
        )
    if recording.returncode != 0:
        typer.echo(f"the recorded command {recording.outcome}", err=True)
    raise typer.Exit(recording.exit_code)


@telemetry_app.command("import")
@user_errors
def telemetry_import(
    logs: Annotated[
        list[Path],
        typer.Argument(
            help="nvidia-smi CSV or dmon log, DCGM CSV, Prometheus query result, or Grafana "
            "CSV download; or the parts of one rotated log (smi.csv smi.csv.1 smi.csv.2.gz, as "
            "smi.csv* gives them), read as one.",
            show_default=False,
        ),
    ],
    fmt: Annotated[
        ImportFormatChoice,
        typer.Option(
            "--format",
            help="The log's format; auto: told from its name and first line as the planner "
            "does (nvidia-smi where it tells none).",
        ),
    ] = "auto",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Trace file (.parquet).")] = None,
    nameplate_w: Annotated[
        float | None, typer.Option("--nameplate-w", help="GPU board power, W, if not in the log.")
    ] = None,
    gpu_name: Annotated[str | None, typer.Option("--gpu-name", help="GPU model name.")] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="The trace's run id (default: the log's stem).")
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option(
            "--timezone",
            help="IANA time zone of timestamps without one (nvidia-smi writes local time); "
            "default: the machine's. Recorded in the trace.",
        ),
    ] = None,
    split_on_clock_jumps: SplitOption = False,
    engine: Annotated[
        Path | None,
        typer.Option(
            "--engine",
            help="The inference engine's metrics log of the same run (CSV, unix seconds): adds "
            "per-sample concurrency and tokens_per_s, its clock offset found from the data.",
        ),
    ] = None,
    engine_name: Annotated[
        EngineFormatChoice,
        typer.Option(
            "--engine-format",
            help="The engine whose metrics --engine is; auto: told from its header line (vllm "
            "where it tells none).",
        ),
    ] = "auto",
    origin: Annotated[
        str | None,
        typer.Option(
            "--origin",
            help="Where the log comes from (e.g. a public repository, path and commit); recorded "
            "in the trace and shown with it as 'measured (public trace)'.",
        ),
    ] = None,
) -> None:
    """Convert an nvidia-smi, DCGM, Prometheus or Grafana log (compressed too: .gz, .bz2, .xz,
    .zst; rotated: its parts) into a trace (source: imported), optionally with the inference
    engine's concurrency and token rate aligned to every sample."""
    from grpo_power.telemetry.engine import add_engine_columns, read_engine_log
    from grpo_power.telemetry.formats import (
        DMON_NO_TIME,
        engine_format,
        import_format,
        unread_kind,
    )
    from grpo_power.telemetry.importers import ImportError_, import_log
    from grpo_power.telemetry.logrows import log_stem
    from grpo_power.telemetry.rotation import (
        RotatedLog,
        is_rotated,
        one_log,
        rotated_format,
        rotated_parts_beside,
    )
    from grpo_power.telemetry.store import earlier_import, trace_output_problem, write_trace

    parts = one_log(logs)
    log, rotated = parts[-1], is_rotated(parts)
    source = RotatedLog(parts) if rotated else log
    check_numbers({"--nameplate-w": nameplate_w}, where=log)
    out = out or log.with_name(f"{log_stem(log)}.parquet")
    problem = trace_output_problem(out)
    if problem:
        raise ValueError(problem)
    replacing = earlier_import(out, parts)
    given, told = fmt != "auto", False
    if not given and rotated:
        kind, reason = rotated_format(parts)
        if kind is None:
            raise ValueError(f"{log}: expected a power log, got {reason}")
        fmt, told = kind, True
    elif not given:
        fmt, told = import_format(log)
        if not told and (unread := unread_kind(log)) is not None:
            raise ValueError(f"{log}: expected a power log, got {unread}")
    try:
        frame, metadata = import_log(
            source,
            fmt,
            nameplate_w=nameplate_w,
            gpu_name=gpu_name,
            run_id=run_id,
            timezone=timezone,
            split_on_clock_jumps=split_on_clock_jumps,
        )
        if engine is not None:
            if engine_name == "auto":
                told_engine = engine_format(engine)
                engine_name = told_engine or "vllm"
                how = "told from its header line" if told_engine else "its header tells none"
                echo_notes(
                    [f"{engine}: engine format {engine_name} ({how}; --engine-format to choose)"]
                )
            frame, metadata = add_engine_columns(
                frame, metadata, read_engine_log(engine, engine_name)
            )
        if origin is not None:
            metadata = type(metadata).model_validate({**metadata.model_dump(), "origin": origin})
    except ImportError_ as error:
        hint = ""
        if given:  # does the file look like another format, or a log no importer reads?
            other, known = import_format(log)
            if known and other != fmt:
                hint = f" (the file looks like a {other} log: --format {other})"
            elif (unread := unread_kind(log)) is not None and not (
                fmt == "nvidia-smi-dmon" and unread == DMON_NO_TIME  # the error says so
            ):
                hint = f" (the file is {unread})"
        beside = rotated_parts_beside(log)
        if len(beside) > len(parts):  # parts left out: the header may be in one of them
            names = " ".join(str(part) for part in beside)
            hint += (
                f" (it is a part of a rotated log: import its parts as one, `grpo-power "
                f"telemetry import {names}`)"
            )
        raise ValueError(f"{error}{hint}") from None
    write_trace(out, frame, metadata)
    typer.echo(f"imported {len(frame)} samples of {frame['gpu'].nunique()} GPU(s) into {out}")
    if replacing:
        typer.echo(f"note: {replacing}")
    if told:
        typer.echo(f"note: {log}: format {fmt} (told from the file; --format to choose)")
    echo_notes((metadata.model_extra or {}).get("notes", []))


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
    from grpo_power.telemetry.summary import check_energy, summary_table

    config_path = config or default_config_path()
    defaults = TraceDefaults.from_config(config_from(config_path), f"the config {config_path}")
    trace = read_trace(trace_file, defaults, split_on_clock_jumps)
    if trace.frame.empty:
        raise ValueError(f"{trace_file}: the trace has no samples; expected at least one")
    _print_summary(trace.metadata.source, trace_file, summary_table(trace))
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
        if checks and trace.metadata.source == "simulated":
            typer.echo(
                "note: the simulated GPU's counter integrates its readings between the samples, "
                "so this checks the sampling, not a hardware counter"
            )
    if not trace.complete:
        typer.echo("note: read from the journal of a recording that did not finish", err=True)
    echo_notes(trace.notes)


def _print_summary(source: str, path: Path, table: Any, err: bool = False) -> None:
    """Print a trace's summary table (``err``: on stderr, beside a recorded command's own
    output); ``energy_span_s`` is the time with readings the energy and the mean are over
    (``duration_s`` less the gaps)."""
    label = " (SIMULATED power)" if source == "simulated" else ""
    typer.echo(f"trace {path}{label}", err=err)
    shown = table.assign(
        energy_wh=table["energy_j"] / 3600.0,
    )[
        [
            "gpu",
            "samples",
            "duration_s",
            "energy_span_s",
            "energy_j",
            "energy_wh",
            "energy_source",
            "mean_power_w",
            "peak_power_w",
        ]
    ]
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.2f}"), err=err)
