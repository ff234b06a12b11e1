"""Per window: the fleet's exceedance and peak share of nameplate over draws, and the
oversubscription factor ``nameplate / (peak x (1 + margin))``."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from grpo_power.analysis.fleet.monte_carlo import DrawStats
from grpo_power.config import Config


def _quantile(values: np.ndarray, q: float) -> float:
    finite = values[np.isfinite(values)]
    return float(np.quantile(finite, q)) if len(finite) else float("nan")


def _factor(peak_share: float, margin: float) -> float:
    if not peak_share > 0:
        return float("nan")
    return 1.0 / (peak_share * (1.0 + margin))


def stats_table(
    stats: DrawStats, n_gpus: int, alignment: str, config: Config, label: str
) -> pd.DataFrame:
    """One row per window: exceedance and peak share over draws, and the factor."""
    q = config.fleet.peak_quantile
    margin = config.fleet.margin
    exceed = stats.exceedance
    share = stats.peak_share
    rows = []
    for i, window_s in enumerate(stats.window_s):
        peak_q = _quantile(share[:, i], q)
        peak_mean = float(np.nanmean(share[:, i])) if np.isfinite(share[:, i]).any() else math.nan
        e = exceed[:, i]
        has = np.isfinite(e).any()
        rows.append(
            {
                "alignment": alignment,
                "n_gpus": n_gpus,
                "draws": len(share),
                "window_s": window_s,
                "windows_per_draw": int(stats.windows[:, i].max()),
                "exceedance_mean": float(np.nanmean(e)) if has else math.nan,
                "exceedance_p95": _quantile(e, 0.95),
                "exceedance_max": float(np.nanmax(e)) if has else math.nan,
                "draws_with_exceedance": int(np.count_nonzero(stats.over[:, i] > 0)),
                "peak_share_mean": peak_mean,
                "peak_share_p5": _quantile(share[:, i], 0.05),
                "peak_share_p50": _quantile(share[:, i], 0.5),
                "peak_share_p95": _quantile(share[:, i], 0.95),
                "peak_share_max": float(np.nanmax(share[:, i])) if has else math.nan,
                "peak_quantile": q,
                "peak_share_sizing": peak_q,
                "margin": margin,
                "factor": _factor(peak_q, margin),
                "factor_no_margin_mean_peak": _factor(peak_mean, 0.0),
                "data": label,
            }
        )
    return pd.DataFrame(rows)
