"""Per-run energy, tokens and time: what the economics stage prices, read from stage outputs.

Two kinds of run, one record each (one row of :data:`RECORD_COLUMNS`):

- a real GRPO run of the run stage (``runs/<size>/<arm>/seed<seed>/``): GPU energy from its
  trace (the energy counter where present, else integrated power; every GPU summed), completion
  tokens from its step log, wall time from the trace's span. ``data`` is the trace's source:
  ``simulated`` power on CPU, ``nvml`` on GPUs, ``imported``;
- a simulated run of the evaluate stage (``evaluate/study/metrics.csv``): the simulator's output
  tokens and GPU energy in the deployment's time budget. ``data`` is ``simulated``.

Nothing here imports torch or TRL: the step log and the trace are read with pyarrow.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_power.layout import RUN
from grpo_power.stage_files import read_csv, read_json
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import read_trace
from grpo_power.telemetry.summary import summarize_trace

RUN_FILE = "a run folder's manifest.json, written by `grpo-power run --out DIR`"
METRICS_FILE = "the evaluate stage's metrics.csv, written by `grpo-power evaluate --out DIR`"
RECORD_COLUMNS = (
    "source",  # "run" (the run stage) | "simulator" (the evaluate stage)
    "deployment",  # the run's model size, or the simulated deployment
    "arm",
    "seed",
    "gpus",
    "tokens",  # completion tokens
    "energy_j",  # GPU energy, all GPUs, J
    "wall_s",  # wall time the tokens and energy cover, s
    "data",  # "simulated" | "nvml" | "imported"
)


def run_record(folder: Path | str) -> dict[str, object]:
    """The record of one run folder (``manifest.json``, ``trace.parquet``, ``steps.parquet``).

    Raises:
        FileNotFoundError: a file of the run is missing.
        ValueError: the run did not complete, or its trace has no samples.
    """
    folder = Path(folder)
    manifest = read_json(folder / RUN.manifest, RUN_FILE, ("status", "size", "arm", "seed"))
    if manifest.get("status") != "completed":
        raise ValueError(
            f"{folder}: run status is {manifest.get('status')!r}, not 'completed'; rerun it "
            "before pricing it"
        )
    trace = read_trace(folder / RUN.trace)
    if trace.frame.empty:
        raise ValueError(f"{folder / 'trace.parquet'}: the trace has no samples")
    gpus = summarize_trace(trace)
    steps = read_step_log(folder / RUN.steps)
    return {
        "source": "run",
        "deployment": manifest["size"],
        "arm": manifest["arm"],
        "seed": int(manifest["seed"]),
        "gpus": len(gpus),
        "tokens": float(steps["completion_tokens"].sum()),
        "energy_j": float(sum(g.energy_j for g in gpus)),
        "wall_s": float(max(g.duration_s for g in gpus)) - _between_attempts_s(manifest),
        "data": trace.metadata.source,
    }


def _between_attempts_s(manifest: dict[str, Any]) -> float:
    """Time between the attempts of a resumed run, s (trace clock): in the trace's span, but
    not time the run ran."""
    attempts = manifest.get("attempts") or []
    return sum(
        max(0.0, after["t_start_s"] - before["t_end_s"])
        for before, after in itertools.pairwise(attempts)
        if before.get("t_end_s") is not None and after.get("t_start_s") is not None
    )


def simulator_records(metrics_csv: Path | str) -> pd.DataFrame:
    """Records of the evaluate stage's simulated runs (its per-run ``metrics.csv``)."""
    needed = ["deployment", "arm", "seed", "gpus", "output_tokens", "energy_j", "budget_s"]
    metrics = read_csv(metrics_csv, METRICS_FILE, needed)
    return pd.DataFrame(
        {
            "source": "simulator",
            "deployment": metrics["deployment"].astype(str),
            "arm": metrics["arm"],
            "seed": metrics["seed"].astype(int),
            "gpus": metrics["gpus"].astype(int),
            "tokens": metrics["output_tokens"].astype(float),
            "energy_j": metrics["energy_j"].astype(float),
            "wall_s": metrics["budget_s"].astype(float),
            "data": "simulated",
        }
    )


def all_records(run_folders: list[Path], metrics_csv: Path | None) -> pd.DataFrame:
    """Records of the given runs and of the evaluate stage's metrics (either may be absent)."""
    frames = [pd.DataFrame([run_record(f) for f in run_folders], columns=list(RECORD_COLUMNS))]
    if metrics_csv is not None:
        frames.append(simulator_records(metrics_csv))
    frames = [f for f in frames if len(f)]
    if not frames:
        raise ValueError(
            "nothing to price: give run folders (--run) or the evaluate stage's folder"
        )
    records = pd.concat(frames, ignore_index=True)
    bad = records[(records["tokens"] <= 0) | (records["wall_s"] <= 0)]
    if len(bad):
        first = bad.iloc[0]
        raise ValueError(
            f"{first['source']} {first['deployment']}/{first['arm']}/seed{first['seed']}: "
            f"{first['tokens']:g} tokens in {first['wall_s']:g} s: nothing to price per token"
        )
    return records
