"""The statistics module against published tables and brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from grpo_power.stats import (
    effective_sample_size,
    mean_ci,
    nonnegative_least_squares,
    normal_sf,
    percentile_upper_bound,
)


def test_mean_and_interval_use_students_t() -> None:
    mean, low, high = mean_ci(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 0.95)
    half = 2.7764 * np.std([1, 2, 3, 4, 5], ddof=1) / math.sqrt(5)  # t(0.975, 4) = 2.7764
    assert mean == 3.0
    assert (low, high) == pytest.approx((3 - half, 3 + half), abs=1e-3)
    mean, low, high = mean_ci(np.array([0.0, 2.0]), 0.95)
    assert high - mean == pytest.approx(12.7062, abs=1e-3)  # t(0.975, 1) x sd sqrt(2) / sqrt(2)
    assert math.isnan(mean_ci(np.array([7.0]), 0.95)[1])
    assert math.isnan(mean_ci(np.array([np.nan]), 0.95)[0])
    assert mean_ci(np.array([1.0, np.nan, 3.0]), 0.95)[0] == 2.0  # NaNs dropped


def test_an_interval_stays_within_what_the_quantity_can_take() -> None:
    """Five seeds' violation rates, four of them 0: the t-interval reaches below 0 (the report
    showed 'ppo+hwcap 0.01 [-0.01, 0.04]'); a share's is cut at 0, its upper end unchanged."""
    rates = np.array([0.0, 0.0, 0.0, 0.0, 0.05])
    half = 2.7764 * np.std(rates, ddof=1) / math.sqrt(5)  # t(0.975, 4) = 2.7764
    assert mean_ci(rates, 0.95)[1] == pytest.approx(0.01 - half, abs=1e-4)  # below 0
    mean, low, high = mean_ci(rates, 0.95, (0.0, 1.0))
    assert (mean, low) == (0.01, 0.0) and high == pytest.approx(0.01 + half, abs=1e-4)
    shares = np.array([1.0, 1.0, 1.0, 1.0, 0.9])  # and at 1 from above
    assert mean_ci(shares, 0.95, (0.0, 1.0))[1:] == (pytest.approx(0.98 - half * 2, abs=1e-4), 1.0)


def test_percentile_upper_bound_is_an_order_statistic() -> None:
    values = np.arange(1.0, 1001.0)  # 1..1000
    # P(Binomial(1000, 0.99) <= k - 1) >= 0.95 first holds at k = 996 (P = 0.96; 0.93 at 995).
    assert percentile_upper_bound(values, 99.0, 0.95) == 996.0
    assert percentile_upper_bound(values[:50], 99.0, 0.95) == 50.0  # too few: the maximum
    assert percentile_upper_bound(values, 50.0, 0.95) > 500.0
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(values)
    assert percentile_upper_bound(shuffled, 99.0, 0.95) == 996.0  # order of the input is free


def test_the_percentile_bound_of_a_correlated_series_holds_as_often_as_it_says() -> None:
    """6,000 readings of an AR(1) series (lag-1 correlation 0.9, the true p99 2.326 sd; about
    316 effective samples, enough for a 95 % bound of p99): the bound that counts every reading
    as independent held the p99 in about 3 of 4 series; on the series' effective size it must
    hold it at least 95 % of the time (it holds it in every one: the AR(1) size is
    conservative for a tail)."""
    from scipy import signal

    rng = np.random.default_rng(1)
    rho, true_p99 = 0.9, float(stats.norm.ppf(0.99))
    noise = rng.normal(0.0, math.sqrt(1 - rho**2), size=(400, 7000))
    series = signal.lfilter([1.0], [1.0, -rho], noise, axis=1)[:, -6000:]  # warmed up: sd 1
    held = {"iid": 0, "effective": 0}
    for x in series:
        held["iid"] += percentile_upper_bound(x, 99.0, 0.95) >= true_p99
        bound = percentile_upper_bound(x, 99.0, 0.95, effective_sample_size(x))
        held["effective"] += bound >= true_p99
    assert held["iid"] < 0.8 * 400 and held["effective"] >= 0.95 * 400, held
    assert 6000 * 0.1 / 1.9 * 0.8 < effective_sample_size(series[0]) < 6000 * 0.1 / 1.9 * 1.2
    x = np.arange(1.0, 1001.0)  # uncorrelated: the effective size changes nothing
    assert percentile_upper_bound(x, 99.0, 0.95, 1000.0) == 996.0


def test_normal_tail_matches_known_values() -> None:
    np.testing.assert_allclose(
        normal_sf(np.array([0.0, 1.0, 1.959964, -1.0])),
        [0.5, 0.158655, 0.025, 0.841345],
        atol=1e-6,
    )


def test_nonnegative_least_squares_against_brute_force() -> None:
    """NNLS is the best of the least-squares fits on every subset of columns whose coefficients
    are all non-negative (the others held at zero)."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        design = rng.normal(size=(12, 3))
        target = rng.normal(size=12)
        best = math.inf
        for size in range(4):
            for subset in itertools.combinations(range(3), size):
                if not subset:
                    best = min(best, float(target @ target))
                    continue
                coef, *_ = np.linalg.lstsq(design[:, subset], target, rcond=None)
                if (coef >= 0).all():
                    best = min(best, float(np.sum((design[:, subset] @ coef - target) ** 2)))
        solution = nonnegative_least_squares(design, target)
        assert (solution >= 0).all()
        assert float(np.sum((design @ solution - target) ** 2)) == pytest.approx(best, rel=1e-9)
