"""Planner mode: a folder of mixed traces (the committed logs, a Parquet trace with its step
log, a file that is no trace) to fleet, economics and report; and the README's two commands on
the public real traces in ../shared/data/real-traces, which must agree."""

from __future__ import annotations

import gzip
import html
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from grpo_power.cli import app
from grpo_power.config import Config, load_config, validate_config
from grpo_power.planner.discover import import_traces
from grpo_power.planner.stage import run_planner
from grpo_power.report import figures
from grpo_power.telemetry.record import trace_metadata
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.simulated import SimulatedGpuSource
from grpo_power.telemetry.steplog import StepLogWriter
from grpo_power.telemetry.store import read_trace, write_trace
from tests.conftest import (
    DATA,
    REAL_RUNS,
    REPO,
    checkout_copy,
    real_traces,
    run_as_user,
    small_config,
    user_env,
)

POWER = "DCGM_FI_DEV_POWER_USAGE"
CLI_FORM = ".venv/bin/grpo-power planner run ../shared/data/real-traces --out results/planner"
SNAKEMAKE_FORM = (
    "snakemake --cores 2 planner --config planner='{traces: ../shared/data/real-traces}'"
)


def _run_folder(folder: Path, config: Config) -> None:
    """A run folder as `grpo-power run` leaves it: a 2-GPU trace and its step log (tokens)."""
    source = SimulatedGpuSource(config.gpu, config.telemetry.simulated, WorkloadSignal(), [0, 1])
    rows = [dict(row, t=0.1 * i) for i in range(600) for row in source.read(0.1 * i)]
    write_trace(
        folder / "trace.parquet",
        pd.DataFrame(rows),
        trace_metadata(source, "run-a", 0.1, start_unix_s=1.7e9),
    )
    log = StepLogWriter(folder / "steps.parquet", "run-a", simulated_power=True)
    log.write([{"step": 1, "completion_tokens": 4000}, {"step": 2, "completion_tokens": 6000}])
    log.close(True)


def test_planner_on_a_folder_of_mixed_traces(config: Config, tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    (folder / "smi").mkdir(parents=True)
    shutil.copy(DATA / "nvidia-smi-a100.csv", folder / "smi" / "node1.csv")
    # no nameplate; rotated and compressed by logrotate: read as the log beneath, named by it
    (folder / "smi" / "node2.csv.gz").write_bytes(
        gzip.compress((DATA / "nvidia-smi-basic.csv").read_bytes())
    )
    shutil.copy(DATA / "dcgm-exporter-a100.csv", folder / "dcgm.csv")
    _run_folder(folder / "run-a", config)
    (folder / "notes.csv").write_text("when,what\nmonday,nothing\n")
    headerless = (DATA / "nvidia-smi-basic.csv").read_text().splitlines(keepends=True)[1:]
    (folder / "smi" / "noheader.csv").write_text("".join(headerless))  # --format=csv,noheader
    shutil.copy(DATA / "nvidia-smi-dmon.log", folder / "smi" / "node3.log")
    (folder / "dcgmi.txt").write_text("#Entity   POWER\nID        W\nGPU 0     64.1\n")
    report = "\n==============NVSMI LOG==============\n\nTimestamp : Fri Dec  4 16:00:00 2026\n"
    (folder / "smi" / "report.txt").write_text(report)  # nvidia-smi -q -d POWER > report.txt
    engine = "timestamp,vllm:num_requests_running,vllm:generation_tokens_total\n1.5,3,100\n"
    (folder / "run-a" / "engine.csv").write_text(engine)
    shutil.copy(DATA / "prometheus-dcgm.json", folder / "prometheus.json")  # two hosts
    (folder / "run-a" / "manifest.json").write_text('{"run_id": "run-a"}')
    utilisation = json.loads((DATA / "prometheus-dcgm.json").read_text())
    utilisation["data"]["result"] = [  # a query of another field: no power
        s for s in utilisation["data"]["result"] if s["metric"]["__name__"] != POWER
    ]
    (folder / "util.json").write_text(json.dumps(utilisation, indent=2))
    grafana = [  # a panel's "Download CSV" for Excel: NVIDIA's DCGM dashboard, legend GPU {{gpu}}
        "sep=,",
        '"Time","GPU 0","GPU 1"',
        *(f"2026-12-01 10:00:{s:02d},{250 + s} W,{300 + s}.5 W" for s in range(0, 60, 15)),
    ]
    (folder / "grafana.csv").write_bytes(("\r\n".join(grafana) + "\r\n").encode("utf-8-sig"))
    result = run_planner(folder, tmp_path / "out", config)
    index = pd.read_csv(tmp_path / "out" / "traces" / "index.csv")
    imported = index[index["status"] == "imported"].set_index("key")
    assert dict(imported["format"]) == {
        "dcgm": "dcgm",
        "grafana": "grafana",
        "prometheus": "prometheus",
        "run-a/trace": "trace",
        "smi/node1": "nvidia-smi",
        "smi/node2": "nvidia-smi",
        "smi/node3": "nvidia-smi-dmon",
    }
    skipped = set(index.loc[index["status"] == "skipped", "key"])
    assert skipped == {
        "notes",
        "run-a/steps",
        "smi/noheader",
        "dcgmi",
        "smi/report",
        "run-a/engine",
        "run-a/manifest",
        "util",
    }
    reasons = index.set_index("key")["reason"]
    assert reasons["smi/noheader"].startswith("no header line (line 1 is data: ")
    assert "--format=csv" in reasons["smi/noheader"]
    assert reasons["dcgmi"].startswith("a dcgmi dmon log: it has no time column")
    assert reasons["smi/report"].startswith("an nvidia-smi -q report (text): not read")
    assert "--query-gpu=timestamp,index,power.draw" in reasons["smi/report"]
    assert reasons["run-a/engine"].startswith("an inference engine's metrics log (vllm), not power")
    assert reasons["util"].startswith(f"a Prometheus query result without {POWER} series")
    assert reasons["run-a/manifest"] == "a .json file that is not a Prometheus query result"
    grafana_trace = read_trace(tmp_path / "out" / "traces" / "grafana.parquet").frame
    assert grafana_trace.groupby("gpu")["power_w"].last().to_dict() == {0: 295.0, 1: 345.5}
    assert imported.loc["grafana", "sample_period_s"] == 15.0
    assert "gpu.nameplate_w" in imported.loc["smi/node2", "notes"]
    assert "2 hosts in column 'Hostname'" in imported.loc["prometheus", "notes"]
    assert imported.loc["prometheus", "sample_period_s"] == 15.0  # a scrape every 15 s
    # the fleet is the traces' GPUs (dcgm 1, run-a 2, node2 1, node3 2, prometheus 4 on two
    # hosts, grafana 2), but for the log too short for one energy bin
    left_out = [entry["run_id"] for entry in result.fleet.summary["left_out"]]
    assert left_out == ["smi/node1"]  # 0.3 s of samples: no complete 0.5 s bin
    assert result.fleet.summary["n_gpus"] == int(imported["gpus"].drop(left_out).sum()) == 12
    assert result.fleet.summary["simulated"]  # one input is simulated: the fleet says so
    traces = pd.read_csv(tmp_path / "out" / "economics" / "traces.csv").set_index("deployment")
    assert traces.loc["run-a/trace", "tokens"] == 10000
    assert np.isfinite(traces.loc["run-a/trace", "kwh_per_mtok"])
    assert np.isnan(traces.loc["dcgm", "kwh_per_mtok"])  # no step log: no per-token figures
    # the pooled energy is the sum of each trace's, read back independently
    total_j = sum(
        read_trace(tmp_path / "out" / "traces" / f"{k}.parquet")
        .frame.groupby("gpu")["energy_j"]
        .agg(lambda e: e.iloc[-1] - e.iloc[0])
        .sum()
        for k in ["dcgm", "run-a/trace"]
    )
    assert traces.loc["all traces", "energy_j"] > total_j  # plus the nvidia-smi logs' energy
    page = result.report.read_text()
    assert "SIMULATED" in page and "planner_fleet.png" in page and "T4" in page
    # measured logs beside the simulated run: the headline says both (it said SIMULATED alone)
    assert "GPU(s), SIMULATED and measured: imported: a fleet of" in page
    # the 15 s scrapes cannot resolve the fleet's shorter windows: the report says which (naming
    # the first of the two traces of that period, grafana)
    label = f"T{sorted(imported.index).index('grafana') + 1}"
    assert f"Windows shorter than {label}&#x27;s sample period" in page
    assert "the 0.5, 1, 5 s rows) are not resolved" in page
    assert not result.economics["tokens_used"]  # not every trace has tokens


def test_nvidia_smi_logs_are_found_by_their_header(tmp_path: Path) -> None:
    """NVIDIA's example query logs pci.bus_id rather than index, and a log written with
    `> smi.log` has no .csv suffix: both are nvidia-smi logs."""
    from grpo_power.planner.discover import classify

    headers = {
        "bus": "timestamp, name, pci.bus_id, power.draw [W]",
        "uuid": "timestamp, uuid, power.draw.instant [W]",
        "none": "timestamp, name, power.draw [W]",
    }
    for name, header in headers.items():
        (tmp_path / f"{name}.csv").write_text(header + "\n")
    found = {n: classify(tmp_path / f"{n}.csv", tmp_path) for n in headers}
    assert {n: f.kind for n, f in found.items()} == {
        "bus": "nvidia-smi",
        "uuid": "nvidia-smi",
        "none": None,
    }
    assert found["none"].reason.startswith("an nvidia-smi log without a column naming its GPUs")
    # `nvidia-smi --query-gpu=... > smi.log`: a CSV log whatever its suffix; other text is not
    (tmp_path / "smi.log").write_text(headers["bus"] + "\n")
    (tmp_path / "notes.txt").write_text("timestamp of the run, and what changed\n")
    assert classify(tmp_path / "smi.log", tmp_path).kind == "nvidia-smi"
    notes = classify(tmp_path / "notes.txt", tmp_path)
    assert (notes.kind, notes.reason) == (
        None,
        "not a .csv or .json file, nor a log of a known format by its first line",
    )
    (tmp_path / "empty.csv").write_text("")  # a logger that never ran, a truncated copy
    assert classify(tmp_path / "empty.csv", tmp_path).reason.startswith("an empty file")


def test_engine_metrics_pair_only_with_the_one_power_log_beside_them(
    config: Config, tmp_path: Path
) -> None:
    """An engine log is aligned with the power log of its folder only where the folder holds
    one of each; one whose clock cannot be aligned leaves the power log without tokens, noted."""
    from grpo_power.planner.discover import engines_beside, find_traces, import_traces

    folder = tmp_path / "traces"
    engine = "timestamp,vllm:num_requests_running,vllm:generation_tokens_total\n1.5,3,100\n"
    for run, logs in {"one": ["power.csv"], "two": ["power.csv", "other.csv"]}.items():
        (folder / run).mkdir(parents=True)
        for log in logs:
            shutil.copy(DATA / "nvidia-smi-a100.csv", folder / run / log)
        (folder / run / "engine.csv").write_text(engine)
    traces, skipped = find_traces(folder)
    paired = engines_beside(traces, skipped)
    assert {k: (f.key, e) for k, (f, e) in paired.items()} == {"one/power": ("one/engine", "vllm")}
    index = import_traces(folder, tmp_path / "out", config).set_index("key")
    # the engine's one sample in 1970 covers none of the 2025 power log: not aligned
    assert pd.isna(index.loc["one/power", "tokens"])
    assert "engine metrics not aligned: " in index.loc["one/power", "notes"]
    assert index.loc["one/engine", "reason"].startswith("an inference engine's metrics log (vllm)")
    assert "telemetry import POWER_LOG --engine" in index.loc["two/engine", "reason"]


def test_logs_of_one_node_joined_in_time_order_are_one_trace(
    config: Config, tmp_path: Path
) -> None:
    """README: a node's daily logs joined with `cat` (the second's header repeated, a day
    between them) are one trace of that node's GPUs, whose energy is the two days' and not the
    hours between them."""

    def day(start: str) -> str:
        stamps = pd.date_range(start, periods=240, freq="500ms").strftime("%Y/%m/%d %H:%M:%S.%f")
        rows = [f"{s[:-3]}, {g}, {250 + 20 * g} W" for s in stamps for g in (0, 1)]
        return "timestamp, index, power.draw [W]\n" + "\n".join(rows) + "\n"

    parts = [day("2026-11-01 09:00"), day("2026-11-02 09:00")]
    apart, joined = tmp_path / "apart", tmp_path / "joined"
    apart.mkdir()
    joined.mkdir()
    for i, text in enumerate(parts):
        (apart / f"node1-day{i + 1}.csv").write_text(text)
    (joined / "node1.csv").write_text("".join(parts))  # cat node1-day1.csv node1-day2.csv
    economics = {}
    for folder in (apart, joined):
        result = run_planner(folder, tmp_path / f"out-{folder.name}", config)
        economics[folder.name] = result.economics
        traces = pd.read_csv(tmp_path / f"out-{folder.name}" / "traces" / "index.csv")
        assert traces["gpus"].sum() == (4 if folder is apart else 2)
    apart_, joined_ = economics["apart"], economics["joined"]
    assert joined_["energy_j"] == pytest.approx(apart_["energy_j"], rel=1e-6)
    assert joined_["energy_j"] == pytest.approx(2 * 2 * 119.5 * 260.0, rel=0.02)  # 2 days, 2 GPUs
    # the fleet-year is priced at the power the GPUs drew, not diluted by the day between logs
    assert joined_["mean_power_w_per_gpu"] == pytest.approx(260.0, rel=0.02)
    assert joined_["annual_mwh"] == pytest.approx(apart_["annual_mwh"], rel=0.01)


def _smi_log(
    columns: str, cells: Callable[[int, int], str], samples: int, gpus: int = 4, day: int = 1
) -> str:
    """An nvidia-smi log of ``gpus`` GPUs sampled every 0.5 s from 09:00 on November ``day``:
    the header ``timestamp, index, COLUMNS`` and, after each row's index, ``cells(sample, gpu)``."""
    stamps = pd.date_range(f"2026-11-{day:02d} 09:00", periods=samples, freq="500ms")
    text = stamps.strftime("%Y/%m/%d %H:%M:%S.%f").str[:-3]
    rows = [f"{s}, {g}, {cells(i, g)}" for i, s in enumerate(text) for g in range(gpus)]
    return f"timestamp, index, {columns}\n" + "\n".join(rows) + "\n"


def _split_by_day(log: Path, folder: Path, at: str) -> None:
    """A node's nvidia-smi log as a logger that starts a file a day writes it: two files under
    names of its own (no rotation), each with the header, cut at the sample stamped ``at``."""
    header, *body = log.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(body) if line.startswith(at))
    folder.mkdir(parents=True)
    (folder / "smi-day1.csv").write_text(header + "".join(body[:cut]))
    (folder / "smi-day2.csv").write_text(header + "".join(body[cut:]))


def test_logs_of_one_gpu_in_several_files_are_one_gpu_of_the_fleet(tmp_path: Path) -> None:
    """Two nodes' measured A100 logs (each naming its GPU by UUID), each split into a file a
    day: the planner's fleet is the two GPUs, wall-clock aligned, as from the whole logs, not
    four GPUs drawn by Monte Carlo (what it made of them before it read the UUIDs)."""
    shared = real_traces()
    config = small_config(tmp_path / "results")
    whole, apart = tmp_path / "whole", tmp_path / "apart"
    for node, run in (("node-a", "bursty"), ("node-b", "r2p5")):
        log = shared / REAL_RUNS[run] / "power.csv"
        (whole / node).mkdir(parents=True)
        shutil.copy(log, whole / node / "smi.csv")
        _split_by_day(log, apart / node, "2026/07/18 16:01:50")
    results = {
        folder.name: run_planner(folder, tmp_path / folder.name, config)
        for folder in (whole, apart)
    }
    one, split = results["whole"], results["apart"]
    assert (one.traces, split.traces) == (2, 4)
    assert one.fleet.summary["n_gpus"] == split.fleet.summary["n_gpus"] == 2
    assert one.fleet.summary["alignment"] == split.fleet.summary["alignment"] == "wall_clock"
    assert [j["logs"] for j in split.fleet.summary["joined"]] == [
        [f"{node}/smi-day1", f"{node}/smi-day2"] for node in ("node-a", "node-b")
    ]
    page = (tmp_path / "apart" / "report" / "index.html").read_text()
    assert "Logs of one set of 1 GPU(s), named by UUID, counted once: node-a/smi-day1 + " in page
    # the same fleet: only the one bin at each cut is lost to the split
    for key in ("peak_share_sizing", "factor"):
        assert split.fleet.summary[key] == pytest.approx(one.fleet.summary[key], rel=0.01), key
    assert split.economics["gpus"] == one.economics["gpus"] == 2
    assert split.economics["energy_j"] == pytest.approx(one.economics["energy_j"], rel=0.01)
    assert split.economics["mean_power_w_per_gpu"] == pytest.approx(
        one.economics["mean_power_w_per_gpu"], rel=0.01
    )


def test_a_fleet_drawn_from_logs_without_uuids_says_why_and_how_to_count_them_once(
    tmp_path: Path,
) -> None:
    """The same two nodes' logs split into a file a day, logged without the uuid field: nothing
    tells the planner that day 2 holds day 1's GPUs, so its fleet is four GPUs drawn by Monte
    Carlo; the summary, the report and the CLI say why, naming the traces without UUIDs and
    the field that would count each GPU once."""
    shared = real_traces()
    folder, out = tmp_path / "logs", tmp_path / "out"
    for node, run in (("node-a", "bursty"), ("node-b", "r2p5")):
        text = (shared / REAL_RUNS[run] / "power.csv").read_text()
        rows = [row.split(",") for row in text.splitlines()]
        assert rows[0][2] == "uuid"
        (tmp_path / node).write_text("".join(",".join(r[:2] + r[3:]) + "\n" for r in rows))
        _split_by_day(tmp_path / node, folder / node, "2026/07/18 16:01:50")
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "fleet" / "summary.json").read_text())
    assert (summary["n_gpus"], summary["alignment"]) == (4, "monte_carlo")
    (note,) = summary["gpu_notes"]
    # the logs of day 2 start where those of day 1 end: named, with how far apart they start
    assert note.startswith("the runs' clocks do not overlap: node-a/smi-day2 starts ")
    assert "node-b/smi-day2 starts " in note
    assert "set apart), so the fleet of 4 GPUs is drawn by Monte Carlo " in note
    assert "4 trace(s) name no GPU UUID (node-a/smi-day1, node-a/smi-day2, node-b/smi-day1 " in note
    assert note.endswith("(nvidia-smi's uuid field, DCGM's UUID label)")
    assert f"note: {note}" in " ".join(result.output.split())
    page = html.unescape((out / "report" / "index.html").read_text())
    assert note[0].upper() + note[1:] in " ".join(page.split())


def test_one_gpu_logged_twice_is_refused(tmp_path: Path) -> None:
    """A copy of a node's log elsewhere in the folder would count its GPU twice: the planner
    refuses it in one line naming both logs and writes nothing (it left the traces it had
    imported); so does `planner fleet`, given windows of the two."""
    log = real_traces() / REAL_RUNS["bursty"] / "power.csv"
    folder = tmp_path / "traces"
    (folder / "node-a").mkdir(parents=True)
    (folder / "backup").mkdir()
    shutil.copy(log, folder / "node-a" / "smi.csv")
    shutil.copy(log, folder / "backup" / "node-a-smi.csv")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error")]
    assert len(lines) == 1, result.output
    assert "GPU GPU-03a84180-d660-dbdc-17f4-0e0655717066" in lines[0]
    assert "'node-a/smi'" in lines[0] and "'backup/node-a-smi'" in lines[0]
    assert "logged twice" in lines[0]
    assert not out.exists()  # nothing written, not even the traces imported before the check
    windows = []
    for key in ("node-a/smi", "backup/node-a-smi"):
        log, trace = folder / f"{key}.csv", tmp_path / "imported" / f"{key}.parquet"
        for command in (
            ["telemetry", "import", str(log), "--nameplate-w", "400", "--out", str(trace)],
            ["windows", str(trace), "--out", str(tmp_path / "windows" / key)],
        ):
            run = CliRunner().invoke(app, command)
            assert run.exit_code == 0, run.output
        windows.append(tmp_path / "windows" / key)
    fleet = CliRunner().invoke(
        app, ["planner", "fleet", *map(str, windows), "--out", str(tmp_path / "fleet")]
    )
    assert fleet.exit_code == 2 and "logged twice" in fleet.output, fleet.output
    assert not (tmp_path / "fleet").exists()
    # without the copy it runs; a log renamed since leaves no trace of its old name behind
    shutil.rmtree(folder / "backup")
    for rename in (True, False):
        result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
        assert result.exit_code == 0, result.output
        if rename:
            (folder / "node-a" / "smi.csv").rename(folder / "node-a" / "smi-old.csv")
    assert sorted(p.name for p in (out / "traces").rglob("*.parquet")) == ["smi-old.parquet"]


def test_a_log_of_two_days_beside_the_day_between_counts_each_gpu_once(tmp_path: Path) -> None:
    """A node's log of Monday and Wednesday in one file (a logger that appends, restarted) and
    Tuesday's in another hold the GPUs at different times: the fleet is the one the three days
    in three files make (it was refused as one GPU logged twice, as Monday-to-Wednesday spans
    Tuesday), from the logs or from their windows. A copy of Wednesday's log beside them is
    still refused."""

    def day(day: int) -> str:
        return _smi_log(
            "uuid, power.draw [W]",
            lambda i, g: f"GPU-{g}, {250 + 20 * g + 40 * np.sin(i / 9 + day):.2f} W",
            240,
            2,
            day,
        )

    header, *_ = day(1).splitlines(keepends=True)
    summaries = {}
    for layout, files in {
        "apart": {"mon": day(1), "tue": day(2), "wed": day(3)},
        "joined": {"mon-wed": day(1) + day(3).removeprefix(header), "tue": day(2)},
    }.items():
        folder = tmp_path / layout
        folder.mkdir()
        for name, text in files.items():
            (folder / f"{name}.csv").write_text(text)
        out = tmp_path / f"{layout}-out"
        result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
        assert result.exit_code == 0, result.output
        summaries[layout] = json.loads((out / "fleet" / "summary.json").read_text())
    apart, joined = summaries["apart"], summaries["joined"]
    assert apart["n_gpus"] == joined["n_gpus"] == 2
    assert joined["joined"] == [{"run_id": "mon-wed + tue", "logs": ["mon-wed", "tue"], "gpus": 2}]
    for key in ("peak_share_sizing", "factor"):
        assert joined[key] == pytest.approx(apart[key]), key
    assert [*joined["bins_without_a_reading"].values()] == [
        *apart["bins_without_a_reading"].values()
    ]
    windows = [tmp_path / "joined-out" / "windows" / key for key in ("mon-wed", "tue")]
    fleet = CliRunner().invoke(
        app, ["planner", "fleet", *map(str, windows), "--out", str(tmp_path / "fleet")]
    )
    assert fleet.exit_code == 0, fleet.output  # the windows' bins are checked as the logs were
    (tmp_path / "joined" / "wed-copy.csv").write_text(day(3))
    result = CliRunner().invoke(
        app, ["planner", "run", str(tmp_path / "joined"), "--out", str(tmp_path / "copied")]
    )
    assert result.exit_code == 2, result.output
    assert "'wed-copy' and in 'mon-wed' over the same time" in " ".join(result.output.split())


def test_logs_sharing_some_gpus_stay_apart_and_say_so(tmp_path: Path) -> None:
    """A node whose GPU was replaced between two days' logs: the logs share one GPU of two, so
    they are not one set of GPUs; they stay two runs of the fleet, and a note says the shared
    GPU counts in each. The pooled economics count each GPU once (three)."""

    def day(day: int, uuids: tuple[str, str]) -> str:
        return _smi_log(
            "uuid, power.draw [W]", lambda i, g: f"{uuids[g]}, {250 + 20 * g} W", 240, 2, day
        )

    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "node1-day1.csv").write_text(day(1, ("GPU-a", "GPU-b")))
    (folder / "node1-day2.csv").write_text(day(2, ("GPU-a", "GPU-c")))
    result = CliRunner().invoke(
        app, ["planner", "run", str(folder), "--out", str(tmp_path / "out")], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    fleet = json.loads((tmp_path / "out" / "fleet" / "summary.json").read_text())
    assert (fleet["n_gpus"], fleet["joined"]) == (4, [])
    shared, drawn = fleet["gpu_notes"]
    assert shared == (
        "'node1-day1' and 'node1-day2' share 1 of their GPUs (by UUID) but not all, at different "
        "times: they stay separate runs, and the shared GPUs count in each"
    )
    # the days do not overlap: a Monte Carlo fleet, of GPUs each named by UUID
    assert drawn.startswith("the runs' clocks do not overlap") and "no GPU UUID" not in drawn
    assert "note: 'node1-day1' and 'node1-day2' share 1 of their GPUs" in result.output
    economics = json.loads((tmp_path / "out" / "economics" / "summary.json").read_text())
    assert economics["gpus"] == 3


def test_a_log_missing_a_gpu_joins_the_logs_of_them_all(tmp_path: Path) -> None:
    """A node's GPU lost (or not exported) on day 2: day 2's log holds one of day 1's two GPUs.
    It joins day 1's as one set of two GPUs, saying so (it was a separate run: the fleet counted
    the GPU left three GPUs); the wall-clock fleet counts the bins where both have a reading, as
    in one log where a GPU was lost."""

    def day(day: int, uuids: tuple[str, ...]) -> str:
        return _smi_log(
            "uuid, power.draw [W]",
            lambda i, g: f"{uuids[g]}, {250 + 20 * g + 30 * np.sin(i / 7):.2f} W",
            1200,
            len(uuids),
            day,
        )

    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "node1-day1.csv").write_text(day(1, ("GPU-a", "GPU-b")))
    (folder / "node1-day2.csv").write_text(day(2, ("GPU-a",)))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    fleet = json.loads((out / "fleet" / "summary.json").read_text())
    assert (fleet["n_gpus"], fleet["alignment"]) == (2, "wall_clock")
    assert [j["logs"] for j in fleet["joined"]] == [["node1-day1", "node1-day2"]]
    assert fleet["gpu_notes"] == [
        "'node1-day2' holds 1 of the 2 GPUs of 'node1-day1 + node1-day2' (by UUID): joined with "
        "the logs of them all, the others have no reading over its time"
    ]
    economics = json.loads((out / "economics" / "summary.json").read_text())
    assert economics["gpus"] == 2
    # the energy of every reading: day 1's two GPUs and day 2's one, 600 s each
    assert economics["energy_j"] == pytest.approx(600 * (250 + 270 + 250), rel=0.01)


def test_a_fleet_of_two_parts_is_provisioned_at_their_mean_nameplate(tmp_path: Path) -> None:
    """A node of four A100s (400 W) and one of four H100s (700 W): each GPU of the fleet is
    provisioned at the mean board power, 550 W, so the capacity oversubscription avoids is the
    extra GPUs at 550 W plus host power, not at the H100's 700 W (a third more, before)."""

    def node(name: str, nameplate_w: float) -> str:
        return _smi_log(
            "name, power.draw [W], power.default_limit [W]",
            lambda i, g: (
                f"{name}, {0.5 * nameplate_w + 40 * np.sin(i / 20 + g):.2f} W, {nameplate_w:.2f} W"
            ),
            600,
        )

    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "a100.csv").write_text(node("NVIDIA A100-SXM4-80GB", 400.0))
    (folder / "h100.csv").write_text(node("NVIDIA H100 80GB HBM3", 700.0))
    config = load_config()
    result = run_planner(folder, tmp_path / "out", config)
    assert result.economics["nameplate_w"] == pytest.approx(550.0)
    row = result.economics["oversubscription"]
    host_w = config.economics.host_power.value  # W per GPU
    assert row["capacity_mw_avoided"] == pytest.approx(row["extra_gpus"] * (550.0 + host_w) / 1e6)
    page = (tmp_path / "out" / "report" / "index.html").read_text()
    assert re.search(r"each GPU provisioned at <span[^>]*>550</span> W", page)
    # a reviewer's findings: the $ is the power of the extra GPUs, and a factor of a drawn
    # fleet stands beside the traced GPUs' own
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())
    fleet = json.loads((tmp_path / "out" / "fleet" / "summary.json").read_text())
    assert f"the power of {row['extra_gpus']:,} more GPUs (and their hosts) in what the" in text
    assert row["factor_from_gpus"] != fleet["n_gpus"]  # the scaling study's, drawn
    fleet_table = text.split("Fleet of the traces")[1].split("source:")[0]
    assert fleet["alignment"] == "monte_carlo"
    assert "Monte Carlo from measured traces" in fleet_table  # it read "measured (imported)"
    cap = f"Exceedance is judged against a cap of {config.cap_w:g} W per GPU (the config's cap_w"
    assert cap in text  # the cap was in the figures' captions only
    assert (
        "the traced GPUs drawn with replacement as if independent; the traced fleet of "
        f"{fleet['n_gpus']} GPU(s) itself has a factor of {fleet['factor']:.3f} x"
    ) in text


def test_the_planner_prices_at_an_analysts_own_figures_and_varies_each(tmp_path: Path) -> None:
    """An analyst's own price, PUE and grid intensity (a utility's figure, with its source)
    price the traces, and the sensitivity recomputes the pooled figures and the capital value
    at each end of the analyst's ranges (the planner validated ``economics.sensitivity`` and
    wrote nothing of it, before)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "node.csv").write_text(
        _smi_log("power.draw [W]", lambda i, g: f"{200 + 60 * np.sin(i / 15 + g):.2f} W", 600)
    )
    economics = {
        "electricity_price": {"value": 0.12, "source": "utility tariff", "year": 2025},
        "pue": {"value": 1.3, "source": "site meter", "year": 2025},
        "carbon_intensity": {"value": 250, "source": "utility disclosure", "year": 2024},
        "sensitivity": {
            "electricity_usd_per_kwh": {"low": 0.06, "high": 0.24},
            "pue": {"low": 1.1, "high": 1.95},
            "carbon_regions": ["FRA"],
        },
    }
    config = validate_config({"economics": economics})
    result = run_planner(folder, tmp_path / "out", config)
    e = result.economics
    assert e["carbon_region"] == "own figure" and e["carbon_g_per_kwh"] == 250
    assert e["wall_kwh"] == pytest.approx(e["energy_j"] / 3.6e6 * 1.3)
    assert e["carbon_kg"] == pytest.approx(e["wall_kwh"] * 0.250)
    constants = pd.read_csv(tmp_path / "out" / "economics" / "constants.csv").set_index("name")
    assert constants.loc["carbon_intensity", "source"] == "utility disclosure"
    assert constants.loc["carbon_intensity", "year"] == 2024
    assert constants.loc["sensitivity pue high", "value"] == 1.95  # each end, with its source
    assert constants.loc["sensitivity pue high", "source"] == "not given in the config"
    assert constants.loc["sensitivity capacity_usd_per_mw low", "source"].startswith("Cushman")

    table = pd.read_csv(tmp_path / "out" / "economics" / "sensitivity.csv")

    def at(parameter: str, setting: str, quantity: str) -> float:
        row = table[
            (table["parameter"] == parameter)
            & (table["setting"] == setting)
            & (table["quantity"] == quantity)
        ]
        return float(row["value"].iloc[0])

    assert at("base", "as configured", "energy cost") == pytest.approx(e["energy_usd"])
    assert at("electricity price", "0.24 $/kWh", "energy cost") == pytest.approx(
        e["wall_kwh"] * 0.24
    )
    assert at("PUE", "1.95", "GPU energy x PUE") == pytest.approx(e["wall_kwh"] * 1.5)
    france = "FRA (56.039 g/kWh)"
    assert at("carbon intensity", france, "carbon") == pytest.approx(e["wall_kwh"] * 0.056039)
    capital = "capital avoided by oversubscription"
    assert at("capacity cost", "15 M$/MW", capital) == pytest.approx(
        e["oversubscription"]["capital_usd_avoided"] * 15.0 / 11.7
    )
    page = (tmp_path / "out" / "report" / "index.html").read_text()
    assert "Sensitivity of the headline" in page and "utility disclosure" in page
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())
    assert "kWh: GPU energy x PUE 1.3 (the hosts' not counted)" in text
    # the GPU-hour price moves nothing of the planner's headline: not a column of its table
    sensitivity = "Sensitivity of the headline to electricity price, PUE, carbon intensity and "
    assert sensitivity + "capacity cost (measured" in text
    assert "GPU-hour price:" not in text and "The capital is a one-time cost" in text
    assert "Fleet-year: 10,000 GPUs running 8,760 h a year" in text


def test_a_gpu_lost_mid_log_is_read_and_the_fleet_says_what_it_left_out(tmp_path: Path) -> None:
    """One GPU of a node falls off the bus two minutes into a ten-minute log (nvidia-smi writes
    [GPU is lost] from then on): the log is read, the lost GPU noted; the wall-clock fleet counts
    only the bins where every GPU has a reading, and says how many it left out and whose."""

    def node(name: str, lost_from: int | None) -> str:
        def cells(i: int, g: int) -> str:
            lost = g == 3 and lost_from is not None and i >= lost_from
            power = (
                "[GPU is lost], [GPU is lost]"
                if lost
                else f"{200 + 60 * np.sin(i / 30 + g):.2f} W, 400.00 W"
            )
            return f"{'[GPU is lost]' if lost else f'GPU-{name}-{g}'}, {power}"  # its uuid too

        return _smi_log("uuid, power.draw [W], power.default_limit [W]", cells, 1200)

    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "node1.csv").write_text(node("n1", None))
    (folder / "node2.csv").write_text(node("n2", 240))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    index = pd.read_csv(out / "traces" / "index.csv").set_index("key")
    assert "gpu 3 is lost" in index.loc["node2", "notes"]
    assert "in 960 row(s) from line 965" in index.loc["node2", "notes"]
    fleet = json.loads((out / "fleet" / "summary.json").read_text())
    assert fleet["alignment"] == "wall_clock" and fleet["n_gpus"] == 8
    left_out = fleet["common_bins"] - fleet["complete_bins"]
    assert fleet["bins_without_a_reading"] == {"node2": left_out}
    assert 0.75 < left_out / fleet["common_bins"] < 0.85  # the 8 of 10 minutes after the loss
    assert f"counts {fleet['complete_bins']:,} of the {fleet['common_bins']:,}" in result.output
    assert f"node2 ({left_out:,})" in result.output
    page = (out / "report" / "index.html").read_text()
    assert "The wall-clock fleet counts" in page and "fleet.alignment: monte_carlo" in page


def test_a_wall_clock_fleet_with_no_whole_window_of_readings_is_drawn_instead(
    tmp_path: Path,
) -> None:
    """A GPU lost 5 s into a ten-minute log (or one row inventing a GPU) leaves no bin where
    every GPU has a reading over a window: the wall-clock fleet printed a NaN factor and exit 0,
    and the economics still priced oversubscription. auto draws it by Monte Carlo and says why;
    asked for by name, the planner refuses in one line."""

    def lost(i: int, g: int) -> str:
        return "[GPU is lost]" if g == 1 and i >= 10 else f"{200 + 60 * np.sin(i / 30):.2f} W"

    lost_folder = tmp_path / "lost"
    lost_folder.mkdir()
    (lost_folder / "node.csv").write_text(_smi_log("power.draw [W]", lost, 1200, gpus=2))
    invented = tmp_path / "invented"
    invented.mkdir()
    log = _smi_log("power.draw [W]", lambda i, g: f"{250 + g:.2f} W", 1200, gpus=2)
    (invented / "node.csv").write_text(log + "2026/11/01 09:04:09.000, 7, 327.30 W\n")
    for folder in (lost_folder, invented):
        out = tmp_path / f"out-{folder.name}"
        result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert "nan" not in result.output.lower()
        fleet = json.loads((out / "fleet" / "summary.json").read_text())
        assert fleet["alignment"] == "monte_carlo" and np.isfinite(fleet["factor"])
        assert "the bins where every GPU has a reading" in fleet["alignment_reason"]
        assert "hold no whole" in result.output
        economics = json.loads((out / "economics" / "summary.json").read_text())
        assert np.isfinite(economics["oversubscription"]["factor"])
    asked = validate_config({"fleet": {"alignment": "wall_clock"}})
    with pytest.raises(ValueError, match=r"^fleet.alignment: wall_clock: the bins where every"):
        run_planner(lost_folder, tmp_path / "asked", asked)


def _h100_log(samples: int = 1200) -> str:
    """A 2-GPU H100 node's nvidia-smi log (700 W nameplate) drawing 400-520 W."""
    return _smi_log(
        "name, power.draw [W], power.default_limit [W]",
        lambda i, g: f"NVIDIA H100 80GB HBM3, {460 + 60 * np.sin(i / 20 + g):.2f} W, 700.00 W",
        samples,
        gpus=2,
    )


def test_the_planner_says_which_cap_it_judges_by_and_takes_its_own(tmp_path: Path) -> None:
    """H100 traces (700 W) judged by the config's cap_w (320 W, set for its A100) exceed it in
    every window: the windows stage noted it in a summary.json that neither `planner run` nor
    the report showed, and the planner had no way to set the cap. The fleet says so on stdout
    and in the report; --cap-w and planner.cap_w set the planner's cap."""
    folder = tmp_path / "h100"
    folder.mkdir()
    (folder / "node.csv").write_text(_h100_log())
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    said = "the traces are judged by the config's cap_w, 320 W per GPU, set for its"
    assert said in result.output and "node (NVIDIA H100 80GB HBM3, 700 W)" in result.output
    assert "planner.cap_w (--cap-w) gives the cap" in result.output
    page = html.unescape(re.sub(r"<[^>]+>", " ", (out / "report" / "index.html").read_text()))
    assert said[1:] in " ".join(page.split())
    # the capital provisions each H100's host at the packaged DGX A100 figure: said (it was not)
    host = (
        "the capital counts each GPU's host at 412.5 W (economics.host_power, the packaged "
        "default: NVIDIA DGX A100 datasheet"
    )
    assert host in " ".join(result.output.split())
    assert "Caution: " + host in " ".join(page.split())
    # and its GPU time at an A100's rental price: said too (an H200 user found it unsaid)
    price = "GPU time is priced at $4.1 a GPU-hour (economics.gpu_hour, the packaged default: AWS"
    assert price in " ".join(result.output.split())
    assert "Caution: " + price in " ".join(page.split())
    hosts = {"value": 575, "source": "DGX H100 datasheet", "year": 2023}
    h100_hosts = validate_config({"economics": {"host_power": hosts}})
    notes = run_planner(folder, tmp_path / "hosts", h100_hosts).economics["part_notes"]
    assert len(notes) == 1 and notes[0].startswith("GPU time is priced at $4.1")
    h100 = yaml.safe_load((REPO / "config" / "h100.yaml").read_text())
    own_prices = validate_config({"economics": h100["economics"]})
    assert run_planner(folder, tmp_path / "prices", own_prices).economics["part_notes"] == []
    own = CliRunner().invoke(
        app, ["planner", "run", str(folder), "--out", str(out), "--cap-w", "600"]
    )
    assert own.exit_code == 0, own.output
    assert "judged by the config's cap_w" not in own.output
    fleet = json.loads((out / "fleet" / "summary.json").read_text())
    assert fleet["cap_w_per_gpu"] == 600 and fleet["cap_note"] is None
    windows = json.loads((out / "windows" / "node" / "summary.json").read_text())
    assert windows["cap_w"] == 600 and not any("cap_w" in n for n in windows["notes"])
    exceedance = pd.read_csv(out / "windows" / "node" / "exceedance.csv")
    assert (exceedance["exceedance"] == 0).all()  # 520 W at most, under 600 W
    configured = run_planner(folder, tmp_path / "cfg", validate_config({"planner": {"cap_w": 600}}))
    assert configured.fleet.summary["cap_w_per_gpu"] == 600
    too_high = validate_config({"planner": {"cap_w": 800}})
    with pytest.raises(ValueError, match=r"node\.parquet: planner\.cap_w \(--cap-w\): expected at"):
        run_planner(folder, tmp_path / "high", too_high)


def test_the_planner_leaves_its_own_outputs_out_of_the_folder_it_reads(tmp_path: Path) -> None:
    """`planner import DIR --out DIR/traces` then `planner run DIR` counted each log twice (the
    traces under DIR/traces were imported from DIR's logs); `planner run DIR --out DIR/out` run
    twice read its own fleet as a trace the second time and failed."""
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "node.csv").write_text(_h100_log(600))
    alone = run_planner(folder, tmp_path / "alone", small_config(tmp_path))
    runner = CliRunner()
    imported = runner.invoke(
        app, ["planner", "import", str(folder), "--out", str(folder / "traces")]
    )
    assert imported.exit_code == 0, imported.output
    twice = run_planner(folder, tmp_path / "out", small_config(tmp_path))
    assert twice.economics["energy_j"] == pytest.approx(alone.economics["energy_j"])
    index = pd.read_csv(tmp_path / "out" / "traces" / "index.csv").set_index("key")
    assert list(index[index["status"] == "imported"].index) == ["node"]
    reason = index.loc["traces/node", "reason"]
    assert reason.startswith(f"a grpo-power trace imported from {folder}/node.csv, a log in this")
    shutil.rmtree(folder / "traces")
    for _ in range(2):  # the second run finds the first one's outputs in the folder
        inside = runner.invoke(app, ["planner", "run", str(folder), "--out", str(folder / "out")])
        assert inside.exit_code == 0, inside.output
        index = pd.read_csv(folder / "out" / "traces" / "index.csv")
        assert list(index["key"]) == ["node"]


def test_the_planner_splits_a_log_at_a_clock_jump_when_asked(tmp_path: Path) -> None:
    """A duplicated row is refused with advice to give --split-on-clock-jumps, which `planner
    run` and `planner import` did not have ("No such option"); they take it, and the config's
    planner.split_on_clock_jumps (the Snakemake target's way) does the same."""
    folder = tmp_path / "logs"
    folder.mkdir()
    header, *rows = _smi_log("power.draw [W]", lambda i, g: f"{300 + i % 7:.2f} W", 600).split("\n")
    rows.insert(400, rows[399])  # a row written twice
    (folder / "node.csv").write_text("\n".join([header, *rows]))
    runner = CliRunner()
    refused = runner.invoke(app, ["planner", "run", str(folder), "--out", str(tmp_path / "o")])
    assert refused.exit_code == 2 and "give --split-on-clock-jumps" in refused.output
    for command in ("run", "import"):
        out = tmp_path / command
        split = ["planner", command, str(folder), "--out", str(out), "--split-on-clock-jumps"]
        result = runner.invoke(app, split)
        assert result.exit_code == 0, result.output
    index = pd.read_csv(tmp_path / "run" / "traces" / "index.csv").set_index("key")
    assert "split" in index.loc["node", "notes"]
    configured = validate_config({"planner": {"split_on_clock_jumps": True}})
    assert run_planner(folder, tmp_path / "cfg", configured).traces == 1


def test_the_planner_names_its_config_as_where_the_time_zone_came_from(tmp_path: Path) -> None:
    """planner.timezone in the config was noted as "(--timezone)", an option the planner has
    not."""
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "node.csv").write_text(_h100_log(120))
    config = validate_config({"planner": {"timezone": "Europe/Berlin"}})
    result = run_planner(folder, tmp_path / "out", config)
    said = f"{folder}/node.csv: timestamps read as local time in Europe/Berlin (planner.timezone)"
    assert said in result.notes
    assert not any("--timezone" in note for note in result.notes)


def test_planner_refuses_a_folder_without_traces(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(
        app, ["planner", "run", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error")]
    assert len(lines) == 1 and "no power trace found" in lines[0]
    assert not (tmp_path / "out").exists()


def test_logs_that_would_share_a_name_keep_their_suffixes(tmp_path: Path) -> None:
    """x.csv and x.log in one folder (an nvidia-smi log saved under either suffix) refused the
    whole run as "the same trace name": each is a trace named with its suffix, the other
    logs without one."""
    folder = tmp_path / "logs"
    folder.mkdir()
    for name, gpus in (("x.csv", 1), ("x.log", 2), ("y.csv", 1)):
        text = _smi_log("power.draw [W]", lambda i, g: f"{250 + (i + g) % 50}.00 W", 240, gpus)
        (folder / name).write_text(text)
    index = import_traces(folder, tmp_path / "out", small_config(tmp_path / "results"))
    assert index.set_index("key")["gpus"].to_dict() == {"x.csv": 1, "x.log": 2, "y": 1}
    assert (tmp_path / "out" / "x.csv.parquet").exists()
    assert (tmp_path / "out" / "x.log.parquet").exists()


def test_a_log_whose_clock_lies_apart_is_named_in_the_fleets_note(tmp_path: Path) -> None:
    """Two nodes' logs and one whose timestamps carry +01:00 (an hour from the others): the
    note said only that the clocks do not overlap; it names the log an hour apart."""
    folder = tmp_path / "logs"
    folder.mkdir()

    def readings(sample: int, gpu: int) -> str:
        return f"{250 + (sample + gpu) % 50}.00 W"

    for node in ("node1", "node2"):
        (folder / f"{node}.csv").write_text(_smi_log("power.draw [W]", readings, 240, 2, day=3))
    zoned = _smi_log("power.draw [W]", readings, 240, 2, day=3)
    zoned = re.sub(r"(?m)^2026/11/03 (\S+),", r"2026-11-03T\1+01:00,", zoned)
    (folder / "zoned.csv").write_text(zoned)
    config = small_config(tmp_path / "results")
    config = config.model_copy(
        update={"planner": config.planner.model_copy(update={"timezone": "UTC"})}
    )
    result = run_planner(folder, tmp_path / "out", config)
    (note,) = result.fleet.summary["gpu_notes"]
    assert note.startswith(
        "the runs' clocks do not overlap: zoned starts 3,600 s = 1 h before the others (logs of "
        "other times, or a clock or time zone set apart), so the fleet of 6 GPUs is drawn by "
    )


def test_a_folder_without_traces_says_why_its_files_were_skipped(tmp_path: Path) -> None:
    """A folder of --format=csv,noheader logs and a CSV that Excel re-saved with semicolons gave
    "no power trace found", naming neither a file nor a reason: the error names the first
    files' reasons and counts the rest."""
    folder = tmp_path / "logs"
    folder.mkdir()
    row = "2026/11/03 10:00:00.000, 0, 250.00 W\n"
    (folder / "a.csv").write_text(row)  # --format=csv,noheader
    (folder / "b.csv").write_text("timestamp;index;power.draw [W]\n" + row.replace(", ", ";"))
    for name in ("c.csv", "d.csv"):
        (folder / name).write_text(row)
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    (error,) = [ln for ln in result.output.splitlines() if ln.startswith("error")]
    assert error.startswith(
        f"error: {folder}: no power trace found (a.csv: no header line (line 1 is data: "
        "2026/11/03 10:00:00.000, 0, 250.00 W, ...); an nvidia-smi log recorded with "
        "--format=csv,noheader has none: "
    )
    assert "; b.csv: separated by ';', not commas (a CSV re-saved by Excel where " in error
    assert " and 2 more skipped); expected a folder of power traces" in error


@pytest.mark.slow
def test_planner_on_the_public_real_traces(tmp_path: Path) -> None:
    """The README's planner commands as written, in a checkout copy beside the shared data."""
    real_traces()
    checkout = checkout_copy(tmp_path / "checkout")
    (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    output = run_as_user(CLI_FORM, checkout)
    print(output[-800:])
    by_cli = json.loads((checkout / "results" / "planner" / "fleet" / "summary.json").read_text())
    shutil.rmtree(checkout / "results")
    run_as_user(SNAKEMAKE_FORM, checkout)
    planner = checkout / "results" / "planner"
    by_snakemake = json.loads((planner / "fleet" / "summary.json").read_text())
    # six recordings of three A100s: each log names its GPU by UUID, and some GPUs ran several
    assert by_cli["n_gpus"] == by_snakemake["n_gpus"] == 3
    assert sorted(len(j["logs"]) for j in by_cli["joined"]) == [2, 3]
    assert by_cli["data"] == "measured (imported)"
    for key in ("alignment", "factor", "peak_share_sizing"):
        assert by_cli[key] == pytest.approx(by_snakemake[key]), key  # the same computation
    assert 1.0 < by_cli["factor"] < 2.0
    index = pd.read_csv(planner / "traces" / "index.csv")
    skipped = index[index["status"] == "skipped"]
    engines = skipped[skipped["key"].str.endswith("engine")]
    assert len(engines) == 6 and engines["reason"].str.contains("metrics log \\(vllm\\)").all()
    assert engines["reason"].str.contains("aligned with the power log beside it").all()
    # each power log's tokens: the engine's counter over the log's span, read here from the CSV
    imported = index[index["status"] == "imported"].set_index("key")
    for key, row in imported.iterrows():
        engine = pd.read_csv(
            REPO.parent / "shared" / "data" / "real-traces" / f"{key[:-5]}engine.csv"
        )
        counter = engine[next(c for c in engine.columns if c.endswith("generation_tokens_total"))]
        total = counter.iloc[-1] - counter.iloc[0]
        assert 0.85 * total <= row["tokens"] <= total, key  # the power log spans most of it
        assert row["tokens_from"].startswith("engine metrics (vllm, ")
    per_token = pd.read_csv(planner / "economics" / "traces.csv").set_index("deployment")
    assert np.isfinite(per_token["kwh_per_mtok"]).all()  # every trace, and the pool
    page = (planner / "report" / "index.html").read_text()
    assert "kWh per million tokens, pooled (GPU energy x PUE" in page
    assert len(list((planner / "report" / "figures").glob("*.png"))) == 3


@pytest.mark.slow
def test_the_workflow_imports_again_when_results_hold_another_folders_traces(
    tmp_path: Path,
) -> None:
    """The README's two planner forms on two folders whose logs have the same names: after
    `planner run A`, the Snakemake target for B imports B (it said "Nothing to be done" and
    kept A's fleet and report: the outputs were there, and the CLI records no provenance), and
    does so again after another `planner run A`; asked for B twice, it does nothing."""
    checkout = checkout_copy(tmp_path / "checkout")
    folders = {}
    for name, level_w in (("A", 150.0), ("B", 300.0)):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "node.csv").write_text(
            _smi_log(
                "power.draw [W]", lambda i, g, w=level_w: f"{w + 20 * np.sin(i / 9 + g):.2f} W", 400
            )
        )
    # the target without a folder stops before any job (it imported a folder named "None")
    unset = subprocess.run(
        ["bash", "-c", "snakemake --cores 2 planner"],
        cwd=checkout,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert unset.returncode == 1
    assert "planner.traces: no folder of traces configured" in unset.stdout + unset.stderr
    assert not (checkout / "results" / "planner").exists()
    cli_a = f".venv/bin/grpo-power planner run {folders['A']} --out results/planner"
    snakemake_b = f"snakemake --cores 2 planner --config planner='{{traces: {folders['B']}}}'"
    summary = checkout / "results" / "planner" / "economics" / "summary.json"

    def power_w() -> float:
        return json.loads(summary.read_text())["mean_power_w_per_gpu"]

    run_as_user(cli_a, checkout)
    assert power_w() == pytest.approx(150.0, rel=0.02)
    run_as_user(snakemake_b, checkout)
    assert power_w() == pytest.approx(300.0, rel=0.02)
    assert "Nothing to be done" in run_as_user(snakemake_b, checkout)
    run_as_user(cli_a, checkout)
    run_as_user(snakemake_b, checkout)
    assert power_w() == pytest.approx(300.0, rel=0.02)
    index = pd.read_csv(checkout / "results" / "planner" / "traces" / "index.csv")
    assert index["source_path"].tolist() == [str(folders["B"] / "node.csv")]


def _trace_csv(path: Path, power_w: dict[int, np.ndarray], start_unix_s: float) -> None:
    """A trace CSV (t, gpu, power_w) of GPUs sampled every second from ``start_unix_s``:
    ``power_w[gpu]`` each GPU's readings (a GPU whose readings stop has fewer)."""
    rows = [
        pd.DataFrame({"t": start_unix_s + np.arange(len(w), dtype=float), "gpu": gpu, "power_w": w})
        for gpu, w in power_w.items()
    ]
    frame = pd.concat(rows).sort_values(["t", "gpu"], kind="stable")
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def test_a_fleet_drawn_of_traces_at_different_times_is_each_trace_once(tmp_path: Path) -> None:
    """Two one-GPU traces a day apart, one at 380 W and one at 200 W: the fleet of the traced
    GPUs is the two of them, so every draw peaks at 580 of 800 W (72.5 %), the factor
    1 / (0.725 x 1.1); drawn with replacement, a draw held the hot trace twice (95 %) or the
    cool one twice (50 %). The scaling study still draws with replacement."""
    folder, out = tmp_path / "traces", tmp_path / "out"
    _trace_csv(folder / "hot.csv", {0: np.full(600, 380.0)}, 1.8e9)
    _trace_csv(folder / "cool.csv", {0: np.full(600, 200.0)}, 1.8e9 + 86400)
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "fleet" / "summary.json").read_text())
    assert (summary["alignment"], summary["n_gpus"]) == ("monte_carlo", 2)
    fleet = pd.read_csv(out / "fleet" / "fleet_windows.csv")
    for column in ("peak_share_p5", "peak_share_max", "peak_share_sizing"):
        np.testing.assert_allclose(fleet[column], 0.725, err_msg=column)
    assert summary["factor"] == pytest.approx(1 / (0.725 * 1.1))
    assert "fleet peak 72.5 % of nameplate at 30 s: oversubscription factor 1.25x" in result.output
    assert summary["assumption"].startswith("each run once per draw")
    assert summary["chosen_window_fits"] and summary["sizing_note"] is None
    scaling = pd.read_csv(out / "fleet" / "scaling.csv")
    smallest = scaling[scaling["n_gpus"] == scaling["n_gpus"].min()]
    assert (
        smallest["peak_share_max"] > 0.725
    ).all()  # 16 GPUs drawn from the two, with replacement


def test_a_gpu_whose_readings_stop_is_priced_over_its_own_time(tmp_path: Path) -> None:
    """A node of two GPUs at 300 W whose GPU 1's readings stop half way (lost, or not
    exported): each GPU drew 300 W while it had readings, so the trace and the pooled row price
    300 W per GPU and the fleet-year as the node whose GPUs both kept reading, not 225 W (GPU 1
    counted at 0 W for the time it has none)."""
    rows = {"lost": {0: np.full(1200, 300.0), 1: np.full(600, 300.0)}}
    rows["whole"] = {0: np.full(1200, 300.0), 1: np.full(1200, 300.0)}
    priced = {}
    for name, power_w in rows.items():
        folder, out = tmp_path / name, tmp_path / f"{name}-out"
        _trace_csv(folder / "node.csv", power_w, 1.8e9)
        result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
        assert result.exit_code == 0, result.output
        priced[name] = pd.read_csv(out / "economics" / "traces.csv").set_index("deployment")
        summary = json.loads((out / "economics" / "summary.json").read_text())
        assert summary["mean_power_w_per_gpu"] == pytest.approx(300.0)
    lost, whole = priced["lost"], priced["whole"]
    for row in ("node", "all traces"):
        assert lost.loc[row, "power_w_per_gpu"] == pytest.approx(300.0), row
        assert lost.loc[row, "annual_mwh"] == pytest.approx(whole.loc[row, "annual_mwh"]), row
        # GPU-seconds: GPU 0's 1,199 s and GPU 1's 599 s
        gpu_s = lost.loc[row, "gpus"] * lost.loc[row, "wall_s"]
        assert gpu_s == pytest.approx(1199 + 599), row


def test_a_trace_of_one_sample_is_left_out_of_the_economics_as_of_the_fleet(
    tmp_path: Path,
) -> None:
    """A folder with a one-sample log beside a node's log: import, windows and fleet take it
    (the fleet leaves it out, holding no energy bin), and the economics refused the whole
    folder (exit 2, no report). It is left out there too, and said so."""
    folder, out = tmp_path / "logs", tmp_path / "out"
    _trace_csv(folder / "node.csv", {0: np.full(600, 300.0), 1: np.full(600, 250.0)}, 1.8e9)
    _trace_csv(folder / "one.csv", {0: np.full(1, 250.0)}, 1.8e9)
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "economics" / "summary.json").read_text())
    assert [entry["run_id"] for entry in summary["left_out"]] == ["one"]
    assert summary["mean_power_w_per_gpu"] == pytest.approx(275.0)  # the node's two GPUs
    assert (out / "report" / "index.html").exists()


def test_planner_run_names_the_traces_left_out_of_the_fleet_and_why(tmp_path: Path) -> None:
    """A trace of one sample (a Prometheus instant query) left out of the fleet was named only
    in the report; alone, the error named the planner's own bins file. `planner run` says which
    log was left out and why; with none left, the error names the logs."""
    folder, out = tmp_path / "logs", tmp_path / "out"
    _trace_csv(folder / "node.csv", {0: np.full(600, 300.0), 1: np.full(600, 250.0)}, 1.8e9)
    _trace_csv(folder / "one.csv", {0: np.full(1, 250.0)}, 1.8e9)
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert (
        f"note: left out of the fleet: one ({folder}/one.csv: no complete 0.5 s energy bin: 1 "
        "sample(s) of 1 GPU(s) over 0 s (too short, or cut by gaps))" in said
    )
    (folder / "node.csv").unlink()
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 2
    (error,) = [ln for ln in result.output.splitlines() if ln.startswith("error")]
    assert error.startswith(f"error: {folder}/one.csv: no complete 0.5 s energy bin: 1 sample")
    assert "bins.parquet" not in error


def test_a_log_whose_gpus_were_logged_one_after_another_is_left_out_not_fatal(
    tmp_path: Path,
) -> None:
    """One DCGM CSV of two hosts, the second logged after the first had stopped: its GPUs have
    no bin in common, and `planner run` stopped on "no bin where all 2 GPUs have data", naming
    its own bins file, for the whole folder. That log is left out of the fleet, named, and why."""
    folder, out = tmp_path / "logs", tmp_path / "out"
    _trace_csv(folder / "node.csv", {0: np.full(600, 300.0), 1: np.full(600, 250.0)}, 1.8e9)
    rows = [
        f"2027-01-15T08:{m:02d}:{s:02d}Z,{host},0,{240 + s}"
        for host, m in (("a1", 0), ("b2", 5))
        for s in range(30)
    ]
    (folder / "handover.csv").write_text(
        "timestamp,Hostname,gpu,DCGM_FI_DEV_POWER_USAGE\n" + "\n".join(rows) + "\n"
    )
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert (
        f"left out of the fleet: handover ({folder}/handover.csv: no 0.5 s energy bin where all "
        "of its GPUs have a reading: 60 sample(s) of 2 GPU(s) over 329 s (its GPUs logged at "
        "different times: split the log by host or GPU))"
    ) in said
    fleet = json.loads((out / "fleet" / "summary.json").read_text())
    assert fleet["n_gpus"] == 2  # the node's


def test_a_wall_clock_fleet_says_which_time_it_is_of_and_reads_its_one_peak(
    tmp_path: Path,
) -> None:
    """A planner found the wall-clock fleet of 128 GPUs was the 2.83 h every trace shared, set
    by a log that started late, while the energy counted every log's 3-5 h: unsaid. And its one
    draw's peak read "(sizing quantile 0.95)" and "peak share % (mean)", both its highest
    window. The fleet says its time and which traces bound it, and reads its peak as such."""
    folder, out = tmp_path / "logs", tmp_path / "out"
    t0 = 1.8e9  # 2027-01-15 08:00:00 UTC
    _trace_csv(folder / "early.csv", {0: np.full(900, 300.0)}, t0)
    _trace_csv(folder / "late.csv", {0: np.full(900, 250.0)}, t0 + 120)
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    fleet = json.loads((out / "fleet" / "summary.json").read_text())
    assert fleet["alignment"] == "wall_clock"
    note = (
        "the wall-clock fleet is the time every trace covers: 2027-01-15 08:02:00 to 08:14:59 "
        "UTC (0.22 h), from the start of late (the last to start) to the end of early (the first "
        "to end); its peaks and factor are of that time, the energy and cost of each trace's "
        "whole span"
    )
    assert f"note: {note}" in " ".join(result.output.split())
    page = html.unescape(re.sub(r"<[^>]+>", " ", (out / "report" / "index.html").read_text()))
    page = " ".join(page.split())
    assert note[0].upper() + note[1:] in page
    assert "% of nameplate in its highest 30 s window, so it can be" in page
    assert "sizing quantile" not in page and "peak share % (mean)" not in page
    assert "peak share % (highest window)" in page


def test_a_failed_or_empty_prometheus_answer_is_not_passed_over_in_silence(
    tmp_path: Path,
) -> None:
    """A Prometheus answer saved from a failed query (too fine a step) or one that matched no
    series was skipped as "not a Prometheus query result", the run exiting 0 without that node
    and saying nothing. The failed one is an error naming the file and Prometheus's reason; the
    empty one is skipped for what it is, which `planner run` says."""
    folder, out = tmp_path / "logs", tmp_path / "out"
    _trace_csv(folder / "node.csv", {0: np.full(600, 300.0)}, 1.8e9)
    (folder / "node07.json").write_text(
        '{"status": "success", "data": {"resultType": "matrix", "result": []}}'
    )
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (
        "note: skipped: node07 (a Prometheus query result with no series (a selector or time "
        "range that matched nothing): query the DCGM power field over the logged time) (every "
        f"reason: {out}/traces/index.csv)"
    ) in " ".join(result.output.split())
    (folder / "node07.json").write_text(
        '{"status": "error", "errorType": "bad_data", "error": "exceeded maximum resolution of '
        '11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"}'
    )
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 2
    (error,) = [line for line in result.output.splitlines() if line.startswith("error")]
    assert error == (
        f"error: {folder}/node07.json: status: expected 'success' (a query's answer with its "
        "series), got 'error': bad_data: exceeded maximum resolution of 11,000 points per "
        "timeseries. Try decreasing the query resolution (?step=XX); query again and save the "
        "answer"
    )


def test_replanning_into_a_folder_keeps_only_its_traces_and_refuses_a_fleet_of_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning a second folder into the OUT of a first leaves OUT/windows holding the second's
    traces only, so the README's `planner fleet OUT/windows/*` is their fleet (it was three
    GPUs: the first's window folder stayed). A fleet of other traces, or of some of them, is
    refused by `planner economics` and `planner report` in one line naming both folders and
    the traces that differ."""
    _trace_csv(tmp_path / "first" / "old.csv", {0: np.full(600, 300.0)}, 1.8e9)
    _trace_csv(tmp_path / "second" / "a.csv", {0: np.full(600, 250.0)}, 1.8e9)
    _trace_csv(tmp_path / "second" / "b.csv", {0: np.full(600, 350.0)}, 1.8e9)
    monkeypatch.chdir(tmp_path)  # the paths as a user in that folder types them

    def planner(*args: str, exit_code: int = 0) -> str:
        result = CliRunner().invoke(app, ["planner", *args])
        assert result.exit_code == exit_code, result.output
        return result.output

    def windows(*folders: str) -> list[str]:  # the shell's glob FOLDER/*
        return [str(p) for folder in folders for p in sorted(Path(folder).glob("*"))]

    for folder in ("first", "second"):
        planner("run", folder, "--out", "OUT")
    assert windows("OUT/windows") == ["OUT/windows/a", "OUT/windows/b"]
    fleet = run_as_user("grpo-power planner fleet OUT/windows/* --out OUT/fleet", tmp_path)
    assert "fleet of 2 GPUs" in fleet, fleet
    folders = ["--traces", "OUT/traces", "--fleet", "OUT/fleet"]
    steps = (
        ["economics", *folders, "--out", "OUT/economics"],
        ["report", *folders, "--economics", "OUT/economics", "--out", "OUT/report"],
    )
    for step in steps:
        planner(*step)
    planner("run", "first", "--out", "OTHER")
    for fleet_of, differ in (
        (windows("OTHER/windows", "OUT/windows"), "in the fleet, not in OUT/traces/index.csv: old"),
        (["OUT/windows/a"], "in OUT/traces/index.csv, not in the fleet: b"),
    ):
        planner("fleet", *fleet_of, "--out", "OUT/fleet")
        for step in steps:
            output = planner(*step, exit_code=2)
            lines = [line for line in output.splitlines() if line.startswith("error")]
            assert len(lines) == 1, output
            assert lines[0].startswith("error: OUT/fleet: run_ids: not the fleet of the traces ")
            assert "in OUT/traces (" in lines[0] and differ in lines[0], lines[0]


def test_a_planner_run_stopped_part_way_leaves_no_stage_of_other_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second `planner run` into the same OUT, stopped after its traces were imported, left
    the first run's fleet, economics and report beside the new traces (3 GPUs and 6 traces
    described beside 1): they are gone before any later stage is redone. The README's
    `planner fleet OUT/windows/*` finds the windows of traces whose keys are paths
    (`OUT/windows/<folder>/<name>`), which it refused as no bins.parquet."""
    import grpo_power.planner.stage as stage

    config = Config()
    _trace_csv(tmp_path / "first" / "node" / "a.csv", {0: np.full(600, 300.0)}, 1.8e9)
    _trace_csv(tmp_path / "first" / "node" / "b.csv", {0: np.full(600, 200.0)}, 1.8e9)
    _trace_csv(tmp_path / "second" / "c.csv", {0: np.full(600, 250.0)}, 1.8e9)
    out = tmp_path / "OUT"
    run_planner(tmp_path / "first", out, config)
    assert {p.name for p in out.iterdir()} >= {"fleet", "economics", "report"}
    fleet = run_as_user(f"grpo-power planner fleet {out}/windows/* --out {tmp_path}/f", tmp_path)
    assert "fleet of 2 GPUs" in fleet, fleet

    def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the fleet is drawn

    monkeypatch.setattr(stage, "fleet_of_traces", stopped)
    with pytest.raises(KeyboardInterrupt):
        run_planner(tmp_path / "second", out, config)
    assert list(pd.read_csv(out / "traces" / "index.csv")["key"]) == ["c"]
    assert not [name for name in ("fleet", "economics", "report") if (out / name).exists()]


def test_traces_shorter_than_the_sizing_window_say_the_factor_repeats_them(
    tmp_path: Path,
) -> None:
    """A 10 s trace has no 30 s window: the fleet's 30 s figures repeat it end to end over the
    Monte Carlo timeline, which `planner run`, summary.json and the report say (it said
    nothing but that the clocks overlap by 9.5 s, with chosen_window_fits true)."""
    folder, out = tmp_path / "traces", tmp_path / "out"
    t = np.round(np.arange(0, 10.0, 0.1), 1)
    folder.mkdir()
    pd.DataFrame({"t": 1.8e9 + t, "gpu": 0, "power_w": np.where(t < 5, 380.0, 200.0)}).to_csv(
        folder / "s10.csv", index=False
    )
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "fleet" / "summary.json").read_text())
    assert not summary["chosen_window_fits"] and summary["runs_shorter_than_window"]
    assert summary["alignment_reason"] == (
        "s10 spans 9.5 s from its first complete 0.5 s energy bin to its last, less than the "
        "longest window (300 s)"
    )
    note = summary["sizing_note"]
    assert note.startswith(
        "every trace is shorter than the 30 s sizing window (the longest has 9.5 s of complete "
        "bins), so the fleet's 30 s peak and oversubscription factor repeat the traces end to "
        "end over a 600 s timeline: an assumption"
    )
    assert f"note: {note}" in " ".join(result.output.split())
    # the capital's factor is the scaling fleet's, drawn from one traced GPU: the line says so
    # and gives the traced fleet's own (it gave the drawn 4,096-GPU fleet's alone)
    economics = json.loads((out / "economics" / "summary.json").read_text())
    assert economics["oversubscription"]["factor_from_gpus"] > summary["n_gpus"] == 1
    assert (
        f"the traced GPUs drawn with replacement as if independent; the traced fleet's own "
        f"factor is {summary['factor']:.3g}x)"
    ) in " ".join(result.output.split())
    assert "fleet of 1 GPU by monte_carlo alignment" in result.output
    page = " ".join(html.unescape((out / "report" / "index.html").read_text()).split())
    assert note[0].upper() + note[1:] in page
    page = re.sub("<[^>]+>", "", page)  # a number's provenance span
    # the fleet table's rows longer than the trace rest on its repetition alone, which the
    # table's note says of those rows (the sizing note speaks of the 30 s window only)
    assert (
        "Each draw's timeline (600 s, fleet.horizon_s) is longer than every trace (9.5 s of "
        "complete bins): the traces are repeated end to end to fill it, each treated as "
        "periodic, an assumption, not a measurement; the 30, 60, 300 s row(s) are longer than "
        "every trace and rest on that repetition alone."
    ) in page


def test_the_planner_report_states_the_files_settings_and_captions_what_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`planner report -c other.yaml` on folders a run with the default config wrote: the
    window, quantile, margin, fleet size and cap it states are the files' (it stated the other
    config's 60 s, margin 0.2 and 1,000 GPUs beside numbers computed at 30 s, 0.1 and 10,000),
    each caption says what its figure draws (the fleet figure draws no cap), no title reads
    ``measured: measured``, and the traces' time axis does not speak of steps they lack."""
    folder, out = tmp_path / "traces", tmp_path / "out"
    _trace_csv(folder / "hot.csv", {0: np.full(600, 380.0)}, 1.8e9)
    _trace_csv(folder / "cool.csv", {0: np.full(600, 200.0)}, 1.8e9 + 86400)
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    other = tmp_path / "other.yaml"
    other.write_text(
        "cap_w: 300\nfleet: {window_s: 60, margin: 0.2, peak_quantile: 0.9}\n"
        "economics: {fleet_gpus: 1000}\n"
    )
    drawn: dict[str, list[str]] = {}
    save = figures.save_figure

    def recording_save(figure, folder, name, dpi):  # the figure's axis labels and titles
        texts = [figure.get_supxlabel(), *(ax.get_title() for ax in figure.axes)]
        drawn[name] = [*texts, *(ax.get_xlabel() for ax in figure.axes)]
        return save(figure, folder, name, dpi)

    monkeypatch.setattr(figures, "save_figure", recording_save)
    folders = ["--traces", str(out / "traces"), "--fleet", str(out / "fleet")]
    folders += ["--economics", str(out / "economics"), "--out", str(tmp_path / "report")]
    report = CliRunner().invoke(app, ["planner", "report", *folders, "-c", str(other)])
    assert report.exit_code == 0, report.output
    fleet = json.loads((out / "fleet" / "summary.json").read_text())
    economics = json.loads((out / "economics" / "summary.json").read_text())
    assert (fleet["window_s"], fleet["margin"], fleet["peak_quantile"]) == (30.0, 0.1, 0.95)
    page = html.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "report" / "index.html").read_text()))
    page = " ".join(page.split())
    assert "at the 30 s window (sizing quantile 0.95 of its draws)" in page
    assert "x with margin 0.1." in page
    assert f"a fleet of {economics['fleet_gpus']:,} such GPUs running 8,760 h a year" in page
    assert f"a fleet of {fleet['n_gpus']} GPUs by monte_carlo" in page
    cap = f"dashed: the cap, {fleet['cap_w_per_gpu']:g} W per GPU"
    assert page.count(cap) == 2  # the traces and their distributions, not the fleet
    assert "dashed: the study's about 2x" in page
    assert "300 W" not in page and "60 s window" not in page
    assert "measured: measured" not in page
    assert not any("measured: measured" in text for texts in drawn.values() for text in texts)
    assert drawn["planner_traces"][0] == "time since the trace's first reading (s); dashed: the cap"
    assert not any("step" in text for text in drawn["planner_traces"])


def test_a_folder_of_many_traces_draws_the_first_ones_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A planner's folder of hundreds of logs drew a traces figure a panel per trace in one row
    (1,900 inches wide for 1,000), whose shared axes cost matplotlib time growing with the
    square of their number: 1,000 traces never finished. The figures draw the first
    `DRAWN_TRACES` by label and their captions say so; every trace counts in the tables. The
    steps after the windows show their progress too (minutes on weeks of logs)."""
    from grpo_power.planner import report as planner_report

    count = planner_report.DRAWN_TRACES + 3
    folder, out = tmp_path / "traces", tmp_path / "out"
    for i in range(count):
        _trace_csv(folder / f"node{i:02d}.csv", {0: np.full(120, 150.0 + i)}, 1.8e9 + 86400 * i)
    panels: dict[str, int] = {}
    save = figures.save_figure

    def counting_save(figure, where, name, dpi):
        panels[name] = sum(ax.has_data() for ax in figure.axes)
        return save(figure, where, name, dpi)

    monkeypatch.setattr(figures, "save_figure", counting_save)
    run_planner(folder, out, small_config(tmp_path), show_progress=True)
    assert panels["planner_traces"] == planner_report.DRAWN_TRACES
    page = html.unescape(re.sub(r"<[^>]+>", "", (out / "report" / "index.html").read_text()))
    said = (
        f"The first {planner_report.DRAWN_TRACES} of the {count} traces are drawn "
        f"(T1-T{planner_report.DRAWN_TRACES}); every trace counts in the tables and the fleet."
    )
    assert " ".join(page.split()).count(said) == 2  # the traces and their distributions
    assert f"T{count}" in page  # the last trace is in the traces table
    progress = capsys.readouterr().err
    assert "economics" in progress and "report" in progress


def test_the_joined_logs_of_many_nodes_are_named_three_then_counted() -> None:
    """A node's logs of every day are joined into one set of GPUs: 500 nodes printed 500 such
    lines, where the other notes name three and count the rest."""
    from grpo_power.planner.fleet import fleet_notes

    joined = [{"gpus": 8, "logs": [f"n{i}/day1", f"n{i}/day2"]} for i in range(5)]
    notes = fleet_notes({"joined": joined})
    assert notes[:3] == [
        f"logs of one set of 8 GPU(s), named by UUID, counted once: n{i}/day1 + n{i}/day2"
        for i in range(3)
    ]
    assert notes[3] == (
        "and 2 more sets of GPUs whose logs were joined (the fleet's summary.json, joined, "
        "lists every one)"
    )
    assert len(notes) == 4


def test_planner_run_says_how_it_read_the_logs_and_skips_those_without_samples(
    tmp_path: Path,
) -> None:
    """`planner run` printed none of the import's notes (a nameplate taken from the config,
    readings above it: the headline's % of nameplate rests on them) and the report listed them
    nowhere; a log of a header and no rows (a logger stopped before its first sample) or a dmon
    log recorded without -o DT ended the whole run, where a dcgmi table is skipped."""
    folder, out = tmp_path / "logs", tmp_path / "out"
    (folder / "node1").mkdir(parents=True)
    header = "timestamp, index, power.draw [W]\n"
    readings = [
        f"2026/12/06 10:{s // 60:02d}:{s % 60:02d}.000, 0, {300 + s:.2f} W" for s in range(180)
    ]
    (folder / "node1" / "smi.csv").write_text(header + "\n".join(readings) + "\n")
    (folder / "node4").mkdir()
    shutil.copy(folder / "node1" / "smi.csv", folder / "node4" / "smi.csv")  # the same notes
    (folder / "node2").mkdir()
    (folder / "node2" / "smi.csv").write_text(header)  # killed before its first sample
    (folder / "node3.log").write_text("# gpu   pwr\n# Idx     W\n    0    62\n")  # no -o DT
    (folder / "grafana.csv").write_text('"Time","GPU 0"\n')  # a panel's download of no data
    result = CliRunner().invoke(app, ["planner", "run", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if line.startswith("note: ")]
    # the two logs' notes are said once each, naming both logs
    both = f"{folder}/node1/smi.csv, {folder}/node4/smi.csv: "
    nameplate = both + "no power.default_limit: nameplate 400 W from the config's"
    above = both + "readings reach 479 W, above the nameplate 400 W"
    assert any(nameplate in line for line in said) and any(above in line for line in said)
    assert sum("no power.default_limit" in line for line in said) == 1
    index = pd.read_csv(out / "traces" / "index.csv").set_index("key")
    assert index.loc["node1/smi", "status"] == "imported"
    assert index.loc["node2/smi", "status"] == index.loc["node3", "status"] == "skipped"
    assert (
        index.loc["node2/smi", "reason"] == "nvidia-smi log with no sample (a header and no rows)"
    )
    assert "-o DT" in index.loc["node3", "reason"]
    assert index.loc["grafana", "reason"] == "grafana log with no sample (a header and no rows)"
    page = html.unescape(re.sub(r"<[^>]+>", " ", (out / "report" / "index.html").read_text()))
    page = " ".join(page.split())
    assert "3 note(s) from the import on how the traces were read" in page
    assert nameplate in page and above in page
    only_empty = tmp_path / "empty-logs"
    only_empty.mkdir()
    (only_empty / "smi.csv").write_text(header)
    refused = CliRunner().invoke(app, ["planner", "run", str(only_empty), "--out", str(out)])
    assert refused.exit_code == 2
    assert f"{only_empty}: no power trace with samples found" in refused.output
    assert (out / "report" / "index.html").exists()  # the earlier run's folder is untouched


def test_the_planner_report_gives_each_traces_peaks(config: Config, tmp_path: Path) -> None:
    """A planner saw the fleet's peak but not which node made it: each trace's highest 30 s
    window, of one GPU and of its GPUs' sum, and the share of windows above the cap, are in the
    fleet's trace_peaks.csv and the report. Node a's GPU 0 runs 60 s at 200 W then 40 s at
    380 W beside a GPU at 250 W: one GPU's highest 30 s mean is 380 W (95 % of 400), the sum's
    630 W, under the caps' sum (2 x 320 W) throughout; a 30 s window of GPU 0 is above 320 W
    when more than 20 s of it are at 380 W, so about 20 of its 70 s of window starts."""
    folder = tmp_path / "logs"
    folder.mkdir()
    columns = "name, power.draw [W], power.limit [W]"

    def a100(power_w: Callable[[int, int], float]) -> Callable[[int, int], str]:
        return lambda i, g: f"NVIDIA A100-SXM4-80GB, {power_w(i, g):.2f} W, 400.00 W"

    # 200 samples, 0.5 s apart: node a's GPU 0 at 380 W from 60 s on
    node_a = a100(lambda i, g: 250.0 if g else (200.0 if i < 120 else 380.0))
    (folder / "node-a.csv").write_text(_smi_log(columns, node_a, 200, gpus=2))
    node_b = a100(lambda i, g: 100.0 + 20.0 * g)
    (folder / "node-b.csv").write_text(_smi_log(columns, node_b, 200, gpus=2))
    assert config.fleet.window_s == 30 and config.cap_w == 320
    run_planner(folder, tmp_path / "out", config)
    peaks = pd.read_csv(tmp_path / "out" / "fleet" / "trace_peaks.csv").set_index("run_id")
    a, b = peaks.loc["node-a"], peaks.loc["node-b"]
    assert a["gpu_peak_w"] == pytest.approx(380.0, abs=0.5)
    assert a["gpu_peak_share"] == pytest.approx(0.95, abs=0.002)
    assert a["total_peak_w"] == pytest.approx(630.0, abs=0.5)
    assert a["total_exceedance"] == 0.0
    assert a["gpu_exceedance"] == pytest.approx(20 / 70 / 2, abs=0.02)  # GPU 1 never above
    assert (b["gpu_peak_w"], b["total_peak_w"], b["gpu_exceedance"]) == pytest.approx(
        (120.0, 220.0, 0.0), abs=0.5
    )
    page = (tmp_path / "out" / "report" / "index.html").read_text()
    table = page[page.index("Peaks per trace at the sizing window") :]
    assert 'data-col="total_peak_w"' in table and "630" in table
