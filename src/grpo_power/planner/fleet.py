"""The fleet made of the planner's traces: the fleet stage with one GPU per traced GPU.

:func:`grpo_power.analysis.fleet.analyze_fleet` on the traces' windows outputs, with
``fleet.n_gpus`` set to the GPUs the traces hold: the fleet is wall-clock aligned when the
traces' clocks overlap by at least the longest window (``fleet.alignment: auto``), else drawn by
Monte Carlo over start offsets; the scaling study to larger fleets is Monte Carlo either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grpo_power.analysis.fleet import FleetResult, read_run_bins, run_fleet
from grpo_power.config import Config


def fleet_of_traces(
    window_outputs: Sequence[Path | str], out: Path | str, config: Config
) -> FleetResult:
    """Run the fleet stage on ``window_outputs`` (windows folders or their ``bins.parquet``)
    as the fleet they make; write ``out``."""
    n_gpus = sum(read_run_bins(p).n_gpus for p in window_outputs)
    fleet = config.fleet.model_copy(update={"n_gpus": n_gpus})
    return run_fleet(window_outputs, out, config.model_copy(update={"fleet": fleet}))
