"""Identify's fit of the decode power model from measured traces with per-sample concurrency
(``grpo-power identify --trace T.parquet [--validate T2.parquet]``), and its validation.

The model is the simulator's decode curve (:mod:`grpo_power.sim.power_model`)::

    power_w = idle_w + (nameplate_w - idle_w) * (decode_base_frac
                                                 + decode_slope_per_doubling * log2(concurrency))

fitted by ordinary least squares (:func:`scipy.stats.linregress`) on every sample with a
concurrency of 1 or more. ``idle_w`` is the median of the samples with concurrency 0 and 0 %
utilisation (a bootstrap interval); ``noise_w`` the residuals' standard deviation;
``transient_peak_frac`` the highest reading over nameplate, minus 1. Consecutive 250 ms
samples are correlated, so every interval uses the effective sample size of AR(1) residuals,
``n (1 - rho) / (1 + rho)``. The residuals' empirical distribution (prefill bursts make it
skewed, not Gaussian) gives the fitted model's p95 and maximum per concurrency bin.

The least-squares line is the mean of decode samples with the engine's prefill bursts in them
(vLLM admits new requests while it decodes); a GRPO step decodes one batch with its prefill
before it, so the simulator takes :func:`steady_decode`: the Theil-Sen line (median of pairwise
slopes, :func:`scipy.stats.theilslopes`) and the residuals' robust spread (normal-scaled median
absolute deviation), with the share of samples in bursts above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

CONFIDENCE = 0.95
MIN_BIN_SAMPLES = 30  # bins with fewer samples are shown but not held to the targets
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


def _effective_n(residuals: np.ndarray) -> float:
    """Samples' effective count under AR(1) correlation of consecutive residuals."""
    n = len(residuals)
    if n < 3:
        return float(n)
    rho = float(np.corrcoef(residuals[:-1], residuals[1:])[0, 1])
    rho = min(max(rho, 0.0), 0.99) if math.isfinite(rho) else 0.0
    return max(3.0, n * (1 - rho) / (1 + rho))


def _decode_samples(runs: list[TraceRun]) -> pd.DataFrame:
    frames = [r.frame.assign(run_id=r.run_id) for r in runs]
    data = pd.concat(frames, ignore_index=True)
    return data[np.isfinite(data["concurrency"]) & (data["concurrency"] >= 1)]


def fit_decode_power(
    runs: list[TraceRun], nameplate_w: float, prior: dict[str, dict[str, float]]
) -> dict[str, Any]:
    """Fit the decode power model to the runs' samples.

    Args:
        runs: the traces to fit (each with concurrency).
        nameplate_w: their GPU's board power, W.
        prior: parameter name -> ``{"value", "low", "high"}`` of the simulator's defaults.

    Returns:
        ``parameters`` (name -> value, low, high, prior, prior_low, prior_high, unit),
        ``residual_quantiles_w`` (101 quantiles of the decode residuals, W), sample counts and
        the effective sample size.

    Raises:
        ValueError: fewer than 10 decode samples, or concurrency that never varies.
    """
    decode = _decode_samples(runs)
    if len(decode) < 10 or decode["concurrency"].nunique() < 2:
        raise ValueError(
            f"traces {[r.run_id for r in runs]}: concurrency: expected at least 10 samples at 2 "
            f"or more levels >= 1, got {len(decode)} at {decode['concurrency'].nunique()}"
        )
    data = pd.concat([r.frame for r in runs], ignore_index=True)
    idle = data[(data["concurrency"] == 0) & (data["sm_util"].fillna(0) == 0)]["power_w"]
    idle_values = idle.to_numpy(float)
    if len(idle_values) < 2:
        idle_w = idle_lo = idle_hi = prior["idle_w"]["value"]
    else:
        idle_w = float(np.median(idle_values))
        boot = stats.bootstrap(
            (idle_values,),
            np.median,
            n_resamples=999,
            confidence_level=CONFIDENCE,
            method="percentile",
            random_state=np.random.default_rng(0),
        )
        idle_lo, idle_hi = (
            float(boot.confidence_interval.low),
            float(boot.confidence_interval.high),
        )
    x = np.log2(decode["concurrency"].to_numpy(float))
    y = decode["power_w"].to_numpy(float)
    line = stats.linregress(x, y)
    residuals = y - (line.intercept + line.slope * x)
    n_eff = _effective_n(residuals)
    inflate = math.sqrt(len(y) / n_eff)
    t = float(stats.t.ppf(0.5 + CONFIDENCE / 2, max(n_eff - 2, 1)))
    span_w = nameplate_w - idle_w
    noise_w = float(np.std(residuals, ddof=2))
    chi = stats.chi2.ppf([0.5 + CONFIDENCE / 2, 0.5 - CONFIDENCE / 2], max(n_eff - 2, 1))
    noise_lo, noise_hi = (noise_w * math.sqrt((n_eff - 2) / c) for c in chi)
    peak_frac = float(data["power_w"].max()) / nameplate_w - 1.0
    base_half = t * line.intercept_stderr * inflate / span_w
    slope_half = t * line.stderr * inflate / span_w
    base = (line.intercept - idle_w) / span_w
    values = {
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
    parameters = {
        name: {
            "value": float(v),
            "low": float(lo),
            "high": float(hi),
            "unit": unit,
            "prior": prior[name]["value"],
            "prior_low": prior[name]["low"],
            "prior_high": prior[name]["high"],
        }
        for name, (v, lo, hi, unit) in values.items()
    }
    return {
        "parameters": parameters,
        "nameplate_w": nameplate_w,
        "confidence": CONFIDENCE,
        "decode_samples": len(y),
        "effective_samples": n_eff,
        "idle_samples": len(idle_values),
        "concurrency_zero_samples": int((data["concurrency"] == 0).sum()),
        "residual_quantiles_w": _residual_quantiles(
            decode["concurrency"].to_numpy(float), residuals
        ),
        "interval_note": "t and chi-square intervals on the AR(1) effective sample size; idle: "
        "bootstrap of the median",
        "steady_decode": steady_decode(x, y),
    }


BURST_SIGMAS = 3.0  # a sample this many robust standard deviations above the line is a burst
LINE_RESAMPLES = 999  # bootstrap resamples of the steady line (each a Theil-Sen refit)
MAX_PAIRS = 250_000  # pairwise slopes a Theil-Sen line takes at most (all of 707 samples')


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
        the residuals), and ``burst_share``: the share of samples more
        than :data:`BURST_SIGMAS` robust standard deviations above the line.
    """
    rng = np.random.default_rng(0)
    n = len(doublings)
    # every pair where there are few enough (the same for every resample), else drawn anew
    pairs = np.triu_indices(n, k=1) if n * (n - 1) // 2 <= MAX_PAIRS else rng
    slope, intercept = _theil_sen(doublings, power_w, pairs)
    # the line at concurrency 1 lies below most samples' concurrency, so it moves with the slope:
    # both intervals come from the whole line refitted on each resample
    lines = np.empty((LINE_RESAMPLES, 2))
    for k in range(LINE_RESAMPLES):
        pick = rng.integers(0, len(doublings), len(doublings))
        lines[k] = _theil_sen(doublings[pick], power_w[pick], pairs)
    tail = (1 - CONFIDENCE) / 2
    (slope_lo, at_1_lo), (slope_hi, at_1_hi) = np.quantile(lines, [tail, 1 - tail], axis=0)

    def spread(values: np.ndarray, axis: int = -1) -> np.ndarray:
        return stats.median_abs_deviation(values, scale="normal", axis=axis)

    residuals = power_w - slope * doublings - intercept
    noise_w = float(spread(residuals))
    noise = stats.bootstrap(
        (residuals,),
        spread,
        n_resamples=999,
        confidence_level=CONFIDENCE,
        method="percentile",
        random_state=rng,
    ).confidence_interval
    return {
        "power_at_1_w": {"value": intercept, "low": float(at_1_lo), "high": float(at_1_hi)},
        "slope_w_per_doubling": {
            "value": float(slope),
            "low": float(slope_lo),
            "high": float(slope_hi),
        },
        "noise_w": {"value": noise_w, "low": float(noise.low), "high": float(noise.high)},
        "burst_share": float((residuals > BURST_SIGMAS * noise_w).mean()),
        "method": "Theil-Sen line (the median of pairwise slopes, of "
        f"{MAX_PAIRS:,} random pairs where there are more) with bootstrap intervals of the line "
        "refitted on each resample; normal-scaled MAD of the residuals with a bootstrap "
        "interval; bursts above "
        f"{BURST_SIGMAS:g} robust standard deviations",
    }


def _theil_sen(
    x: np.ndarray, y: np.ndarray, pairs: tuple[np.ndarray, np.ndarray] | np.random.Generator
) -> tuple[float, float]:
    """The Theil-Sen line through (``x``, ``y``): the median slope of ``pairs`` of samples
    (indices: every pair; a generator: :data:`MAX_PAIRS` drawn from it, as an hour at 0.1 s has
    650 million pairs, which scipy's ``theilslopes`` holds in memory at once) at different
    ``x``, and the median offset under it. Returns (slope, line at x = 0)."""
    if isinstance(pairs, np.random.Generator):
        first, second = pairs.integers(0, len(x), (2, MAX_PAIRS))
    else:
        first, second = pairs
    dx = x[second] - x[first]
    kept = dx != 0
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
    """Each concurrency's bin: the doubling it falls in (1, 2-3, 4-7, ...) as its lower edge."""
    return 2 ** np.floor(np.log2(np.maximum(concurrency, 1.0)))


def validation_rows(fit: dict[str, Any], runs: list[TraceRun], split: str) -> pd.DataFrame:
    """Measured against predicted mean, p95 and max power per concurrency bin, per run and over
    the runs together (``run_id`` "all"), for the fitted model and the prior.

    The fitted model's samples are its curve plus the fit's residual distribution in that bin
    (over all bins where the fit had too few samples in it), capped at nameplate x
    (1 + transient_peak_frac); the prior's are its curve plus Gaussian noise of
    ``noise_w`` (its maximum: the expected maximum of the bin's count of draws, capped at its
    transient peak).
    """
    parameters, nameplate_w = fit["parameters"], fit["nameplate_w"]
    fitted, prior = (
        curve_of(parameters, nameplate_w, "value"),
        curve_of(parameters, nameplate_w, "prior"),
    )
    quantiles = fit["residual_quantiles_w"]
    peak_w = nameplate_w * (1 + parameters["transient_peak_frac"]["value"])
    prior_peak_w = nameplate_w * (1 + parameters["transient_peak_frac"]["prior"])
    prior_noise_w = parameters["noise_w"]["prior"]
    decode = _decode_samples(runs)
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
    table["in_target"] = table["samples"] >= MIN_BIN_SAMPLES
    return table


def held_out_error(table: pd.DataFrame) -> dict[str, Any]:
    """The largest absolute error over bins with at least :data:`MIN_BIN_SAMPLES` samples, % of
    nameplate (fitted and prior), of the held-out runs together and of each (``runs``)."""

    def worst(rows: pd.DataFrame) -> dict[str, Any]:
        out: dict[str, Any] = {"bins": len(rows)}
        for stat in ("mean", "p95", "max"):
            for prefix in ("", "prior_"):
                column = rows[f"{prefix}error_{stat}_pct_nameplate"].abs()
                out[f"{prefix}{stat}_pct_nameplate"] = float(column.max()) if len(rows) else None
        return out

    held = table[(table["split"] == "held-out") & table["in_target"]]
    return {
        **worst(held[held["run_id"] == "all"]),
        "runs": {r: worst(part) for r, part in held[held["run_id"] != "all"].groupby("run_id")},
    }
