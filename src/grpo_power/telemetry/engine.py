"""Inference-engine metrics beside a power log: ``telemetry import POWER.csv --engine ENGINE.csv``.

An engine's metrics log (vLLM, SGLang or TGI Prometheus gauges scraped to CSV) gives, per
sample, the decode concurrency (requests being decoded together) and a cumulative count of
generated tokens. This module reads such a log through a small column table
(:data:`ENGINE_COLUMNS`), finds the offset between its clock and the power log's, and aligns
its samples to every power sample with :func:`pandas.merge_asof`, adding the trace columns
``concurrency`` and ``tokens_per_s``.

Clocks: nvidia-smi writes local wall time without a zone, engines write unix seconds. The
offset is found from the data: the whole quarter hour between -14 h and +14 h (every time
zone's offset) that puts the most engine samples inside the power log's span, then the
residual skew within +-1 s that best correlates power with concurrency, measured over segments
of the run too (at least six, at most 20 s long; those where power follows concurrency with a
correlation of 0.3 or more): the Theil-Sen line through their skews is the drift, and a drift
of more than a power sample over the run, whose 95 % interval excludes none and whose rate a
clock can have (1,000 ppm at most), is followed along that line. No candidate that covers at
least half the engine samples: refused. What was chosen is recorded in the trace metadata and
printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from grpo_power.telemetry.logrows import (
    ImportError_,
    columns_shown,
    numeric_column,
    read_csv_log,
)

EngineName = Literal["vllm", "sglang", "tgi"]

# engine -> (timestamp column, concurrency gauge, cumulative generated-token counter); a
# Prometheus prefix ("vllm:", "sglang:") on a column name is ignored.
ENGINE_COLUMNS: dict[str, tuple[str, str, str]] = {
    "vllm": ("timestamp", "num_requests_running", "generation_tokens_total"),
    "sglang": ("timestamp", "num_running_reqs", "generation_tokens_total"),
    "tgi": ("timestamp", "tgi_batch_current_size", "tgi_request_generated_tokens_sum"),
}
QUARTER_HOUR_S = 900.0
ZONE_LIMIT_S = 14 * 3600.0
SKEW_LIMIT_S = 1.0
MIN_COVERED = 0.5  # the share of engine samples an offset must put inside the power log
DRIFT_SEGMENTS = 6  # the run's parts whose skews give the drift: at least six,
DRIFT_SEGMENT_S = 20.0  # and as many more as make them this long at most
DRIFT_MIN_CORRELATION = 0.3  # a segment's skew counts where power follows concurrency this well
# A clock's rate error: quartz oscillators are within about 100 ppm; a faster apparent drift is
# the engine's reporting lag changing, not its clock, and is not followed.
MAX_DRIFT_PPM = 1000.0


@dataclass(frozen=True)
class EngineLog:
    """An engine log read: per sample, unix time (s), concurrency and generated tokens/s."""

    unix_s: np.ndarray
    concurrency: np.ndarray
    tokens_per_s: np.ndarray
    engine: str
    path: Path
    period_s: float


def read_engine_log(path: Path | str, engine: EngineName = "vllm") -> EngineLog:
    """Read an engine metrics CSV (unix-second timestamps; CRLF or LF) through
    :data:`ENGINE_COLUMNS`; tokens/s is the counter's difference over the time difference
    (the first sample: 0; a counter reset: 0 for that interval).

    Raises:
        ImportError_: a missing column (naming the ones found), a non-numeric value, or time
            that does not increase.
    """
    path = Path(path)
    raw, lines = read_csv_log(path, f"{engine} metrics")
    names = {c.strip().split(":", 1)[-1]: c for c in raw.columns}
    wanted = ENGINE_COLUMNS[engine]
    for column in wanted:
        if column not in names:
            raise ImportError_(
                f"{path}: missing column '{column}' (expected in a {engine} metrics log: "
                f"{list(wanted)}); found {columns_shown(raw.columns)}"
            )
    t_s, concurrency, tokens = (
        numeric_column(path, raw[names[c]], c, lines).to_numpy() for c in wanted
    )
    finite, backwards = np.isfinite(t_s), np.diff(t_s) <= 0
    if not finite.all() or backwards.any():
        bad = int(np.argmax(~finite)) if not finite.all() else int(np.argmax(backwards)) + 1
        raise ImportError_(
            f"{path}: line {lines[bad]}: column '{wanted[0]}': expected unix seconds that "
            f"increase, got {t_s[bad]!r}"
        )
    rate = np.diff(tokens, prepend=tokens[:1]) / np.diff(t_s, prepend=t_s[0] - 1.0)
    rate = np.where(np.isfinite(rate) & (rate >= 0), rate, 0.0)
    period_s = float(np.median(np.diff(t_s))) if len(t_s) > 1 else 1.0
    return EngineLog(t_s, np.nan_to_num(concurrency), rate, engine, path, period_s)


def _covered(power_unix_s: np.ndarray, engine_unix_s: np.ndarray, offset_s: float) -> float:
    """The share of engine samples inside the power log's span shifted by ``offset_s``."""
    lo, hi = power_unix_s[0] + offset_s, power_unix_s[-1] + offset_s
    return float(np.mean((engine_unix_s >= lo) & (engine_unix_s <= hi)))


def _merged(
    power_unix_s: np.ndarray, log: EngineLog, offset_s: float | np.ndarray, tolerance_s: float
) -> pd.DataFrame:
    """Each power sample's nearest engine sample within ``tolerance_s`` (NaN where none); the
    offset is one for the run or one per power sample (a drift followed)."""
    left = pd.DataFrame({"unix_s": power_unix_s + offset_s, "row": np.arange(len(power_unix_s))})
    right = pd.DataFrame(
        {"unix_s": log.unix_s, "concurrency": log.concurrency, "tokens_per_s": log.tokens_per_s}
    )
    merged = pd.merge_asof(
        left.sort_values("unix_s"),
        right,
        on="unix_s",
        direction="nearest",
        tolerance=tolerance_s,
    )
    return merged.sort_values("row").reset_index(drop=True)


def _skew(
    power_unix_s: np.ndarray, power_w: np.ndarray, log: EngineLog, offset_s: float, step_s: float
) -> tuple[float, float]:
    """The residual skew in [-1, 1] s (steps of ``step_s``) that best correlates power with
    concurrency, and that correlation (NaN when concurrency never varies)."""
    best = (0.0, float("nan"))
    for skew_s in np.arange(-SKEW_LIMIT_S, SKEW_LIMIT_S + step_s / 2, step_s):
        r = _correlation(power_w, _merged(power_unix_s, log, offset_s + skew_s, log.period_s))
        if np.isfinite(r) and (not np.isfinite(best[1]) or r > best[1] + 1e-9):
            best = (float(skew_s), r)
    return best


def _correlation(power_w: np.ndarray, merged: pd.DataFrame) -> float:
    """Power's correlation with the matched engine concurrency (NaN when either never varies
    or fewer than 3 samples matched)."""
    ok = merged["concurrency"].notna().to_numpy()
    if ok.sum() < 3 or np.std(merged["concurrency"][ok]) == 0 or np.std(power_w[ok]) == 0:
        return float("nan")
    return float(np.corrcoef(power_w[ok], merged["concurrency"][ok])[0, 1])


def align_engine(
    power_unix_s: np.ndarray, power_w: np.ndarray, log: EngineLog
) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    """The engine's concurrency and tokens/s at every power sample, the alignment chosen and
    notes.

    Args:
        power_unix_s: each power sample's time as the power log states it (local time read in
            some zone), unix seconds, in file order.
        power_w: the samples' power, W (for the residual skew).
        log: the engine log.

    Returns:
        (frame with ``concurrency`` and ``tokens_per_s`` per power sample, NaN where no engine
        sample lies within one engine period; metadata ``engine_alignment``; notes).

    Raises:
        ImportError_: no zone offset puts half the engine samples inside the power log's span.
    """
    order = np.sort(power_unix_s)
    candidates = np.arange(-ZONE_LIMIT_S, ZONE_LIMIT_S + 1, QUARTER_HOUR_S)
    shares = np.array([_covered(order, log.unix_s, c) for c in candidates])
    if shares.max() < MIN_COVERED:
        gap_h = (log.unix_s[0] - order[0]) / 3600.0
        raise ImportError_(
            f"{log.path}: timestamp: expected engine samples within the power log's span under "
            f"some time-zone offset (whole quarter hours, -14 h to +14 h), got none covering "
            f"{MIN_COVERED:.0%} of them (the engine log starts {gap_h:+.2f} h from the power "
            "log): not the same run?"
        )
    zone_s = float(candidates[int(np.argmax(shares))])
    step_s = float(np.median(np.diff(order))) if len(order) > 1 else log.period_s
    skew_s, r = _skew(power_unix_s, power_w, log, zone_s, step_s)
    # the skew of each segment of the run, and the line through them: the drift
    centres_s, skews_s = [], []
    segments = max(DRIFT_SEGMENTS, int((order[-1] - order[0]) // DRIFT_SEGMENT_S))
    for part in np.array_split(np.arange(len(power_unix_s)), segments):
        part_skew_s, part_r = _skew(power_unix_s[part], power_w[part], log, zone_s + skew_s, step_s)
        if part_r >= DRIFT_MIN_CORRELATION:  # a segment whose power follows concurrency
            centres_s.append(float(power_unix_s[part].mean()) - order[0])
            skews_s.append(skew_s + part_skew_s)
    line = stats.theilslopes(skews_s, centres_s) if len(skews_s) >= 3 else None
    rate = float(line.slope) if line is not None else 0.0
    drift_s = float(rate * (order[-1] - order[0]))
    offset_s: float | np.ndarray = zone_s + skew_s
    # followed when over a sample and its 95 % interval excludes none: noisy segments' skews
    # scatter by a sample or two without any drift
    significant = line is not None and (line.low_slope > 0 or line.high_slope < 0)
    plausible = abs(rate) <= MAX_DRIFT_PPM * 1e-6
    corrected = bool(significant and plausible and abs(drift_s) > 1.01 * step_s)
    if corrected:  # the clocks run at different rates: the skew follows the segments' line
        intercept_s = float(np.median(np.array(skews_s) - rate * np.array(centres_s)))
        offset_s = zone_s + intercept_s + rate * (power_unix_s - order[0])
    merged = _merged(power_unix_s, log, offset_s, log.period_s)
    if corrected:
        r = _correlation(power_w, merged)
    matched = float(merged["concurrency"].notna().mean())
    start_offset_s = float(np.ravel(offset_s)[0])  # at the power log's first sample
    info = {
        "engine": log.engine,
        "engine_log": str(log.path),
        "offset_s": start_offset_s,
        "zone_offset_s": zone_s,
        "skew_s": start_offset_s - zone_s,
        "skew_correlation": r,
        "drift_s": drift_s,
        "drift_corrected": corrected,
        "engine_samples_covered": float(shares.max()),
        "power_samples_matched": matched,
        "tolerance_s": log.period_s,
    }
    drift = (
        f"drift {drift_s:+.3f} s over the run, followed linearly"
        if corrected
        else f"drift {drift_s:+.3f} s over the run, not followed (under one sample, within the "
        f"segments' scatter or faster than a clock drifts, {MAX_DRIFT_PPM:g} ppm)"
    )
    note = (
        f"{log.path}: engine clock = power log clock {start_offset_s:+.3f} s at the start "
        f"(time-zone offset {zone_s / 3600:+.2f} h, residual skew {start_offset_s - zone_s:+.3f} "
        f"s, power-concurrency correlation {r:.2f}, {drift}); {matched:.0%} of power samples "
        f"matched within {log.period_s:.3g} s"
    )
    return merged[["concurrency", "tokens_per_s"]], info, [note]


def add_engine_columns(
    frame: pd.DataFrame, metadata: Any, log: EngineLog
) -> tuple[pd.DataFrame, Any]:
    """An imported trace (:func:`~grpo_power.telemetry.importers.import_log`) with the
    engine's ``concurrency`` and ``tokens_per_s`` at each sample; its metadata gains
    ``engine_alignment`` and the notes, and its start moves onto the engine's unix clock."""
    power_unix_s = metadata.start_unix_s + frame["t"].to_numpy(float)
    columns, info, notes = align_engine(power_unix_s, frame["power_w"].to_numpy(float), log)
    out = frame.copy()
    out["concurrency"] = columns["concurrency"].to_numpy()
    out["tokens_per_s"] = columns["tokens_per_s"].to_numpy()
    extra = dict(metadata.model_extra or {})
    data = {
        **metadata.model_dump(),
        "start_unix_s": metadata.start_unix_s + info["offset_s"],
        "engine_alignment": info,
        "notes": [*extra.get("notes", []), *notes],
    }
    return out, type(metadata).model_validate(data)


def generated_tokens(log: EngineLog, start_unix_s: float, end_unix_s: float) -> float:
    """Tokens the engine generated between two times on its clock: its counter's increase over
    the samples within them (an interval with a counter reset counts none, as in
    ``tokens_per_s``)."""
    interval_s = np.diff(log.unix_s, prepend=log.unix_s[:1])
    inside = (log.unix_s > start_unix_s) & (log.unix_s <= end_unix_s)
    return float((log.tokens_per_s * interval_s)[inside].sum())
