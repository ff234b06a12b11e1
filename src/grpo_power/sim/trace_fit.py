"""Identify's fit of the decode power model from measured traces with per-sample concurrency
(``grpo-power identify --trace T.parquet [--validate T2.parquet]``), and its validation.

The model is the simulator's decode curve (:mod:`grpo_power.sim.power_model`)::

    power_w = idle_w + (nameplate_w - idle_w) * (decode_base_frac
                                                 + decode_slope_per_doubling * log2(concurrency))

fitted by ordinary least squares (:func:`scipy.stats.linregress`) on every sample with a
concurrency of 1 or more; the traces need :data:`MIN_LEVEL_SAMPLES` such samples at each of two
concurrency levels or more. ``idle_w`` is the median of the samples with concurrency 0 and 0 %
utilisation (a bootstrap interval), or the config's ``gpu.idle_w`` (source ``config``, no
interval) where the traces have fewer than two; ``noise_w`` the residuals' standard deviation;
``transient_peak_frac`` the highest reading over nameplate, minus 1. A fitted value outside the
config schema's range for its parameter is written as not identifiable (``value`` None, the
``estimate`` and the ``reason`` beside it), never clamped. Consecutive 250 ms
samples are correlated, so the line's intervals use the effective sample size of AR(1)
residuals, ``n (1 - rho) / (1 + rho)``, and the idle median's and the noise's are bootstraps of
blocks of that many consecutive samples (the noise's not chi-square: the residuals are
skewed). The residuals' empirical distribution (prefill bursts make it
skewed, not Gaussian) gives the fitted model's p95 and maximum per concurrency bin.

The least-squares line is the mean of decode samples with the engine's prefill bursts in them
(vLLM admits new requests while it decodes); a GRPO step decodes one batch with its prefill
before it, so the simulator takes :func:`steady_decode`: the Theil-Sen line (median of pairwise
slopes, :func:`scipy.stats.theilslopes`) and the residuals' robust spread (normal-scaled median
absolute deviation), with the share of samples in bursts above it. Its bootstrap resamples
blocks of consecutive samples where the residuals are correlated beyond chance (a part's 1 s
averages read every 0.25 s), single samples elsewhere (:func:`block_length`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from grpo_power.config.telemetry import SimulatedPowerConfig
from grpo_power.listing import named_few
from grpo_power.stats import effective_sample_size, lag1_correlation

CONFIDENCE = 0.95
MIN_BIN_SAMPLES = 30  # bins with fewer samples are shown but not held to the targets
# the targets of a held-out bin's error, % of nameplate: of its mean power and of its p95
HELD_OUT_TARGETS_PCT = {"mean": 5.0, "p95": 10.0}
# Decode samples a concurrency level needs to count as one of the (at least 2) levels the line
# is fitted through: fewer are a handful of readings, one prefill burst among them moves their
# mean by tens of watts (11.6 % of the public traces' decode samples are bursts), and a bootstrap
# resample leaves out every sample of a level of k with probability about e^-k (e^-10 = 5e-5).
MIN_LEVEL_SAMPLES = 10
MIN_LEVELS = 2
FIT_PARAMETERS = (
    "idle_w",
    "decode_base_frac",
    "decode_slope_per_doubling",
    "noise_w",
    "transient_peak_frac",
)


@dataclass(frozen=True)
class TraceRun:
    """One trace's samples the fit reads: ``power_w``, ``concurrency`` (NaN where unknown) and
    ``sm_util`` (NaN where absent), with its run id and where it comes from."""

    run_id: str
    frame: pd.DataFrame
    label: str  # "measured (public trace)", "measured" or "simulated"


@dataclass(frozen=True)
class DecodeCurve:
    """The decode power model's parameters (W and fractions of nameplate - idle)."""

    nameplate_w: float
    idle_w: float
    base_frac: float
    slope_per_doubling: float

    def power_w(self, concurrency: np.ndarray) -> np.ndarray:
        """Steady decode power at each concurrency (>= 1), W."""
        span_w = self.nameplate_w - self.idle_w
        doublings = np.log2(np.maximum(np.asarray(concurrency, dtype=float), 1.0))
        return self.idle_w + span_w * (self.base_frac + self.slope_per_doubling * doublings)


def _decode_samples(runs: list[TraceRun]) -> pd.DataFrame:
    """The runs' samples with a concurrency of 1 or more, with a ``run_id`` column."""
    frames = [r.frame.assign(run_id=r.run_id) for r in runs]
    data = pd.concat(frames, ignore_index=True)
    return data[np.isfinite(data["concurrency"]) & (data["concurrency"] >= 1)]


def check_levels(concurrency: pd.Series, where: str) -> None:
    """Refuse decode samples the line cannot be fitted through.

    Args:
        concurrency: each decode sample's concurrency (>= 1).
        where: the traces they come from, for the message (their files).

    Raises:
        ValueError: fewer than :data:`MIN_LEVELS` concurrency levels with
            :data:`MIN_LEVEL_SAMPLES` samples each (the message lists the levels found).
    """
    counts = concurrency.value_counts().sort_index().sort_values(ascending=False, kind="stable")
    if int((counts >= MIN_LEVEL_SAMPLES).sum()) >= MIN_LEVELS:
        return
    shown = named_few(
        [f"{n} at {level:g}" for level, n in counts.items()], 6, more="more levels with fewer"
    )
    found = f"{len(concurrency)} ({shown})" if len(counts) else "none"
    raise ValueError(
        f"{where}: concurrency: expected at least {MIN_LEVEL_SAMPLES} decode samples "
        f"(concurrency >= 1) at each of {MIN_LEVELS} or more concurrency levels to fit the "
        f"decode line, got {found}"
    )


def schema_range(name: str, nameplate_w: float) -> tuple[float, float]:
    """The config schema's valid range of a fitted parameter (``idle_w``: ``gpu.idle_w``,
    above 0 and below ``nameplate_w``; the others: ``telemetry.simulated.<name>``), as
    (low, high); an open bound is infinite."""
    if name == "idle_w":
        return 0.0, nameplate_w
    low, high = -math.inf, math.inf
    for bound in SimulatedPowerConfig.model_fields[name].metadata:
        low = max(low, float(getattr(bound, "ge", getattr(bound, "gt", low))))
        high = min(high, float(getattr(bound, "le", getattr(bound, "lt", high))))
    return low, high


def _not_identifiable_reason(
    name: str, value: float, nameplate_w: float, highest_w: float
) -> str | None:
    """Why a fitted value is not a usable parameter (outside the config schema's range), or
    None where it lies inside it."""
    low, high = schema_range(name, nameplate_w)
    if low <= value <= high:
        return None
    where = "gpu.idle_w" if name == "idle_w" else f"telemetry.simulated.{name}"
    reason = (
        f"the estimate {value:.4g} lies outside {where}'s valid range [{low:g}, {high:g}] "
        "(the config schema)"
    )
    if name == "transient_peak_frac" and value < 0:
        reason += (
            f": the traces' highest reading, {highest_w:.1f} W, is under nameplate "
            f"({nameplate_w:g} W), so no transient above nameplate is seen in them"
        )
    return reason


def fit_decode_power(
    runs: list[TraceRun],
    nameplate_w: float,
    prior: dict[str, dict[str, float]],
    where: str | None = None,
) -> dict[str, Any]:
    """Fit the decode power model to the runs' samples.

    Args:
        runs: the traces to fit (each with concurrency).
        nameplate_w: their GPU's board power, W.
        prior: parameter name -> ``{"value", "low", "high"}`` of the simulator's defaults.
        where: the traces' files, for error messages (default: their run ids).

    Returns:
        ``parameters`` (name -> value, low, high, estimate, source, identifiable, reason,
        prior, prior_low, prior_high, unit; ``value``, ``low`` and ``high`` None where the
        estimate is outside the config schema's range, and ``low``/``high`` None for an
        ``idle_w`` taken from the config), ``least_squares_w`` and ``prior_w`` (the two lines
        in W: power at concurrency 1, per doubling, noise), ``residual_quantiles_w`` (101
        quantiles of the decode residuals, W), ``highest_reading_w``, sample counts and the
        effective sample size.

    Raises:
        ValueError: fewer than :data:`MIN_LEVELS` concurrency levels with
            :data:`MIN_LEVEL_SAMPLES` decode samples each, or a steady line no bootstrap can
            give an interval of (the message names ``where``).
    """
    where = where or ", ".join(r.run_id for r in runs)
    decode = _decode_samples(runs)
    check_levels(decode["concurrency"], where)
    data = pd.concat([r.frame for r in runs], ignore_index=True)
    idle = data[(data["concurrency"] == 0) & (data["sm_util"].fillna(0) == 0)]["power_w"]
    idle_values = idle.to_numpy(float)
    idle_from_config = len(idle_values) < 2
    if idle_from_config:
        idle_w, idle_lo, idle_hi = prior["idle_w"]["value"], None, None
    else:
        idle_w = float(np.median(idle_values))
        idle_lo, idle_hi = block_bootstrap_interval(idle_values, np.median)
    x = np.log2(decode["concurrency"].to_numpy(float))
    y = decode["power_w"].to_numpy(float)
    line = stats.linregress(x, y)
    residuals = y - (line.intercept + line.slope * x)
    n_eff = effective_sample_size(residuals)
    inflate = math.sqrt(len(y) / n_eff)
    t = float(stats.t.ppf(0.5 + CONFIDENCE / 2, max(n_eff - 2, 1)))
    span_w = nameplate_w - idle_w
    noise_w = float(np.std(residuals, ddof=2))
    # the residuals are skewed (prefill bursts): a chi-square interval assumes them normal
    noise_lo, noise_hi = block_bootstrap_interval(
        residuals, lambda r, axis=-1: np.std(r, ddof=2, axis=axis)
    )
    highest_w = float(data["power_w"].max())
    peak_frac = highest_w / nameplate_w - 1.0
    base_half = t * line.intercept_stderr * inflate / span_w
    slope_half = t * line.stderr * inflate / span_w
    base = (line.intercept - idle_w) / span_w
    try:
        steady = steady_decode(x, y)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    values: dict[str, tuple[float, float | None, float | None, str]] = {
        "idle_w": (idle_w, idle_lo, idle_hi, "W"),
        "decode_base_frac": (base, base - base_half, base + base_half, "of nameplate - idle"),
        "decode_slope_per_doubling": (
            line.slope / span_w,
            line.slope / span_w - slope_half,
            line.slope / span_w + slope_half,
            "of nameplate - idle per doubling",
        ),
        "noise_w": (noise_w, noise_lo, noise_hi, "W"),
        "transient_peak_frac": (peak_frac, peak_frac, peak_frac, "of nameplate, above it"),
    }
    parameters = {}
    for name, (v, lo, hi, unit) in values.items():
        entry: dict[str, Any] = {
            "value": float(v),
            "low": None if lo is None else float(lo),
            "high": None if hi is None else float(hi),
            "estimate": float(v),
            "source": "fit",
            "identifiable": True,
            "reason": None,
            "unit": unit,
            "prior": prior[name]["value"],
            "prior_low": prior[name]["low"],
            "prior_high": prior[name]["high"],
        }
        reason = _not_identifiable_reason(name, float(v), nameplate_w, highest_w)
        if name == "idle_w" and idle_from_config:
            entry.update(
                source="config",
                estimate=None,
                identifiable=False,
                reason=f"the config's gpu.idle_w, not fitted: the traces have {len(idle_values)} "
                "idle samples (concurrency 0 at 0 % utilisation), 2 or more needed",
            )
        elif reason is not None:
            entry.update(value=None, low=None, high=None, identifiable=False, reason=reason)
        parameters[name] = entry
    prior_span_w = nameplate_w - prior["idle_w"]["value"]
    at_1_half_w, slope_half_w = base_half * span_w, slope_half * span_w
    return {
        "parameters": parameters,
        "least_squares_w": {
            "power_at_1_w": {
                "value": float(line.intercept),
                "low": float(line.intercept - at_1_half_w),
                "high": float(line.intercept + at_1_half_w),
            },
            "slope_w_per_doubling": {
                "value": float(line.slope),
                "low": float(line.slope - slope_half_w),
                "high": float(line.slope + slope_half_w),
            },
            "noise_w": {"value": noise_w, "low": float(noise_lo), "high": float(noise_hi)},
        },
        "prior_w": {
            "power_at_1_w": {
                k: prior["idle_w"]["value"] + prior_span_w * prior["decode_base_frac"][k]
                for k in ("value", "low", "high")
            },
            "slope_w_per_doubling": {
                k: prior_span_w * prior["decode_slope_per_doubling"][k]
                for k in ("value", "low", "high")
            },
            "noise_w": dict(prior["noise_w"]),
        },
        "highest_reading_w": highest_w,
        "nameplate_w": nameplate_w,
        "confidence": CONFIDENCE,
        "decode_samples": len(y),
        "effective_samples": n_eff,
        "idle_samples": len(idle_values),
        "concurrency_zero_samples": int((data["concurrency"] == 0).sum()),
        "residual_quantiles_w": _residual_quantiles(
            decode["concurrency"].to_numpy(float), residuals
        ),
        "interval_note": "the line: t intervals on the AR(1) effective sample size; idle (the "
        "median) and noise (the residuals' standard deviation): percentile bootstrap, of blocks "
        "of consecutive samples where they are correlated",
        "steady_decode": steady,
    }


BURST_SIGMAS = 3.0  # a sample this many robust standard deviations above the line is a burst
LINE_RESAMPLES = 999  # bootstrap resamples of the steady line (each a Theil-Sen refit)
MAX_PAIRS = 250_000  # pairwise slopes a Theil-Sen line takes at most (all of 707 samples')
# The share of the line's resamples that may draw a single concurrency level (no line through
# them), left out and counted; past it the rest are a conditioned, narrower set than the 95 %
# interval says, and the line is refused.
MAX_LEFT_OUT_SHARE = 1 - CONFIDENCE
# values one vectorised call of scipy's bootstrap resamples at most (its ``batch`` x the sample
# count): 32 MB of float64, where 999 resamples of a day's 1 s readings at once, and the
# median's copy of them, took 1.4 GB
BOOTSTRAP_BATCH_VALUES = 4_000_000


def steady_decode(doublings: np.ndarray, power_w: np.ndarray) -> dict[str, Any]:
    """The steady decode line without prefill bursts, in watts (independent of the idle level).

    Args:
        doublings: log2 of each decode sample's concurrency.
        power_w: each sample's power, W.

    Returns:
        ``power_at_1_w`` (the line at concurrency 1), ``slope_w_per_doubling`` and ``noise_w``
        (the residuals' normal-scaled median absolute deviation), each ``{"value", "low",
        "high"}`` at :data:`CONFIDENCE` (the line's from a bootstrap of the whole line,
        refitted on each of :data:`LINE_RESAMPLES` resamples; the spread's from a bootstrap of
        the residuals), ``burst_share``: the share of samples more
        than :data:`BURST_SIGMAS` robust standard deviations above the line, and
        ``line_resamples_left_out``: the resamples that drew a single concurrency level, left
        out of the line's intervals.

    Raises:
        ValueError: the samples lie at fewer than 2 concurrency levels, or more than
            :data:`MAX_LEFT_OUT_SHARE` of the resamples draw a single level.
    """
    levels = len(np.unique(doublings))
    if levels < 2:
        raise ValueError(
            "concurrency: expected decode samples at 2 or more concurrency levels for the "
            f"steady line, got {len(doublings)} at {levels}"
        )
    rng = np.random.default_rng(0)
    n = len(doublings)
    # every pair where there are few enough (the same for every resample), else drawn anew
    pairs = np.triu_indices(n, k=1) if n * (n - 1) // 2 <= MAX_PAIRS else rng
    slope, intercept = _theil_sen(doublings, power_w, pairs)
    residuals = power_w - slope * doublings - intercept
    block = block_length(residuals)
    # the line at concurrency 1 lies below most samples' concurrency, so it moves with the slope:
    # both intervals come from the whole line refitted on each resample
    lines = np.empty((LINE_RESAMPLES, 2))
    for k in range(LINE_RESAMPLES):
        pick = block_resample(rng, n, block)
        lines[k] = _theil_sen(doublings[pick], power_w[pick], pairs)
    fitted = np.isfinite(lines).all(axis=1)
    left_out = int(LINE_RESAMPLES - fitted.sum())
    if left_out > MAX_LEFT_OUT_SHARE * LINE_RESAMPLES:
        raise ValueError(
            f"concurrency: expected decode samples spread over concurrency levels enough for a "
            f"bootstrap of the steady line (at most {MAX_LEFT_OUT_SHARE:.0%} of its "
            f"{LINE_RESAMPLES} resamples drawing a single level), got {left_out} of "
            f"{LINE_RESAMPLES} from {n} samples"
        )
    tail = (1 - CONFIDENCE) / 2
    (slope_lo, at_1_lo), (slope_hi, at_1_hi) = np.quantile(lines[fitted], [tail, 1 - tail], axis=0)

    def spread(values: np.ndarray, axis: int = -1) -> np.ndarray:
        return stats.median_abs_deviation(values, scale="normal", axis=axis)

    noise_w = float(spread(residuals))
    # blocks of consecutive residuals, as the line's resamples
    noise_lo, noise_hi = block_bootstrap_interval(residuals, spread, rng)
    return {
        "power_at_1_w": {"value": intercept, "low": float(at_1_lo), "high": float(at_1_hi)},
        "slope_w_per_doubling": {
            "value": float(slope),
            "low": float(slope_lo),
            "high": float(slope_hi),
        },
        "noise_w": {"value": noise_w, "low": noise_lo, "high": noise_hi},
        "burst_share": float((residuals > BURST_SIGMAS * noise_w).mean()),
        "line_resamples_left_out": left_out,
        "bootstrap_block": block,
        "method": "Theil-Sen line (the median of pairwise slopes, of "
        f"{MAX_PAIRS:,} random pairs where there are more) with bootstrap intervals of the line "
        "refitted on each resample; normal-scaled MAD of the residuals with a bootstrap "
        "interval; resamples of consecutive blocks where the residuals are correlated "
        "(bootstrap_block samples, 1: single samples); bursts above "
        f"{BURST_SIGMAS:g} robust standard deviations",
    }


def block_bootstrap_interval(
    values: np.ndarray,
    statistic: Any,
    rng: np.random.Generator | None = None,
) -> tuple[float, float]:
    """The percentile bootstrap interval (``CONFIDENCE``, 999 resamples drawn from ``rng``, by
    default seeded 0) of ``statistic(values)``, resampled in blocks of consecutive samples as
    long as :func:`block_length` of ``values`` asks (their lag-1 correlation, the same about any
    level); scipy's bootstrap where the samples are uncorrelated, in batches of at most
    :data:`BOOTSTRAP_BATCH_VALUES` resampled values. ``statistic`` takes an ``axis`` argument."""
    rng = np.random.default_rng(0) if rng is None else rng
    block = block_length(values)
    if block == 1:
        interval = stats.bootstrap(
            (values,),
            statistic,
            n_resamples=999,
            batch=max(1, BOOTSTRAP_BATCH_VALUES // len(values)),
            confidence_level=CONFIDENCE,
            method="percentile",
            random_state=rng,
        ).confidence_interval
        return float(interval.low), float(interval.high)
    draws = [statistic(values[block_resample(rng, len(values), block)]) for _ in range(999)]
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return float(low), float(high)


def block_length(residuals: np.ndarray) -> int:
    """Samples per bootstrap block: ``ceil((1 + rho) / (1 - rho))`` for the lag-1 correlation
    ``rho`` of consecutive residuals (at most 0.99), the number of correlated samples that
    count as one (:func:`~grpo_power.stats.effective_sample_size`'s ratio); 1 where ``rho`` is
    within what uncorrelated samples give by chance (``1.96 / sqrt(n)``). Readings a part
    averages over 1 s, read every 0.25 s, repeat a value four times: resampled one by one, they
    looked like four times the samples and narrowed the intervals by half."""
    n = len(residuals)
    rho = lag1_correlation(residuals)
    if n < 3 or rho <= 1.96 / math.sqrt(n):
        return 1
    rho = min(rho, 0.99)
    return max(1, min(n // 2, math.ceil((1 + rho) / (1 - rho))))


def block_resample(rng: np.random.Generator, n: int, block: int) -> np.ndarray:
    """Indices of a moving-block bootstrap resample of ``n`` samples in blocks of ``block``
    consecutive ones (single samples drawn with replacement where ``block`` is 1)."""
    if block == 1:
        return rng.integers(0, n, n)
    starts = rng.integers(0, n - block + 1, -(-n // block))
    return (starts[:, None] + np.arange(block)).ravel()[:n]


def _theil_sen(
    x: np.ndarray, y: np.ndarray, pairs: tuple[np.ndarray, np.ndarray] | np.random.Generator
) -> tuple[float, float]:
    """The Theil-Sen line through (``x``, ``y``): the median slope of ``pairs`` of samples
    (indices: every pair; a generator: :data:`MAX_PAIRS` drawn from it, as an hour at 0.1 s has
    650 million pairs, which scipy's ``theilslopes`` holds in memory at once) at different
    ``x``, and the median offset under it. Returns (slope, line at x = 0), both NaN where no
    pair lies at different ``x`` (a resample of a single concurrency level)."""
    if isinstance(pairs, np.random.Generator):
        first, second = pairs.integers(0, len(x), (2, MAX_PAIRS))
    else:
        first, second = pairs
    dx = x[second] - x[first]
    kept = dx != 0
    if not kept.any():
        return math.nan, math.nan
    slope = float(np.median((y[second] - y[first])[kept] / dx[kept]))
    return slope, float(np.median(y - slope * x))


def _residual_quantiles(concurrency: np.ndarray, residuals: np.ndarray) -> dict[str, list[float]]:
    """101 quantiles of the residuals (W) per concurrency bin with at least
    :data:`MIN_BIN_SAMPLES` samples, and over all (``"all"``): prefill bursts, the skewed tail,
    grow with concurrency (more requests arrive while more decode)."""
    levels = np.linspace(0, 1, 101)
    bins = concurrency_bin(concurrency)
    out = {"all": np.quantile(residuals, levels).tolist()}
    for low in np.unique(bins):
        part = residuals[bins == low]
        if len(part) >= MIN_BIN_SAMPLES:
            out[str(int(low))] = np.quantile(part, levels).tolist()
    return out


def curve_of(parameters: dict[str, dict[str, float]], nameplate_w: float, key: str) -> DecodeCurve:
    """The decode curve of the fitted (``key="value"``) or the prior (``"prior"``) parameters."""
    return DecodeCurve(
        nameplate_w,
        parameters["idle_w"][key],
        parameters["decode_base_frac"][key],
        parameters["decode_slope_per_doubling"][key],
    )


def concurrency_bin(concurrency: np.ndarray) -> np.ndarray:
    """Each concurrency's decode bin: the doubling it falls in (1, 2-3, 4-7, ...) as its lower
    edge; NaN below 1 (idle, concurrency 0, is no decode bin) and where it is unknown."""
    c = np.asarray(concurrency, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c >= 1, 2 ** np.floor(np.log2(np.where(c >= 1, c, 1.0))), np.nan)


def validation_rows(fit: dict[str, Any], runs: list[TraceRun], split: str) -> pd.DataFrame:
    """Measured against predicted mean, p95 and max power per concurrency bin, per run and over
    the runs together (``run_id`` "all"), for the fitted model and the prior.

    The fitted model's samples are its curve plus the fit's residual distribution in that bin
    (over all bins where the fit had too few samples in it), capped at nameplate x
    (1 + transient_peak_frac); the prior's are its curve plus Gaussian noise of
    ``noise_w`` (its maximum: the expected maximum of the bin's count of draws, capped at its
    transient peak). The fitted model is the least-squares estimate, also where a parameter is
    not identifiable (outside the config schema's range). ``held_to_targets``: the bin has
    :data:`MIN_BIN_SAMPLES` samples or more; ``meets_targets``: its errors of the mean and the
    p95 are within :data:`HELD_OUT_TARGETS_PCT` (empty where the bin is not held to them).

    Raises:
        ValueError: the runs have no decode sample (concurrency >= 1) to validate on.
    """
    parameters, nameplate_w = fit["parameters"], fit["nameplate_w"]
    estimates = {
        name: {"value": p["value"] if p.get("estimate") is None else p["estimate"]}
        for name, p in parameters.items()
    }
    fitted, prior = (
        curve_of(estimates, nameplate_w, "value"),
        curve_of(parameters, nameplate_w, "prior"),
    )
    quantiles = fit["residual_quantiles_w"]
    peak_w = nameplate_w * (1 + estimates["transient_peak_frac"]["value"])
    prior_peak_w = nameplate_w * (1 + parameters["transient_peak_frac"]["prior"])
    prior_noise_w = parameters["noise_w"]["prior"]
    decode = _decode_samples(runs)
    if decode.empty:
        raise ValueError(
            f"{', '.join(r.run_id for r in runs)}: concurrency: expected decode samples "
            "(concurrency >= 1) to validate the fit on, got none"
        )
    decode = decode.assign(bin=concurrency_bin(decode["concurrency"].to_numpy(float)))
    groups = [
        ("all", decode),
        *((r, decode[decode["run_id"] == r]) for r in decode["run_id"].unique()),
    ]
    rows = []
    for run_id, frame in groups:
        for low, part in frame.groupby("bin"):
            c = part["concurrency"].to_numpy(float)
            p = part["power_w"].to_numpy(float)
            residual_q = np.asarray(quantiles.get(str(int(low)), quantiles["all"]))
            mean_f, mean_p = fitted.power_w(c), prior.power_w(c)
            draws = np.minimum(peak_w, np.add.outer(mean_f, residual_q).ravel())
            z_max = stats.norm.ppf(1 - 1 / (len(p) + 1))
            rows.append(
                {
                    "split": split,
                    "run_id": run_id,
                    "concurrency_bin": f"{int(low)}-{int(2 * low - 1)}" if low > 1 else "1",
                    "concurrency_low": int(low),
                    "samples": len(p),
                    "measured_mean_w": p.mean(),
                    "predicted_mean_w": mean_f.mean(),
                    "prior_mean_w": mean_p.mean(),
                    "measured_p95_w": np.quantile(p, 0.95),
                    "predicted_p95_w": np.quantile(draws, 0.95),
                    "prior_p95_w": min(prior_peak_w, mean_p.mean() + 1.645 * prior_noise_w),
                    "measured_max_w": p.max(),
                    "predicted_max_w": min(peak_w, mean_f.max() + residual_q[-1]),
                    "prior_max_w": min(prior_peak_w, mean_p.max() + z_max * prior_noise_w),
                }
            )
    table = pd.DataFrame(rows)
    for stat in ("mean", "p95", "max"):
        table[f"error_{stat}_w"] = table[f"predicted_{stat}_w"] - table[f"measured_{stat}_w"]
        table[f"error_{stat}_pct_nameplate"] = 100 * table[f"error_{stat}_w"] / nameplate_w
        table[f"prior_error_{stat}_pct_nameplate"] = (
            100 * (table[f"prior_{stat}_w"] - table[f"measured_{stat}_w"]) / nameplate_w
        )
    table["held_to_targets"] = table["samples"] >= MIN_BIN_SAMPLES
    within = (table["error_mean_pct_nameplate"].abs() <= HELD_OUT_TARGETS_PCT["mean"]) & (
        table["error_p95_pct_nameplate"].abs() <= HELD_OUT_TARGETS_PCT["p95"]
    )
    # a bin with too few samples is not judged (empty), not passed
    table["meets_targets"] = within.astype("boolean").where(table["held_to_targets"])
    return table


def held_out_error(table: pd.DataFrame) -> dict[str, Any]:
    """The largest absolute error over bins with at least :data:`MIN_BIN_SAMPLES` samples, % of
    nameplate (fitted and prior), and how many of those ``bins`` meet the targets
    (``bins_meeting_targets``), of the held-out runs together and of each (``runs``), with
    ``held_out_samples`` (the held-out runs' decode samples, 0 where none was given) and
    ``largest_bin_samples`` (the held-out runs' fullest bin together, 0 where none), and the
    targets they are held to (``targets_pct_nameplate``: of a bin's mean and p95,
    ``min_bin_samples``: the bins held to them)."""

    def worst(rows: pd.DataFrame) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bins": len(rows),
            "bins_meeting_targets": int(rows["meets_targets"].fillna(False).sum()),
        }
        for stat in ("mean", "p95", "max"):
            for prefix in ("", "prior_"):
                column = rows[f"{prefix}error_{stat}_pct_nameplate"].abs()
                out[f"{prefix}{stat}_pct_nameplate"] = float(column.max()) if len(rows) else None
        return out

    every = table[(table["split"] == "held-out") & (table["run_id"] == "all")]
    held = table[(table["split"] == "held-out") & table["held_to_targets"]]
    return {
        **worst(held[held["run_id"] == "all"]),
        "held_out_samples": int(every["samples"].sum()),
        "largest_bin_samples": int(every["samples"].max()) if len(every) else 0,
        "runs": {r: worst(part) for r, part in held[held["run_id"] != "all"].groupby("run_id")},
        "targets_pct_nameplate": HELD_OUT_TARGETS_PCT,
        "min_bin_samples": MIN_BIN_SAMPLES,
    }
