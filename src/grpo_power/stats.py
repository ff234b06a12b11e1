"""The statistics grpo-power uses, from scipy: confidence intervals over seeds, a distribution-free
bound of a percentile, the normal tail and quantiles, and non-negative least squares.

Shared by the analysis (evaluate), the economics (cost per arm) and the simulator (its power
noise and its calibration fit); imports nothing of grpo-power.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats


def mean_ci(
    values: np.ndarray, confidence: float, support: tuple[float, float] = (-math.inf, math.inf)
) -> tuple[float, float, float]:
    """Mean and two-sided Student-t confidence interval of ``values`` (NaNs dropped), the
    interval cut to ``support``, the values the quantity can take (a share of samples: 0 to 1;
    a rate or an energy: 0 up), where the t-interval of a few seeds reaches past them.

    Returns ``(mean, low, high)``; the interval is NaN with fewer than two values, all three
    with none.
    """
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(values.mean())
    if len(values) == 1:
        return mean, float("nan"), float("nan")
    t = float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1))
    half = t * values.std(ddof=1) / math.sqrt(len(values))
    low, high = support
    return mean, max(mean - half, low), min(mean + half, high)


def percentile_upper_bound(values: np.ndarray, percentile: float, confidence: float) -> float:
    """Distribution-free upper confidence bound of the ``percentile`` (0-100) of ``values``: the
    smallest order statistic x_(k) with P(Binomial(n, q) <= k - 1) >= ``confidence``; the
    maximum when there are too few values for that confidence."""
    x = np.sort(np.asarray(values, dtype=float))
    cdf = stats.binom.cdf(np.arange(len(x)), len(x), percentile / 100.0)
    enough = np.nonzero(cdf >= confidence)[0]
    return float(x[enough[0]]) if len(enough) else float(x[-1])


def normal_sf(z: np.ndarray) -> np.ndarray:
    """Upper tail of the standard normal, P(Z > z), elementwise."""
    return special.ndtr(-np.asarray(z, dtype=float))


def normal_ppf(q: np.ndarray) -> np.ndarray:
    """Quantiles of the standard normal at probabilities ``q``, elementwise."""
    return special.ndtri(np.asarray(q, dtype=float))


def nonnegative_least_squares(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The coefficients ``c >= 0`` minimising ``|design @ c - target|`` (Lawson-Hanson NNLS)."""
    solution, _ = optimize.nnls(np.asarray(design, dtype=float), np.asarray(target, dtype=float))
    return solution
