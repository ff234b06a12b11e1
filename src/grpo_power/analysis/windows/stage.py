"""The windows stage for one trace: exceedance rows per GPU, pooled over the run's GPUs and
of the run's summed power, the gaps, the energy bins and the summary; written atomically."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.analysis.windows.bins import energy_bins, run_total_counts
from grpo_power.analysis.windows.kernel import gpu_window_counts
from grpo_power.analysis.windows.series import TOL, GpuSeries, series_from_frame
from grpo_power.config import Config, ConfigError
from grpo_power.layout import BINS_METADATA_KEY, WINDOWS
from grpo_power.telemetry.store import Trace, TraceDefaults, read_trace


@dataclass
class WindowsResult:
    """Everything the windows stage computes for one trace."""

    exceedance: pd.DataFrame
    gaps: pd.DataFrame
    bins: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def _data_label(simulated: bool, source: str) -> str:
    """``simulated``, or ``measured (SOURCE)``: where a real trace's power comes from (``nvml``,
    ``imported``)."""
    return "simulated" if simulated else f"measured ({source})"


def model_size_of(metadata: Any) -> str | None:
    """The model size a trace's metadata names (``model_size`` or ``size``), if any."""
    extra = getattr(metadata, "model_extra", None) or {}
    for key in ("model_size", "size"):
        if extra.get(key) is not None:
            return str(extra[key])
    return None


def _gap_rows(
    run_id: str, series: GpuSeries, windows_s: Sequence[float], step_s: float
) -> list[dict[str, Any]]:
    rows = []
    span_s = series.seg_span_s
    counts = series.seg_last - series.seg_first + 1
    for b in range(1, series.segments):
        start_s = float(series.t_s[series.seg_last[b - 1]])
        end_s = float(series.t_s[series.seg_first[b]])
        for window_s in windows_s:
            short = span_s[b] < window_s - TOL * step_s
            rows.append(
                {
                    "run_id": run_id,
                    "gpu": series.gpu,
                    "gap": b,
                    "start_s": start_s,
                    "end_s": end_s,
                    "gap_s": end_s - start_s,
                    "window_s": window_s,
                    # No window can end in the gap nor in the first window_s after it.
                    "removed_s": end_s - start_s + min(window_s, float(span_s[b])),
                    "lost_window_ends": int(
                        min(math.ceil(window_s / step_s - TOL), span_s[b] / step_s + 1)
                    ),
                    "samples_unused": int(counts[b]) if short else 0,
                }
            )
    return rows


GAP_COLUMNS = [
    "run_id",
    "gpu",
    "gap",
    "start_s",
    "end_s",
    "gap_s",
    "window_s",
    "removed_s",
    "lost_window_ends",
    "samples_unused",
    "data",
]


def _gpu_rows(
    series: GpuSeries, windows_s: list[float], cap_w: float, step_s: float, nameplate_w: float
) -> list[dict[str, Any]]:
    """One ``scope = gpu`` row per window: its counts, samples, gaps and energy source."""
    span_s = series.seg_span_s
    seg_counts = series.seg_last - series.seg_first + 1
    gap_s = float((series.t_s[series.seg_first[1:]] - series.t_s[series.seg_last[:-1]]).sum())
    over_samples = int(np.count_nonzero(series.power_w > cap_w))
    rows = []
    for c in gpu_window_counts(series, windows_s, cap_w, step_s):
        note = ""
        if c.windows == 0:
            note = (
                f"no full window: the longest contiguous segment is {span_s.max():.6g} s, "
                f"shorter than {c.window_s:g} s"
            )
        rows.append(
            {
                "scope": "gpu",
                "gpu": series.gpu,
                "window_s": c.window_s,
                "windows": c.windows,
                "windows_over": c.over,
                "exceedance": c.exceedance,
                "peak_mean_w": c.peak_mean_w,
                "peak_share_nameplate": c.peak_mean_w / nameplate_w,
                "nameplate_w": nameplate_w,
                "samples": len(series.t_s),
                "samples_over_cap": over_samples,
                "segments": series.segments,
                "gap_s": gap_s,
                "samples_unused": int(seg_counts[span_s < c.window_s - TOL * step_s].sum()),
                "energy_source": series.energy_source,
                "counter_resets": series.counter_resets,
                "note": note,
            }
        )
    return rows


def _pooled_rows(gpu_rows: list[dict[str, Any]], windows_s: list[float]) -> list[dict[str, Any]]:
    """One ``scope = run_pooled`` row per window: every GPU's windows counted together."""
    rows = []
    for window_s in windows_s:
        at = [r for r in gpu_rows if r["window_s"] == window_s]
        windows = sum(r["windows"] for r in at)
        over = sum(r["windows_over"] for r in at)
        peak_w = max((r["peak_mean_w"] for r in at if r["windows"]), default=float("nan"))
        rows.append(
            {
                "scope": "run_pooled",
                "window_s": window_s,
                "windows": windows,
                "windows_over": over,
                "exceedance": over / windows if windows else float("nan"),
                "peak_mean_w": peak_w,
                "samples_unused": sum(r["samples_unused"] for r in at),
                "note": "" if windows else "no full window on any GPU",
            }
        )
    return rows


def _run_total_rows(
    bins: pd.DataFrame, n_gpus: int, windows_s: list[float], bin_s: float, cap_w: float
) -> list[dict[str, Any]]:
    """One ``scope = run_total`` row per window: the GPUs' summed power against
    ``n_gpus x cap_w``, on the wall-clock bin grid."""
    rows = []
    for c in run_total_counts(bins, n_gpus, windows_s, bin_s, cap_w * n_gpus):
        rows.append(
            {
                "scope": "run_total",
                "window_s": c.window_s,
                "windows": c.windows,
                "windows_over": c.over,
                "exceedance": c.exceedance,
                "peak_mean_w": c.peak_mean_w,
                "cap_w": cap_w * n_gpus,
                "samples_unused": 0,
                "note": "summed power of all GPUs vs n_gpus x cap_w, windows on the "
                f"{bin_s:g} s wall-clock bin grid"
                + ("" if c.windows else "; no full window where every GPU has data"),
            }
        )
    return rows


def _bins(all_series: list[GpuSeries], start_unix_s: float, bin_s: float) -> pd.DataFrame:
    """Every GPU's energy per wall-clock bin, as (bin, gpu, energy_j) rows sorted by bin."""
    frames = []
    for series in all_series:
        index, energy = energy_bins(series, start_unix_s, bin_s)
        gpu = np.full(len(index), series.gpu, np.int32)
        frames.append(pd.DataFrame({"bin": index, "gpu": gpu, "energy_j": energy}))
    bins = pd.concat(frames, ignore_index=True)
    order = np.lexsort((bins["gpu"].to_numpy(), bins["bin"].to_numpy()))
    return bins.iloc[order].reset_index(drop=True)


def analyze_trace(
    trace: Trace,
    config: Config,
    cap_w: float | None = None,
    windows_s: Sequence[float] | None = None,
) -> WindowsResult:
    """Exceedance per GPU and per run at every configured window, gaps, and energy bins.

    ``cap_w`` (default: the config's ``cap_w``) and ``windows_s`` (default:
    ``windows.windows_s``) override the config's for a trace taken under another cap (a
    simulated deployment's) or windowed at other lengths.

    Rows of ``exceedance`` (one per scope and window):
    - ``scope = gpu``: one GPU;
    - ``scope = run_pooled``: all the run's GPU windows pooled (the study's per-run share);
    - ``scope = run_total``: the run's summed power against ``n_gpus x cap_w``, on the bin grid
      (windows where every GPU has data).
    """
    cfg = config.windows
    meta = trace.metadata
    where = str(trace.path)
    period_s = meta.sample_period_s
    step_s = cfg.step_s or period_s
    max_gap_s = cfg.gap_periods * period_s
    cap_w = config.cap_w if cap_w is None else float(cap_w)
    windows_s = list(cfg.windows_s if windows_s is None else windows_s)
    all_series = series_from_frame(trace.frame, cfg.gap_periods, period_s, where, meta.nameplate_w)
    label = _data_label(meta.simulated or meta.source == "simulated", meta.source)
    common = {"run_id": meta.run_id, "cap_w": cap_w, "data": label}

    gpu_rows = [
        row
        for series in all_series
        for row in _gpu_rows(series, windows_s, cap_w, step_s, meta.nameplate_w)
    ]
    gap_rows = [
        {**row, "data": label}
        for series in all_series
        for row in _gap_rows(meta.run_id, series, windows_s, step_s)
    ]
    bins = _bins(all_series, meta.start_unix_s, cfg.bin_s)
    n_gpus = len(all_series)
    sources = sorted({s.energy_source for s in all_series})
    first_rows = [r for r in gpu_rows if r["window_s"] == windows_s[0]]
    run_common = {
        **common,
        "gpu": -1,
        "nameplate_w": meta.nameplate_w * n_gpus,
        "samples": sum(len(s.t_s) for s in all_series),
        "samples_over_cap": sum(r["samples_over_cap"] for r in first_rows),
        "segments": sum(s.segments for s in all_series),
        "gap_s": sum(r["gap_s"] for r in first_rows),
        "energy_source": sources[0] if len(sources) == 1 else "mixed",
        "counter_resets": sum(s.counter_resets for s in all_series),
    }
    run_rows = _pooled_rows(gpu_rows, windows_s) + _run_total_rows(
        bins, n_gpus, windows_s, cfg.bin_s, cap_w
    )
    for row in run_rows:  # a run's peak is a share of the nameplate of one GPU when pooled
        per = meta.nameplate_w * (n_gpus if row["scope"] == "run_total" else 1)
        row["peak_share_nameplate"] = row["peak_mean_w"] / per
    exceedance = pd.DataFrame(
        [{**common, **row} for row in gpu_rows] + [{**run_common, **row} for row in run_rows]
    )
    summary = {
        "trace": where,
        "run_id": meta.run_id,
        "source": meta.source,
        "simulated": label == "simulated",
        "data": label,
        "model_size": model_size_of(meta),
        "gpu_name": meta.gpu_name,
        "gpu_indices": [s.gpu for s in all_series],  # the trace's GPU numbers
        "gpu_uuids": [meta.gpu_uuids.get(str(s.gpu)) for s in all_series],
        "n_gpus": n_gpus,
        "nameplate_w": meta.nameplate_w,
        "cap_w": cap_w,
        "sample_period_s": period_s,
        "step_s": step_s,
        "max_gap_s": max_gap_s,  # at the trace's period; a slower GPU's own is longer
        "bin_s": cfg.bin_s,
        "windows_s": windows_s,
        "start_unix_s": meta.start_unix_s,
        "samples": run_common["samples"],
        "gaps": int(sum(s.segments - 1 for s in all_series)),
        "gap_s": float(run_common["gap_s"]),
        "energy_source": run_common["energy_source"],
        "counter_resets": int(run_common["counter_resets"]),
        "trace_complete": trace.complete,
        "bins": len(bins),
        "bin_range": [int(bins["bin"].min()), int(bins["bin"].max())] if len(bins) else None,
        "complete_bins": _complete_bins(bins["bin"].to_numpy(), bins["gpu"].nunique()),
    }
    gaps = pd.DataFrame(gap_rows, columns=GAP_COLUMNS)
    return WindowsResult(exceedance=exceedance, gaps=gaps, bins=bins, summary=summary)


def _complete_bins(bin_index: np.ndarray, n_gpus: int) -> int:
    """How many bins hold a reading of every one of the ``n_gpus`` GPUs with bins (``bin_index``:
    the per-GPU bins' bin numbers; a GPU of one stray row has none, and a fleet leaves it out):
    the bins a fleet can sum the trace over, as the fleet's own sum does."""
    if len(bin_index) == 0:
        return 0
    per_bin = np.bincount(bin_index - bin_index.min())
    return int(np.count_nonzero(per_bin == n_gpus))


def bins_metadata(result: WindowsResult) -> dict[bytes, bytes]:
    """Schema metadata of ``bins.parquet``: what the fleet stage needs to know about the run."""
    keys = (
        "run_id",
        "source",
        "simulated",
        "data",
        "model_size",
        "gpu_name",
        "gpu_indices",
        "gpu_uuids",
        "n_gpus",
        "nameplate_w",
        "cap_w",
        "bin_s",
        "start_unix_s",
        "bin_range",
        "complete_bins",
        "trace",
    )
    info = {k: result.summary[k] for k in keys}
    return {BINS_METADATA_KEY: json.dumps(info).encode()}


def write_windows(result: WindowsResult, out_dir: Path | str) -> list[Path]:
    """Write a trace's windows outputs into ``out_dir`` (each file atomically).

    Files: ``exceedance.csv``/``.parquet``, ``gaps.csv``, ``bins.parquet`` (per-GPU energy per
    wall-clock bin, sorted by bin, for the fleet stage) and ``summary.json``.
    """
    from grpo_power.atomic import (
        write_csv_atomic,
        write_json_atomic,
        write_parquet_atomic,
    )

    out = Path(out_dir)
    paths = [
        write_csv_atomic(out / WINDOWS.exceedance_csv, result.exceedance),
        write_parquet_atomic(out / WINDOWS.exceedance_parquet, result.exceedance),
        write_csv_atomic(out / WINDOWS.gaps, result.gaps),
        write_parquet_atomic(out / WINDOWS.bins, result.bins, metadata=bins_metadata(result)),
        write_json_atomic(out / WINDOWS.summary, result.summary),
    ]
    return paths


def unresolved_note(summary: dict[str, Any]) -> list[str]:
    """A note naming the windows shorter than the trace's sample period (a scrape every 15 s
    cannot see a 1 s peak: each sample is held for its period), or none."""
    period_s = summary["sample_period_s"]
    short = [w for w in summary["windows_s"] if w < period_s]
    if not short:
        return []
    return [
        f"{summary['trace']}: windows of {', '.join(f'{w:g}' for w in short)} s are shorter than "
        f"the sample period {period_s:g} s: not resolved by the samples (each held for its "
        "period), so their peaks and exceedance can be understated"
    ]


def run_windows(
    trace_path: Path | str,
    out_dir: Path | str,
    config: Config,
    split_on_clock_jumps: bool = False,
    cap_w: float | None = None,
    cap_from: str = "--cap-w",
) -> WindowsResult:
    """The windows stage for one trace file: read, analyse against ``cap_w`` (default: the
    config's; ``cap_from`` names what gave it, in errors and notes), write; returns the result.

    The trace is read by :func:`grpo_power.telemetry.store.read_trace` (the one trace check):
    metadata it lacks comes from ``config``, and what was inferred is listed in the summary's
    ``notes``, with one where the trace was recorded under another cap than the one used.
    """
    trace = read_trace(trace_path, TraceDefaults.from_config(config), split_on_clock_jumps)
    meta = trace.metadata
    if cap_w is not None and cap_w > meta.nameplate_w:
        raise ConfigError(
            f"{trace_path}: {cap_from}: expected at most the trace's nameplate, "
            f"{meta.nameplate_w:g} W ({meta.gpu_name}), got {cap_w:g} W"
        )
    result = analyze_trace(trace, config, cap_w)
    used_w, recorded_w = result.summary["cap_w"], (meta.model_extra or {}).get("cap_w")
    other_cap = []
    if isinstance(recorded_w, int | float) and not math.isclose(recorded_w, used_w):
        other_cap = [
            f"{trace_path}: recorded under a cap of {recorded_w:g} W per GPU (its metadata's "
            f"cap_w); judged by {used_w:g} W, "
            + (cap_from if cap_w is not None else "the config's cap_w")
            + f" (--cap-w {recorded_w:g} judges it by its own)"
        ]
    elif cap_w is None and not math.isclose(meta.nameplate_w, config.gpu.nameplate_w):
        other_cap = [
            f"{trace_path}: the trace's {meta.gpu_name} ({meta.nameplate_w:g} W) is judged by "
            f"the config's cap_w, {used_w:g} W, set for its {config.gpu.name} "
            f"({config.gpu.nameplate_w:g} W): --cap-w gives this part's cap"
        ]
    result.summary["notes"] = list(trace.notes) + other_cap + unresolved_note(result.summary)
    write_windows(result, out_dir)
    return result
