"""Planner mode in one call: import a folder of traces, window them, build their fleet, price
them and write the report (``grpo-power planner run``; ``snakemake planner`` runs the same
steps as separate commands).

Folders under ``out``: ``traces/`` (the imported traces and ``index.csv``), ``windows/<key>/``
(the windows stage per trace), ``fleet/``, ``economics/`` and ``report/index.html``. The traces
and windows folders are written whole, replacing an earlier run's: they hold this folder's
traces only.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from grpo_power.analysis.fleet import FleetResult
from grpo_power.analysis.windows import run_windows
from grpo_power.atomic import replace_folder_atomic
from grpo_power.config import Config
from grpo_power.layout import PlannerLayout
from grpo_power.planner.discover import import_traces
from grpo_power.planner.economics import planner_economics
from grpo_power.planner.fleet import CAP, fleet_of_traces
from grpo_power.planner.report import PlannerFolders, import_notes, planner_report


@dataclass(frozen=True)
class PlannerResult:
    """What planner mode wrote and found."""

    report: Path
    fleet: FleetResult
    economics: dict[str, Any]
    traces: int
    skipped: list[str]  # each skipped file of the folder, "key (why)"
    notes: list[str]  # what the import inferred or repaired, one note each


def run_planner(
    folder: Path | str, out: Path | str, config: Config, show_progress: bool = False
) -> PlannerResult:
    """Every planner step on the traces under ``folder``; outputs under ``out``; returns what
    it wrote and found. Every trace and the fleet are judged by ``planner.cap_w`` where the
    config sets it, else by its ``cap_w`` (the fleet's ``cap_note`` names traces of another
    part)."""
    layout = PlannerLayout(Path(out))
    folders = PlannerFolders(layout.traces, layout.fleet, layout.economics)
    # `out` may lie in `folder` (or be it): its own outputs are not traces of the folder
    outputs = [layout.traces, layout.windows_root, layout.fleet, layout.economics, layout.report]
    index = import_traces(folder, layout.traces, config, show_progress, leave_out=outputs)
    imported = index[index["status"] == "imported"]
    keys = list(imported["key"])
    # the later stages of an earlier run describe other traces: gone before any is redone, so
    # a run stopped part-way leaves no fleet, economics or report of another set of traces
    for stale in (layout.windows_root, layout.fleet, layout.economics, layout.report):
        if stale.is_dir():
            shutil.rmtree(stale)

    def window(staging: Path) -> None:
        for key in tqdm(keys, desc="windows", unit="trace", disable=not show_progress):
            # the imported trace's clock is split already, where planner asked for it
            run_windows(
                layout.trace(key), staging / key, config, cap_w=config.planner.cap_w, cap_from=CAP
            )

    # the windows folder holds these traces' windows only, as the traces folder holds them
    replace_folder_atomic(layout.windows_root, window)
    # the steps after the windows: minutes on weeks of logs (the fleet's scaling study most)
    with tqdm(total=3, desc="fleet", unit="step", disable=not show_progress) as steps:
        sources = dict(zip(keys, imported["source_path"], strict=True))
        fleet = fleet_of_traces(
            [layout.windows(key) for key in keys], layout.fleet, config, sources
        )
        steps.set_description("economics")
        steps.update()
        economics = planner_economics(layout.traces, layout.fleet, layout.economics, config)
        steps.set_description("report")
        steps.update()
        report = planner_report(folders, layout.report, config)
        steps.update()
    skipped = [f"{r.key} ({r.reason})" for r in index[index["status"] == "skipped"].itertuples()]
    return PlannerResult(report, fleet, economics, len(keys), skipped, import_notes(imported))
