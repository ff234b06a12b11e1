"""Arm-vs-arm evaluation (stage 4) from simulated runs: metrics, confidence intervals, ratios.

Reads what ``control/rollout.py`` wrote for each deployment (``<arm>.samples.parquet``,
``<arm>.steps.parquet``, ``arms.json``) and computes, per run (deployment x arm x seed), the
metrics of docs/design.md section 7:

- violation rate: share of per-GPU samples above the cap;
- exceedance at ``evaluate.exceedance_window_s`` (0.5 s): share of sliding windows whose mean
  power is above the cap, by :mod:`grpo_power.analysis.windows` (windows pooled over GPUs);
- output: completion tokens in the deployment's time budget (the last step pro rata);
- throughput: output / budget; tokens per MJ: output / GPU energy (integrated samples);
- the study's objective (``analysis/objective.py``): breaker-window exceedance (share of
  ``objective.breaker_window_s`` windows above the cap), the worst breaker window, and whether
  the run is within the violation budget.

An arm is within the budget when its mean violation rate over seeds is at most the budget and
no seed has a breaker window above the cap. The issue's targets compare the ppo arms with the
oracle and with the best classic peer (threshold, fixed-safe, fixed) within the budget. When
the oracle found no setting within the budget, the table says the cap is infeasible for the
deployment with these actuators and gives the lowest achievable power, instead of ranking
arms on violations.

Per arm: means with two-sided ``evaluate.confidence`` Student-t intervals over seeds. Ratios
the study reports are computed per seed (seeds are common to all arms, so comparisons are
paired) and given with the same intervals, next to the study's figures and the issue's targets.
Every number here is simulated and labelled so. Analysis imports neither torch nor SB3.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from grpo_power.analysis.objective import INFEASIBLE, judge, meets_budget
from grpo_power.analysis.reference import STUDY_SOURCE
from grpo_power.analysis.windows import gpu_window_counts, prepare_series
from grpo_power.atomic import write_csv_atomic, write_json_atomic, write_text_atomic
from grpo_power.config import ObjectiveConfig, oracle_for
from grpo_power.layout import EVALUATE, SIM_RUN, SIM_RUN_METADATA_KEY
from grpo_power.stats import mean_ci

METRICS = (
    "violation_rate",
    "exceedance",
    "breaker_exceedance",
    "output_tokens",
    "throughput",
    "tokens_per_mj",
)
PEERS = ("threshold", "fixed-safe", "fixed")  # the classic peers of the ppo targets


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
        series = prepare_series(int(gpu), t_s, rows["power_w"].to_numpy(float), None, 2 * period_s)
        energy_j += float(series.energy_j[-1])
        counts = gpu_window_counts(series, [window_s], cap_w, period_s)[0]
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
        "throughput": tokens / budget_s,
        "tokens_per_mj": tokens / (energy_j / 1e6) if energy_j > 0 else float("nan"),
        "energy_mj": energy_j / 1e6,
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
    """Per deployment and arm: mean and confidence interval of every metric over seeds, and
    whether the arm is within the violation budget (mean violation rate, worst breaker)."""
    rows = []
    for (deployment, arm), group in metrics.groupby(["deployment", "arm"], sort=False):
        row: dict[str, Any] = {"deployment": deployment, "arm": arm, "seeds": len(group)}
        for metric in (*METRICS, "mean_power_w", "mean_concurrency", "mean_max_new_tokens"):
            mean, low, high = mean_ci(group[metric].to_numpy(), confidence)
            row[metric], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"] = mean, low, high
        row["breaker_excess_w"] = float(group["breaker_excess_w"].max())
        row["within_budget"] = meets_budget(
            row["violation_rate"], row["breaker_excess_w"], objective
        )
        row["data"] = "simulated"
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Comparison:
    """One ratio the study reports, with the issue's target and the study's figure.

    ``kind``: ``change`` = (arm / base - 1) in %; ``share`` = arm / base in %; ``points`` =
    (arm - base) in percentage points.
    """

    key: str
    arm_role: str  # "controller": the ppo arm evaluated; else a fixed arm name
    base: str
    metric: str
    kind: str
    target: str
    passes: Callable[[float], bool]
    study: float | None = None
    deployments: tuple[str, ...] | None = None  # None: every deployment
    joint: str | None = None  # met only when this comparison (its other half) is met too


COMPARISONS: tuple[Comparison, ...] = (
    Comparison(
        "violations_vs_fixed",
        "controller",
        "fixed",
        "violation_rate",
        "change",
        "<= -85 %",
        lambda v: v <= -85.0,
        -89.8,
    ),
    Comparison(
        "output_vs_fixed",
        "controller",
        "fixed",
        "output_tokens",
        "change",
        ">= +15 %",
        lambda v: v >= 15.0,
        18.1,
    ),
    Comparison(
        "tokens_per_mj_vs_fixed",
        "controller",
        "fixed",
        "tokens_per_mj",
        "change",
        ">= +20 %",
        lambda v: v >= 20.0,
        26.2,
    ),
    Comparison(
        "output_vs_fixed_safe",
        "controller",
        "fixed-safe",
        "output_tokens",
        "change",
        ">= +30 % (72b)",
        lambda v: v >= 30.0,
        35.7,
        ("72b",),
    ),
    Comparison(
        "violations_vs_uncontrolled",
        "controller",
        "uncontrolled",
        "violation_rate",
        "change",
        "<= -85 % (72b)",
        lambda v: v <= -85.0,
        -87.2,
        ("72b",),
    ),
    Comparison(
        "output_share_of_oracle",
        "controller",
        "oracle",
        "output_tokens",
        "share",
        ">= 95 %",
        lambda v: v >= 95.0,
    ),
    Comparison(
        "violations_minus_oracle",
        "controller",
        "oracle",
        "violation_rate",
        "points",
        "<= +1 point",
        lambda v: v <= 1.0,
    ),
    Comparison(
        "output_vs_threshold",
        "controller",
        "threshold",
        "output_tokens",
        "change",
        ">= 0 % (with violations_minus_threshold <= 0)",
        lambda v: v >= 0.0,
        joint="violations_minus_threshold",
    ),
    Comparison(
        "violations_minus_threshold",
        "controller",
        "threshold",
        "violation_rate",
        "points",
        "<= 0 points (with output_vs_threshold >= 0)",
        lambda v: v <= 0.0,
        joint="output_vs_threshold",
    ),
)


def _paired(metrics: pd.DataFrame, arm: str, base: str, metric: str, kind: str) -> np.ndarray:
    a = metrics[metrics["arm"] == arm].set_index("seed")[metric]
    b = metrics[metrics["arm"] == base].set_index("seed")[metric]
    a, b = a.align(b, join="inner")
    a_v, b_v = a.to_numpy(float), b.to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "change":
            return np.where(b_v > 0, 100.0 * (a_v / b_v - 1.0), np.nan)
        if kind == "share":
            return np.where(b_v > 0, 100.0 * a_v / b_v, np.nan)
    return 100.0 * (a_v - b_v)


def comparisons(
    metrics: pd.DataFrame, confidence: float, controller_arms: list[str]
) -> pd.DataFrame:
    """The study's ratios for each controller arm on each deployment, with targets."""
    rows = []
    for deployment, group in metrics.groupby("deployment", sort=False):
        arms = set(group["arm"])
        for controller in controller_arms:
            if controller not in arms:
                continue
            values = {}
            for c in COMPARISONS:
                if c.deployments is not None and deployment not in c.deployments:
                    continue
                if c.base not in arms:
                    continue
                values[c.key] = mean_ci(
                    _paired(group, controller, c.base, c.metric, c.kind), confidence
                )
            by_key = {c.key: c for c in COMPARISONS}
            for key, (mean, low, high) in values.items():
                c = by_key[key]
                met = math.isfinite(mean) and c.passes(mean)
                if c.joint is not None:
                    other = values.get(c.joint, (float("nan"),) * 3)[0]
                    met = met and math.isfinite(other) and by_key[c.joint].passes(other)
                rows.append(_ratio_row(deployment, controller, c, (mean, low, high), bool(met)))
    return pd.DataFrame(rows)


def _ratio_row(
    deployment: str,
    controller: str,
    c: Comparison,
    value: tuple[float, float, float],
    met: bool,
    base: str | None = None,
) -> dict[str, Any]:
    return {
        "deployment": deployment,
        "controller": controller,
        "comparison": c.key,
        "base": base or c.base,
        "metric": c.metric,
        "unit": {"change": "%", "share": "%", "points": "points"}[c.kind],
        "value": value[0],
        "ci_low": value[1],
        "ci_high": value[2],
        "target": c.target,
        "met": met,
        "study": c.study,
        "data": "simulated",
    }


def budget_targets(
    metrics: pd.DataFrame,
    summary: pd.DataFrame,
    infos: dict[str, dict[str, Any]],
    confidence: float,
    controller_arms: list[str],
    changing: bool,
) -> pd.DataFrame:
    """The issue's targets under the objective, for each controller arm on each deployment:

    - ``budget_share_of_oracle``: output >= 95 % of its oracle's (``oracle``, or
      ``oracle+hwcap`` for an arm of the hardware tier), the controller within the budget;
    - ``budget_vs_best_peer``: output >= 100 % (110 % in a changing-workload or cap-schedule
      scenario) of the best classic peer within the budget, the controller within it too.

    A controller whose oracle found the cap infeasible gets no target rows (the table gives the
    verdict instead)."""
    rows = []
    need = 110.0 if changing else 100.0
    oracle = Comparison(
        "budget_share_of_oracle",
        "controller",
        "oracle",
        "output_tokens",
        "share",
        ">= 95 % within budget",
        lambda v: v >= 95.0,
    )
    peer = Comparison(
        "budget_vs_best_peer",
        "controller",
        "best peer",
        "output_tokens",
        "share",
        f">= {need:g} % of the best peer within budget",
        lambda v: v >= need,
    )
    for deployment, group in metrics.groupby("deployment", sort=False):
        arms = summary[summary["deployment"] == deployment].set_index("arm")
        peers = [p for p in PEERS if p in arms.index and bool(arms.loc[p, "within_budget"])]
        best = max(peers, key=lambda p: arms.loc[p, "output_tokens"]) if peers else None
        for controller in controller_arms:
            own = oracle_for(controller)
            feasible = infos[deployment]["arms"].get(own, {}).get("feasible", True)
            if controller not in arms.index or not feasible:
                continue
            within = bool(arms.loc[controller, "within_budget"])
            if own in arms.index:
                v = mean_ci(_paired(group, controller, own, "output_tokens", "share"), confidence)
                rows.append(
                    _ratio_row(
                        deployment,
                        controller,
                        oracle,
                        v,
                        within and math.isfinite(v[0]) and oracle.passes(v[0]),
                        own,
                    )
                )
            if best is not None:
                v = mean_ci(_paired(group, controller, best, "output_tokens", "share"), confidence)
                met = within and math.isfinite(v[0]) and peer.passes(v[0])
            else:
                v, met = (float("nan"),) * 3, within
            rows.append(_ratio_row(deployment, controller, peer, v, met, best or "none"))
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
        if settings.get("power_limit_w"):
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


def markdown_table(
    summary: pd.DataFrame, ratios: pd.DataFrame, infos: dict[str, dict[str, Any]]
) -> str:
    """The evaluation as Markdown: one arm table and one ratio table per deployment."""
    lines = [
        "# Arm evaluation (SIMULATED)",
        "",
        "All numbers are simulated (GRPO step simulator, calibrated A100 power model). "
        "Means over seeds with 95 % confidence intervals in brackets; c = concurrency, "
        "m = max new tokens, mb = training micro-batch.",
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
                lines += [
                    f"**{INFEASIBLE}** ({actuators}, arm {name}): no setting it searched meets "
                    f"the budget; lowest achievable mean power {oracle['lowest_power_w']:.1f} W "
                    f"per GPU (cap {info['cap_w']:g} W). Its arms are not ranked on violations.",
                    "",
                ]
        outputs = group.set_index("arm")["output_tokens"]
        lines += [
            "| arm | settings | violation rate % | exceedance 0.5 s % | breaker-window "
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
                ("throughput", 1.0, 1),
                ("tokens_per_mj", 1.0, 0),
            ):
                cells.append(
                    f"{_fmt(row[metric], digits, scale)} "
                    f"[{_fmt(row[metric + '_ci_low'], digits, scale)}, "
                    f"{_fmt(row[metric + '_ci_high'], digits, scale)}]"
                )
                if metric == "breaker_exceedance":
                    cells.append("yes" if row["within_budget"] else "NO")
            own = outputs.get(oracle_for(row["arm"]), float("nan"))
            cells.append(_fmt(100.0 * row["output_tokens"] / own))
            lines.append("| " + " | ".join(cells) + " |")
        mine = ratios[ratios["deployment"] == deployment] if len(ratios) else ratios
        if len(mine):
            lines += [
                "",
                "| controller | comparison | value | 95 % CI | target | met | study |",
                "|---|---|---|---|---|---|---|",
            ]
            for _, r in mine.iterrows():
                study = "" if r["study"] is None or not math.isfinite(r["study"]) else r["study"]
                lines.append(
                    f"| {r['controller']} | {r['comparison']} | {_fmt(r['value'])} {r['unit']} | "
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
            comparisons(metrics, confidence, controllers),
            budget_targets(metrics, summary, infos, confidence, controllers, changing),
        ],
        ignore_index=True,
    )
    markdown = markdown_table(summary, ratios, infos)
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
                    for a in ("oracle", "oracle+hwcap")
                    if a in i["arms"]
                }
                for d, i in infos.items()
            },
            "targets_met": int(ratios["met"].sum()) if len(ratios) else 0,
            "targets": len(ratios),
        },
    )
    return EvaluationResult(metrics, summary, ratios, markdown, infos)
