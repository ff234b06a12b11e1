"""Publication figures: one seaborn style, every figure saved as PDF and PNG.

Each figure function takes tidy frames (:mod:`grpo_power.report.inputs` and stage CSVs) and
returns a matplotlib figure; :func:`save_figure` writes it atomically in both formats. Arms keep
one colour and one order across every figure (:func:`arm_palette`). Panel titles carry the data
label, so a simulated panel always says so; captions (:data:`CAPTIONS`) say it again.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from grpo_power.analysis.authority import STUDY_CONCURRENCY_AUTHORITY_72B
from grpo_power.analysis.reference import (
    PUBLISHED_OVERSUBSCRIPTION,
    STUDY_EXCEEDANCE_72B,
    STUDY_FLEET_GPUS,
    STUDY_FLEET_PEAK,
    STUDY_OVERSUBSCRIPTION,
)
from grpo_power.atomic import write_atomic
from grpo_power.config import SIM_ARM_NAMES
from grpo_power.report.cells import data_label

FORMATS = ("pdf", "png")
STYLE = {
    "context": "paper",
    "style": "whitegrid",
    "palette": "colorblind",
    "rc": {
        "figure.dpi": 100,
        "axes.titlesize": 8,
        "axes.labelsize": 8,
        "xtick.labelsize": 7,
        "ytick.labelsize": 7,
        "legend.fontsize": 7,
        "pdf.fonttype": 42,  # embed TrueType: editable text in the PDF
        "savefig.bbox": "tight",
    },
}
CAP_STYLE = {"color": "black", "linestyle": "--", "linewidth": 0.8}
STUDY_STYLE = {"color": "black", "marker": "X", "s": 45, "zorder": 5}


def apply_style() -> None:
    """The one style of every figure."""
    sns.set_theme(**STYLE)


def ordered_arms(arms: Iterable[str]) -> list[str]:
    """``arms`` without repeats, in the config's order (:data:`~grpo_power.config.SIM_ARM_NAMES`;
    others after, in order of appearance)."""
    seen = list(dict.fromkeys(arms))
    return [a for a in SIM_ARM_NAMES if a in seen] + [a for a in seen if a not in SIM_ARM_NAMES]


def arm_palette(arms: Iterable[str]) -> dict[str, tuple[float, float, float]]:
    """One colour per arm, the same in every figure."""
    names = ordered_arms([*SIM_ARM_NAMES, *arms])
    colors = sns.color_palette("colorblind", len(names))
    return dict(zip(names, colors, strict=True))


def save_figure(fig: Figure, folder: Path, name: str, dpi: int) -> list[Path]:
    """Write ``folder/name.pdf`` and ``.png`` atomically; close the figure; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        path = folder / f"{name}.{fmt}"
        # no creation date in a PDF: the same figure is the same file on a rerun
        metadata = {"CreationDate": None} if fmt == "pdf" else None
        write_atomic(
            path,
            lambda tmp, fmt=fmt, metadata=metadata: fig.savefig(
                tmp, format=fmt, dpi=dpi, metadata=metadata
            ),
        )
        paths.append(path)
    plt.close(fig)
    return paths


def _log_x(ax: Axes, x: pd.Series) -> None:
    """A log x axis, or a note on an empty panel (no full window of the chosen length)."""
    if (x > 0).any():
        ax.set_xscale("log")
    else:
        ax.text(0.5, 0.5, "no full window in the input", ha="center", transform=ax.transAxes)


def _slant_tick_labels(ax: Axes) -> None:
    """Arm names under a bar or violin slanted at 45 degrees, each ending at its tick: rotated
    about their centres (matplotlib's default), long names ran into their neighbours."""
    plt.setp(ax.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor")


def _thousands(ax: Axes) -> None:
    """An axis of steps in thousands (``40k``): full numbers ran together at 120,000."""
    ax.xaxis.set_major_formatter(
        matplotlib.ticker.FuncFormatter(lambda value, _: f"{value / 1000:g}k")
    )


def _legend_below(fig: Figure, rows_in: float) -> None:
    """One legend under the panels for every labelled line of every axis (twins included),
    each label once; ``rows_in``: the height it takes, inches. Inside a panel the reference
    lines crossed it."""
    seen: dict[str, object] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncols=4, frameon=False)
    fig.tight_layout(rect=(0, rows_in / fig.get_figheight(), 1, 1))


def _grid(n: int, ncols: int, width: float, height: float) -> tuple[Figure, np.ndarray]:
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_axis_off()
    return fig, axes.flat


def power_traces(traces: pd.DataFrame, time_label: str = "time since the first step (s)") -> Figure:
    """Power of GPU 0 over time, one panel per source (row) and arm (column), cap dashed.

    ``traces``: ``panel, arm, t_s, power_w, cap_w, data``; ``time_label``: the x axis, saying
    where ``t_s`` starts.
    """
    panels = list(dict.fromkeys(traces["panel"]))
    arms = ordered_arms(traces["arm"])
    palette = arm_palette(arms)
    fig, axes = plt.subplots(
        len(panels),
        len(arms),
        figsize=(1.9 * len(arms), 1.45 * len(panels) + 0.4),
        sharex=True,
        sharey="row",
        squeeze=False,
    )
    for i, panel in enumerate(panels):
        for j, arm in enumerate(arms):
            ax = axes[i, j]
            sub = traces[(traces["panel"] == panel) & (traces["arm"] == arm)]
            if sub.empty:
                ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)
                continue
            ax.plot(sub["t_s"], sub["power_w"], color=palette[arm], linewidth=0.6)
            ax.axhline(sub["cap_w"].iloc[0], **CAP_STYLE)
            ax.set_title(f"{panel}: {arm}\n{data_label(sub['data'])}", fontsize=7)
    for i in range(len(panels)):  # per row, beside its ticks (a figure-wide label overprinted
        axes[i, 0].set_ylabel("GPU 0 power (W)", fontsize=7)  # the middle row's tick labels)
    fig.supxlabel(f"{time_label}; dashed: the cap", fontsize=8)
    fig.tight_layout()
    return fig


def power_distributions(samples: pd.DataFrame) -> Figure:
    """Distribution of per-GPU power per arm, one panel per source, cap dashed."""
    panels = list(dict.fromkeys(samples["panel"]))
    fig, axes = _grid(len(panels), 2, 4.2, 2.8)
    for ax, panel in zip(axes, panels, strict=False):
        sub = samples[samples["panel"] == panel]
        arms = ordered_arms(sub["arm"])
        sns.violinplot(
            sub,
            x="arm",
            y="power_w",
            hue="arm",
            order=arms,
            hue_order=arms,
            palette=arm_palette(arms),
            cut=0,
            inner="quart",
            linewidth=0.6,
            density_norm="width",
            legend=False,
            ax=ax,
        )
        ax.axhline(sub["cap_w"].iloc[0], **CAP_STYLE)
        ax.set_title(f"{panel} ({data_label(sub['data'])})")
        ax.set_xlabel("")
        ax.set_ylabel("per-GPU power (W)")
        _slant_tick_labels(ax)
    fig.tight_layout()
    return fig


def exceedance_windows(
    runs: pd.DataFrame,
    fleet: pd.DataFrame,
    sim: pd.DataFrame,
    sim_window_s: float,
    sim_72b: pd.DataFrame | None = None,
) -> Figure:
    """Share of windows whose mean power is above the cap, against the window length.

    ``runs``: the windows stage's ``run_pooled`` rows of every run (``run_id``, ``arm``,
    ``window_s``, ``exceedance``, ``data``); ``fleet``: the fleet stage's
    ``fleet_windows.csv``; ``sim``: the evaluate stage's ``summary.csv`` (exceedance at
    ``sim_window_s`` per deployment and arm); ``sim_72b``: the study fleet's comparison rows of
    the simulated 72B's over-cap share (``arm``, ``window_s``, ``this_run`` in %) at the study's
    windows. The study's 72B points are black crosses.
    """
    fig, ax = plt.subplots(figsize=(5.6, 3.4))
    palette = arm_palette(runs["arm"])
    for run_id, sub in runs.groupby("run_id", sort=False):
        ax.plot(
            sub["window_s"],
            100 * sub["exceedance"],
            marker="o",
            ms=3,
            lw=1,
            color=palette[sub["arm"].iloc[0]],
            label=f"run {run_id} ({data_label(sub['data'])})",
            zorder=3,  # over the fleet's line: runs at 0 % were hidden under it
        )
    n_gpus = int(fleet["n_gpus"].iloc[0])
    ax.plot(
        fleet["window_s"],
        100 * fleet["exceedance_mean"],
        marker="s",
        ms=3,
        lw=1.5,
        ls="--",
        color="0.35",
        label=f"fleet of {n_gpus} GPUs, mean over draws ({data_label(fleet['data'])})",
        zorder=2,
    )
    uncontrolled = sim[sim["arm"] == "uncontrolled"]
    if sim_72b is not None and "uncontrolled" in set(sim_72b["arm"]):
        # the 72B's uncontrolled point is drawn below with the study's windows: the same share
        # twice hid one marker under the other
        uncontrolled = uncontrolled[uncontrolled["deployment"].str.lower() != "72b"]
    for k, (marker, (_, row)) in enumerate(zip("^vD<>", uncontrolled.iterrows(), strict=False)):
        # dodged about the window (log x) so that shares a point apart do not merge
        dodge = 1.0 + 0.15 * (k - (len(uncontrolled) - 1) / 2)
        ax.scatter(
            [sim_window_s * dodge],
            [100 * row["exceedance"]],
            marker=marker,
            color="0.5",
            label=f"simulator {row['deployment']}, uncontrolled, {sim_window_s:g} s (SIMULATED)",
        )
    if sim_72b is not None:
        # points, not lines: only the study's windows, and exceedance need not fall between
        # them (a line from 0.5 s to 30 s hid the 72B's higher share at 5 s)
        for (arm, sub), marker in zip(sim_72b.groupby("arm", sort=False), "x+", strict=False):
            ax.scatter(
                sub["window_s"],
                sub["this_run"],
                marker=marker,
                s=24,
                color="0.2",
                label=f"simulator 72B, {arm}, seeds pooled, at the study's windows (SIMULATED)",
            )
    study = [(f.window_s, f.low) for f in STUDY_EXCEEDANCE_72B]
    ax.scatter(*zip(*study, strict=True), label="study: 72B, measured", **STUDY_STYLE)
    ax.set_xscale("log")
    ax.set_xlabel("averaging window (s)")
    ax.set_ylabel("windows above the cap (%)")
    ax.legend(frameon=False, fontsize=6, loc="upper right")
    fig.tight_layout()
    return fig


def authority(table: pd.DataFrame, threshold: float, study_72b_pct: tuple[float, float]) -> Figure:
    """Authority of each actuator per deployment beside the study's 72B concurrency authority
    (``study_72b_pct``, %), and the share a deployment retains."""
    table = table.assign(where=table["deployment"] + "\n" + table["data"].str.replace(" (", "\n("))
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.2))
    sns.barplot(table, x="where", y="authority", hue="actuator", ax=left)
    left.axhline(threshold, **CAP_STYLE)
    left.axhspan(*(v / 100.0 for v in study_72b_pct), color="0.8", zorder=0)
    left.set_title(
        f"authority (dashed: selection threshold {threshold:g}; grey: study, 72B "
        f"concurrency {study_72b_pct[0]:g}-{study_72b_pct[1]:g} %)"
    )
    left.set_ylabel("(power at highest - lowest level)\n/ (nameplate - idle)")
    retained = table.dropna(subset=["retained_authority"])
    sns.barplot(
        retained.assign(retained_pct=100 * retained["retained_authority"]),
        x="where",
        y="retained_pct",
        hue="actuator",
        ax=right,
    )
    right.set_title("retained authority")
    right.set_ylabel("% of the single-GPU deployment's")
    for ax in (left, right):
        ax.set_xlabel("")
        ax.legend(frameon=False, title="")
    fig.tight_layout()
    return fig


def fleet(fleet_windows: pd.DataFrame, scaling: pd.DataFrame, window_s: float) -> Figure:
    """Fleet peak demand against window length and fleet size, and the oversubscription factor
    against fleet size, beside the study's and published figures."""
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(11.0, 3.2))
    label = data_label(fleet_windows["data"])
    n_gpus = int(fleet_windows["n_gpus"].iloc[0])
    fw = fleet_windows.dropna(subset=["peak_share_mean"])
    a.fill_between(
        fw["window_s"],
        100 * fw["peak_share_p5"],
        100 * fw["peak_share_p95"],
        alpha=0.3,
        label="5-95 % of draws",
    )
    a.plot(fw["window_s"], 100 * fw["peak_share_mean"], marker="o", ms=3, label="mean")
    _log_x(a, fw["window_s"])
    a.set_xlabel("averaging window (s)")
    a.set_title(f"{n_gpus}-GPU fleet peak ({label})")
    at = scaling[(scaling["window_s"] - window_s).abs() <= 1e-9 * window_s].dropna(
        subset=["peak_share_mean"]
    )
    b.fill_between(at["n_gpus"], 100 * at["peak_share_p5"], 100 * at["peak_share_p95"], alpha=0.3)
    b.plot(at["n_gpus"], 100 * at["peak_share_mean"], marker="o", ms=3)
    _log_x(b, at["n_gpus"])
    b.set_xlabel("fleet size (GPUs)")
    b.set_title(f"peak at the {window_s:g} s window ({data_label(scaling['data'])})")
    # the study's one figure, where it was measured: 16 GPUs at its window (a band across every
    # window and fleet size read as the study's figure at each)
    low, high = STUDY_FLEET_PEAK.low, STUDY_FLEET_PEAK.high
    study_window_s = STUDY_FLEET_PEAK.window_s or window_s
    study = f"study: {STUDY_FLEET_GPUS} GPUs, {study_window_s:g} s, {STUDY_FLEET_PEAK.shown()}"
    for ax, x in ((a, study_window_s), (b, STUDY_FLEET_GPUS)):
        ax.errorbar(
            [x],
            [(low + high) / 2],
            yerr=[[(high - low) / 2], [(high - low) / 2]],
            fmt="s",
            ms=4,
            color="0.45",
            capsize=3,
            zorder=3,
            label=study,
        )
        ax.set_ylabel("peak demand (% of nameplate)")
    a.legend(frameon=False)
    sizing = f"margin {scaling['margin'].iloc[0]:g}, quantile {scaling['peak_quantile'].iloc[0]:g}"
    c.plot(at["n_gpus"], at["factor"], marker="o", ms=3, color="C2", label=f"this run ({sizing})")
    # the study's reading of its factor: nameplate / mean peak, no margin
    c.plot(
        at["n_gpus"],
        at["factor_no_margin_mean_peak"],
        marker="o",
        ms=3,
        ls="--",
        color="C2",
        label="this run (no margin, mean peak: the study's reading)",
    )
    study_label = f"study: {STUDY_OVERSUBSCRIPTION_TEXT}"
    c.axhline(STUDY_OVERSUBSCRIPTION.low, **CAP_STYLE, label=study_label)
    for figure, color in zip(PUBLISHED_OVERSUBSCRIPTION, ("C3", "C4", "C6"), strict=True):
        if figure.is_range:
            c.axhspan(figure.low, figure.high, color=color, alpha=0.2, label=figure.name)
        else:
            c.axhline(figure.low, color=color, linewidth=1, label=figure.name)
    _log_x(c, at["n_gpus"])
    c.set_xlabel("fleet size (GPUs)")
    c.set_ylabel("oversubscription factor (x)")
    c.set_title(f"factor at the {window_s:g} s window ({data_label(scaling['data'])})")
    # room above the lines for the legend (the study's 2x line ran through its first entry)
    low, high = c.get_ylim()
    c.set_ylim(low, high + 0.8 * (high - low))
    c.legend(frameon=False, fontsize=6, loc="upper left")
    fig.tight_layout()
    return fig


def ppo_learning(controllers: dict[str, dict], curves: dict[str, pd.DataFrame | None]) -> Figure:
    """The PPO meta-controller's training: episode return against environment steps where the
    controller stage wrote a learning curve, and the trained and random policies' and the
    oracle's setting's returns on the same nominal episodes (``controller.json``), per
    controller; where the curve has the rollouts'
    throughput and ``controller.json`` the oracle's, the throughput against the oracle's on a
    second axis (the returns' multiplier changes during training; the throughput does not); a
    dotted vertical line at the snapshot validation chose (``controller.json: selection``), in
    the training it came from (``training.seed``, named in the title where several trained)."""
    names = list(controllers)
    fig, axes = _grid(len(names), 3, 3.4, 2.6)
    for ax, name in zip(axes, names, strict=False):
        evaluation = controllers[name]["evaluation"]
        curve = curves.get(name)
        if curve is not None:
            ax.plot(curve["timesteps"], curve["episode_return"], lw=0.8, label="training episodes")
        else:
            ax.text(
                0.5,
                0.5,
                "no learning curve written\nby the controller stage",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=7,
            )
        ax.axhline(evaluation["trained_return"], color="C2", label="trained (nominal)")
        selection = controllers[name].get("selection")
        if selection:
            chosen = selection["candidates"][selection["chosen"]]["timesteps"]
            ax.axvline(chosen, color="0.4", ls=":", lw=0.8, label="validated snapshot")
        ax.axhline(evaluation["random_return"], color="C3", ls=":", label="random policy")
        if "oracle_return" in evaluation:
            ax.axhline(evaluation["oracle_return"], color="0.15", ls="-.", label="oracle (nominal)")
        oracle = controllers[name].get("oracle")
        if curve is not None and "tokens_per_s" in curve and oracle:
            twin = ax.twinx()
            twin.plot(
                curve["timesteps"],
                curve["tokens_per_s"],
                color="C4",
                lw=0.8,
                label="rollout tokens/s",
            )
            twin.axhline(oracle["tokens_per_s"], color="C4", ls="--", label="oracle tokens/s")
            twin.set_ylabel("tokens/s (rollouts; oracle dashed)", fontsize=7)
        meta = controllers[name]
        training = meta.get("training", {})
        seeds = training.get("seeds", [])
        chosen_of = f", seed {training['seed']} of {len(seeds)}" if len(seeds) > 1 else ""
        # the steps it trained (the deployment's factor times controller.total_timesteps)
        steps = f", {training['timesteps'] / 1000:g}k steps" if "timesteps" in training else ""
        ax.set_title(
            f"{meta.get('deployment', name)}: {meta.get('arm', 'ppo')}{chosen_of}{steps} "
            "(SIMULATED)"
        )
        ax.set_xlabel("environment steps (GRPO steps)")
        ax.set_ylabel("episode return")
        _thousands(ax)
    _legend_below(fig, 0.45)
    return fig


def throughput_violations(summary: pd.DataFrame) -> Figure:
    """Throughput against violation rate per arm and deployment, with confidence intervals."""
    deployments = list(dict.fromkeys(summary["deployment"]))
    palette = arm_palette(summary["arm"])
    fig, axes = _grid(len(deployments), 3, 3.5, 2.9)
    for ax, deployment in zip(axes, deployments, strict=False):
        sub = summary[summary["deployment"] == deployment]
        for _, row in sub.iterrows():
            x, y = 100 * row["violation_rate"], row["tokens_per_s"]
            xerr = 100 * np.abs(
                np.array([[row["violation_rate_ci_low"]], [row["violation_rate_ci_high"]]])
                - row["violation_rate"]
            )
            ends = [[row["tokens_per_s_ci_low"]], [row["tokens_per_s_ci_high"]]]
            yerr = np.abs(np.array(ends) - y)
            ax.errorbar(  # no bar where there is no interval (one seed): not a zero-width one
                x,
                y,
                xerr=xerr if np.isfinite(xerr).all() else None,
                yerr=yerr if np.isfinite(yerr).all() else None,
                fmt="o",
                ms=4,
                capsize=2,
                color=palette[row["arm"]],
                label=row["arm"],
            )
        ax.set_title(f"{deployment} ({data_label(sub['data'])})")
        ax.set_xlabel("violation rate (% of samples above the cap)")
        ax.set_ylabel("throughput (tokens/s)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


COST_METRICS = (
    ("energy_usd_per_mtok", "energy cost ($ / M tokens)"),
    ("carbon_kg_per_mtok", "carbon (kgCO2eq / M tokens)"),
    ("gpu_usd_per_mtok", "GPU time ($ / M tokens)"),
)


# The columns the figures read of each stage file (the report stage asks for them when it reads
# the file, so that a file without one is refused by name before anything is drawn).
def _with_ci(*names: str) -> tuple[str, ...]:
    return tuple(f"{name}{end}" for name in names for end in ("", "_ci_low", "_ci_high"))


SUMMARY_COLUMNS = (
    "deployment",
    "arm",
    "data",
    "exceedance",
    *_with_ci("tokens_per_s", "violation_rate"),
)
FLEET_WINDOWS_COLUMNS = (
    "window_s",
    "n_gpus",
    "exceedance_mean",
    "peak_share_mean",
    "peak_share_p5",
    "peak_share_p95",
    "data",
)
SCALING_COLUMNS = (
    *FLEET_WINDOWS_COLUMNS,
    "factor",
    "factor_no_margin_mean_peak",
    "margin",
    "peak_quantile",
)
AUTHORITY_COLUMNS = (
    "deployment",
    "data",
    "actuator",
    "authority",
    "retained_authority",
    "threshold",
)
ARMS_COLUMNS = (
    "source",
    "deployment",
    "arm",
    "data",
    *_with_ci(*(metric for metric, _ in COST_METRICS)),
)


def cost_carbon(arms: pd.DataFrame) -> Figure:
    """Energy cost, carbon and GPU-time cost per million tokens per arm, with intervals; one
    column per source and deployment."""
    arms = arms.assign(panel=arms["deployment"] + " (" + arms["source"] + ")")
    panels = list(dict.fromkeys(arms["panel"]))
    fig, axes = plt.subplots(
        len(COST_METRICS), len(panels), figsize=(2.6 * len(panels), 6.6), squeeze=False
    )
    for j, panel in enumerate(panels):
        sub = arms[arms["panel"] == panel]
        names = ordered_arms(sub["arm"])
        sub = sub.set_index("arm").loc[names]
        palette = arm_palette(names)
        for i, (metric, label) in enumerate(COST_METRICS):
            ax = axes[i, j]
            low = (sub[metric] - sub[f"{metric}_ci_low"]).clip(lower=0)
            high = (sub[f"{metric}_ci_high"] - sub[metric]).clip(lower=0)
            ax.bar(names, sub[metric], color=[palette[a] for a in names])
            # error bars where there is an interval only (an arm of one seed has none: a
            # zero-width bar would read as a tight interval)
            shown = (low.notna() & high.notna()).to_numpy()
            if shown.any():
                ax.errorbar(
                    np.flatnonzero(shown),
                    sub[metric].to_numpy()[shown],
                    yerr=[low.to_numpy()[shown], high.to_numpy()[shown]],
                    fmt="none",
                    ecolor="black",
                    capsize=2,
                )
            _slant_tick_labels(ax)
            ax.set_ylabel(label if j == 0 else "")
            if i == 0:
                ax.set_title(f"{panel}\n{data_label(sub['data'])}")
    fig.tight_layout()
    return fig


# Each figure's caption; ``{gpu}``: the GPU the real runs' traces name (their metadata).
# the study's "about 2x" (its abstract's words), as the fleet figure's line and caption say it
STUDY_OVERSUBSCRIPTION_TEXT = f"about {STUDY_OVERSUBSCRIPTION.low:g}x"
# the reference figures the captions name, from analysis/reference.py and analysis/authority.py
CAPTION_FIGURES = {
    "study_low": STUDY_CONCURRENCY_AUTHORITY_72B[0],
    "study_high": STUDY_CONCURRENCY_AUTHORITY_72B[1],
    "study_peak": STUDY_FLEET_PEAK.shown(),
    "study_factor": STUDY_OVERSUBSCRIPTION_TEXT,
    "published": ", ".join(f.name for f in PUBLISHED_OVERSUBSCRIPTION),
}
CAPTIONS = {
    "power_traces": "Power of GPU 0 over time for each arm (columns) of each real run and "
    "simulated deployment (rows), from the first training step; the dashed line is the per-GPU "
    "cap. Real runs are tiny GRPO runs whose power comes from the simulated {gpu} model where "
    "marked SIMULATED; simulator rows are the evaluate stage's first seed.",
    "power_distributions": "Distribution of per-GPU power samples per arm (violins cut at the "
    "observed range; lines: quartiles), evenly thinned to report.max_points per arm; the dashed "
    "line is the cap.",
    "exceedance_windows": "Share of sliding windows whose mean power is above the cap against the "
    "window length: each real run (per-GPU windows pooled), the fleet (mean over Monte Carlo "
    "draws), the simulator's uncontrolled arm at the evaluation window, the simulated 72B "
    "deployment's share at the study's windows only (uncontrolled and the controller, seeds "
    "pooled; points, not lines: every window's share is in the sim_windows stage's "
    "windows/simulated/DEPLOYMENT/exceedance.csv), and the study's 72B figures (black crosses). "
    "Exceedance need not fall monotonically with the window.",
    "authority": "Actuator authority per deployment: the change of mean per-GPU power between an "
    "actuator's lowest and highest level, as a share of nameplate minus idle (left), and the "
    "share of the single-GPU deployment's authority a sharded deployment retains (right); the grey "
    "band is the study's {study_low:g}-{study_high:g} % authority of concurrency on 72B.",
    "fleet": "Fleet peak demand as a share of nameplate against the averaging window (left) and "
    "the fleet size (middle), and the oversubscription factor nameplate / (peak x (1 + margin)) "
    "against the fleet size (right; dashed: with no margin over the mean peak, the study's "
    "reading), beside the study's {study_peak} and {study_factor} and the "
    "published {published} results. The fleet is made of {fleet_runs}.",
    "ppo_learning": "Training of the PPO meta-controllers (ppo and ppo+hwcap per deployment) in "
    "the simulator: episode return against environment steps where the controller stage logged "
    "it, the returns of the trained policy, a random policy and the oracle's setting on the "
    "same nominal episodes (dash-dot), the rollouts' throughput against the oracle's (dashed), "
    "and the snapshot validation chose (dotted); where a controller trained from several seeds "
    "(controller.training_seeds), the curve of the training validation chose from (its title "
    "names the seed). The training episodes' returns are not on the nominal lines' scale: they "
    "run under randomised physics and conditions (a lower cap, derating) at the training's own "
    "changing multiplier, so they can lie far below the random policy's nominal return; the "
    "throughput axis compares like with like.",
    "throughput_violations": "Throughput against violation rate per arm and deployment in the "
    "simulator, means over seeds with confidence intervals (both axes; none where an arm has "
    "one seed).",
    "cost_carbon": "Energy cost, location-based carbon and GPU-time cost per million completion "
    "tokens per arm (ratios of totals over seeds: all seeds' energy or GPU time over all their "
    "tokens; the ratio estimator's confidence intervals where an arm has two seeds or more), at "
    "the configured electricity price, PUE (GPU energy x PUE; hosts not counted), carbon region "
    "and GPU-hour price.",
}
