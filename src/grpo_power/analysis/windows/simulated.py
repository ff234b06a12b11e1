"""The windows stage on the evaluate stage's simulated runs (SIMULATED power).

The evaluation writes each arm's runs on a deployment as ``<arm>.samples.parquet`` (seed, gpu,
sample index, power_w; ``t = sample x period_s``; :mod:`grpo_power.control.rollout`). Each seed
of each arm is made into a trace (source ``simulated``, starting at unix time 0) and windowed by
:func:`grpo_power.analysis.windows.stage.analyze_trace`, the windows stage's own function,
against the deployment's cap, at the configured windows and the study's (0.5 s, 30 s, 5 min,
:data:`grpo_power.analysis.reference.STUDY_EXCEEDANCE_72B`). Rows of every seed are kept, and
``scope = arm_pooled`` rows pool each arm's seeds (the GPU windows of every seed counted
together: the study's per-run over-cap share over the evaluation's seeds). The energy bins of
every seed are what the study's fleet mix (:mod:`grpo_power.analysis.fleet.study_mix`) composes.

Reads files only (no simulator, no torch).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from grpo_power.analysis import reference
from grpo_power.analysis.windows.stage import analyze_trace
from grpo_power.config import Config
from grpo_power.layout import (
    BINS_METADATA_KEY,
    EVALUATE,
    SIM_RUN,
    SIM_RUN_METADATA_KEY,
    SIM_WINDOWS,
)
from grpo_power.stage_files import read_json, require_keys
from grpo_power.telemetry.schema import TraceMetadata
from grpo_power.telemetry.store import Trace

SAMPLE_COLUMNS = ("seed", "gpu", "sample", "power_w")
METADATA_KEYS = ("deployment", "arm", "gpus", "cap_w", "period_s", "nameplate_w")
EXPECTED = "an arm's samples written by `grpo-power evaluate`"


@dataclass(frozen=True)
class SimSamples:
    """One arm's simulated runs on one deployment: the samples and the file's metadata."""

    path: Path
    info: dict[str, Any]
    frame: pd.DataFrame

    @property
    def deployment(self) -> str:
        return str(self.info["deployment"])

    @property
    def arm(self) -> str:
        return str(self.info["arm"])


@dataclass
class SimWindowsResult:
    """The windows of one deployment's simulated runs: every arm and seed."""

    exceedance: pd.DataFrame
    bins: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def read_sim_samples(path: Path | str) -> SimSamples:
    """An evaluation's ``<arm>.samples.parquet`` with its metadata, checked.

    Raises:
        ValueError: not such a file (no metadata, missing keys or columns), or a seed whose cap
            changes during the run (a scenario's schedule: windows compare with one cap).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file; expected {EXPECTED}")
    table = pq.read_table(path)
    raw = (table.schema.metadata or {}).get(SIM_RUN_METADATA_KEY)
    if raw is None:
        raise ValueError(
            f"{path}: {SIM_RUN_METADATA_KEY.decode()}: expected {EXPECTED}, found no such metadata"
        )
    info = json.loads(raw)
    require_keys(info, METADATA_KEYS, f"{path}: {SIM_RUN_METADATA_KEY.decode()} metadata", EXPECTED)
    missing = [c for c in SAMPLE_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: {missing[0]}: expected the columns {list(SAMPLE_COLUMNS)}")
    frame = table.to_pandas()
    if "cap_w" in frame.columns:
        spread = frame.groupby("seed")["cap_w"].agg(["min", "max"])
        changing = spread[spread["max"] > spread["min"]]
        if len(changing):
            raise ValueError(
                f"{path}: cap_w: expected one cap per seed (the study's evaluation), seed "
                f"{changing.index[0]} goes from {changing['min'].iloc[0]:g} to "
                f"{changing['max'].iloc[0]:g} W (a scenario's schedule)"
            )
    return SimSamples(path, info, frame)


def seed_cap_w(samples: SimSamples, seed: int) -> float:
    """The cap a seed's samples were taken under, W (the samples' ``cap_w``, else the file's)."""
    frame = samples.frame
    if "cap_w" in frame.columns:
        return float(frame.loc[frame["seed"] == seed, "cap_w"].iloc[0])
    return float(samples.info["cap_w"])


def seed_trace(samples: SimSamples, seed: int, gpu_name: str) -> Trace:
    """One seed's samples as a simulated trace: ``t = sample x period_s`` from unix time 0."""
    info = samples.info
    rows = samples.frame[samples.frame["seed"] == seed]
    period_s = float(info["period_s"])
    frame = pd.DataFrame(
        {
            "t": rows["sample"].to_numpy(dtype=np.float64) * period_s,
            "gpu": rows["gpu"].to_numpy(dtype=np.int64),
            "power_w": rows["power_w"].to_numpy(dtype=np.float64),
        }
    )
    metadata = TraceMetadata(
        run_id=f"sim-{samples.deployment}-{samples.arm}-seed{seed}",
        source="simulated",
        gpu_name=gpu_name,
        nameplate_w=float(info["nameplate_w"]),
        sample_period_s=period_s,
        host="simulator",
        start_unix_s=0.0,
        simulated=True,
        model_size=samples.deployment,
        deployment=samples.deployment,
        arm=samples.arm,
        seed=int(seed),
    )
    return Trace(frame=frame, metadata=metadata, path=samples.path, complete=True)


def study_windows_s(config: Config) -> list[float]:
    """The configured windows and the study's (0.5 s, 30 s, 5 min), in increasing order."""
    study = [fig.window_s for fig in reference.STUDY_EXCEEDANCE_72B if fig.window_s is not None]
    listed = list(config.windows.windows_s)
    extra = [w for w in study if not any(abs(w - v) <= 1e-9 * w for v in listed)]
    return sorted(listed + extra)


def _arm_pooled_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """``scope = arm_pooled``: each arm's ``run_pooled`` windows summed over its seeds, with the
    seeds' lowest and highest share beside."""
    pooled = runs[runs["scope"] == "run_pooled"]
    rows = []
    for (arm, window_s), at in pooled.groupby(["arm", "window_s"], sort=False):
        windows = int(at["windows"].sum())
        over = int(at["windows_over"].sum())
        shares = at["exceedance"].to_numpy(dtype=float)
        finite = shares[np.isfinite(shares)]
        first = at.iloc[0]
        rows.append(
            {
                "scope": "arm_pooled",
                "deployment": first["deployment"],
                "arm": arm,
                "seed": -1,
                "gpu": -1,  # every GPU pooled, as the run_pooled rows mark it
                "seeds": len(at),
                "run_id": f"sim-{first['deployment']}-{arm}",
                "window_s": window_s,
                "windows": windows,
                "windows_over": over,
                "exceedance": over / windows if windows else float("nan"),
                "exceedance_seed_min": float(finite.min()) if len(finite) else float("nan"),
                "exceedance_seed_max": float(finite.max()) if len(finite) else float("nan"),
                "peak_mean_w": float(at["peak_mean_w"].max()),
                "cap_w": float(first["cap_w"]),
                "nameplate_w": float(first["nameplate_w"]),
                "samples": int(at["samples"].sum()),
                "samples_over_cap": int(at["samples_over_cap"].sum()),
                "data": "simulated",
                "note": "" if windows else f"no full {window_s:g} s window in any seed",
            }
        )
    return pd.DataFrame(rows)


def analyze_sim_deployment(sample_files: Sequence[Path | str], config: Config) -> SimWindowsResult:
    """Window every seed of every arm of one deployment (files of one deployment).

    Returns the exceedance rows of every seed (scopes ``gpu``, ``run_pooled``, ``run_total``
    of :func:`analyze_trace`) and each arm's ``arm_pooled`` rows, with ``deployment``, ``arm``
    and ``seed`` columns; and every seed's energy bins (``arm, seed, bin, gpu, energy_j``).
    """
    if not sample_files:
        raise ValueError(
            "no simulated samples given; expected an evaluation's <arm>.samples.parquet files"
        )
    windows_s = study_windows_s(config)
    frames, bins, arms = [], [], []
    deployment, first = None, {}
    for path in sample_files:
        samples = read_sim_samples(path)
        if deployment is None:
            deployment, first = samples.deployment, samples.info
        elif samples.deployment != deployment:
            raise ValueError(
                f"{samples.path}: deployment: expected {deployment!r} like the other files, got "
                f"{samples.deployment!r} (one deployment per call)"
            )
        arms.append(samples.arm)
        for seed in sorted(int(s) for s in samples.frame["seed"].unique()):
            trace = seed_trace(samples, seed, config.gpu.name)
            result = analyze_trace(trace, config, seed_cap_w(samples, seed), windows_s)
            labels = {"deployment": deployment, "arm": samples.arm, "seed": seed}
            frames.append(result.exceedance.assign(**labels))
            # the seed as every other file has it (an int32 seed did not join the metrics')
            bins.append(result.bins.assign(arm=samples.arm, seed=np.int64(seed)))
    runs = pd.concat(frames, ignore_index=True)
    exceedance = pd.concat([runs, _arm_pooled_rows(runs)], ignore_index=True)
    summary = {
        "simulated": True,
        "data": "simulated",
        "deployment": deployment,
        "arms": arms,
        "seeds": sorted(int(s) for s in runs["seed"].unique()),
        "gpus": int(first["gpus"]),
        "nameplate_w": float(first["nameplate_w"]),
        "cap_w": float(first["cap_w"]),
        "sample_period_s": float(first["period_s"]),
        "windows_s": windows_s,
        "bin_s": config.windows.bin_s,
        "inputs": [str(p) for p in sample_files],
    }
    columns = ["arm", "seed", "bin", "gpu", "energy_j"]
    return SimWindowsResult(exceedance, pd.concat(bins, ignore_index=True)[columns], summary)


def evaluated_arms(evaluation: Path | str, deployment: str) -> list[str]:
    """The arms an evaluation ran on ``deployment`` (its ``summary.json``).

    Raises:
        ValueError: the evaluation did not run this deployment (the message lists those it ran).
    """
    path = Path(evaluation) / EVALUATE.summary_json
    expected = "the evaluate stage's summary.json, written by `grpo-power evaluate`"
    summary = read_json(path, expected, ("deployments",))
    deployments = summary["deployments"]
    if deployment not in deployments:
        raise ValueError(
            f"{path}: deployments: expected {deployment!r} among the evaluated deployments, got "
            f"{sorted(deployments)}"
        )
    return list(deployments[deployment]["arms"])


def sim_sample_files(evaluation: Path | str, deployment: str, arms: Sequence[str]) -> list[Path]:
    """The ``<arm>.samples.parquet`` of each arm of a deployment in an evaluation folder."""
    return [Path(evaluation) / deployment / SIM_RUN.samples(arm) for arm in arms]


def write_sim_windows(result: SimWindowsResult, out_dir: Path | str) -> list[Path]:
    """Write the windows of one deployment's simulated runs into ``out_dir`` (atomically):
    ``exceedance.csv``/``.parquet``, ``bins.parquet`` (with the summary as metadata) and
    ``summary.json``."""
    from grpo_power.atomic import write_csv_atomic, write_json_atomic, write_parquet_atomic

    out = Path(out_dir)
    metadata = {BINS_METADATA_KEY: json.dumps(result.summary).encode()}
    return [
        write_csv_atomic(out / SIM_WINDOWS.exceedance_csv, result.exceedance),
        write_parquet_atomic(out / SIM_WINDOWS.exceedance_parquet, result.exceedance),
        write_parquet_atomic(out / SIM_WINDOWS.bins, result.bins, metadata=metadata),
        write_json_atomic(out / SIM_WINDOWS.summary, result.summary),
    ]


def run_sim_windows(
    sample_files: Sequence[Path | str], out_dir: Path | str, config: Config
) -> SimWindowsResult:
    """The windows of one deployment's simulated runs: read, analyse, write."""
    result = analyze_sim_deployment(sample_files, config)
    write_sim_windows(result, out_dir)
    return result
