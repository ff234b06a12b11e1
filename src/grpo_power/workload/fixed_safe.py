"""Calibration of the fixed-safe arm: the highest static concurrency whose p99 power stays under
the cap in short measured runs.

Candidates are powers of two between the concurrency bounds (and the upper bound itself), tried
from the highest down; the first whose per-GPU p-th percentile power (over the steps, start-up
excluded) is below the cap wins. The percentile is judged by its distribution-free upper
confidence bound (an order statistic, ``confidence`` 95 % by default): a short calibration cannot
claim a setting safe that a longer run would show is not. Consecutive readings are correlated,
so the bound counts the samples' effective number (each GPU's series under AR(1) correlation,
:func:`~grpo_power.stats.effective_sample_size`), not every reading as independent. With too
few for that bound (fewer than about 300 effective samples for p99) the bound is the largest
sample. Every candidate measured is saved with the choice, and the file is reused while the
settings that determine it are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.atomic import write_json_atomic
from grpo_power.config import Config
from grpo_power.control.controllers import FixedController
from grpo_power.layout import FIXED_SAFE, RUN
from grpo_power.stats import effective_sample_size, percentile_upper_bound
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import read_trace
from grpo_power.workload.failsafe import calibration_key
from grpo_power.workload.resume import RunPaths, StopSignals
from grpo_power.workload.runner import completed, run_grpo


def steps_trace(run_folder: Path) -> pd.DataFrame:
    """A run's trace rows over its steps (samples before the first step excluded)."""
    steps = read_step_log(run_folder / RUN.steps)
    frame = read_trace(run_folder / RUN.trace).frame
    in_steps = (frame["t"] >= steps["start_s"].min()) & (frame["t"] <= steps["end_s"].max())
    return frame.loc[in_steps]


def steps_power_w(run_folder: Path) -> np.ndarray:
    """Per-GPU power samples over a run's steps (samples before the first step excluded), W."""
    return steps_trace(run_folder)["power_w"].to_numpy()


def effective_samples(frame: pd.DataFrame) -> float:
    """The effective number of a trace's power samples: the sum over GPUs of each GPU's
    series' effective size under AR(1) correlation (consecutive readings are correlated)."""
    frame = frame.sort_values(["gpu", "t"], kind="stable")
    return float(
        sum(effective_sample_size(g.to_numpy()) for _, g in frame.groupby("gpu")["power_w"])
    )


CandidatesRunner = Callable[[list[tuple[int, Path]]], None]


def calibrate_fixed_safe(
    config: Config,
    folder: Path,
    show_progress: bool = False,
    run_candidates: CandidatesRunner | None = None,
) -> dict[str, Any]:
    """The fixed-safe setting for ``config``, measured in ``folder`` or reused from it.

    Args:
        run_candidates: measures the fixed arm anew at each (concurrency, folder), all at
            once (the CLI passes one that submits them as one job array on clusters). Without
            it the candidates run in this process, highest first, until one stays under the cap.

    Returns the saved calibration: the chosen concurrency, every candidate's measured percentile,
    and whether any candidate stayed under the cap.
    """

    def run_here(concurrency: int, run_folder: Path) -> None:
        result = run_grpo(
            config,
            "calibration",
            config.seed,
            run_folder,
            FixedController(concurrency, config.workload.max_new_tokens),
            steps=config.arms.fixed_safe.calibration_steps,
            show_progress=show_progress,
        )
        # a stopped candidate's power is not a measurement: the calibration stops with it (the
        # same command measures it anew)
        completed(result, label(concurrency))

    def label(concurrency: int) -> str:
        return f"fixed-safe calibration of {config.workload.size}, concurrency {concurrency}"

    result_path = folder / FIXED_SAFE.setting
    key = calibration_key(config)
    if result_path.exists():
        saved = json.loads(result_path.read_text())
        if saved.get("key") == key:
            return saved
    settings = config.arms.fixed_safe
    bounds = config.workload.concurrency_bounds
    measured: list[dict[str, float]] = []
    chosen = None
    candidates = [(c, folder / f"concurrency-{c}") for c in reversed(bounds.levels())]
    if run_candidates is not None:
        run_candidates(candidates)
    with StopSignals() as stop:
        for concurrency, run_folder in candidates:
            if run_candidates is None:
                stop.check(label(concurrency))  # a signal between two candidates
                RunPaths(run_folder).clear()  # measured anew whenever the calibration is
                run_here(concurrency, run_folder)
            frame = steps_trace(run_folder)
            power_w = frame["power_w"].to_numpy()
            effective = effective_samples(frame)
            bound_w = percentile_upper_bound(
                power_w, settings.percentile, settings.confidence, effective
            )
            measured.append(
                {
                    "concurrency": concurrency,
                    "samples": len(power_w),
                    "effective_samples": effective,
                    f"p{settings.percentile:g}_power_w": float(
                        np.percentile(power_w, settings.percentile)
                    ),
                    f"p{settings.percentile:g}_upper_bound_w": bound_w,
                }
            )
            if bound_w < config.cap_w:
                chosen = concurrency
                break
    result = {
        "key": key,
        "cap_w": config.cap_w,
        "percentile": settings.percentile,
        "confidence": settings.confidence,
        "max_new_tokens": config.workload.max_new_tokens,
        "concurrency": chosen if chosen is not None else bounds.min,
        "under_cap": chosen is not None,
        "candidates": measured,
        "simulated_power": read_trace(run_folder / RUN.trace).metadata.simulated,
    }
    write_json_atomic(result_path, result)
    return result
