"""The study's fleet composed of the evaluation's simulated runs, per arm (SIMULATED).

The study's 16-GPU fleet is 2 x 72B (4 GPUs each), 2 x 14B (2) and 4 x 7B (1) (its summary;
config ``fleet.study_mix``). Its inputs are the windows of each deployment's simulated runs
(:mod:`grpo_power.analysis.windows.simulated`: every seed's energy bins). For each arm evaluated
on every deployment of the mix, ``fleet.draws`` fleets are drawn: each run of the mix is one of
its deployment's evaluation seeds, drawn uniformly with replacement, at a uniform random start
offset, its series periodic (the Monte Carlo fleet's assumption; the summation and the windows
are :mod:`grpo_power.analysis.fleet.monte_carlo`'s). Each fleet is windowed against the sum of
its runs' caps; per window, :func:`grpo_power.analysis.fleet.factors.stats_table` gives the peak
share of nameplate over draws and the oversubscription factor, and the peak in kW is added.

The comparison puts each arm beside the study: the 72B over-cap share at 0.5 s, 30 s and 5 min
(the largest model of the mix, its ``arm_pooled`` rows), the fleet's exceedance at 30 s and
longer, its 30 s peak in kW and as a share of nameplate, and the factor with its evidence.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from grpo_power.analysis import reference
from grpo_power.analysis.fleet.comparison import comparison_markdown
from grpo_power.analysis.fleet.factors import stats_table
from grpo_power.analysis.fleet.inputs import JobSource, Rows, job_source_from_rows
from grpo_power.analysis.fleet.monte_carlo import MonteCarloFleet, window_draws
from grpo_power.analysis.windows.simulated import study_windows_s
from grpo_power.config import Config
from grpo_power.layout import SIM_WINDOWS, STUDY_FLEET
from grpo_power.stage_files import read_json

SUMMARY_KEYS = ("deployment", "arms", "seeds", "gpus", "nameplate_w", "cap_w", "bin_s")
EXPECTED = "the windows of a deployment's simulated runs, written by `grpo-power sim-windows`"
ALIGNMENT = "study_mix"


@dataclass(frozen=True)
class SimDeployment:
    """One deployment's simulated runs as the windows stage left them: summary, bins, rows."""

    folder: Path
    summary: dict[str, Any]
    bins: pd.DataFrame
    exceedance: pd.DataFrame

    @property
    def name(self) -> str:
        return str(self.summary["deployment"])

    @property
    def gpus(self) -> int:
        return int(self.summary["gpus"])

    def sources(self, arm: str) -> list[JobSource]:
        """Each seed of ``arm`` as a job source (its GPUs' energy per bin, J)."""
        runs = self.runs
        seeds = sorted(seed for run_arm, seed in runs if run_arm == arm)
        if not seeds:
            raise ValueError(
                f"{self.folder / SIM_WINDOWS.bins}: arm: expected bins of arm {arm!r}, found "
                f"only {sorted(self.bins['arm'].unique())}"
            )
        return [
            job_source_from_rows(
                f"sim-{self.name}-{arm}-seed{seed}",
                float(self.summary["nameplate_w"]),
                functools.partial(self._rows, runs[arm, seed]),
                float(self.summary["bin_s"]),
                str(self.folder / SIM_WINDOWS.bins),
            )
            for seed in seeds
        ]

    @functools.cached_property
    def runs(self) -> dict[tuple[str, int], np.ndarray]:
        """The positions in ``bins`` of each (arm, seed)'s rows, in file order."""
        return self.bins.groupby(["arm", "seed"], sort=False).indices

    def _rows(self, positions: np.ndarray) -> Rows:
        """The (bin, gpu, energy_j) rows at ``positions`` of ``bins``."""
        return tuple(self.bins[name].to_numpy()[positions] for name in ("bin", "gpu", "energy_j"))


def read_sim_deployment(folder: Path | str, config: Config) -> SimDeployment:
    """A deployment's simulated windows folder, checked against the config's bin width."""
    folder = Path(folder)
    summary = read_json(folder / SIM_WINDOWS.summary, EXPECTED, SUMMARY_KEYS)
    bin_s = float(summary["bin_s"])
    if abs(bin_s - config.windows.bin_s) > 1e-12 * bin_s:
        raise ValueError(
            f"{folder / SIM_WINDOWS.summary}: bin_s: bins of {bin_s} s, but windows.bin_s is "
            f"{config.windows.bin_s} s; expected the same config (rerun sim-windows)"
        )
    bins = pq.read_table(folder / SIM_WINDOWS.bins).to_pandas()
    exceedance = pd.read_parquet(folder / SIM_WINDOWS.exceedance_parquet)
    return SimDeployment(folder, summary, bins, exceedance)


@dataclass
class StudyFleetResult:
    """The study's fleet per arm: window rows, the comparison and the summary."""

    fleet: pd.DataFrame
    comparison: pd.DataFrame
    summary: dict[str, Any]


def mix_arms(deployments: Sequence[SimDeployment]) -> list[str]:
    """The arms evaluated on every deployment of the mix, in the first one's order."""
    arms = list(deployments[0].summary["arms"])
    return [a for a in arms if all(a in d.summary["arms"] for d in deployments[1:])]


def compose_arm(
    arm: str,
    mix: Sequence[tuple[SimDeployment, int]],
    config: Config,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """``fleet.draws`` fleets of the mix (deployment, runs) for one arm, windowed; one row per
    window (:func:`stats_table`'s columns, the arm, the peak in kW and the fleet's cap)."""
    fc = config.fleet
    bin_s = config.windows.bin_s
    windows_s = study_windows_s(config)
    sources: list[JobSource] = []
    groups: list[tuple[np.ndarray, int]] = []
    for deployment, jobs in mix:
        seeds = deployment.sources(arm)
        groups.append((np.arange(len(sources), len(sources) + len(seeds)), jobs))
        sources += seeds
    longest = max(round(w / bin_s) for w in windows_s)
    shortest = min(s.length for s in sources)
    horizon = shortest if fc.horizon_s is None else round(fc.horizon_s / bin_s)
    mc = MonteCarloFleet(sources, max(horizon, longest), rng)

    def draw() -> tuple[np.ndarray, float]:
        counts = np.zeros(len(sources), dtype=np.int64)
        for index, jobs in groups:
            counts += np.bincount(rng.choice(index, size=jobs), minlength=len(sources))
        return mc.sum_jobs(counts)

    n_gpus = sum(d.gpus * jobs for d, jobs in mix)
    cap_w = sum(d.gpus * jobs * float(d.summary["cap_w"]) for d, jobs in mix)
    stats = window_draws(draw, fc.draws, windows_s, bin_s, cap_w)
    table = stats_table(stats, n_gpus, ALIGNMENT, config, "simulated")
    with np.errstate(invalid="ignore"):
        peak_kw = stats.peak_w / 1000.0
    finite = np.isfinite(peak_kw)
    for name, q in (("peak_kw_p5", 0.05), ("peak_kw_p95", 0.95)):
        table[name] = [
            float(np.quantile(peak_kw[finite[:, i], i], q)) if finite[:, i].any() else math.nan
            for i in range(len(windows_s))
        ]
    table["peak_kw_mean"] = [
        float(peak_kw[finite[:, i], i].mean()) if finite[:, i].any() else math.nan
        for i in range(len(windows_s))
    ]
    table.insert(0, "arm", arm)
    table["nameplate_kw"] = float(stats.nameplate_w[0]) / 1000.0
    table["fleet_cap_kw"] = cap_w / 1000.0
    table["horizon_s"] = mc.horizon_bins * bin_s
    return table


def _mix_text(mix: Sequence[tuple[SimDeployment, int]]) -> str:
    """The mix as text: ``2 x 72b (4 GPUs) + ...``."""
    parts = [f"{jobs} x {d.name} ({d.gpus} GPU{'s' if d.gpus > 1 else ''})" for d, jobs in mix]
    return " + ".join(parts)


def _row(fig: reference.ReferenceFigure, arm: str, value: float, note: str) -> dict[str, Any]:
    return {
        "reference": "study",
        "key": fig.key,
        "arm": arm,
        "quantity": f"{fig.quantity} (simulated, arm {arm})",
        "reference_value": fig.shown(),
        "this_run": value,
        "difference": fig.difference(value),
        "unit": fig.unit,
        "window_s": fig.window_s,
        "data": "simulated",
        "study_origin": fig.origin,
        "note": note,
        "source": fig.source,
    }


def _against_fixed_arm(deployment: SimDeployment) -> str:
    """The deployment's cap against its fixed arm's mean power per GPU (its energy bins, seeds
    pooled), as ``, X % above/below its fixed-arm mean of Y W``; empty without a fixed arm."""
    fixed = deployment.bins[deployment.bins["arm"] == "fixed"]
    if fixed.empty:
        return ""
    mean_w = float(fixed["energy_j"].mean()) / float(deployment.summary["bin_s"])
    gap_pct = 100.0 * (float(deployment.summary["cap_w"]) / mean_w - 1.0)
    side = "above" if gap_pct >= 0 else "below"
    return f", {abs(gap_pct):.0f} % {side} its fixed-arm mean of {mean_w:.0f} W"


def _window_rows(big: SimDeployment, arm: str, config: Config) -> list[dict[str, Any]]:
    """The 72B over-cap share per study window: the largest deployment's seeds pooled."""
    pooled = big.exceedance[
        (big.exceedance["scope"] == "arm_pooled") & (big.exceedance["arm"] == arm)
    ]
    s = big.summary
    against_fixed = _against_fixed_arm(big)
    rows = []
    for fig in reference.STUDY_EXCEEDANCE_72B:
        at = pooled[np.isclose(pooled["window_s"], fig.window_s)]
        if at.empty:
            raise ValueError(
                f"{big.folder / SIM_WINDOWS.exceedance_parquet}: window_s: expected arm {arm!r} "
                f"at the study's {fig.window_s:g} s window (rerun sim-windows)"
            )
        row = at.iloc[0]
        value = 100.0 * float(row["exceedance"]) if row["windows"] else math.nan
        note = (
            f"{big.name} deployment, {s['gpus']} GPUs, {len(s['seeds'])} seeds pooled "
            f"({int(row['windows']):,} GPU windows; seeds {100 * row['exceedance_seed_min']:.3g}-"
            f"{100 * row['exceedance_seed_max']:.3g} %); differs: power from the calibrated "
            f"simulator, not measured 72B runs; cap {s['cap_w']:g} W per GPU (the deployment's"
            f"{against_fixed}; the study's 72B cap is not in the abstract); "
            f"sampled every {s['sample_period_s']:g} s (the study: "
            f"{reference.STUDY_SAMPLE_PERIOD_S:g} s)"
        )
        if not row["windows"]:
            note = f"no full {fig.window_s:g} s window in the simulated runs; " + note
        rows.append(_row(fig, arm, value, note))
    return rows


def _fleet_rows(
    table: pd.DataFrame, arm: str, mix_text: str, config: Config
) -> list[dict[str, Any]]:
    """The fleet's rows beside the study's: exceedance >= 30 s, 30 s peak, the factor."""
    fc = config.fleet
    first = table.iloc[0]
    evidence = (
        f"{int(first['n_gpus'])} GPUs: {mix_text}, nameplate {first['nameplate_kw']:.2f} kW; "
        f"{fc.draws} draws of seeds and start offsets, runs periodic over "
        f"{first['horizon_s']:g} s"
    )
    part = (  # the study's kW are of A100s: another part's differ by its nameplate too
        f"; the GPUs are {config.gpu.name}s ({config.gpu.nameplate_w:g} W), the study's "
        f"{reference.STUDY_GPU_NAME}s ({reference.STUDY_NAMEPLATE_W:g} W)"
        if config.gpu.nameplate_w != reference.STUDY_NAMEPLATE_W
        else ""
    )
    why = (
        "differs: simulated power; the deployments keep their own caps; the study's start "
        f"times are not known, here random{part}"
    )
    long = table[(table["window_s"] >= 30.0) & np.isfinite(table["exceedance_mean"])]
    worst = long.loc[long["exceedance_mean"].idxmax()] if len(long) else None
    at = table[np.isclose(table["window_s"], reference.STUDY_FLEET_PEAK_KW.window_s)].iloc[0]
    spread = (
        f"mean over draws, p5-p95 {at['peak_kw_p5']:.3g}-{at['peak_kw_p95']:.3g} kW "
        f"({100 * at['peak_share_p5']:.3g}-{100 * at['peak_share_p95']:.3g} %)"
    )
    window = f"window {at['window_s']:g} s"
    rows = [
        _row(
            reference.STUDY_FLEET_EXCEEDANCE,
            arm,
            math.nan if worst is None else 100.0 * float(worst["exceedance_mean"]),
            f"{evidence}; against the runs' summed caps ({first['fleet_cap_kw']:.2f} kW); "
            + (
                "no full window >= 30 s"
                if worst is None
                else f"worst window {worst['window_s']:g} s, mean over draws (worst draw "
                f"{100 * worst['exceedance_max']:.3g} %)"
            )
            + f"; {why}",
        ),
        _row(
            reference.STUDY_FLEET_PEAK_KW,
            arm,
            float(at["peak_kw_mean"]),
            f"{evidence}; {window}; {spread}; {why}",
        ),
        _row(
            reference.STUDY_FLEET_PEAK,
            arm,
            100.0 * float(at["peak_share_mean"]),
            f"{evidence}; {window}; {spread}; {why}",
        ),
        _row(
            reference.STUDY_OVERSUBSCRIPTION,
            arm,
            float(at["factor_no_margin_mean_peak"]),
            f"{evidence}; {window}; 1 / mean peak share, no margin (the study's reading); {why}",
        ),
        _row(
            reference.STUDY_OVERSUBSCRIPTION,
            arm,
            float(at["factor"]),
            f"{evidence}; {window}; peak (each draw's highest window over its "
            f"{first['horizon_s']:g} s: the factor holds per that long) at the "
            f"{fc.peak_quantile:g} quantile of draws, margin {fc.margin:g}; {why}",
        ),
    ]
    rows[-1]["key"] = "oversubscription_factor_sized"
    return rows


def analyze_study_fleet(folders: Sequence[Path | str], config: Config) -> StudyFleetResult:
    """The study's fleet of every arm from the deployments' simulated windows folders."""
    if not config.fleet.study_mix:
        raise ValueError("fleet.study_mix: expected at least one deployment, got []")
    found = {d.name: d for d in (read_sim_deployment(f, config) for f in folders)}
    missing = [e.deployment for e in config.fleet.study_mix if e.deployment not in found]
    if missing:
        raise ValueError(
            f"fleet.study_mix: deployment {missing[0]!r}: expected its simulated windows among "
            f"the inputs, got {sorted(found)} (run `grpo-power sim-windows` for it)"
        )
    mix = [(found[e.deployment], e.jobs) for e in config.fleet.study_mix]
    fc = config.fleet
    seed = config.seed if fc.seed is None else fc.seed
    rng = np.random.default_rng(seed)
    big = max(mix, key=lambda m: config.sim.deployment(m[0].name).params_b)[0]
    arms = mix_arms([d for d, _ in mix])
    text = _mix_text(mix)
    tables, rows = [], []
    for arm in arms:
        table = compose_arm(arm, mix, config, rng)
        tables.append(table)
        rows += _window_rows(big, arm, config) + _fleet_rows(table, arm, text, config)
    fleet = pd.concat(tables, ignore_index=True)
    chosen = fleet[np.isclose(fleet["window_s"], fc.window_s)]
    summary = {
        "simulated": True,
        "data": "simulated",
        "alignment": ALIGNMENT,
        "mix": [{"deployment": d.name, "jobs": jobs, "gpus": d.gpus} for d, jobs in mix],
        "mix_text": text,
        "n_gpus": int(fleet["n_gpus"].iloc[0]),
        "nameplate_kw": float(fleet["nameplate_kw"].iloc[0]),
        "fleet_cap_kw": float(fleet["fleet_cap_kw"].iloc[0]),
        "draws": fc.draws,
        "window_s": fc.window_s,
        "margin": fc.margin,
        "peak_quantile": fc.peak_quantile,
        "horizon_s": float(fleet["horizon_s"].iloc[0]),
        "seed": seed,
        "windows_72b_from": big.name,
        "arms": arms,
        "per_arm": {
            str(r["arm"]): {
                "peak_kw_mean": r["peak_kw_mean"],
                "peak_share_mean": r["peak_share_mean"],
                "factor": r["factor"],
                "factor_no_margin_mean_peak": r["factor_no_margin_mean_peak"],
            }
            for _, r in chosen.iterrows()
        },
        "inputs": [str(d.folder) for d, _ in mix],
    }
    return StudyFleetResult(fleet, pd.DataFrame(rows), summary)


def write_study_fleet(result: StudyFleetResult, out_dir: Path | str) -> list[Path]:
    """Write the study fleet's files into ``out_dir`` (each atomically)."""
    from grpo_power.atomic import (
        write_csv_atomic,
        write_json_atomic,
        write_parquet_atomic,
        write_text_atomic,
    )

    out = Path(out_dir)
    title = "The study's fleet mix and 72B windows: the study vs this run's simulated deployments"
    return [
        write_csv_atomic(out / STUDY_FLEET.fleet_csv, result.fleet),
        write_parquet_atomic(out / STUDY_FLEET.fleet_parquet, result.fleet),
        write_csv_atomic(out / STUDY_FLEET.comparison_csv, result.comparison),
        write_text_atomic(
            out / STUDY_FLEET.comparison_md,
            comparison_markdown(result.comparison, "simulated", result.summary, title),
        ),
        write_json_atomic(out / STUDY_FLEET.summary, result.summary),
    ]


def run_study_fleet(
    folders: Sequence[Path | str], out_dir: Path | str, config: Config
) -> StudyFleetResult:
    """The study's fleet: read the simulated windows, compose, write; returns the result."""
    result = analyze_study_fleet(folders, config)
    write_study_fleet(result, out_dir)
    return result
