"""`grpo-power telemetry record` runs a command, follows its phases, and reports energy."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from grpo_power.telemetry.store import journal_path, read_trace
from tests.conftest import REPO

CLI = [sys.executable, "-m", "grpo_power.cli"]
CONFIG = ["--config", str(REPO / "config" / "config.yaml")]


@pytest.mark.slow
def test_record_demo_workload_follows_its_phases(tmp_path: Path) -> None:
    out = tmp_path / "demo.parquet"
    result = subprocess.run(
        [
            *CLI,
            "telemetry",
            "record",
            *CONFIG,
            "--period",
            "0.1",
            "--out",
            str(out),
            "--",
            sys.executable,
            "-m",
            "grpo_power.workload.demo",
            "--seconds",
            "6",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    # the summary on stderr, as `time` prints it: the command's stdout is its own
    assert "SIMULATED" in result.stderr and "mean_power_w" in result.stderr
    assert "mean_power_w" not in result.stdout and "energy_span_s" in result.stderr
    trace = read_trace(out)
    assert trace.complete and trace.metadata.simulated
    assert trace.metadata.command[-2:] == ["--seconds", "6"]
    power_w = trace.frame["power_w"].to_numpy()
    # Idle while Python starts, then decode (~230-345 W) and training (~300 W) phases.
    assert np.percentile(power_w, 5) < 70.0
    assert np.percentile(power_w, 95) > 295.0
    energy_j = trace.frame["energy_j"].to_numpy()
    assert np.all(np.diff(energy_j) >= 0)


@pytest.mark.parametrize(
    ("command", "exit_code", "said"),
    [
        ("import sys; sys.exit(3)", 3, "the recorded command exited with 3"),
        # killed by a signal: 128 + its number, as a shell reports it (it was 247 for SIGKILL)
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
            128 + signal.SIGKILL,
            "the recorded command was killed by SIGKILL",
        ),
    ],
    ids=["exit-3", "sigkill"],
)
def test_record_passes_the_command_exit_status_on(
    tmp_path: Path, command: str, exit_code: int, said: str
) -> None:
    trace = tmp_path / "f.parquet"
    recorded = ["--", sys.executable, "-c", command]
    result = subprocess.run(
        [*CLI, "telemetry", "record", *CONFIG, "--period", "0.1", "--out", str(trace), *recorded],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == exit_code, result.stderr
    assert said in result.stderr
    assert read_trace(trace).complete


# Stops on SIGTERM or SIGHUP, saying which, with exit code 5; says when it is ready.
STOPPING_CHILD = """
import pathlib, signal, sys, time
def stop(signum, frame):
    pathlib.Path(sys.argv[1]).write_text(signal.Signals(signum).name)
    sys.exit(5)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
pathlib.Path(sys.argv[2]).write_text("ready")
time.sleep(60)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_sigterm_or_sighup_is_passed_on_and_the_trace_closed(
    tmp_path: Path, signum: signal.Signals
) -> None:
    out, stopped, ready = tmp_path / "term.parquet", tmp_path / "stopped", tmp_path / "ready"
    child = [sys.executable, "-c", STOPPING_CHILD, str(stopped), str(ready)]
    recorder = subprocess.Popen(
        [*CLI, "telemetry", "record", *CONFIG, "--period", "0.1", "--out", str(out), "--", *child],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and recorder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), recorder.stderr.read() if recorder.poll() is not None else ""
        recorder.send_signal(signum)  # the recorder only: the command hears it only if passed on
        recorder.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):  # a command left running holds the pipes
            os.killpg(recorder.pid, signal.SIGKILL)
        _, stderr = recorder.communicate()
    assert recorder.returncode == 5, stderr
    assert stopped.read_text() == signum.name
    assert "the recorded command exited with 5" in stderr and "mean_power_w" in stderr
    assert read_trace(out).complete and not journal_path(out).exists()


def test_a_recording_is_never_written_over(tmp_path: Path) -> None:
    """A killed recording leaves its journal (`k.parquet.partial`), which a second recording to
    the same --out emptied: it now goes to `k-2.parquet`, saying so, and the first is read back
    whole. A command that cannot start (a typo) left a one-sample trace over a good one, with
    exit 2, "nothing written": now nothing is."""
    out = tmp_path / "k.parquet"
    record = [*CLI, "telemetry", "record", *CONFIG, "--period", "0.1", "--out", str(out), "--"]
    killed = subprocess.Popen(
        [*record, "sleep", "60"],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            not journal_path(out).exists() or journal_path(out).stat().st_size < 4_000
        ):
            time.sleep(0.2)  # until some flushed samples are in the journal
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
    samples = len(read_trace(out).frame)
    assert samples > 0
    again = subprocess.run(
        [*record, "sleep", "0.5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert f"note: {out} exists; this recording goes to {tmp_path / 'k-2.parquet'}" in again.stderr
    assert len(read_trace(out).frame) == samples  # the killed recording, whole
    assert read_trace(tmp_path / "k-2.parquet").complete
    typo_out = ["--out", str(tmp_path / "sub" / "deep" / "t.parquet"), "--", "slep", "3"]
    typo = subprocess.run(
        [*CLI, "telemetry", "record", *CONFIG, *typo_out],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert typo.returncode == 2 and "slep" in typo.stderr
    assert not (tmp_path / "sub").exists()  # not even the folders it named


@pytest.mark.parametrize(("period_s", "seconds"), [(2.0, 1.0), (0.05, 0.55)])
def test_a_recording_spans_its_command_and_no_more(
    tmp_path: Path, period_s: float, seconds: float
) -> None:
    """A Zeus-style window: a reading as the command starts and one as it ends. The recording
    ended at its next 0.5 s check of the command and took no reading at the end: `sleep 1`
    sampled every 2 s had one reading and 0 J, `sleep 0.55` every 0.05 s ran on to 1 s."""
    out = tmp_path / "r.parquet"
    args = ["--period", str(period_s), "--out", str(out), "--", "sleep", str(seconds)]
    result = subprocess.run(
        [*CLI, "telemetry", "record", *CONFIG, *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    frame = read_trace(out).frame  # the simulated GPU, idle: 60 W throughout
    span_s = float(frame["t"].max() - frame["t"].min())
    assert seconds <= span_s < seconds + 0.4
    energy_j = float(frame["energy_j"].iloc[-1] - frame["energy_j"].iloc[0])
    assert energy_j == pytest.approx(60.0 * span_s, rel=0.05)


def test_record_without_a_command_or_with_bad_settings_fails_clearly(tmp_path: Path) -> None:
    none = subprocess.run(
        [*CLI, "telemetry", "record", *CONFIG, "--out", str(tmp_path / "x.parquet"), "--"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert none.returncode == 64 and "Missing argument 'command'" in none.stderr  # usage
    bad = subprocess.run(
        [*CLI, "telemetry", "record", *CONFIG, "--period", "-1", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert "telemetry.period_s: Input should be greater than 0 (got -1.0)" in bad.stderr
    # a trace is Parquet: `--out x.csv` recorded the whole command, then could not read it back
    marker, log = tmp_path / "ran", tmp_path / "smi.log"
    log.write_text("timestamp, index, power.draw [W]\n")
    for command in (
        ["record", *CONFIG, "--out", str(tmp_path / "x.csv"), "--", "touch", str(marker)],
        ["import", str(log), "--out", str(tmp_path / "x.csv")],
    ):
        csv = subprocess.run(
            [*CLI, "telemetry", *command], capture_output=True, text=True, timeout=60
        )
        assert csv.returncode == 2, csv.stderr
        lines = csv.stderr.strip().splitlines()
        assert lines[-1].endswith(
            "x.csv: a trace is written as Parquet; expected a file name ending .parquet "
            "(such as x.parquet)"
        )
    assert not marker.exists() and not list(tmp_path.glob("x.*"))
