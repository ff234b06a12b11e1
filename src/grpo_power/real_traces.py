"""The simulator against real traces (``grpo-power real-traces``, rule ``real_traces``): a folder
of measured inference runs, each an nvidia-smi log (``power.csv``) beside its engine's metrics
(``engine.csv``), imported with per-sample concurrency, the decode power model fitted to some
runs and validated on the others (:func:`grpo_power.study.identify_traces`), and each run's
windowed exceedance of the cap at every configured window (the windows stage's code).

Writes under its output folder (``results/real-traces`` in the workflow; layout
:class:`~grpo_power.layout.RealTraceFiles`): ``traces/KEY.parquet``, ``fit/`` (``TRACE_FIT``),
``runs.csv`` (which run was fitted, which held out) and ``exceedance.csv``, every row labelled
``measured (public trace)`` when ``real_traces.origin`` names its source, else ``measured``.
The report's "Simulator against real traces" section reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from grpo_power.atomic import write_csv_atomic
from grpo_power.config import Config
from grpo_power.layout import REAL_TRACES

POWER_LOG = "power.csv"
ENGINE_LOG = "engine.csv"
PUBLIC = "measured (public trace)"


def find_runs(folder: Path) -> list[Path]:
    """The run folders under ``folder`` (searched recursively): those holding both a power log
    and an engine log, sorted.

    Raises:
        ValueError: ``folder`` is missing, or holds no such run.
    """
    if not folder.is_dir():
        raise ValueError(f"real_traces.folder: expected a folder of runs, got {str(folder)!r}")
    runs = sorted(p.parent for p in folder.rglob(POWER_LOG) if (p.parent / ENGINE_LOG).is_file())
    if not runs:
        raise ValueError(
            f"real_traces.folder: expected run folders with {POWER_LOG} (nvidia-smi) and "
            f"{ENGINE_LOG} (engine metrics) under {folder}, found none"
        )
    return runs


def run_key(run: Path, folder: Path) -> str:
    """A run's key: its path under ``folder`` with ``/`` as ``--`` (a file name)."""
    return run.relative_to(folder).as_posix().replace("/", "--")


def import_run(run: Path, key: str, config: Config, out: Path) -> Path:
    """Import one run's power log with its engine's concurrency into ``out`` (a trace file)."""
    from grpo_power.telemetry.engine import add_engine_columns, read_engine_log
    from grpo_power.telemetry.importers import ImportError_, import_log
    from grpo_power.telemetry.store import write_trace

    rt = config.real_traces
    try:
        frame, metadata = import_log(
            run / POWER_LOG,
            "nvidia-smi",
            nameplate_w=config.gpu.nameplate_w,
            gpu_name=config.gpu.name,
            run_id=key,
            timezone=rt.timezone,
            timezone_from="real_traces.timezone",
        )
        frame, metadata = add_engine_columns(
            frame, metadata, read_engine_log(run / ENGINE_LOG, rt.engine_format)
        )
    except ImportError_ as error:
        raise ValueError(str(error)) from None
    if rt.origin is not None:
        origin = f"{rt.origin}: {run.relative_to(rt.folder).as_posix()}"  # type: ignore[arg-type]
        metadata = type(metadata).model_validate({**metadata.model_dump(), "origin": origin})
    return write_trace(out, frame, metadata)


def run_real_traces(config: Config, out: Path | str) -> dict[str, Any]:
    """Import, fit, validate and window the runs of ``config.real_traces.folder`` into ``out``.

    A run whose key contains one of ``real_traces.held_out`` is held out from the fit; the
    others are fitted.

    Returns:
        the fit (``trace_fit.json``'s content, with its held-out error).

    Raises:
        ValueError: no folder configured, no run found, or no run left to fit.
    """
    from grpo_power.analysis.windows import analyze_trace
    from grpo_power.study import identify_traces
    from grpo_power.telemetry.store import read_trace

    rt = config.real_traces
    if rt.folder is None:
        raise ValueError("real_traces.folder: expected a folder of measured runs, got none")
    out = Path(out)
    folder = Path(rt.folder)
    runs = {run_key(run, folder): run for run in find_runs(folder)}
    split = {k: ("held-out" if any(s in k for s in rt.held_out) else "fit") for k in runs}
    if "fit" not in split.values():
        raise ValueError(
            f"real_traces.held_out: expected some of the runs under {folder} left to fit, got "
            f"every one of {sorted(runs)} held out by {rt.held_out}"
        )
    label = PUBLIC if rt.origin is not None else "measured"
    paths = {}
    for key, run in tqdm(runs.items(), desc="import", unit="run", leave=False):
        paths[key] = import_run(run, key, config, out / REAL_TRACES.traces / f"{key}.parquet")
    fit = identify_traces(
        config,
        [p for k, p in paths.items() if split[k] == "fit"],
        [p for k, p in paths.items() if split[k] == "held-out"],
        out / REAL_TRACES.fit,
    )
    rows = []
    for key, path in tqdm(paths.items(), desc="windows", unit="run", leave=False):
        result = analyze_trace(read_trace(path), config)
        pooled = result.exceedance[result.exceedance["scope"] == "run_pooled"]
        rows.append(pooled.assign(run_id=key, split=split[key], data=label))
    index = pd.DataFrame(
        {
            "run_id": list(runs),
            "split": [split[k] for k in runs],
            "folder": [runs[k].relative_to(folder).as_posix() for k in runs],
            "data": label,
        }
    )
    write_csv_atomic(out / REAL_TRACES.runs, index)
    write_csv_atomic(out / REAL_TRACES.exceedance, pd.concat(rows, ignore_index=True))
    return fit
