"""Inference-engine metrics beside a power log: ``telemetry import POWER.csv --engine ENGINE.csv``.

An engine's metrics log (vLLM, SGLang or TGI Prometheus gauges scraped to CSV) gives, per
sample, the decode concurrency (requests being decoded together) and a cumulative count of
generated tokens. This module reads such a log through a small column table
(:data:`ENGINE_COLUMNS`; a column's Prometheus prefix, label set and a counter's ``_total``
suffix ignored, :func:`metric_name`), finds the offset between its clock and the power log's,
and aligns its samples to every power sample with :func:`pandas.merge_asof`, adding the trace
columns ``concurrency`` and ``tokens_per_s``. Several engines in one file (data-parallel ranks
on one GPU set: a metric's columns per label set, or rows per engine told by an ``engine``
column) are summed.

Clocks: nvidia-smi writes local wall time without a zone, engines write unix seconds (or
milliseconds, told by size). The offset is found from the data: the whole quarter hour between
-14 h and +14 h (every time zone's offset) that puts the most of the shorter log's samples inside
the other's span (several that tie, as when the power log runs on past the engine's: the one
under which power follows concurrency best), then the residual skew within +-1 s that best
correlates power with concurrency; where that finds its edge or a correlation under 0.3, the
skew is searched within half a quarter hour (1 s steps, then finely) and taken where power
follows concurrency there. The drift is measured over segments of the run (at least six, at
most 20 s long; those where power follows concurrency with a correlation of 0.3 or more): the
Theil-Sen line through their skews is the drift, and a drift of more than a power sample over
the run, whose 95 % interval excludes none and whose rate a clock can have (1,000 ppm at most),
is followed along that line. Refused: no candidate that covers at least half the shorter log's
samples, or several that tie with power following concurrency under none of them. What was
chosen is recorded in the trace metadata and printed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from grpo_power.stats import lag1_correlation
from grpo_power.telemetry.checks import time_unit
from grpo_power.telemetry.logrows import (
    ImportError_,
    columns_shown,
    numeric_column,
    read_csv_log,
)

EngineName = Literal["vllm", "sglang", "tgi"]

# engine -> (timestamp column, concurrency gauge, cumulative generated-token counter), matched
# by metric_name: a Prometheus prefix ("vllm:"), a label set and a counter's "_total" ignored.
ENGINE_COLUMNS: dict[str, tuple[str, str, str]] = {
    "vllm": ("timestamp", "num_requests_running", "generation_tokens_total"),
    "sglang": ("timestamp", "num_running_reqs", "generation_tokens_total"),
    "tgi": ("timestamp", "tgi_batch_current_size", "tgi_request_generated_tokens_sum"),
}
LABEL_COLUMN = "engine"  # in a log with rows per engine, the column naming each row's engine
QUARTER_HOUR_S = 900.0
ZONE_LIMIT_S = 14 * 3600.0
SKEW_LIMIT_S = 1.0  # the residual skew searched first, finely ...
WIDE_SKEW_LIMIT_S = QUARTER_HOUR_S / 2  # ... and, where that finds nothing, this far (1 s steps)
MIN_COVERED = 0.5  # the share of the shorter log's samples an offset must put inside the other
MIN_CORRELATION = 0.3  # power follows concurrency: a weaker correlation tells no offset
# The wide skew search's best is taken where so many tries would give its correlation by chance
# less often than this (one-sided, Bonferroni over the offsets tried, the sample size what series
# correlated in time hold: _chance): a short run's noise isn't, nor two unrelated logs' steps.
WIDE_SEARCH_ALPHA = 0.01
DRIFT_SEGMENTS = 6  # the run's parts whose skews give the drift: at least six,
DRIFT_SEGMENT_S = 20.0  # and as many more as make them this long at most
# A clock's rate error: quartz oscillators are within about 100 ppm; a faster apparent drift is
# the engine's reporting lag changing, not its clock, and is not followed.
MAX_DRIFT_PPM = 1000.0


@dataclass(frozen=True)
class EngineLog:
    """An engine log read: per sample, unix time (s), concurrency (NaN where not logged) and
    generated tokens/s; what was inferred in reading it (``notes``)."""

    unix_s: np.ndarray
    concurrency: np.ndarray
    tokens_per_s: np.ndarray
    engine: str
    path: Path
    period_s: float
    notes: tuple[str, ...] = ()


def metric_name(column: str) -> str:
    """A metrics log column's metric: ``vllm:generation_tokens_total{engine="0"}`` ->
    ``generation_tokens`` (its Prometheus prefix, label set and a counter's ``_total`` dropped:
    prometheus_client names a counter's family without it)."""
    name = column.strip().strip('"').split("{", 1)[0]
    return name.rsplit(":", 1)[-1].removesuffix("_total")


def engine_of(columns: Iterable[str]) -> str | None:
    """The engine whose metrics log has these column names (:data:`ENGINE_COLUMNS`), or None."""
    metrics = {metric_name(c) for c in columns}
    for engine, (_, gauge, counter) in ENGINE_COLUMNS.items():
        if {metric_name(gauge), metric_name(counter)} <= metrics:
            return engine
    return None


def _metric_columns(path: Path, columns: list[str], engine: str) -> dict[str, list[str]]:
    """Each of the engine's metrics (:data:`ENGINE_COLUMNS`) -> its columns in the log, one per
    label set.

    Raises:
        ImportError_: a metric missing (naming the columns found, and the engine they are of
            where it is another), or two of its columns with the same label set.
    """
    wanted = ENGINE_COLUMNS[engine]
    found = {name: [c for c in columns if metric_name(c) == metric_name(name)] for name in wanted}
    for name, matches in found.items():
        if not matches:
            other = engine_of(columns)
            hint = f" (the columns are a {other} metrics log's: --engine-format {other})"
            raise ImportError_(
                f"{path}: missing column '{name}' (expected in a {engine} metrics log: "
                f"{list(wanted)}); found {columns_shown(columns)}"
                f"{hint if other not in (None, engine) else ''}"
            )
        labels = [c.partition("{")[2] for c in matches]
        if len(set(labels)) < len(labels):
            raise ImportError_(
                f"{path}: columns {columns_shown(matches)}: expected one column of '{name}' per "
                "label set, got two with the same labels"
            )
    return found


def _rate(t_s: np.ndarray, counter: np.ndarray) -> np.ndarray:
    """A cumulative counter's rate at each sample, /s: its increase since the previous sample
    over the time between them, taken across missing values (a gap's increase spread over its
    intervals); 0 at the first sample and where the counter falls (a reset); NaN before its
    first value and after its last."""
    known = np.isfinite(counter)
    if not known.any():
        return np.full(len(t_s), np.nan)
    filled = np.interp(t_s, t_s[known], counter[known], left=np.nan, right=np.nan)
    rate = np.diff(filled, prepend=filled[:1]) / np.diff(t_s, prepend=t_s[0] - 1.0)
    return np.where(rate < 0, 0.0, rate)


def read_engine_log(path: Path | str, engine: EngineName = "vllm") -> EngineLog:
    """Read an engine metrics CSV (CRLF or LF) through :data:`ENGINE_COLUMNS`.

    Time is unix seconds, or milliseconds told by size (with a note). A metric's columns over
    several label sets (``vllm:num_requests_running{engine="0"}``, ``{engine="1"}``), or rows
    per engine told by an ``engine`` column, are data-parallel engines on one GPU set: their
    concurrency is summed, and their tokens/s (each counter's own differences). Tokens/s is a
    counter's difference over the time difference (:func:`_rate`: across a missing value the
    gap's; the first sample: 0; a counter reset: 0 for that interval). A missing concurrency
    value (an empty or ``[N/A]`` cell, or an engine without a row at that time) stays NaN.

    Args:
        path: the CSV.
        engine: whose metrics it holds.

    Returns:
        The log, one sample per time.

    Raises:
        ImportError_: a missing column (naming the ones found), a non-numeric value, or time
            that does not increase (for each engine).
    """
    path = Path(path)
    raw, lines, read_notes = read_csv_log(path, f"{engine} metrics")
    found = _metric_columns(path, [str(c) for c in raw.columns], engine)
    time_name, gauge, counter = ENGINE_COLUMNS[engine]
    t_column = found[time_name][0]
    t_s = numeric_column(path, raw[t_column], time_name, lines).to_numpy()
    scale, unit_note = time_unit(t_s, None, str(path), time_name)
    label = next((c for c in raw.columns if str(c).strip() == LABEL_COLUMN), None)
    engines = raw[label].str.strip() if label is not None else pd.Series("", index=raw.index)
    rows = pd.DataFrame({"engine": engines, "t": t_s * scale})
    step_s = rows.groupby("engine", sort=False)["t"].diff().to_numpy()
    bad = ~np.isfinite(rows["t"].to_numpy()) | (step_s <= 0)
    if bad.any():
        i = int(np.argmax(bad))
        repeat = (
            f"; rows of several engines need an '{LABEL_COLUMN}' column naming each"
            if step_s[i] == 0 and label is None
            else ""
        )
        raise ImportError_(
            f"{path}: line {lines[i]}: column '{time_name}': expected unix seconds that "
            f"increase{' for each engine' if label is not None else ''}, got "
            f"{str(raw[t_column].iloc[i]).strip()!r}{repeat}"
        )
    metrics = found[gauge] + found[counter]
    numbers = pd.DataFrame({c: numeric_column(path, raw[c], c, lines) for c in metrics})
    wide = numbers.assign(t=rows["t"], engine=engines).pivot(index="t", columns="engine")
    unix_s = wide.index.to_numpy(float)
    # NaN where any engine's concurrency is missing: a partial sum would be a false low
    concurrency = wide[found[gauge]].to_numpy(float).sum(axis=1)
    counters = wide[found[counter]].to_numpy(float)
    rate = np.sum([_rate(unix_s, counters[:, j]) for j in range(counters.shape[1])], axis=0)
    period_s = float(np.median(np.diff(unix_s))) if len(unix_s) > 1 else 1.0
    notes = (*read_notes, *([unit_note] if unit_note else []))
    return EngineLog(unix_s, concurrency, rate, engine, path, period_s, notes)


def _covered(
    power_unix_s: np.ndarray, engine_unix_s: np.ndarray, offsets_s: np.ndarray
) -> np.ndarray:
    """Under each offset (engine clock = power clock + offset), the share of the shorter log's
    samples (by the time they span) inside the other's span. Both logs' times are sorted."""
    power_span_s = power_unix_s[-1] - power_unix_s[0]
    if engine_unix_s[-1] - engine_unix_s[0] <= power_span_s:
        inner, outer, shift_s = engine_unix_s, power_unix_s, offsets_s
    else:
        inner, outer, shift_s = power_unix_s, engine_unix_s, -offsets_s
    inside = np.searchsorted(inner, outer[-1] + shift_s, "right") - np.searchsorted(
        inner, outer[0] + shift_s, "left"
    )
    return inside / len(inner)


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
    power_unix_s: np.ndarray,
    power_w: np.ndarray,
    log: EngineLog,
    offset_s: float,
    skews_s: np.ndarray,
) -> tuple[float, float]:
    """Of ``offset_s`` plus each of ``skews_s`` (ascending, s), the skew that best correlates
    power with concurrency, and that correlation (NaN when concurrency never varies)."""
    lo_s = log.unix_s[0] - log.period_s - offset_s
    hi_s = log.unix_s[-1] + log.period_s - offset_s
    best = (0.0, float("nan"))
    for skew_s in skews_s:
        # only the power samples an engine sample can match (a long power log's others can't)
        near = (power_unix_s >= lo_s - skew_s) & (power_unix_s <= hi_s - skew_s)
        if near.sum() < 3:  # too few to correlate (a segment of the run the engine missed)
            continue
        merged = _merged(power_unix_s[near], log, offset_s + skew_s, log.period_s)
        r = _correlation(power_w[near], merged)
        if np.isfinite(r) and (not np.isfinite(best[1]) or r > best[1] + 1e-9):
            best = (float(skew_s), r)
    return best


def _pairs(power_w: np.ndarray, merged: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """Power (W) and the matched engine concurrency at the power samples an engine sample
    matched; None when fewer than 3 matched or either never varies there."""
    ok = merged["concurrency"].notna().to_numpy()
    power, concurrency = power_w[ok], merged["concurrency"].to_numpy(float)[ok]
    if ok.sum() < 3 or np.std(concurrency) == 0 or np.std(power) == 0:
        return None
    return power, concurrency


def _correlation(power_w: np.ndarray, merged: pd.DataFrame) -> float:
    """Power's correlation with the matched engine concurrency (NaN where :func:`_pairs` has
    none)."""
    pairs = _pairs(power_w, merged)
    return float("nan") if pairs is None else float(np.corrcoef(*pairs)[0, 1])


def _chance(power_unix_s: np.ndarray, power_w: np.ndarray, merged: pd.DataFrame) -> float:
    """How often power would follow the matched concurrency (``merged``, :func:`_merged`) as
    closely as it does by chance: the one-sided p-value of their correlation, over the power
    log's sampling times (the GPUs sampled at one time averaged: one sample of the run), with
    the sample size cut to what two series correlated in time hold (Bartlett's effective size,
    ``n (1 - r1 r2) / (1 + r1 r2)`` with ``r1``, ``r2`` their lag-1 autocorrelations): a power
    log and an engine log that change in steps of a minute hold a sample a minute, not a
    second, and the i.i.d. p-value took unrelated logs for aligned. 1 where nothing varies."""
    ok = merged["concurrency"].notna().to_numpy()
    frame = pd.DataFrame(
        {
            "unix_s": power_unix_s[ok],
            "power_w": power_w[ok],
            "concurrency": merged["concurrency"].to_numpy(float)[ok],
        }
    )
    series = frame.groupby("unix_s").mean()  # in time order
    if len(series) < 4 or (series.std() == 0).any():
        return 1.0
    r = float(series["power_w"].corr(series["concurrency"]))
    lag1 = lag1_correlation(series["power_w"].to_numpy()) * lag1_correlation(
        series["concurrency"].to_numpy()
    )
    n_eff = float(np.clip(len(series) * (1.0 - lag1) / (1.0 + lag1), 3.0, len(series)))
    if not np.isfinite(r) or r >= 1.0:
        return 0.0 if r >= 1.0 else 1.0
    t = r * np.sqrt((n_eff - 2.0) / (1.0 - r * r))
    return float(stats.t.sf(t, n_eff - 2.0))


def _fits(r: float) -> bool:
    """Whether power follows concurrency with correlation ``r`` (NaN: never varies) enough to
    place one log against the other."""
    return bool(r >= MIN_CORRELATION)  # NaN compares False


@dataclass(frozen=True)
class _Offset:
    """The engine clock's offset from the power log's: the whole quarter hour and the
    residual skew (s), power's correlation with concurrency there, the share of the shorter log
    covered, how many quarter hours covered as much, and whether the skew was found by the
    wide search."""

    zone_s: float
    skew_s: float
    correlation: float
    covered: float
    tied: int
    wide: bool


def _offset(
    power_unix_s: np.ndarray, power_w: np.ndarray, log: EngineLog, fine_s: np.ndarray
) -> _Offset:
    """The offset that fits (see the module's docstring), given the power samples' times
    (unix s as the power log states them, file order) and power (W), the engine log and the
    residual skews searched first (s, ascending: within 1 s at the power log's period).

    Raises:
        ImportError_: no quarter hour covers half the shorter log, or several cover it alike
            and power follows concurrency under none of them.
    """
    order = np.sort(power_unix_s)
    candidates = np.arange(-ZONE_LIMIT_S, ZONE_LIMIT_S + 1, QUARTER_HOUR_S)
    shares = _covered(order, log.unix_s, candidates)
    if shares.max() < MIN_COVERED:
        gap_h = (log.unix_s[0] - order[0]) / 3600.0
        raise ImportError_(
            f"{log.path}: timestamp: expected engine samples within the power log's span under "
            f"some time-zone offset (whole quarter hours, -14 h to +14 h), got none covering "
            f"{MIN_COVERED:.0%} of the shorter log's samples (the engine log starts "
            f"{gap_h:+.2f} h from the power log): not the same run?"
        )
    tied = candidates[shares == shares.max()]
    fits = [(zone_s, *_skew(power_unix_s, power_w, log, zone_s, fine_s)) for zone_s in tied]
    # the best correlation; among equals, the offset nearest 0
    zone_s, skew_s, r = max(fits, key=lambda f: (np.nan_to_num(f[2], nan=-2.0), -abs(f[0] + f[1])))
    wide = False
    if not _fits(r) or skew_s in (fine_s[0], fine_s[-1]):  # nothing found, or at its edge
        coarse_s = np.arange(-WIDE_SKEW_LIMIT_S, WIDE_SKEW_LIMIT_S + 0.5, SKEW_LIMIT_S)
        offsets_s = np.unique(np.add.outer(tied, coarse_s))
        offsets_s = offsets_s[_covered(order, log.unix_s, offsets_s) >= MIN_COVERED]
        near_s, _ = _skew(power_unix_s, power_w, log, 0.0, offsets_s)
        wide_skew_s, wide_r = _skew(power_unix_s, power_w, log, near_s, fine_s)
        total_s = near_s + wide_skew_s
        chance = _chance(power_unix_s, power_w, _merged(power_unix_s, log, total_s, log.period_s))
        tries = len(offsets_s) + len(fine_s)
        better = wide_r > r or not np.isfinite(r)
        if _fits(wide_r) and better and chance * tries < WIDE_SEARCH_ALPHA:
            zone_s = float(np.round(total_s / QUARTER_HOUR_S) * QUARTER_HOUR_S)
            skew_s, r, wide = total_s - zone_s, wide_r, True
    if len(tied) > 1 and not _fits(r):
        raise ImportError_(
            f"{log.path}: timestamp: expected one time-zone offset under which power follows "
            f"concurrency, got {len(tied)} ({tied[0] / 3600:+.2f} h to {tied[-1] / 3600:+.2f} h) "
            f"placing the engine log alike inside the power log and none with a correlation of "
            f"{MIN_CORRELATION} (best {r:.2f}): cut the power log to the engine log's run"
        )
    return _Offset(float(zone_s), float(skew_s), r, float(shares.max()), len(tied), wide)


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
        sample lies within one engine period; metadata ``engine_alignment``; notes: the log's
        and the alignment's).

    Raises:
        ImportError_: no offset fits (:func:`_offset`).
    """
    order = np.sort(power_unix_s)
    times_s = np.unique(order)  # the power log's sampling times (several GPUs share each)
    step_s = float(np.median(np.diff(times_s))) if len(times_s) > 1 else log.period_s
    fine_s = np.arange(-SKEW_LIMIT_S, SKEW_LIMIT_S + step_s / 2, step_s)
    found = _offset(power_unix_s, power_w, log, fine_s)
    zone_s, skew_s, r = found.zone_s, found.skew_s, found.correlation
    # the skew of each segment of the run, and the line through them: the drift
    centres_s, skews_s = [], []
    segments = max(DRIFT_SEGMENTS, int((order[-1] - order[0]) // DRIFT_SEGMENT_S))
    for part in np.array_split(np.arange(len(power_unix_s)), segments):
        part_skew_s, part_r = _skew(power_unix_s[part], power_w[part], log, zone_s + skew_s, fine_s)
        if _fits(part_r):  # a segment whose power follows concurrency
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
        "skew_search_s": WIDE_SKEW_LIMIT_S if found.wide else SKEW_LIMIT_S,
        "shorter_log_covered": found.covered,
        "zone_offsets_tied": found.tied,
        "power_samples_matched": matched,
        "tolerance_s": log.period_s,
    }
    if corrected:
        why = "followed linearly"
    elif line is None:
        why = "not measured: power follows concurrency in fewer than 3 of the run's segments"
    elif not plausible:
        why = (
            f"not followed: {abs(rate) * 1e6:,.0f} ppm is faster than a clock drifts "
            f"({MAX_DRIFT_PPM:g} ppm at most)"
        )
    elif not significant:
        why = "not followed: within the segments' scatter (its 95 % interval includes none)"
    else:
        why = f"not followed: under one sample ({step_s:g} s)"
    drift = f"drift {drift_s:+.3f} s over the run, {why}"
    if found.wide:
        search = (
            f"skew found within {WIDE_SKEW_LIMIT_S:g} s: within {SKEW_LIMIT_S:g} s power did "
            f"not follow concurrency with a correlation of {MIN_CORRELATION}, or the best lay at "
            "the edge"
        )
    elif not _fits(r):
        search = (
            f"power barely follows concurrency (a correlation under {MIN_CORRELATION}) and no "
            f"skew within {WIDE_SKEW_LIMIT_S:g} s does better beyond chance: the time-zone offset "
            "is the one quarter hour that covers the logs, the residual skew is uncertain"
        )
    else:
        search = f"skew found within {SKEW_LIMIT_S:g} s"
    note = (
        f"{log.path}: engine clock = power log clock {start_offset_s:+.3f} s at the start "
        f"(time-zone offset {zone_s / 3600:+.2f} h, residual skew {start_offset_s - zone_s:+.3f} "
        f"s, power-concurrency correlation {r:.2f}, {drift}, {search}); {matched:.0%} of power "
        f"samples matched within {log.period_s:.3g} s"
    )
    return merged[["concurrency", "tokens_per_s"]], info, [*log.notes, note]


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
    ``tokens_per_s``; where the counter is unknown, none)."""
    interval_s = np.diff(log.unix_s, prepend=log.unix_s[:1])
    inside = (log.unix_s > start_unix_s) & (log.unix_s <= end_unix_s)
    return float(np.nansum((log.tokens_per_s * interval_s)[inside]))
