"""The study's one objective, stated once: maximise completion tokens subject to a violation
budget (``objective`` in the config).

A run meets the budget when

- the share of its per-GPU power samples above the cap is at most ``violation_budget``, and
- no window of ``breaker_window_s`` seconds has a mean per-GPU power above the cap (windows
  slide by one sample; the cap may change over the run, a demand-response schedule, so a
  window compares its mean power with its mean cap).

Among runs that meet it, more completion tokens in the time budget is better; a run that does
not meet it ranks below every one that does, and among those the lower violation share is
better. Every arm's evaluation (``analysis/evaluate.py``), the oracle's search
(``control/oracle.py``), the tuning of the threshold peer (``control/rollout.py``), the PPO
reward's Lagrangian multiplier (``control/env.py``, ``control/ppo.py``) and the report use this
module. It reads arrays only (no torch, no simulator), so analysis may import it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_power.config import ObjectiveConfig

INFEASIBLE = "cap infeasible for this deployment with these actuators"


@dataclass(frozen=True)
class Outcome:
    """A run judged by the objective (simulated when the run is).

    Attributes:
        tokens: completion tokens in the time budget.
        violation_rate: share of per-GPU samples above the cap.
        breaker_exceedance: share of breaker-length windows (per GPU) with mean power above
            the cap.
        breaker_excess_w: highest (window mean power - window mean cap) over breaker windows,
            W (> 0: the breaker window was exceeded); -inf when the run is shorter than one.
        mean_power_w: mean per-GPU power, W.
    """

    tokens: float
    violation_rate: float
    breaker_exceedance: float
    breaker_excess_w: float
    mean_power_w: float


def breaker_windows(power_w: np.ndarray, cap_w: np.ndarray, window: int) -> np.ndarray:
    """(mean power - mean cap) of every window of ``window`` consecutive samples, per GPU, W.

    Args:
        power_w: readings, shape (samples, gpus), W.
        cap_w: the cap at each sample, shape (samples,), W.
        window: samples per window (>= 1).

    Returns:
        Shape (samples - window + 1, gpus); empty when there are fewer samples than a window.
    """
    n = power_w.shape[0]
    if n < window:
        return np.empty((0, power_w.shape[1]))
    excess = np.asarray(power_w, dtype=float) - np.asarray(cap_w, dtype=float)[:, None]
    cumulative = np.vstack([np.zeros((1, excess.shape[1])), np.cumsum(excess, axis=0)])
    return (cumulative[window:] - cumulative[:-window]) / window


def judge(
    power_w: np.ndarray,
    cap_w: np.ndarray | float,
    tokens: float,
    period_s: float,
    objective: ObjectiveConfig,
) -> Outcome:
    """The outcome of one run from its readings (samples x gpus, one every ``period_s``)."""
    power_w = np.asarray(power_w, dtype=float)
    if power_w.ndim == 1:
        power_w = power_w[:, None]
    caps = np.broadcast_to(np.asarray(cap_w, dtype=float), (power_w.shape[0],))
    window = max(1, round(objective.breaker_window_s / period_s))
    excess = breaker_windows(power_w, caps, window)
    if power_w.size == 0:
        return Outcome(tokens, 0.0, 0.0, -np.inf, 0.0)
    return Outcome(
        tokens=float(tokens),
        violation_rate=float((power_w > caps[:, None]).mean()),
        breaker_exceedance=float((excess > 0).mean()) if excess.size else 0.0,
        breaker_excess_w=float(excess.max()) if excess.size else -np.inf,
        mean_power_w=float(power_w.mean()),
    )


def meets_budget(
    violation_rate: float, breaker_excess_w: float, objective: ObjectiveConfig
) -> bool:
    """Whether a run (or a mean over runs) is within the violation budget and the breaker."""
    within = violation_rate <= objective.violation_budget + 1e-12
    return bool(within and breaker_excess_w <= 0.0)


def rank_key(outcome: Outcome, objective: ObjectiveConfig) -> tuple[bool, float]:
    """Sort key of the objective (larger is better): within budget first, then more tokens;
    outside it, fewer violations."""
    if meets_budget(outcome.violation_rate, outcome.breaker_excess_w, objective):
        return (True, outcome.tokens)
    return (False, -outcome.violation_rate)


def pooled(outcomes: list[Outcome]) -> Outcome:
    """The mean outcome of runs over seeds; the breaker excess is the worst seed's (the breaker
    may trip on any run)."""
    return Outcome(
        tokens=float(np.mean([o.tokens for o in outcomes])),
        violation_rate=float(np.mean([o.violation_rate for o in outcomes])),
        breaker_exceedance=float(np.mean([o.breaker_exceedance for o in outcomes])),
        breaker_excess_w=float(max(o.breaker_excess_w for o in outcomes)),
        mean_power_w=float(np.mean([o.mean_power_w for o in outcomes])),
    )
