"""Exceedance by averaging window, per GPU and per run (stage 5; docs/design.md, "Windows").

Power caps, breakers and utility contracts act on power averaged over a window. For a window of
``window_s`` seconds ending at time ``g`` the mean power is ``(E(g) - E(g - window_s)) /
window_s``, where ``E`` is the GPU's cumulative energy:

- at each sample, ``E`` comes from the energy counter (``energy_j``) where the trace has one,
  else from trapezoid integration of ``power_w``; an interval whose counter is missing or goes
  backwards (a reset, or a wrap of a narrower counter) falls back to the trapezoid, and is
  counted in the result (``counter_resets``, ``energy_source`` = ``mixed``);
- between two samples energy accrues at a constant rate (the interval's mean power), so a window
  that starts or ends between samples takes the matching share of that interval's energy;
- an interval longer than ``gap_periods`` sample periods is a gap: it splits the series into
  contiguous segments, no window ever spans it, and nothing is interpolated across it.

Window ends lie on a regular grid of ``step_s`` (default: the trace's sample period) starting at
each segment's first sample, so irregular or jittered timestamps weigh every moment of the run
equally. ``exceedance(W)`` is the share of window ends whose mean is strictly above the cap.
Exceedance is not monotone in the window length (a square wave between 1.5x and 0.6x the cap with
a 1 s period is over the cap in every 1 s window but in only some 0.5 s windows); nothing here
assumes it is.

Documented results for awkward input: a window longer than every segment gives ``windows = 0``
and ``exceedance = NaN`` (with a note), never 0. An empty trace, NaN, negative or implausibly
high power (above 3x the metadata's nameplate: milliwatts, see :mod:`grpo_power.telemetry.checks`)
and duplicated or decreasing timestamps are errors that name the file, the GPU and the row.

The per-run energy in wall-clock bins of ``bin_s`` (``bins.parquet``) is what the fleet stage
sums across runs: bins lie on an absolute grid (``bin = floor(unix time / bin_s)``), so runs that
were concurrent line up exactly, and only bins fully inside a segment are kept.

Everything is vectorised over samples with cumulative sums and histograms (no per-sample loops).

    series  a GPU's checked samples, cumulative energy and segments
    kernel  window means and counts over one series
    bins    energy in wall-clock bins; windows over bins (run totals, fleets)
    stage   the stage: exceedance, gaps, bins and summary of one trace, written atomically
    simulated  the same on the evaluation's simulated runs (every arm and seed of a deployment)
"""

from grpo_power.analysis.windows.bins import (
    WindowAccumulator,
    energy_bins,
    run_total_counts,
    window_bins_of,
)
from grpo_power.analysis.windows.kernel import WindowCounts, gpu_window_counts, window_means
from grpo_power.analysis.windows.series import GpuSeries, prepare_series, series_from_frame
from grpo_power.analysis.windows.stage import (
    WindowsResult,
    analyze_trace,
    model_size_of,
    run_windows,
    write_windows,
)

__all__ = [
    "GpuSeries",
    "WindowAccumulator",
    "WindowCounts",
    "WindowsResult",
    "analyze_trace",
    "energy_bins",
    "gpu_window_counts",
    "model_size_of",
    "prepare_series",
    "run_total_counts",
    "run_windows",
    "series_from_frame",
    "window_bins_of",
    "window_means",
    "write_windows",
]
