"""The low-cost pilot: the smallest real deployment that would confirm the controller's gain
and the fleet's oversubscription headroom with stated confidence.

Controller's gain, per simulated deployment: the paired per-seed relative change of the
controller arm against the baseline (output tokens and tokens per MJ up, violation rate down)
from the evaluate stage; metrics where the simulator shows no gain are not confirmed. The pilot
is sized to detect ``min_effect_share`` of the simulated mean change with a two-sided paired
t-test at ``confidence`` and the given ``power``, the simulator's spread inflated by
``sd_inflation``: the fewest seeds (at least ``min_seeds``) at which the test's power, from the
noncentral t distribution (``scipy.stats.nct``, noncentrality ``sqrt(n) x effect / sd``),
reaches ``power`` (where scipy's ``nct`` gives NaN, at very large noncentrality, the normal
approximation of that tail, there 1 or 0 to many digits). The normal formula
``((z(1 - alpha / 2) + z(power)) x sd / effect)^2`` is its start: it undercounts a few seeds
(3 where the t-test needs 5 at the defaults, power 0.39 at 3). The largest over the metrics
with a gain sizes the pilot; a metric the simulator ran on one seed has no spread to size by
and sizes nothing. Each seed runs both arms for ``run_steps`` steps at the simulated step time.

Headroom: with no fleet exceedance in ``n`` independent (non-overlapping) windows, the
exceedance rate is below ``-ln(1 - confidence) / n`` at that confidence; bounding it below
``exceedance_target`` takes ``n = ceil(-ln(1 - confidence) / target)`` windows of the fleet
window, on a fleet of the fleet stage's size. The runs are the fleet's workload, so both
checks share the same nodes and hours: the pilot lasts the longer of the two.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pandas as pd
from scipy import stats

from grpo_power.config import PilotConfig

# metric -> the sign of a gain
GAIN_METRICS = {"output_tokens": 1.0, "tokens_per_mj": 1.0, "violation_rate": -1.0}


def paired_t_power(seeds: int, effect: float, sd: float, confidence: float) -> float:
    """Power of a two-sided paired t-test at ``confidence`` over ``seeds`` pairs (two or more)
    against a true mean change ``effect`` with per-pair spread ``sd``."""
    df = seeds - 1
    critical = float(stats.t.ppf(0.5 + confidence / 2, df))
    shift = abs(math.sqrt(seeds) * effect / sd)  # the power of a two-sided test: symmetric
    near = float(stats.nct.sf(critical, df, shift))  # rejecting on the side of the effect
    far = float(stats.nct.cdf(-critical, df, shift))  # and on the other side
    # scipy's nct returns NaN at large noncentrality (cdf at df 5, shift 10; df 50, shift 40):
    # there the far side is below the normal tail Phi(-critical - shift), nothing, and the near
    # side is the normal approximation 1 - Phi(critical - shift), 1 to many digits
    if not math.isfinite(far):
        far = float(stats.norm.cdf(-critical - shift))
    if not math.isfinite(near):
        near = float(stats.norm.sf(critical - shift))
    power = near + far
    if not math.isfinite(power):
        raise ValueError(
            f"no power for {seeds} seeds, effect {effect:g}, spread {sd:g}: scipy's noncentral t "
            "gave NaN and so did its normal approximation"
        )
    return min(power, 1.0)


def seeds_needed(changes: np.ndarray, pilot: PilotConfig) -> tuple[float, float, float]:
    """Seeds per arm to detect ``min_effect_share`` of the (non-zero) mean of per-seed
    ``changes`` (two or more) with a two-sided paired t-test (see the module docstring), with
    the detectable effect and the inflated spread used."""
    effect = pilot.min_effect_share * abs(float(changes.mean()))
    sd = pilot.sd_inflation * float(changes.std(ddof=1))
    seeds = pilot.min_seeds
    if sd > 0:
        z = NormalDist().inv_cdf(0.5 + pilot.confidence / 2) + NormalDist().inv_cdf(pilot.power)
        seeds = max(seeds, math.ceil((z * sd / effect) ** 2))  # the normal formula: a start
        while paired_t_power(seeds, effect, sd, pilot.confidence) < pilot.power:
            seeds += 1
    return float(seeds), effect, sd


def headroom_windows(pilot: PilotConfig) -> int:
    """Independent fleet windows without exceedance that bound the rate below the target."""
    return math.ceil(-math.log(1.0 - pilot.confidence) / pilot.exceedance_target)


def _paired_changes(group: pd.DataFrame, arm: str, base: str, metric: str) -> np.ndarray:
    mine = group[group["arm"] == arm].set_index("seed")[metric]
    theirs = group[group["arm"] == base].set_index("seed")[metric]
    mine, theirs = mine.align(theirs, join="inner")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(theirs > 0, mine / theirs - 1.0, np.nan)


def pilot_plan(
    metrics: pd.DataFrame,
    controller_arm: str,
    baseline_arm: str,
    fleet_gpus: int,
    window_s: float,
    gpu_hour_usd: float,
    pilot: PilotConfig,
) -> pd.DataFrame:
    """One pilot per simulated deployment (rows of the evaluate stage's ``metrics.csv``), with
    ``smallest`` marking the cheapest that confirms both claims. A deployment where the
    simulator shows no gain gets ``sized_by = "no simulated gain"`` and infinite seeds.

    Args:
        metrics: per-run simulated metrics (``deployment, arm, seed, gpus, steps, budget_s`` and
            :data:`GAIN_METRICS`).
        controller_arm, baseline_arm: the arms compared.
        fleet_gpus: GPUs of the fleet whose headroom is confirmed (the fleet stage's).
        window_s: the fleet window the oversubscription factor was sized at, s.
        gpu_hour_usd: price of a GPU-hour, $.
    """
    windows = headroom_windows(pilot)
    headroom_h = windows * window_s / 3600.0
    rows = []
    for deployment, group in metrics.groupby("deployment", sort=False):
        if not {controller_arm, baseline_arm} <= set(group["arm"]):
            continue
        gains = []  # (seeds, effect, sd, metric, simulated mean change) per metric with a gain
        paired = 0
        for metric, sign in GAIN_METRICS.items():
            changes = _paired_changes(group, controller_arm, baseline_arm, metric)
            changes = changes[np.isfinite(changes)]
            paired = max(paired, len(changes))
            if len(changes) > 1 and sign * changes.mean() > 0:  # one seed: no spread
                gains.append((*seeds_needed(changes, pilot), metric, float(changes.mean())))
        why = "no simulated gain" if paired > 1 else "one simulated seed: no spread to size by"
        no_gain = (math.inf, 0.0, 0.0, why, math.nan)
        seeds, effect, sd, metric, simulated = max(gains, key=lambda g: g[0], default=no_gain)
        gpus = int(group["gpus"].iloc[0])
        compared = group[group["arm"].isin([controller_arm, baseline_arm])]
        step_s = float((compared["budget_s"] / compared["steps"]).mean())
        run_h = pilot.run_steps * step_s / 3600.0
        nodes = math.ceil(max(fleet_gpus, gpus) / pilot.gpus_per_node)
        slots = nodes * pilot.gpus_per_node // gpus
        runs = 2 * seeds
        runs_h = math.ceil(runs / slots) * run_h if math.isfinite(seeds) else math.inf
        hours = max(runs_h, headroom_h)
        gpu_hours = nodes * pilot.gpus_per_node * hours
        rows.append(
            {
                "deployment": deployment,
                "gpus_per_run": gpus,
                "sized_by": metric,
                "simulated_change_pct": 100.0 * simulated,
                "detectable_change_pct": math.copysign(100.0 * effect, simulated),
                "sd_pct": 100.0 * sd,
                "seeds_per_arm": seeds,
                "runs": runs,
                "run_hours": run_h,
                "headroom_windows": windows,
                "headroom_hours": headroom_h,
                "nodes": nodes,
                "gpus": nodes * pilot.gpus_per_node,
                "hours": hours,
                "weeks": hours / 168.0,
                "gpu_hours": gpu_hours,
                "cost_usd": gpu_hours * gpu_hour_usd,
                # the settings the pilot is sized by, so the file says how it was sized
                "confidence": pilot.confidence,
                "power": pilot.power,
                "min_effect_share": pilot.min_effect_share,
                "sd_inflation": pilot.sd_inflation,
                "min_seeds": pilot.min_seeds,
                "exceedance_target": pilot.exceedance_target,
                "data": "simulated inputs",
            }
        )
    plan = pd.DataFrame(rows)
    if len(plan):
        finite = np.isfinite(plan["cost_usd"])
        # one pilot: the cheapest, the first of deployments that cost the same
        cheapest = plan.loc[finite, "cost_usd"].idxmin() if finite.any() else None
        plan["smallest"] = plan.index == cheapest
    return plan
