"""Arm-vs-arm evaluation (stage 4) from simulated runs: metrics, confidence intervals, ratios.

Reads what ``control/rollout.py`` wrote for each deployment (``<arm>.samples.parquet``,
``<arm>.steps.parquet``, ``arms.json``) and computes, per run (deployment x arm x seed), the
metrics of docs/design.md section 7:

- violation rate: share of per-GPU samples above the cap;
- exceedance at ``evaluate.exceedance_window_s`` (0.5 s): share of sliding windows whose mean
  power is above the cap, by :mod:`grpo_power.analysis.windows` (windows pooled over GPUs);
- output: completion tokens in the deployment's time budget (the last step pro rata);
- tokens per second (``tokens_per_s``): output / budget; tokens per MJ: output / GPU energy
  (integrated samples);
- the study's objective (``analysis/objective.py``): breaker-window exceedance (share of
  ``objective.breaker_window_s`` windows above the cap), the worst breaker window, and whether
  the run is within the violation budget.

An arm is within the budget when its mean violation rate over seeds is at most the budget and
no seed has a breaker window above the cap. The issue's targets compare the ppo arms with the
oracle and with the best classic peer (threshold, fixed-safe, fixed) within the budget. When
the oracle found no setting within the budget, the table says the cap is infeasible for the
deployment with these actuators and gives the lowest achievable power, instead of ranking
arms on violations.

Per arm: means with two-sided ``evaluate.confidence`` Student-t intervals over seeds. The
ratios the study reports and the issue's targets (``analysis/targets.py``) are computed per seed
(seeds are common to all arms, so comparisons are paired) with the same intervals.
Every number here is simulated and labelled so. Analysis imports neither torch nor SB3.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from grpo_power.analysis.objective import INFEASIBLE, judge, meets_budget
from grpo_power.analysis.reference import STUDY_SOURCE
from grpo_power.analysis.targets import budget_targets, comparisons, paired_mean_ci
from grpo_power.analysis.windows import gpu_window_counts, prepare_series
from grpo_power.atomic import write_csv_atomic, write_json_atomic, write_text_atomic
from grpo_power.config import ORACLE_ARMS, ObjectiveConfig, oracle_for
from grpo_power.layout import EVALUATE, SIM_RUN, SIM_RUN_METADATA_KEY
from grpo_power.stats import mean_ci

METRICS = (
    "violation_rate",
    "exceedance",
    "breaker_exceedance",
    "output_tokens",
    "tokens_per_s",
    "tokens_per_mj",
)
SHARES = ("violation_rate", "exceedance", "breaker_exceedance")  # of samples or windows: 0 to 1


def _read(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    table = pq.read_table(path)
    raw = (table.schema.metadata or {}).get(SIM_RUN_METADATA_KEY)
    if raw is None:
        raise ValueError(f"{path}: not a simulated run file of grpo-power (no run metadata)")
    return table.to_pandas(), json.loads(raw)


def run_metrics(
    samples: pd.DataFrame,
    steps: pd.DataFrame,
    meta: dict[str, Any],
    window_s: float,
    objective: ObjectiveConfig,
) -> dict[str, float]:
    """Metrics of one simulated run (one seed of one arm) from its samples and steps (samples
    carry their cap in ``cap_w`` when it changed over the run, else the metadata's cap)."""
    period_s = float(meta["period_s"])
    cap_w = float(meta["cap_w"])
    budget_s = float(meta["budget_s"])
    over = windows = 0
    energy_j = 0.0
    power_all = samples["power_w"].to_numpy(dtype=float)
    for gpu, rows in samples.groupby("gpu", sort=True):
        t_s = rows["sample"].to_numpy(dtype=float) * period_s
        power_w = rows["power_w"].to_numpy(float)
        series = prepare_series(int(gpu), t_s, power_w, None, 2 * period_s)
        energy_j += float(series.energy_j[-1])
        judged_cap_w = cap_w
        if "cap_w" in rows and (rows["cap_w"] != cap_w).any():
            # a window is above a changing cap where its mean of (power - the cap at each
            # sample) is above 0: the windows of that excess, shifted up by the highest cap
            caps_w = rows["cap_w"].to_numpy(float)
            judged_cap_w = float(caps_w.max())
            excess_w = power_w - caps_w + judged_cap_w
            series = prepare_series(int(gpu), t_s, excess_w, None, 2 * period_s)
        counts = gpu_window_counts(series, [window_s], judged_cap_w, period_s)[0]
        over += counts.over
        windows += counts.windows
    start, end = steps["start_s"].to_numpy(), steps["end_s"].to_numpy()
    share = np.clip((budget_s - start) / np.maximum(end - start, 1e-12), 0.0, 1.0)
    tokens = float((steps["tokens"].to_numpy() * share).sum())
    weights = np.clip(np.minimum(end, budget_s) - start, 0.0, None)
    grid = samples.pivot_table(index="sample", columns="gpu", values="power_w", aggfunc="first")
    if "cap_w" in samples:
        caps = samples.groupby("sample", sort=True)["cap_w"].first().to_numpy(float)
    else:
        caps = np.full(len(grid), cap_w)
    outcome = judge(grid.to_numpy(float), caps, tokens, period_s, objective)
    return {
        "violation_rate": outcome.violation_rate,
        "exceedance": over / windows if windows else float("nan"),
        "breaker_exceedance": outcome.breaker_exceedance,
        "breaker_excess_w": outcome.breaker_excess_w,
        "output_tokens": tokens,
        "tokens_per_s": tokens / budget_s,
        "tokens_per_mj": tokens / (energy_j / 1e6) if energy_j > 0 else float("nan"),
        "energy_j": energy_j,
        "mean_power_w": float(power_all.mean()),
        "mean_concurrency": float(np.average(steps["concurrency"], weights=weights)),
        "mean_max_new_tokens": float(np.average(steps["max_new_tokens"], weights=weights)),
        "steps": int((start < budget_s).sum()),
    }


def deployment_metrics(
    folder: Path, window_s: float, objective: ObjectiveConfig
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per-run metrics of every arm in one deployment's folder, and its ``arms.json``."""
    info = json.loads((folder / SIM_RUN.arms).read_text())
    rows = []
    for arm in info["arms"]:
        samples, meta = _read(folder / SIM_RUN.samples(arm))
        steps, _ = _read(folder / SIM_RUN.steps(arm))
        for seed, run_samples in samples.groupby("seed", sort=True):
            metrics = run_metrics(
                run_samples, steps[steps["seed"] == seed], meta, window_s, objective
            )
            rows.append(
                {
                    "deployment": info["deployment"],
                    "arm": arm,
                    "seed": int(seed),
                    "gpus": meta["gpus"],
                    "cap_w": meta["cap_w"],
                    "budget_s": meta["budget_s"],
                    **metrics,
                    "data": "simulated",
                }
            )
    return pd.DataFrame(rows), info


def summarize(metrics: pd.DataFrame, confidence: float, objective: ObjectiveConfig) -> pd.DataFrame:
    """Per deployment and arm: mean and confidence interval of every metric over seeds, whether
    the arm is within the violation budget (mean violation rate, worst breaker), and its output's
    share of its oracle's, % (``share_of_oracle``: the mean over seeds of the per-seed shares, as
    the targets take it, :func:`~grpo_power.analysis.targets.paired_mean_ci`; NaN without the
    oracle)."""
    rows = []
    for (deployment, arm), group in metrics.groupby(["deployment", "arm"], sort=False):
        row: dict[str, Any] = {"deployment": deployment, "arm": arm, "seeds": len(group)}
        for metric in (*METRICS, "mean_power_w", "mean_concurrency", "mean_max_new_tokens"):
            support = (0.0, 1.0) if metric in SHARES else (0.0, math.inf)
            mean, low, high = mean_ci(group[metric].to_numpy(), confidence, support)
            row[metric], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"] = mean, low, high
        row["breaker_excess_w"] = float(group["breaker_excess_w"].max())
        row["within_budget"] = meets_budget(
            row["violation_rate"], row["breaker_excess_w"], objective
        )
        runs = metrics[metrics["deployment"] == deployment]
        own = oracle_for(arm)
        row["share_of_oracle"] = (
            paired_mean_ci(runs, arm, own, "output_tokens", "share", confidence)[1][0]
            if (runs["arm"] == own).any()
            else float("nan")
        )
        row["data"] = "simulated"
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(value: float, digits: int = 1, scale: float = 1.0) -> str:
    return "n/a" if not math.isfinite(value) else f"{value * scale:.{digits}f}"


def _settings_text(arm: str, settings: dict[str, Any]) -> str:
    if arm == "threshold":
        s = settings["settings"]
        return (
            f"AIMD c from {settings['start_concurrency']}, m={settings['max_new_tokens']}, "
            f"high {s['high_frac_of_cap']:g}, low {s['low_frac_of_cap']:g}, "
            f"x{s['decrease_factor']:g}"
        )
    if arm.startswith("ppo"):
        holds = ", ".join(f"{k}={v}" for k, v in settings.get("holds", {}).items())
        text = f"drives {'+'.join(settings['actuators'])}" + (f"; {holds}" if holds else "")
        by_cap = settings.get("power_limit_by_cap") or []
        if len(by_cap) > 1:  # the hardware tier's limit at each cap a schedule sets
            text += "; limit " + ", ".join(
                f"{r['power_limit_w']:g} W at the {r['cap_w']:g} W cap" for r in by_cap
            )
        elif settings.get("power_limit_w"):
            text += f"; limit {settings['power_limit_w']:g} W"
        return text
    if arm.startswith("oracle") and len(settings.get("segments", [])) > 1:
        return "; ".join(
            f"from {s['start_s']:g} s: {_setting_text(s)}" for s in settings["segments"]
        )
    return _setting_text(settings)


def _setting_text(setting: dict[str, Any]) -> str:
    """One static setting as the table writes it: concurrency (c), max new tokens (m), the
    training micro-batch (mb) where the setting has one, the pause between steps where it is
    above 0 and the GPU power limit where it sets one."""
    text = f"c={setting['concurrency']}, m={setting['max_new_tokens']}"
    if "train_micro_batch" in setting:
        text += f", mb={setting['train_micro_batch']}"
    if setting.get("pause_s"):
        text += f", pause {setting['pause_s']:g} s"
    if setting.get("power_limit_w"):
        text += f", limit {setting['power_limit_w']:g} W"
    return text


def infeasible_why(lowest_power_w: float, lowest_cap_w: float) -> str:
    """Why a cap is infeasible, from the oracle's lowest achievable mean power per GPU and the
    run's lowest cap: a mean under the cap whose peaks still break the budget reads as a
    contradiction without it."""
    if lowest_power_w < lowest_cap_w:
        return (
            "a mean under the cap, but no setting keeps its samples and windows within the budget"
        )
    return "no setting brings the mean under the cap"


def markdown_table(
    summary: pd.DataFrame,
    ratios: pd.DataFrame,
    infos: dict[str, dict[str, Any]],
    confidence: float,
    window_s: float,
) -> str:
    """The evaluation as Markdown: one arm table and one ratio table per deployment, its
    intervals at ``confidence`` and its exceedance over ``window_s`` windows."""
    level = f"{100 * confidence:g} %"
    lines = [
        "# Arm evaluation (SIMULATED)",
        "",
        "All numbers are simulated (GRPO step simulator, calibrated GPU power model). "
        f"Means over seeds with {level} confidence intervals in brackets; c = concurrency, "
        "m = max new tokens, mb = training micro-batch. A share of the oracle and every ratio "
        "is the mean of the per-seed ratios (seeds are common to all arms), and a target is met "
        "when that mean meets it: its interval is shown, not judged.",
        "",
    ]
    for deployment, group in summary.groupby("deployment", sort=False):
        info = infos[deployment]
        lines += [
            f"## {deployment}: {info['gpus']} GPU(s), cap {info['cap_w']:g} W per GPU, "
            f"budget {info['budget_s']:g} s simulated, {len(info['seeds'])} seeds",
            "",
        ]
        objective = info.get("objective", {})
        if objective:
            lines += [
                f"Objective: most output with at most {100 * objective['violation_budget']:g} % "
                f"of samples above the cap and no {objective['breaker_window_s']:g} s window "
                "above it.",
                "",
            ]
        for name, actuators in (
            ("oracle", "the workload actuators"),
            ("oracle+hwcap", "the workload actuators and the GPU power limit"),
        ):
            oracle = info["arms"].get(name, {})
            if not oracle.get("feasible", True):
                lowest_cap_w = oracle.get("lowest_power_cap_w", info["cap_w"])
                lines += [
                    f"**{INFEASIBLE}** ({actuators}, arm {name}): no setting it searched meets "
                    f"the budget; lowest achievable mean power {oracle['lowest_power_w']:.1f} W "
                    f"per GPU under the run's lowest cap, {lowest_cap_w:g} W: "
                    f"{infeasible_why(oracle['lowest_power_w'], lowest_cap_w)}. Its arms are "
                    "not ranked on violations.",
                    "",
                ]
        lines += [
            f"| arm | settings | violation rate % | exceedance {window_s:g} s % | breaker-window "
            "exceedance % | within budget | output (tokens) | throughput (tok/s) | "
            "tokens per MJ | share of its oracle % |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for _, row in group.iterrows():
            cells = [row["arm"], _settings_text(row["arm"], info["arms"][row["arm"]])]
            for metric, scale, digits in (
                ("violation_rate", 100.0, 2),
                ("exceedance", 100.0, 2),
                ("breaker_exceedance", 100.0, 2),
                ("output_tokens", 1.0, 0),
                ("tokens_per_s", 1.0, 1),
                ("tokens_per_mj", 1.0, 0),
            ):
                cells.append(
                    f"{_fmt(row[metric], digits, scale)} "
                    f"[{_fmt(row[metric + '_ci_low'], digits, scale)}, "
                    f"{_fmt(row[metric + '_ci_high'], digits, scale)}]"
                )
                if metric == "breaker_exceedance":
                    cells.append("yes" if row["within_budget"] else "NO")
            cells.append(_fmt(row.get("share_of_oracle", math.nan)))
            lines.append("| " + " | ".join(cells) + " |")
        mine = ratios[ratios["deployment"] == deployment] if len(ratios) else ratios
        if len(mine):
            lines += [
                "",
                f"| controller | comparison | value | {level} CI | target | met | study |",
                "|---|---|---|---|---|---|---|",
            ]
            for _, r in mine.iterrows():
                study = "" if r["study"] is None or not math.isfinite(r["study"]) else r["study"]
                over = r.get("seeds", math.nan)
                of = r.get("seeds_paired", math.nan)
                fewer = (
                    f" (over {over:.0f} of {of:.0f} seeds: {r['base']} is 0 on the others)"
                    if math.isfinite(over) and math.isfinite(of) and over < of
                    else ""
                )
                reach = r.get("oracle_value", math.nan)
                beyond = (
                    f" (its oracle: {_fmt(reach)} %, short of the target too)"
                    if isinstance(reach, float) and math.isfinite(reach) and not r["reachable"]
                    else ""
                )
                lines.append(
                    f"| {r['controller']} | {r['comparison']} | {_fmt(r['value'])} {r['unit']}"
                    f"{fewer}{beyond} | "
                    f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] | {r['target']} | "
                    f"{'yes' if r['met'] else 'NO'} | {study} |"
                )
        lines.append("")
    lines.append(f"Study figures: {STUDY_SOURCE}.")
    return "\n".join(lines) + "\n"


@dataclass
class EvaluationResult:
    """Everything the evaluate stage computes for one scenario folder."""

    metrics: pd.DataFrame
    summary: pd.DataFrame
    ratios: pd.DataFrame
    markdown: str
    infos: dict[str, dict[str, Any]]


def evaluate_folder(
    folder: Path | str,
    deployments: list[str],
    window_s: float,
    confidence: float,
    objective: ObjectiveConfig,
    changing: bool = False,
) -> EvaluationResult:
    """Metrics, summary, ratios and table of a scenario folder; written into it atomically.

    ``changing``: a changing-workload or cap-schedule scenario (its ppo target is 110 % of the
    best classic peer within the budget).

    Files: ``metrics.csv`` (per run), ``summary.csv`` (per arm), ``ratios.csv``, ``table.md``,
    ``summary.json``.
    """
    folder = Path(folder)
    frames, infos = [], {}
    for deployment in deployments:
        metrics, info = deployment_metrics(folder / deployment, window_s, objective)
        frames.append(metrics)
        infos[deployment] = info
    metrics = pd.concat(frames, ignore_index=True)
    summary = summarize(metrics, confidence, objective)
    controllers = sorted({a for a in metrics["arm"] if a.startswith("ppo")})
    ratios = pd.concat(
        [
            comparisons(metrics, confidence, controllers, infos),
            budget_targets(metrics, summary, infos, confidence, controllers, changing),
        ],
        ignore_index=True,
    )
    for column in ("oracle_value", "reachable"):  # the target rows' (none where no target)
        if column not in ratios:
            ratios[column] = np.nan
    markdown = markdown_table(summary, ratios, infos, confidence, window_s)
    write_csv_atomic(folder / EVALUATE.metrics, metrics)
    write_csv_atomic(folder / EVALUATE.summary_csv, summary)
    write_csv_atomic(folder / EVALUATE.ratios, ratios)
    write_text_atomic(folder / EVALUATE.table, markdown)
    write_json_atomic(
        folder / EVALUATE.summary_json,
        {
            "data": "simulated",
            "confidence": confidence,
            "exceedance_window_s": window_s,
            "deployments": infos,
            "objective": objective.model_dump(),
            "feasible": {
                d: {
                    a: bool(i["arms"][a].get("feasible", True))
                    for a in ORACLE_ARMS
                    if a in i["arms"]
                }
                for d, i in infos.items()
            },
            "targets_met": int(ratios["met"].sum()) if len(ratios) else 0,
            "targets": len(ratios),
        },
    )
    return EvaluationResult(metrics, summary, ratios, markdown, infos)
