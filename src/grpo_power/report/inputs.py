"""What the report reads: the files earlier stages wrote, loaded into tidy tables.

:class:`ReportInputs` names the files; the loaders turn them into long-format frames the
figures and tables share. Every frame carries a ``data`` label (``simulated``, ``nvml``,
``imported``) so nothing simulated is ever shown unlabelled. Power samples are thinned evenly to
``max_points`` per panel and arm, and traces cut to ``trace_s`` seconds, so the report stays fast
on long runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from grpo_power.layout import CONTROLLER, EVALUATE, RUN, SIM_RUN, SIM_RUN_METADATA_KEY
from grpo_power.stage_files import read_csv, read_json, require_data_label
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import read_trace

STAGE_COMMANDS = {
    "run": "grpo-power run --out DIR",
    "windows": "grpo-power windows TRACE --out DIR",
    "fleet": "grpo-power fleet --out DIR",
    "study fleet": "grpo-power study-fleet --out DIR",
    "identify": "grpo-power identify --out DIR",
    "controller": "grpo-power controller train --out DIR",
    "evaluate": "grpo-power evaluate --out DIR",
    "economics": "grpo-power economics --out DIR",
}


def written_by(stage: str, name: str) -> str:
    """What a report input should be, for error messages: a stage's file and its command."""
    return f"the {stage} stage's {name}, written by `{STAGE_COMMANDS[stage]}`"


MANIFEST_KEYS = ("size", "arm", "config")


@dataclass(frozen=True)
class ReportInputs:
    """The stage outputs the report is built from."""

    runs: list[Path]  # run-stage folders (trace.parquet, steps.parquet, manifest.json)
    exceedance: list[Path]  # the windows stage's exceedance.csv of those runs
    fleet: Path  # the fleet stage's folder
    identify: Path  # the identify stage's folder (authority.csv)
    controllers: list[Path]  # controller folders (controller.json, learning_curve.csv if any)
    evaluate: Path  # the evaluate stage's study folder
    economics: Path  # the economics stage's folder
    real_traces: Path | None = None  # `grpo-power real-traces`' folder, if measured runs are set
    study_fleet: Path | None = None  # `grpo-power study-fleet`'s folder, if fleet.study_mix is set
    scenarios: list[Path] = field(default_factory=list)  # evaluate folders of the scenarios


@dataclass(frozen=True)
class RunInfo:
    """One real run: its manifest (without the resolved config), trace metadata, samples."""

    folder: Path
    manifest: dict[str, Any]
    metadata: dict[str, Any]
    samples: int


def run_infos(folders: list[Path]) -> list[RunInfo]:
    """Manifest and trace metadata of every run folder."""
    infos = []
    for folder in folders:
        manifest = read_json(folder / RUN.manifest, written_by("run", RUN.manifest), MANIFEST_KEYS)
        manifest.pop("config", None)
        trace = read_trace(folder / RUN.trace)
        infos.append(RunInfo(folder, manifest, trace.metadata.describe(), len(trace.frame)))
    return infos


def _thin(frame: pd.DataFrame, max_points: int) -> pd.DataFrame:
    """Every k-th row so that at most ``max_points`` remain."""
    step = max(1, int(np.ceil(len(frame) / max_points)))
    return frame.iloc[::step]


def run_power(
    folders: list[Path], trace_s: float, max_points: int, cap_w: float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Power of the real runs: (trace window, distribution sample).

    The trace window starts at the first step (after model loading) and lasts ``trace_s``; it
    shows GPU 0. Columns: ``panel, arm, t_s, power_w, cap_w, data``; ``cap_w`` is the cap the
    windows stage judges the runs by, the config's (a run of an arm that never reads the cap
    is not rerun when it changes, and its manifest keeps the old one).
    """
    traces, samples = [], []
    for folder in folders:
        manifest = read_json(folder / RUN.manifest, written_by("run", RUN.manifest), MANIFEST_KEYS)
        trace = read_trace(folder / RUN.trace)
        steps = read_step_log(folder / RUN.steps)
        start_s = float(steps["start_s"].min()) if len(steps) else 0.0
        frame = trace.frame
        info = {
            "panel": f"{manifest['size']} (run)",
            "arm": manifest["arm"],
            "cap_w": cap_w,
            "data": trace.metadata.source,
        }
        gpu0 = frame[frame["gpu"] == frame["gpu"].min()]
        window = gpu0[(gpu0["t"] >= start_s) & (gpu0["t"] <= start_s + trace_s)]
        traces.append(
            pd.DataFrame({"t_s": window["t"] - start_s, "power_w": window["power_w"], **info})
        )
        samples.append(pd.DataFrame({"power_w": _thin(frame, max_points)["power_w"], **info}))
    return _concat(traces), _concat(samples)


def sim_power(
    evaluate_dir: Path, trace_s: float, max_points: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Power of the simulated evaluation runs (the evaluate folder's
    ``<deployment>/<arm>.samples.parquet``): (first seed's GPU 0 for ``trace_s``, a thinned
    sample of every seed and GPU). Columns as :func:`run_power`."""
    summary = read_json(
        evaluate_dir / EVALUATE.summary_json,
        written_by("evaluate", EVALUATE.summary_json),
        ("deployments",),
    )
    traces, samples = [], []
    for deployment, info in summary["deployments"].items():
        for arm in info["arms"]:
            table = pq.read_table(evaluate_dir / deployment / SIM_RUN.samples(arm))
            meta = json.loads((table.schema.metadata or {})[SIM_RUN_METADATA_KEY])
            frame = table.select(["seed", "gpu", "sample", "power_w"]).to_pandas()
            labels = {
                "panel": f"{deployment} (simulator)",
                "arm": arm,
                "cap_w": float(meta["cap_w"]),
                "data": "simulated",
            }
            first = frame[(frame["seed"] == frame["seed"].min()) & (frame["gpu"] == 0)]
            t_s = first["sample"].to_numpy(dtype=float) * float(meta["period_s"])
            keep = t_s <= trace_s
            traces.append(
                pd.DataFrame(
                    {"t_s": t_s[keep], "power_w": first["power_w"].to_numpy()[keep]}
                ).assign(**labels)
            )
            samples.append(
                pd.DataFrame({"power_w": _thin(frame, max_points)["power_w"]}).assign(**labels)
            )
    return _concat(traces), _concat(samples)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def learning_curve(folder: Path) -> pd.DataFrame | None:
    """A controller folder's ``learning_curve.csv`` (``timesteps``, ``episode_return``) when
    the controller stage wrote one."""
    path = folder / CONTROLLER.learning_curve
    expected = written_by("controller", CONTROLLER.learning_curve)
    return read_csv(path, expected, ("timesteps", "episode_return")) if path.exists() else None


def controller_info(folder: Path) -> dict[str, Any]:
    """A controller folder's ``controller.json``, with the keys the report reads (its data
    label ``simulated`` among them: a missing one is never shown as measured).

    Raises:
        ValueError: a key is missing, or ``simulated`` is not true or false (the message names
            the file).
    """
    path = folder / CONTROLLER.controller
    info = read_json(
        path, written_by("controller", CONTROLLER.controller), ("simulated", "evaluation")
    )
    require_data_label(info, str(path), "whether the controller was trained in the simulator")
    return info


SETTINGS = ("concurrency", "max_new_tokens", "train_micro_batch", "pause_s")  # a step's, logged


def same_settings(infos: list[RunInfo]) -> list[str]:
    """Arms of the real runs of one size that ran the same settings (:data:`SETTINGS`) at every
    step of every seed they share, as their step logs have them: their tokens per second,
    energy and time then differ by this machine's load alone (a tiny run on a busy CPU: fixed,
    fixed-safe and threshold ran alike, and their tokens/s differed two-fold). One line per
    set of such arms, naming the settings; [] where every arm's runs differ."""
    runs: dict[tuple[str, str], dict[int, tuple]] = {}
    for info in infos:
        steps = read_step_log(info.folder / RUN.steps)
        columns = [c for c in SETTINGS if c in steps.columns]
        held = tuple(tuple(zip(columns, row, strict=True)) for row in steps[columns].to_numpy())
        key = (str(info.manifest["size"]), str(info.manifest["arm"]))
        runs.setdefault(key, {})[int(info.manifest.get("seed", 0))] = held
    groups: dict[tuple, list[str]] = {}
    for (size, arm), seeds in runs.items():
        groups.setdefault((size, tuple(sorted(seeds.items()))), []).append(arm)
    lines = []
    for (size, seeds), arms in groups.items():
        steps = seeds[0][1]
        if len(arms) < 2 or not steps:
            continue
        shown = ", ".join(f"{c} {float(v):g}" for c, v in steps[0])
        constant = "" if len(set(steps)) > 1 else f" ({shown} throughout)"
        named = sorted(arms)
        lines.append(
            f"The {size} runs of {', '.join(named[:-1])} and {named[-1]} ran the same settings "
            f"at every step{constant}: their tokens/s, energy and time differ by this machine's "
            "load alone, not by the arm"
        )
    return lines
