"""Actuator sweeps on the real workload: short GRPO runs at each actuator's lowest and highest
level, the others at their defaults (the authority stage's measurements of a real run). The
actuators swept are those that set how much of the chip a phase keeps busy: concurrency and group
size (generation), max new tokens, and the training chunk (``train_micro_batch``), so identify
fits the power of both phases against their occupancy. The pause is not swept: it adds idle time,
whose power the simulator already takes as the GPU's idle power.

On the CPU the runs are the tiny model's, so tokens and phase times are measured and power is
the simulated A100's driven by the run's real phases (labelled so). Each run folder is a normal
run folder (trace, step log, manifest); the identify stage fits the simulator from them and turns
their mean power into authority-table rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from grpo_power.atomic import write_json_atomic
from grpo_power.config import Config
from grpo_power.control.controllers import FixedController
from grpo_power.layout import RUN, SWEEP
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import read_trace


def sweep_settings(config: Config) -> list[tuple[str, int, Config]]:
    """(actuator, level, run config) of each sweep run: every actuator at its bounds.

    Group size takes the smallest and largest of ``sim.group_sizes``; when a small group makes
    fewer sequences per step than the concurrency bounds allow, concurrency is capped at the
    sequences per step (TRL's own behaviour: one generate call for the whole step).
    """
    w = config.workload
    levels = {
        "concurrency": (w.concurrency_bounds.min, w.concurrency_bounds.max),
        "max_new_tokens": (w.max_new_tokens_bounds.min, w.max_new_tokens_bounds.max),
        "train_micro_batch": (w.train_micro_batch_bounds.min, w.train_micro_batch_bounds.max),
        "num_generations": (min(config.sim.group_sizes), max(config.sim.group_sizes)),
    }
    out = []
    for actuator, pair in levels.items():
        for level in pair:
            workload: dict[str, Any] = w.model_dump()
            workload[actuator] = level
            if actuator == "num_generations":
                sequences = w.prompts_per_step * level
                workload["concurrency"] = min(w.concurrency, sequences)
                workload["concurrency_bounds"] = {
                    "min": min(w.concurrency_bounds.min, sequences),
                    "max": min(w.concurrency_bounds.max, sequences),
                }
            run_config = config.model_copy(
                update={"workload": type(w).model_validate(workload)}, deep=True
            )
            out.append((actuator, level, run_config))
    return out


SWEEP_INDEX = SWEEP.index
SweepRunner = Callable[[list[tuple[str, int, Config, Path]]], None]


def run_sweep(
    config: Config, out: Path, steps: int, seed: int, run_all: SweepRunner | None = None
) -> list[Path]:
    """Run every sweep setting for ``steps`` steps into ``out/<actuator>-<level>`` and write
    the index ``out/sweep.json`` (actuator, level and folder of each run) last.

    Args:
        run_all: runs every (actuator, level, run config, folder) at once (the CLI passes one
            that submits them as one job array on clusters); default: one after another in
            this process (a completed run is reused, an unfinished one resumed).

    Returns the run folders, in the order of :func:`sweep_settings`.
    """
    runs = [
        (actuator, level, run_config, Path(out) / f"{actuator}-{level}")
        for actuator, level, run_config in sweep_settings(config)
    ]
    if run_all is not None:
        run_all(runs)
    else:
        from grpo_power.workload.resume import StopSignals
        from grpo_power.workload.runner import completed, run_grpo

        with StopSignals() as stop:
            for actuator, level, run_config, folder in runs:
                stop.check(f"sweep run {actuator}-{level}")  # a signal between two runs
                w = run_config.workload
                result = run_grpo(
                    run_config,
                    f"sweep-{actuator}-{level}",
                    seed,
                    folder,
                    FixedController(w.concurrency, w.max_new_tokens),
                    steps=steps,
                    show_progress=False,
                )
                completed(result, f"sweep run {actuator}-{level}")  # no index of unfinished runs
    write_sweep_index(out, steps, seed, [(a, lv, f.name) for a, lv, _, f in runs])
    return [folder for *_, folder in runs]


def write_sweep_index(
    folder: Path, steps: int, seed: int, runs: list[tuple[str, int, str]]
) -> None:
    """Write ``folder/sweep.json``, the index :func:`read_sweep_index` reads: the steps and
    seed of the runs and each one's (actuator, level, run folder name in ``folder``)."""
    index = [{"actuator": a, "level": level, "folder": name} for a, level, name in runs]
    write_json_atomic(Path(folder) / SWEEP_INDEX, {"steps": steps, "seed": seed, "runs": index})


def read_sweep_index(folder: Path) -> list[tuple[str, int, Path]]:
    """(actuator, level, run folder) of each run of the sweep in ``folder`` (its sweep.json).

    Raises:
        FileNotFoundError / ValueError: no index, or not one written by :func:`run_sweep`.
    """
    path = Path(folder) / SWEEP_INDEX
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no such file; expected the sweep index written by `grpo-power sweep "
            f"--out {folder}`"
        )
    try:
        runs = json.loads(path.read_text())["runs"]
        return [(r["actuator"], int(r["level"]), Path(folder) / r["folder"]) for r in runs]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ValueError(
            f"{path}: expected the sweep index written by `grpo-power sweep` (runs with "
            f"actuator, level and folder), got {type(error).__name__}: {error}"
        ) from None


def measured_sweep_row(
    folder: Path, actuator: str, level: int, deployment: str, config: Config
) -> dict[str, Any]:
    """A sweep row (the authority stage's columns) from one measured run folder.

    Mean per-GPU power over the steps after the first (start-up excluded); throughput =
    completion tokens / wall time of those steps; violations against ``config.cap_w``.
    """
    steps = read_step_log(folder / RUN.steps)
    steps = steps[steps["step"] > 1] if len(steps) > 1 else steps
    trace = read_trace(folder / RUN.trace)
    frame = trace.frame
    inside = (frame["t"] >= steps["start_s"].min()) & (frame["t"] <= steps["end_s"].max())
    power = frame.loc[inside, "power_w"].to_numpy()
    wall_s = float((steps["end_s"] - steps["start_s"]).sum())
    simulated = trace.metadata.simulated or trace.metadata.source == "simulated"
    return {
        "deployment": deployment,
        "gpus": int(frame["gpu"].nunique()),
        "actuator": actuator,
        "level": level,
        "mean_power_w": float(np.mean(power)) if len(power) else float("nan"),
        "tokens_per_s": float(steps["completion_tokens"].sum()) / wall_s,
        "violation_rate": float((power > config.cap_w).mean()) if len(power) else float("nan"),
        "steps": len(steps),
        "nameplate_w": trace.metadata.nameplate_w,
        "idle_w": config.gpu.idle_w,
        "data": "real run (simulated power)" if simulated else "measured",
    }
