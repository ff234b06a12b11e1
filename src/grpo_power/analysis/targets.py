"""The study's ratios and the controller's targets, per deployment, from the evaluation's metrics.

``analysis/evaluate.py`` computes each simulated run's metrics; this module compares a
controller arm's with another arm's on the same seeds (seeds are common to all arms, so every
ratio is paired) and gives each ratio with a two-sided Student-t interval over seeds, cut to
the values the ratio can take. A ratio is the mean over seeds of the per-seed ratios (so a share
of the oracle here and in the evaluation's arm table is one number), and a target is met when
that mean meets it: the interval is reported beside it, not judged (five seeds cannot narrow it
to a target's margin):

- :data:`COMPARISONS`: the ratios the study reports (against ``fixed``, ``fixed-safe``,
  ``uncontrolled``, the oracle and the threshold peer), next to the study's figures and the
  issue's targets; output against the threshold peer is met only with its violations no worse
  (the joint target);
- :func:`budget_targets`: the targets under the objective (``analysis/objective.py``): output
  against the arm's oracle and against the best classic peer (:data:`PEERS`) within the
  violation budget, the controller within it too (where no classic peer keeps the budget, the
  row has no value, base ``none``, and is met by the controller keeping it). A row against the
  peer carries the oracle's own share of that peer (``oracle_value``), the limit the arms are
  compared with: where it misses the target too (``reachable`` false), the target lies beyond
  that limit.

A controller whose oracle found the cap infeasible gets no rows: the evaluation's table says
the cap is infeasible instead of ranking arms on violations. Rows go to ``ratios.csv``; every
number is simulated and labelled so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.config import oracle_for
from grpo_power.stats import mean_ci

PEERS = ("threshold", "fixed-safe", "fixed")  # the classic peers of the ppo targets


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


# the values each kind of ratio can take (its interval is cut to them): a change of a
# non-negative metric is at least -100 %, a share at least 0, a difference of two shares of
# samples within +-100 points
SUPPORT = {"change": (-100.0, math.inf), "share": (0.0, math.inf), "points": (-100.0, 100.0)}


def paired_mean_ci(
    metrics: pd.DataFrame, arm: str, base: str, metric: str, kind: str, confidence: float
) -> tuple[np.ndarray, tuple[float, float, float]]:
    """The per-seed ratios of ``arm`` against ``base`` (:func:`_paired`) and their mean and
    Student-t interval at ``confidence`` over the seeds where the ratio is defined, cut to
    what the ratio can take (:data:`SUPPORT`)."""
    paired = _paired(metrics, arm, base, metric, kind)
    return paired, mean_ci(paired, confidence, SUPPORT[kind])


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
    metrics: pd.DataFrame,
    confidence: float,
    controller_arms: list[str],
    infos: dict[str, dict[str, Any]],
) -> pd.DataFrame:
    """The study's ratios for each controller arm on each deployment, with targets. A
    controller whose oracle found the cap infeasible (``infos``: each deployment's
    ``summary.json`` entry) gets none, as in :func:`budget_targets`: no setting keeps the
    budget there, and a target met against the fixed arm's or the oracle's violations would rank
    arms on violations where the table says the cap is infeasible."""
    rows = []
    for deployment, group in metrics.groupby("deployment", sort=False):
        arms = set(group["arm"])
        for controller in controller_arms:
            if controller not in arms or not _feasible(infos, deployment, controller):
                continue
            values, bases, seeds = {}, {}, {}
            for c in COMPARISONS:
                # an arm of the hardware tier is held to its own oracle (oracle+hwcap)
                base = oracle_for(controller) if c.base == "oracle" else c.base
                if c.deployments is not None and deployment not in c.deployments:
                    continue
                if base not in arms:
                    continue
                paired, values[c.key] = paired_mean_ci(
                    group, controller, base, c.metric, c.kind, confidence
                )
                bases[c.key] = base
                seeds[c.key] = (int(np.isfinite(paired).sum()), len(paired))
            by_key = {c.key: c for c in COMPARISONS}
            for key, (mean, low, high) in values.items():
                c = by_key[key]
                # a ratio undefined on some seeds (the base 0 there) is no ratio of the run
                met = math.isfinite(mean) and c.passes(mean) and seeds[key][0] == seeds[key][1]
                if c.joint is not None:
                    other = values.get(c.joint, (float("nan"),) * 3)[0]
                    met = met and math.isfinite(other) and by_key[c.joint].passes(other)
                row = _ratio_row(
                    deployment, controller, c, (mean, low, high), met, confidence, bases[key]
                )
                row["seeds"], row["seeds_paired"] = seeds[key]
                rows.append(row)
    return pd.DataFrame(rows)


def _feasible(infos: dict[str, dict[str, Any]], deployment: str, controller: str) -> bool:
    """Whether ``controller``'s oracle on ``deployment`` met the budget (``infos``: each
    deployment's ``summary.json`` entry; true where it was not run)."""
    return bool(infos[deployment]["arms"].get(oracle_for(controller), {}).get("feasible", True))


def _ratio_row(
    deployment: str,
    controller: str,
    c: Comparison,
    value: tuple[float, float, float],
    met: bool,
    confidence: float,
    base: str | None = None,
) -> dict[str, Any]:
    return {
        "deployment": deployment,
        "controller": controller,
        "comparison": c.key,
        "base": base or c.base,
        "metric": c.metric,
        # a change and a share are both in %: the unit says which (a share of 91 % read "+91.0 %")
        "unit": {"change": "% change", "share": "% of base", "points": "points"}[c.kind],
        "value": value[0],
        "ci_low": value[1],
        "ci_high": value[2],
        "target": c.target,
        "met": met,
        "study": c.study,
        "confidence": confidence,
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
      scenario) of the best classic peer within the budget, the controller within it too; the
      row's ``oracle_value`` is the controller's oracle's own share of that peer (mean over the
      seeds, %) and ``reachable`` whether that share meets the target (where it does not, the
      target lies beyond the limit the arms are compared with).

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
            if controller not in arms.index or not _feasible(infos, deployment, controller):
                continue
            within = bool(arms.loc[controller, "within_budget"])
            share = "output_tokens", "share", confidence
            if own in arms.index:
                _, v = paired_mean_ci(group, controller, own, *share)
                met = within and math.isfinite(v[0]) and oracle.passes(v[0])
                row = _ratio_row(deployment, controller, oracle, v, met, confidence, own)
                rows.append(row | {"oracle_value": 100.0, "reachable": True})
            reach = float("nan")
            if best is not None:
                _, v = paired_mean_ci(group, controller, best, *share)
                met = within and math.isfinite(v[0]) and peer.passes(v[0])
                if own in arms.index:
                    reach = paired_mean_ci(group, own, best, *share)[1][0]
            else:  # no classic peer keeps the budget: the controller that keeps it beats them all
                v, met = (float("nan"),) * 3, within
            row = _ratio_row(deployment, controller, peer, v, met, confidence, best or "none")
            reachable = not math.isfinite(reach) or peer.passes(reach)
            rows.append(row | {"oracle_value": reach, "reachable": reachable})
    return pd.DataFrame(rows)
