"""Fleet power from per-run energy bins (stage 6; docs/design.md, "Fleet").

Input: the ``bins.parquet`` that the windows stage writes for each run: every GPU's energy in
wall-clock bins of ``bin_s`` (absolute grid, bins cut by gaps left out). A fleet's window mean is
a sum of whole bins, so fleets are analysed exactly from these files, one time partition at a
time, without loading any trace.

Two ways to build a fleet of ``n_gpus`` GPUs:

- ``wall_clock``: the input runs ran concurrently and together are the fleet. Their bins are
  summed bin by bin, reading ``partition_bins`` bins of every file at a time (row-group pruning on
  the sorted ``bin`` column), so memory stays bounded whatever the fleet's size on disk. A window
  counts only where every GPU has data (never interpolated).
- ``monte_carlo``: fleets are drawn: runs (jobs, with all their GPUs, which stay synchronous) are
  drawn with replacement until the fleet has ``n_gpus`` GPUs (the last one cut to fit), or, for
  a fleet of exactly the runs' GPUs (the planner's traces), each run once per draw; each gets a
  uniformly random start offset. Each job's series is its bins where all its GPUs have
  data, gaps removed, and treated as periodic (a job restarts when it ends). The fleet's summed
  series is exact: offsets are histogrammed per job and the sum of shifted copies is a circular
  convolution (direct shifted adds for a few copies, FFT for many), so a draw of 100,000 GPUs
  costs about as much as one of 100 and memory does not grow with the fleet.

Results: per window, the fleet's exceedance of ``n_gpus x cap_w`` and its peak window mean as a
share of nameplate, with the spread over draws; the oversubscription factor ``nameplate / (peak x
(1 + margin))`` at the chosen window (peak: the ``peak_quantile`` of the draws; where every run is
shorter than that window, a Monte Carlo fleet repeats them end to end and the summary says so:
``chosen_window_fits`` false); the scaling study over fleet sizes; and the comparison with the
reference study and with published oversubscription results. Everything computed from simulated
traces is labelled simulated.
    inputs       the runs' bins files, checked; a job's series
    monte_carlo  fleets drawn from jobs at random offsets (exact sums by convolution)
    wall_clock   concurrent runs summed bin by bin; which alignment applies
    factors      exceedance and peak share per window; the oversubscription factor
    comparison   beside the study and published results
    stage        the stage: build, scale, compare, write
    study_mix    the study's fleet mix (2 x 72B, 2 x 14B, 4 x 7B) of simulated runs, per arm
"""

from grpo_power.analysis.fleet.inputs import JobSource, RunBins, load_job_source, read_run_bins
from grpo_power.analysis.fleet.monte_carlo import MonteCarloFleet
from grpo_power.analysis.fleet.stage import FleetResult, analyze_fleet, run_fleet, write_fleet
from grpo_power.analysis.fleet.wall_clock import choose_alignment, wall_clock_fleet

__all__ = [
    "FleetResult",
    "JobSource",
    "MonteCarloFleet",
    "RunBins",
    "analyze_fleet",
    "choose_alignment",
    "load_job_source",
    "read_run_bins",
    "run_fleet",
    "wall_clock_fleet",
    "write_fleet",
]
