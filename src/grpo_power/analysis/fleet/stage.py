"""The fleet stage: read the runs' bins, build the fleet (wall clock or Monte Carlo), the
scaling study over fleet sizes, the comparison; write everything atomically."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.analysis.fleet.comparison import comparison_markdown, comparison_table
from grpo_power.analysis.fleet.factors import stats_table
from grpo_power.analysis.fleet.inputs import (
    JobSource,
    RunBins,
    check_compatible,
    load_job_source,
    read_run_bins,
)
from grpo_power.analysis.fleet.monte_carlo import DrawStats, MonteCarloFleet, draw_summary
from grpo_power.analysis.fleet.wall_clock import (
    choose_alignment,
    no_sizing_window,
    wall_clock_fleet,
)
from grpo_power.analysis.windows import WindowCounts, window_bins_of
from grpo_power.config import Config
from grpo_power.layout import FLEET, WINDOWS

# What a run of the tiny model stands for: its phases drive simulated power on a CPU, seconds
# long, not a GPU run's (the economics' run rows, the fleet's notes and the report say it).
TINY_RUN_NOTE = "tiny model on the CPU, not an estimate for GPU runs"


def fleet_runs(summary: dict[str, Any]) -> str:
    """What a fleet's runs (its ``summary.json``) are: how many, of which model sizes, how long
    (the capital headline rests on them: in the laptop study, tiny CPU runs of seconds)."""
    runs = summary.get("run_ids") or []
    lengths_s = summary.get("source_lengths_s") or []
    span = f", {min(lengths_s):,.4g}-{max(lengths_s):,.4g} s long" if lengths_s else ""
    sizes = summary.get("model_sizes") or []
    of = f" ({TINY_RUN_NOTE})" if sizes == ["tiny"] else f" of {', '.join(sizes)}" if sizes else ""
    return f"the fleet stage's {len(runs)} run(s){of}{span}"


@dataclass
class FleetResult:
    """Everything the fleet stage computes."""

    fleet: pd.DataFrame
    scaling: pd.DataFrame
    comparison: pd.DataFrame
    summary: dict[str, Any]


def analyze_fleet(
    inputs: Sequence[Path | str | RunBins],
    config: Config,
    exceedance_files: Sequence[Path] | None = None,
    each_run_once: bool = False,
) -> FleetResult:
    """The fleet stage on windows-stage outputs (folders or ``bins.parquet`` files, or runs
    already read: the planner's logs of one set of GPUs joined); returns its tables and summary.

    A Monte Carlo fleet draws runs with replacement until it has ``fleet.n_gpus`` GPUs (the
    study's fleet, larger than its runs); with ``each_run_once`` every draw is each run once, at
    a random start offset (the fleet of exactly the runs' GPUs, ``fleet.n_gpus`` of them: the
    planner's traces). The scaling study draws with replacement either way. Where every run is
    shorter than the sizing window (``fleet.window_s``), a Monte Carlo fleet's figures at that
    window repeat the runs end to end: ``chosen_window_fits`` is then false and
    ``runs_shorter_than_window`` true. A fleet that ``fleet.alignment: auto`` aligned by wall
    clock but whose bins where every GPU has a reading hold no whole sizing window (a GPU lost
    early) is drawn by Monte Carlo instead, the summary's ``alignment_reason`` saying why.
    """
    runs = [p if isinstance(p, RunBins) else read_run_bins(p) for p in inputs]
    check_compatible(runs, config.windows.bin_s)
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        files = [str(r.path) for r in runs if r.run_id == dup]
        raise ValueError(
            f"{files[-1]}: run_id: the same run is given twice ({dup!r}, also as "
            f"{', '.join(files[:-1])}); expected each run's windows output once"
        )
    # the draws index the runs: in run_id order, the same inputs give the same fleet whatever
    # order they are named in (a shell glob's, Snakemake's)
    runs.sort(key=lambda r: r.run_id)
    ids = [r.run_id for r in runs]
    if exceedance_files is None:
        exceedance_files = [
            part.path.with_name(WINDOWS.exceedance_parquet) for r in runs for part in r.files
        ]
    fc = config.fleet
    bin_s = config.windows.bin_s
    windows_s = list(config.windows.windows_s)
    # simulated where any run is; else where the runs' power comes from (their windows' labels)
    measured = sorted({str(r.info.get("data") or "measured") for r in runs})
    label = "simulated" if any(r.simulated for r in runs) else ", ".join(measured)
    seed = config.seed if fc.seed is None else fc.seed
    rng = np.random.default_rng(seed)
    alignment, drawn_because = choose_alignment(runs, config)
    counts: list[WindowCounts] = []
    info: dict[str, Any] = {}
    unsized = None
    if alignment == "wall_clock":
        wall_gpus = sum(r.n_gpus for r in runs)
        counts, info = wall_clock_fleet(
            runs, windows_s, bin_s, config.cap_w * wall_gpus, fc.partition_bins
        )
        unsized = no_sizing_window(counts, info, bin_s, fc.window_s)
        if unsized is not None and fc.alignment == "auto":
            # the clocks overlap, but too little of the time has every GPU's reading: the
            # wall-clock fleet would size nothing (a NaN factor), so it is drawn as if they did
            # not overlap
            alignment, drawn_because = "monte_carlo", unsized
    summary: dict[str, Any] = {
        "inputs": [str(part.path) for r in runs for part in r.files],
        "run_ids": ids,
        # the model sizes the runs ran (their bins' model_size; imported traces have none)
        "model_sizes": sorted(
            {str(r.info["model_size"]) for r in runs if r.info.get("model_size")}
        ),
        "data": label,
        "simulated": label == "simulated",
        "alignment": alignment,
        "alignment_reason": drawn_because,
        # wall_clock asked for by name where it sizes nothing: why (its factor is NaN)
        "no_sizing_window": unsized if alignment == "wall_clock" else None,
        "window_s": fc.window_s,
        "margin": fc.margin,
        "peak_quantile": fc.peak_quantile,
        "bin_s": bin_s,
        "cap_w_per_gpu": config.cap_w,
        "seed": seed,
    }
    sources: list[JobSource] | None = None
    if alignment == "wall_clock":
        n_gpus = sum(r.n_gpus for r in runs)
        nameplate = sum(r.n_gpus * r.nameplate_w for r in runs)
        stats = DrawStats(
            windows_s,
            np.array([[c.windows for c in counts]]),
            np.array([[c.over for c in counts]]),
            np.array([[c.peak_mean_w for c in counts]]),
            np.array([nameplate]),
        )
        summary.update(info)
        if fc.n_gpus != n_gpus:
            summary["n_gpus_note"] = (
                f"fleet.n_gpus ({fc.n_gpus}) not used: a wall-clock fleet is the runs' own "
                f"{n_gpus} GPUs (fleet.alignment: auto draws a fleet of {fc.n_gpus} by Monte "
                "Carlo)"
            )
    else:
        sources = [load_job_source(r) for r in runs]
        # each run once: the GPUs with energy bins (a GPU of one corrupt row has none)
        n_gpus = sum(s.n_gpus for s in sources) if each_run_once else fc.n_gpus
        horizon = None if fc.horizon_s is None else max(1, round(fc.horizon_s / bin_s))
        mc = MonteCarloFleet(sources, horizon, rng, replace=not each_run_once)
        stats = mc.run(n_gpus, fc.draws, windows_s, bin_s, config.cap_w)
        summary.update(draw_summary(mc, sources, bin_s))
    summary["n_gpus"] = n_gpus
    # the board power each of the fleet's GPUs is provisioned at: its runs' (a fleet of H100s
    # is valued at 700 W whatever the config's part), the mean over the drawn fleets
    summary["nameplate_w_per_gpu"] = float(np.mean(stats.nameplate_w)) / n_gpus
    # a Monte Carlo fleet of runs all shorter than the sizing window repeats them to fill it
    repeated = (
        sources is not None
        and max(s.length for s in sources) < window_bins_of([fc.window_s], bin_s)[0]
    )
    fleet_table = stats_table(stats, n_gpus, alignment, config, label)
    scaling = scaling_study(runs, config, label, rng, sources)
    comparison = comparison_table(
        fleet_table, runs, exceedance_files, config, label, repeated, summary.get("horizon_s")
    )
    chosen = fleet_table[np.isclose(fleet_table["window_s"], fc.window_s)].iloc[0]
    summary.update(
        {
            "peak_share_mean": chosen["peak_share_mean"],
            "peak_share_sizing": chosen["peak_share_sizing"],
            "factor": chosen["factor"],
            "factor_no_margin_mean_peak": chosen["factor_no_margin_mean_peak"],
            "chosen_window_fits": bool(chosen["windows_per_draw"] > 0) and not repeated,
            "runs_shorter_than_window": repeated,
        }
    )
    return FleetResult(fleet_table, scaling, comparison, summary)


def scaling_study(
    runs: Sequence[RunBins],
    config: Config,
    label: str,
    rng: np.random.Generator,
    sources: Sequence[JobSource] | None = None,
) -> pd.DataFrame:
    """Monte Carlo fleets of each configured size: how peak share and the factor change."""
    fc = config.fleet
    if sources is None:
        sources = [load_job_source(r) for r in runs]
    horizon = None if fc.horizon_s is None else max(1, round(fc.horizon_s / config.windows.bin_s))
    mc = MonteCarloFleet(sources, horizon, rng)
    tables = []
    for size in fc.scaling_sizes:
        stats = mc.run(
            size, fc.scaling_draws, config.windows.windows_s, config.windows.bin_s, config.cap_w
        )
        tables.append(stats_table(stats, size, "monte_carlo", config, label))
    return pd.concat(tables, ignore_index=True)


def write_fleet(result: FleetResult, out_dir: Path | str) -> list[Path]:
    """Write the fleet stage's outputs into ``out_dir`` (each file atomically).

    Files: ``fleet_windows.csv``/``.parquet``, ``scaling.csv``/``.parquet``,
    ``comparison.csv``, ``comparison.md`` and ``summary.json``.
    """
    from grpo_power.atomic import (
        write_csv_atomic,
        write_json_atomic,
        write_parquet_atomic,
        write_text_atomic,
    )

    out = Path(out_dir)
    return [
        write_csv_atomic(out / FLEET.fleet_csv, result.fleet),
        write_parquet_atomic(out / FLEET.fleet_parquet, result.fleet),
        write_csv_atomic(out / FLEET.scaling_csv, result.scaling),
        write_parquet_atomic(out / FLEET.scaling_parquet, result.scaling),
        write_csv_atomic(out / FLEET.comparison_csv, result.comparison),
        write_text_atomic(
            out / FLEET.comparison_md,
            comparison_markdown(result.comparison, result.summary["data"], result.summary),
        ),
        write_json_atomic(out / FLEET.summary, result.summary),
    ]


def run_fleet(inputs: Sequence[Path | str], out_dir: Path | str, config: Config) -> FleetResult:
    """The fleet stage: read windows outputs, analyse, write; returns the result."""
    result = analyze_fleet(inputs, config)
    write_fleet(result, out_dir)
    return result
