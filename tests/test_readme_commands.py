"""Every command in README.md's code blocks, typed as written into a clean copy of the checkout.

The commands are read from README.md. Each must be listed in :data:`HOW` with how it is run:

- ``run``: as written, through bash, in its place's checkout copy, in README order;
- ``dry``: it needs GPUs, or runs longer than CI allows (the controller-targets study), so its
  dry form (``-n``, shown in the README too) stands for it;
- ``stand-in``: it needs an NVIDIA GPU; the file it would write is put in place from
  ``tests/data`` (a mock of the hardware only), and the commands after it run on that file;
- ``this``: ``make test``, the command that runs this test;
- ``covered``: run as written by the test named.

A README command missing from :data:`HOW`, or listed there but gone from the README, fails
:func:`test_every_readme_command_is_classified`, so a README command can never go unrun. No test
here adds a flag, an environment variable or a config file the README does not show; the only
environment is `make test`'s (this Python's bin folder on PATH). Each place prints a table of
what each command did and how long it took (`pytest -s` shows it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from grpo_power.config import load_config
from grpo_power.workload.sweep import sweep_settings
from tests.conftest import (
    DATA,
    REAL_TRACE_COMMANDS,
    REAL_TRACES,
    REPO,
    checkout_copy,
    have_real_traces,
    readme_commands,
    run_as_user,
)

SLURM_TEST = "snakemake --profile profiles/slurm --configfile config/slurm-test.yaml"
A100 = "snakemake --profile profiles/slurm --configfile config/a100-slurm.yaml"
INTERRUPTS = "tests/test_slurm.py::test_ctrl_c_* (both modes)"
PLANNER_REAL = "tests/test_planner.py::test_planner_on_the_public_real_traces (both forms)"

REAL_TRACES_TEST = "tests/test_real_traces.py::test_readme_real_trace_commands_meet_the_targets"
REAL_TRACES_STUDY = (
    "snakemake --cores 2 --config real_traces='{folder: ../shared/data/real-traces, held_out: "
    '[arrival_rate, trace_replay], origin: "grantwilkins/powertrace-sim @96361ef"}\''
)
TARGETS_DRY = (
    "snakemake -n --cores 2 --configfile config/config.yaml config/controller-targets.yaml"
)
H100_DRY = "snakemake -n --cores 2 --configfile config/config.yaml config/h100.yaml"
# command -> (how, place or detail). Places: local (the laptop study), cluster, tools.
GRAFANA_IMPORT = (
    ".venv/bin/grpo-power telemetry import grafana.csv --format grafana --nameplate-w 400 "
    "--timezone Europe/Berlin"
)
HOW: dict[str, tuple[str, str]] = {
    "make demo": ("run", "local"),
    "make test": ("this", "the command that runs this test"),
    "snakemake --cores 2 --report report.html": ("run", "local"),
    "snakemake --cores 2 --forcerun windows": ("run", "local"),
    "snakemake --cores 2 results/runs/tiny/threshold/seed0/trace.parquet": ("run", "local"),
    REAL_TRACES_STUDY: ("run", "local"),
    A100: ("dry", "snakemake -n --profile profiles/slurm --configfile config/a100-slurm.yaml"),
    "snakemake -n --profile profiles/slurm --configfile config/a100-slurm.yaml": ("run", "cluster"),
    f"{A100} --dag > dag.dot": ("run", "cluster"),
    f"{A100} --rulegraph > rulegraph.dot": ("run", "cluster"),
    f"{A100} --summary": ("run", "cluster"),
    f"{A100} --unlock": ("run", "cluster"),
    SLURM_TEST: ("run", "cluster"),
    f"{SLURM_TEST} --report report.html": ("run", "cluster"),
    "snakemake results/runs/tiny/uncontrolled/seed0/trace.parquet --profile profiles/slurm "
    "--configfile config/slurm-test.yaml --config workload='{steps: 60}'": ("covered", INTERRUPTS),
    "snakemake results/runs/tiny/uncontrolled/seed0/trace.parquet --profile profiles/slurm "
    "--configfile config/slurm-test.yaml --config workload='{steps: 60}' "
    "launch='{on_interrupt: keep}'": ("covered", INTERRUPTS),
    ".venv/bin/grpo-power telemetry record --period 0.1 --out results/telemetry/sleep.parquet "
    "-- sleep 5": ("run", "tools"),
    ".venv/bin/grpo-power telemetry summary results/telemetry/sleep.parquet --compare-energy": (
        "run",
        "tools",
    ),
    "nvidia-smi --query-gpu=timestamp,index,uuid,power.draw,power.draw.average,utilization.gpu,"
    "utilization.memory,clocks.sm,temperature.gpu,power.limit,power.default_limit --format=csv "
    "-lms 100 > smi.csv": ("stand-in", "nvidia-smi-a100.csv:smi.csv"),
    ".venv/bin/grpo-power telemetry import smi.csv --out results/traces/mine.parquet": (
        "run",
        "tools",
    ),
    ".venv/bin/grpo-power telemetry import dcgm.csv --format dcgm --nameplate-w 400": (
        "run",
        "tools",
    ),
    ".venv/bin/grpo-power telemetry import prometheus.json --format prometheus": ("run", "tools"),
    GRAFANA_IMPORT: ("run", "tools"),
    ".venv/bin/grpo-power config schema --out workflow/schemas/config.schema.json": (
        "run",
        "tools",
    ),
    ".venv/bin/python examples/measure_any_training.py --out results/examples/loop": (
        "covered",
        "tests/test_examples.py::test_measure_any_training_example",
    ),
    ".venv/bin/python examples/grpo_with_power.py --out results/examples/grpo": (
        "covered",
        "tests/test_examples.py::test_grpo_example_logs_power_to_tensorboard",
    ),
    ".venv/bin/grpo-power planner run ../shared/data/real-traces --out results/planner": (
        "covered",
        PLANNER_REAL,
    ),
    "snakemake --cores 2 planner --config planner='{traces: ../shared/data/real-traces}'": (
        "covered",
        PLANNER_REAL,
    ),
    "make bench": ("run", "tools"),
    TARGETS_DRY: ("run", "local"),
    TARGETS_DRY.replace(" -n", ""): ("dry", TARGETS_DRY),
    H100_DRY: ("run", "local"),
    H100_DRY.replace(" -n", ""): ("dry", H100_DRY),
    ".venv/bin/python -m benchmarks controller": ("run", "local"),
    # the public traces lie outside the checkout (../shared): run as written there
    **{command: ("covered", REAL_TRACES_TEST) for command in REAL_TRACE_COMMANDS},
    ".venv/bin/python -m benchmarks fleet_scaling": ("run", "tools"),
}
# Commands the README says may fail: the controller benchmark exits 1 when a target is missed.
EXIT_CODES = {".venv/bin/python -m benchmarks controller": (0, 1)}
# Files a user brings (no README command writes them): their stand-ins from tests/data (the DCGM
# log's last row holds an [N/A] reading, imported as a missing sample).
BROUGHT = {
    "tools": {
        "dcgm.csv": "dcgm-exporter-a100.csv",
        "prometheus.json": "prometheus-dcgm.json",
        "grafana.csv": "grafana-dcgm.csv",  # the same series as a dashboard panel's download
    }
}


def test_every_readme_command_is_classified() -> None:
    commands = readme_commands()
    assert len(commands) >= 15
    unlisted = [c for c in commands if c not in HOW]
    assert not unlisted, f"README commands no test runs (add them to HOW): {unlisted}"
    gone = [c for c in HOW if c not in commands]
    assert not gone, f"HOW lists commands the README no longer shows: {gone}"
    for command, (how, detail) in HOW.items():
        if how == "dry":
            assert detail in commands and HOW[detail][0] == "run", command


def _run_place(place: str, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Run the README's commands of ``place`` in order in a fresh checkout copy; return the
    copy and each command's combined output."""
    checkout = checkout_copy(tmp_path / "checkout")
    if REAL_TRACES.exists():  # beside the checkout, where the README's commands find them
        (tmp_path / "shared").symlink_to(REAL_TRACES.parent.parent)
    for name, source in BROUGHT.get(place, {}).items():
        shutil.copy(DATA / source, checkout / name)
    outputs: dict[str, str] = {}
    rows = []
    for command in readme_commands():
        how, detail = HOW[command]
        if how == "stand-in" and place == "tools":
            source, target = detail.split(":")
            shutil.copy(DATA / source, checkout / target)
            rows.append((command, "stand-in", f"{target} from tests/data/{source}", 0.0))
        if how != "run" or detail != place:
            continue
        if "../shared/data/real-traces" in command and not have_real_traces():
            rows.append((command, "not run", f"no public traces at {REAL_TRACES}", 0.0))
            continue
        started = time.monotonic()
        output = run_as_user(command, checkout, exit_codes=EXIT_CODES.get(command, (0,)))
        elapsed_s = time.monotonic() - started
        outputs[command] = output
        last = next((ln for ln in reversed(output.splitlines()) if ln.strip()), "")
        rows.append((command, "ran", last.strip()[:90], elapsed_s))
    print(f"\nREADME commands, place {place!r}:")
    for command, what, said, elapsed_s in rows:
        print(f"  [{what}, {elapsed_s:5.1f} s] {command}\n      -> {said}")
    return checkout, outputs


@pytest.mark.slow
def test_readme_local_commands(tmp_path: Path) -> None:
    """The quick start and the rerun commands, on the laptop study (`make demo`)."""
    checkout, outputs = _run_place("local", tmp_path)
    results = checkout / "results"
    assert (results / "report" / "index.html").exists()
    assert (checkout / "report.html").stat().st_size > 10_000  # Snakemake's own report
    forcerun = outputs["snakemake --cores 2 --forcerun windows"]
    assert "rule windows" in forcerun and "rule fleet" in forcerun  # and what depends on it
    assert "rule run" not in forcerun  # nothing upstream
    # the PPO arm ran for real: its step log holds the controller's actions and what it saw
    steps = pd.read_parquet(results / "runs" / "tiny" / "ppo" / "seed0" / "steps.parquet")
    assert steps[["action_concurrency", "action_max_new_tokens"]].notna().all().all()
    assert (steps["obs_mean_power_w"].iloc[1:] > 0).all() and (steps["obs_cap_w"] > 0).all()
    one = outputs["snakemake --cores 2 results/runs/tiny/threshold/seed0/trace.parquet"]
    assert "Nothing to be done" in one
    if REAL_TRACES_STUDY in outputs:  # the simulator against the public traces, after the study
        rerun = outputs[REAL_TRACES_STUDY]
        assert "rule real_traces" in rerun and "rule report" in rerun
        assert "rule run" not in rerun and "rule controller" not in rerun
        page = (results / "report" / "index.html").read_text()
        assert 'id="real-traces"' in page and "measured (public trace)" in page
        assert (results / "report" / "figures" / "real_traces.png").stat().st_size > 10_000
        exceedance = pd.read_csv(results / "real-traces" / "exceedance.csv")
        windows_s = load_config(checkout / "config" / "config.yaml").windows.windows_s
        assert exceedance.groupby("run_id")["window_s"].nunique().min() == len(windows_s)
        assert set(exceedance["data"]) == {"measured (public trace)"}
        runs = pd.read_csv(results / "real-traces" / "runs.csv")
        assert set(runs[runs["split"] == "fit"]["folder"].str.split("/").str[0]) == {
            "arrival_pattern_qwen3-8b_a100_bursty",
            "arrival_pattern_qwen3-8b_a100_smooth",
        }
    # the controller-targets study planned on top of the laptop study: its new scenarios
    plan = outputs[TARGETS_DRY]
    for scenario in ("demand-response", "length-drift", "derating", "7b-cap-0.6"):
        assert f"results/evaluate/scenarios/{scenario}/table.md" in plan, scenario
    assert "rule sweep:" not in plan
    # it trains each controller from three seeds (controller.training_seeds: 3), so the one
    # real run a controller drives, the ppo arm's, is planned again; no other run is
    planned_runs = re.findall(r"rule run:\n(?:    .*\n)*?    wildcards: ([^\n]*)", plan)
    ppo_only = [re.search(r"\barm=ppo(,|$)", w) for w in planned_runs]
    assert planned_runs and all(ppo_only), planned_runs
    assert "rule controller:" in plan
    # the H100 overlay: a valid config, every stage planned again for the new part and caps
    h100 = outputs[H100_DRY]
    assert "results/evaluate/scenarios/7b-cap-500w/table.md" in h100
    assert "rule run:" in h100 and "rule controller:" in h100
    # the targets benchmark reads what the study's evaluation wrote, every row labelled
    bench = json.loads((results / "benchmarks" / "controller.json").read_text())
    targets = pd.DataFrame(bench["controller_targets"]["targets"])
    ratios = pd.read_csv(results / "evaluate" / "study" / "ratios.csv")
    study = ratios[ratios["comparison"].str.startswith("budget_")]
    assert len(targets[targets["scenario"] == "study"]) == len(study) > 0
    assert set(targets["scenario"]) == {"study", "7b-cap-305w"}
    assert set(targets["data"]) == {"simulated"}
    said = outputs[".venv/bin/python -m benchmarks controller"]
    assert f"targets met: {bench['controller_targets']['targets_met']} of {len(targets)}" in said
    # the targets are the benchmark's assertions: each missed one named, then exit 1
    missed = targets[~targets["met"].astype(bool)]
    assert ("benchmark target(s) missed" in said) == (len(missed) > 0)
    for row in missed.itertuples():
        assert f"on {row.scenario}, {row.deployment}, {row.controller}: " in said
    # a missed target its arm's oracle misses too is said to lie beyond the limit
    beyond = missed[~missed["reachable"].astype(bool)]
    assert said.count("the target lies beyond the limit itself") == len(beyond)
    assert targets["oracle_value"].notna().any()


def _sacct_rows(since: str) -> list[list[str]]:
    out = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-S", since, "-o", "JobID,JobName%60,State,Comment%200"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split("|") for line in out.splitlines() if line]


@pytest.mark.slow
def test_readme_cluster_commands(slurm: None, tmp_path: Path) -> None:
    """The cluster section: the A100 study planned, drawn and inspected, and the small study run
    on the test Slurm with the site profile as it is, then its Snakemake report."""
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    checkout, outputs = _run_place("cluster", tmp_path)
    plan = outputs["snakemake -n --profile profiles/slurm --configfile config/a100-slurm.yaml"]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", plan, re.M))
    assert counts["run"] == "18" and counts["windows"] == "54" and counts["sweep"] == "1"
    assert counts["controller"] == counts["controller_hwcap"] == "3"  # ppo, ppo+hwcap
    dag, rulegraph = ((checkout / f"{n}.dot").read_text() for n in ("dag", "rulegraph"))
    assert dag.startswith("digraph") and rulegraph.startswith("digraph")
    assert rulegraph.count("label = ") < 20 < dag.count("label = ")  # rules, and jobs
    results = checkout / "results"
    assert (results / "report" / "index.html").exists()
    assert (checkout / "report.html").stat().st_size > 10_000
    for arm in ("uncontrolled", "fixed", "fixed-safe", "threshold"):
        for seed in (0, 1):
            manifest = json.loads(
                (results / "runs" / "tiny" / arm / f"seed{seed}" / "manifest.json").read_text()
            )
            assert manifest["status"] == "completed"
    rows = _sacct_rows(since)
    gpu = {}
    for job_id, name, state, _ in rows:
        if name.startswith("grpo-power-tiny-"):
            gpu.setdefault(name, set()).add(job_id.split("_")[0])
            assert state == "COMPLETED", (job_id, name, state)
    # one array per arm (both seeds), per calibration and for the sweep: never one job per run
    expected = {
        f"grpo-power-tiny-{a}" for a in ("uncontrolled", "fixed", "fixed-safe", "threshold")
    }
    expected |= {"grpo-power-tiny-calibration", "grpo-power-tiny-sweep"}
    assert set(gpu) == expected, gpu
    assert all(len(ids) == 1 for ids in gpu.values()), gpu
    tasks = {name: sum(1 for r in rows if r[1] == name) for name in gpu}
    # the sweep: each of its actuators (concurrency, max new tokens, the training chunk, the
    # group size) at its two bounds, one array task each
    sweep_runs = len(sweep_settings(load_config(checkout / "config" / "config.yaml")))
    assert tasks["grpo-power-tiny-calibration"] == 3
    assert tasks["grpo-power-tiny-sweep"] == sweep_runs == 8
    analysis: dict[str, int] = {}
    for _, name, state, comment in rows:
        match = re.search(r"rule_(\w+?)(_wildcards|$)", comment)
        if not name.startswith("grpo-power-") and match:
            analysis[match.group(1)] = analysis.get(match.group(1), 0) + 1
            assert state == "COMPLETED", (name, comment, state)
    assert "windows" not in analysis and "run" not in analysis  # local rules
    assert analysis.get("identify") == 1 and analysis.get("controller") == 3, analysis
    print(f"sacct: GPU job arrays (tasks) {tasks}; analysis jobs per rule {analysis}")


@pytest.mark.slow
def test_readme_tool_commands(tmp_path: Path) -> None:
    """Recording, importing (the GPU's log from tests/data) and the benchmarks."""
    checkout, outputs = _run_place("tools", tmp_path)
    assert (checkout / "results" / "telemetry" / "sleep.parquet").exists()
    assert (checkout / "results" / "traces" / "mine.parquet").exists()
    assert (checkout / "dcgm.parquet").exists()
    dcgm = outputs[".venv/bin/grpo-power telemetry import dcgm.csv --format dcgm --nameplate-w 400"]
    assert "missing" in dcgm  # the [N/A] reading, counted in a note
    prometheus = outputs[
        ".venv/bin/grpo-power telemetry import prometheus.json --format prometheus"
    ]
    assert "imported 23 samples of 4 GPU(s)" in prometheus and "2 hosts" in prometheus
    assert (checkout / "prometheus.parquet").exists()
    grafana = outputs[GRAFANA_IMPORT]
    assert "imported 23 samples of 4 GPU(s)" in grafana and "2 hosts" in grafana
    assert (checkout / "grafana.parquet").exists()
    assert "power source: simulated" in "".join(outputs.values())
    schema = "workflow/schemas/config.schema.json"
    assert (checkout / schema).read_text() == (REPO / schema).read_text()  # the committed one
    assert sorted(p.name for p in (checkout / "results" / "benchmarks").glob("*.json"))
