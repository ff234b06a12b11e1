"""Commands that analyse traces: ``windows`` (exceedance by window), ``fleet`` (fleet peak
and oversubscription), ``identify`` (calibration fit and actuator authority) and
``real-traces`` (the simulator's decode power model against measured runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from grpo_power.cli.base import (
    ConfigOption,
    SplitOption,
    app,
    check_numbers,
    config_from,
    echo_notes,
    user_errors,
)
from grpo_power.config import (
    DEFAULT_CONFIG_PATH,
)


@app.command("windows")
@user_errors
def windows(
    trace_file: Annotated[
        Path,
        typer.Argument(help="A trace (.parquet, or .csv with t, gpu, power_w) or its journal."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder for this trace.")],
    cap_w: Annotated[
        float | None,
        typer.Option("--cap-w", help="The per-GPU cap to judge the trace by, W (default: config)."),
    ] = None,
    split_on_clock_jumps: SplitOption = False,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Exceedance of the cap by averaging window, per GPU and per run; energy bins for `fleet`."""
    from grpo_power.analysis.windows import run_windows

    check_numbers({"--cap-w": cap_w})
    cfg = config_from(config)
    result = run_windows(trace_file, out, cfg, split_on_clock_jumps, cap_w)
    label = " (SIMULATED power)" if result.summary["simulated"] else ""
    typer.echo(f"windows of {trace_file}{label}: cap {result.summary['cap_w']:g} W per GPU")
    shown = result.exceedance[result.exceedance["scope"] != "gpu"]
    shown = shown[["scope", "window_s", "windows", "windows_over", "exceedance", "peak_mean_w"]]
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if result.summary["gaps"]:
        typer.echo(
            f"note: {result.summary['gaps']} gap(s), {result.summary['gap_s']:.3g} s without "
            f"samples (see {out / 'gaps.csv'})"
        )
    typer.echo(f"wrote {out}/exceedance.csv, gaps.csv, bins.parquet, summary.json")
    echo_notes(result.summary.get("notes", []))


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

    cfg = config_from(config)
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
    if s["chosen_window_fits"] or s["runs_shorter_than_window"]:
        typer.echo(
            f"oversubscription factor at {s['window_s']:g} s, margin {s['margin']:g}: "
            f"{s['factor']:.3g}x (no margin, mean peak: {s['factor_no_margin_mean_peak']:.3g}x)"
        )
    if s["runs_shorter_than_window"]:
        typer.echo(
            f"note: every run is shorter than the {s['window_s']:g} s sizing window: the fleet "
            "repeats them end to end (each run periodic), an assumption, not a measurement"
        )
    elif not s["chosen_window_fits"]:
        typer.echo(
            f"note: no full {s['window_s']:g} s window in the fleet timeline, so no "
            "oversubscription factor (record longer runs, or set fleet.horizon_s)"
        )
    typer.echo(f"wrote {out}/fleet_windows.csv, scaling.csv, comparison.csv, comparison.md")
    echo_notes([s["n_gpus_note"]] if "n_gpus_note" in s else [])


@app.command("sim-windows")
@user_errors
def sim_windows(
    evaluation: Annotated[
        Path, typer.Argument(help="The evaluate stage's study folder (results/evaluate/study).")
    ],
    deployment: Annotated[str, typer.Option("--deployment", help="The simulated deployment.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder of the deployment.")],
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """The windows stage on a deployment's simulated runs: every arm and seed (SIMULATED)."""
    from grpo_power.analysis.windows.simulated import (
        evaluated_arms,
        run_sim_windows,
        sim_sample_files,
    )

    cfg = config_from(config)
    arms = evaluated_arms(evaluation, deployment)
    result = run_sim_windows(sim_sample_files(evaluation, deployment, arms), out, cfg)
    rows = result.exceedance[result.exceedance["scope"] == "arm_pooled"]
    typer.echo(
        f"windows of {deployment}'s simulated runs (SIMULATED power): {len(arms)} arms x "
        f"{len(result.summary['seeds'])} seeds, cap {result.summary['cap_w']:g} W per GPU"
    )
    shown = rows[["arm", "window_s", "windows", "exceedance", "peak_mean_w"]]
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    typer.echo(f"wrote {out}/exceedance.csv, exceedance.parquet, bins.parquet, summary.json")


@app.command("study-fleet")
@user_errors
def study_fleet(
    sim_windows_dirs: Annotated[
        list[Path],
        typer.Argument(help="Outputs of `grpo-power sim-windows`: one folder per deployment."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """The study's fleet mix (fleet.study_mix) of simulated runs per arm (SIMULATED)."""
    from grpo_power.analysis.fleet.study_mix import run_study_fleet

    cfg = config_from(config)
    result = run_study_fleet(sim_windows_dirs, out, cfg)
    s = result.summary
    typer.echo(
        f"study fleet (SIMULATED power): {s['mix_text']} = {s['n_gpus']} GPUs, "
        f"{s['nameplate_kw']:g} kW nameplate, {s['draws']} draws, window {s['window_s']:g} s, "
        f"margin {s['margin']:g}"
    )
    for arm, info in s["per_arm"].items():
        typer.echo(
            f"  {arm}: peak {info['peak_kw_mean']:.3g} kW ({100 * info['peak_share_mean']:.3g} % "
            f"of nameplate), factor {info['factor']:.3g}x (no margin: "
            f"{info['factor_no_margin_mean_peak']:.3g}x)"
        )
    typer.echo(f"wrote {out}/fleet_windows.csv, comparison.csv, comparison.md, summary.json")


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
    traces: Annotated[
        list[Path] | None,
        typer.Option(
            "--trace",
            help="A trace with per-sample concurrency (telemetry import --engine, or a run's "
            "trace beside its step log) to fit the decode power model from (repeatable); "
            "then only that fit runs.",
        ),
    ] = None,
    validate: Annotated[
        list[Path] | None,
        typer.Option("--validate", help="A held-out trace to validate the --trace fit on."),
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Stage 2: actuator sweeps, the authority table, and the simulator's calibration fit; with
    --trace, the decode power model fitted to measured traces and validated on held-out ones."""
    from grpo_power.study import identify as run_identify

    check_numbers({"--real-sweep-steps": real_sweep_steps})
    cfg = config_from(config)
    if validate and not traces:
        raise ValueError("--validate: expected it with at least one --trace to fit, got none")
    if traces:
        _identify_traces(cfg, traces, validate or [], out)
        return
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
        lengths = result.fit["completion_lengths"]
        if lengths["identifiable"]:
            typer.echo(
                f"fit completion lengths: {lengths['points']} steps, median "
                f"{lengths['completion_tokens']} tokens, lognormal sigma "
                f"{lengths['completion_tokens_sigma']:.2f} (relative RMS residual "
                f"{lengths['relative_rms_total']:.3f} total, "
                f"{lengths['relative_rms_longest']:.3f} longest); set sim.completion_tokens and "
                "sim.completion_tokens_sigma to simulate them"
            )
        else:
            typer.echo(f"fit completion lengths: not identifiable: {lengths['reason']}")
    typer.echo(
        f"wrote {result.calibration_path}, {out}/authority.json, authority.csv, authority.md, "
        f"sweeps.csv{', fit_residuals.csv' if result.fit is not None else ''}"
    )


def _identify_traces(cfg: Any, traces: list[Path], validate: list[Path], out: Path) -> None:
    """Fit the decode power model to ``traces``, validate on ``validate``, print both."""
    from grpo_power.layout import TRACE_FIT
    from grpo_power.study import identify_traces

    _echo_trace_fit(cfg, identify_traces(cfg, traces, validate, out))
    typer.echo(f"wrote {', '.join(str(out / n) for n in TRACE_FIT.names())}")


@app.command("real-traces")
@user_errors
def real_traces(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """The simulator against measured runs (the config's real_traces section): import each run
    with its engine's concurrency, fit the decode power model, validate it on the held-out
    runs, and window every run's exceedance of the cap."""
    from grpo_power.layout import REAL_TRACES
    from grpo_power.real_traces import run_real_traces

    cfg = config_from(config)
    _echo_trace_fit(cfg, run_real_traces(cfg, out))
    typer.echo(f"wrote {', '.join(str(out / n) for n in REAL_TRACES.names())}")


def _parameter_text(p: dict[str, Any]) -> str:
    """A fitted parameter as printed: its value and interval, the config's value (no interval)
    where it was not fitted, or why it is not identifiable (with its estimate)."""
    if p.get("source") == "config":
        return f"{p['value']:.4g} ({p['unit']}), {p['reason']}"
    if p["value"] is None:
        return f"not identifiable from these traces (estimate {p['estimate']:.4g}): {p['reason']}"
    return f"{p['value']:.4g} [{p['low']:.4g}, {p['high']:.4g}] ({p['unit']})"


def _echo_trace_fit(cfg: Any, fit: dict[str, Any]) -> None:
    """Print a decode power fit: its notes (traces whose concurrency is coarse), its
    parameters beside the prior, and its held-out error."""
    echo_notes(fit.get("notes", []))
    typer.echo(
        f"decode power fit of {fit['decode_samples']} samples ({fit['data']}; effective "
        f"{fit['effective_samples']:.0f}), {cfg.gpu.name} at {cfg.gpu.nameplate_w:g} W:"
    )
    for name, p in fit["parameters"].items():
        typer.echo(
            f"  {name}: {_parameter_text(p)}; "
            f"prior {p['prior']:.4g} [{p['prior_low']:.4g}, {p['prior_high']:.4g}]"
        )
    steady = fit["steady_decode"]
    at_1, slope, noise = (steady[k] for k in ("power_at_1_w", "slope_w_per_doubling", "noise_w"))
    typer.echo(
        f"steady decode line (the simulator's decode curve): {at_1['value']:.1f} W at concurrency "
        f"1 [{at_1['low']:.1f}, {at_1['high']:.1f}], {slope['value']:+.2f} W per doubling "
        f"[{slope['low']:.2f}, {slope['high']:.2f}], noise {noise['value']:.2f} W "
        f"[{noise['low']:.2f}, {noise['high']:.2f}]; {100 * steady['burst_share']:.1f} % of "
        "samples in bursts above it"
    )
    held = fit["held_out_error"]
    if held["bins"]:
        typer.echo(
            f"held-out error, the worst of {held['bins']} concurrency bin(s) with >= 30 "
            f"samples, % of nameplate: mean {held['mean_pct_nameplate']:.2f} (prior "
            f"{held['prior_mean_pct_nameplate']:.2f}), p95 {held['p95_pct_nameplate']:.2f} (prior "
            f"{held['prior_p95_pct_nameplate']:.2f}), max {held['max_pct_nameplate']:.2f}"
        )
        for run_id, worst in held["runs"].items():
            typer.echo(
                f"  {run_id}: mean {worst['mean_pct_nameplate']:.2f}, p95 "
                f"{worst['p95_pct_nameplate']:.2f}, max {worst['max_pct_nameplate']:.2f} "
                f"({worst['bins']} bins)"
            )
    elif not fit["held_out_runs"]:
        typer.echo("held-out error: none, no held-out trace given (give --validate)")
    else:
        typer.echo(
            f"held-out error: none, no concurrency bin of the held-out traces has >= 30 samples "
            f"(the fullest has {held.get('largest_bin_samples', 0)} of their "
            f"{held.get('held_out_samples', 0)} decode samples)"
        )
