"""Resuming runs: journals appended across attempts, stop signals, SIGKILL, credentials.

The run tests start the real ``grpo-power run`` command (tiny model, TRL, simulated power) in a
process of its own, interrupt it, and run the same command again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_power.config import load_config
from grpo_power.control.contract import Action, Observation
from grpo_power.economics.records import run_record
from grpo_power.journal import (
    ParquetJournal,
    earlier_path,
    journal_path,
    read_journaled,
    seal_journal,
)
from grpo_power.redact import REDACTED, redact, redact_text
from grpo_power.telemetry.steplog import read_step_log, trim_step_log
from grpo_power.telemetry.store import read_trace
from grpo_power.workload.distributed import run_passing_stops
from grpo_power.workload.manifest import RunManifest
from grpo_power.workload.resume import (
    EXIT_INTERRUPTED,
    RunPaths,
    RunStopped,
    StopSignals,
    start_or_resume,
)
from grpo_power.workload.runner import RunResult, completed, run_grpo
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # real runs stopped, killed and resumed

SCHEMA = pa.schema([("t", pa.float64()), ("gpu", pa.int64())])
STEPS = 16
SECRET = "hf_" + "a1B2c3D4" * 4  # shaped like a Hugging Face token


def _rows(*t_s: float) -> list[dict[str, Any]]:
    return [{"t": t, "gpu": 0} for t in t_s]


def _t(path: Path) -> list[float]:
    return read_journaled(path)[0].column("t").to_pylist()


def test_attempts_append_and_a_repeated_merge_adds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    with ParquetJournal(path, SCHEMA, append_key="t") as first:  # stopped: rows kept aside
        first.write(_rows(0.0, 0.1))
        first.close(complete=False)
    assert not path.exists() and _t(path) == [0.0, 0.1]
    killed = ParquetJournal(path, SCHEMA, append_key="t")  # a second attempt, then SIGKILL
    killed.write(_rows(5.0, 5.1))
    killed._sink.close()
    assert _t(path) == [0.0, 0.1, 5.0, 5.1]  # readable before it is sealed
    assert seal_journal(path, key="t").rows_kept == 4
    assert seal_journal(path, key="t").rows_kept == 4  # repeated: the same rows, no more
    with ParquetJournal(path, SCHEMA, append_key="t") as last:
        last.write(_rows(5.1, 9.0))  # 5.1 is already there
    assert read_journaled(path)[1] and _t(path) == [0.0, 0.1, 5.0, 5.1, 9.0]
    assert not earlier_path(path).exists() and not journal_path(path).exists()


def test_a_kill_right_after_completing_loses_nothing_on_resume(tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    with ParquetJournal(path, SCHEMA, append_key="t") as first:
        first.write(_rows(0.0, 0.1))
    earlier_path(path).write_bytes(path.read_bytes())  # as if killed before its removal
    seal_journal(path, key="t")  # the run resumes: the whole file counts as earlier rows
    assert not path.exists() and _t(path) == [0.0, 0.1]


def test_a_journal_cut_before_its_header_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    journal_path(path).write_bytes(b"\xff\xff")
    assert seal_journal(path, key="t").rows_kept == 0
    assert not journal_path(path).exists() and not earlier_path(path).exists()


def test_trim_step_log_drops_steps_after_the_resume_point(tmp_path: Path) -> None:
    path = tmp_path / "steps.parquet"
    schema = pa.schema([("step", pa.int64())])
    pq.write_table(pa.table({"step": [1, 2, 3]}, schema=schema), earlier_path(path))
    journal = ParquetJournal(path, schema, append_key="step")
    journal.write([{"step": 4}, {"step": 5}])
    journal._sink.close()
    assert trim_step_log(path, last_step=4) == [5]
    assert read_journaled(path)[0].column("step").to_pylist() == [1, 2, 3, 4]
    assert trim_step_log(path, last_step=4) == []  # repeated: nothing changes


def test_a_folder_of_another_run_is_refused_and_a_completed_run_kept(tmp_path: Path) -> None:
    config = load_config(REPO / "config" / "config.yaml")
    paths = RunPaths(tmp_path)
    first = RunManifest.create(paths.manifest, config, "fixed", 0, {"steps_planned": 5})
    first.write()
    other = RunManifest.create(paths.manifest, config, "fixed", 1, {"steps_planned": 5})
    with pytest.raises(ValueError, match=r"holds another run \(seed \(was 0, now 1\)\).*--fresh"):
        start_or_resume(paths, other, fresh=False)
    assert start_or_resume(paths, other, fresh=True).manifest is other
    first.finish("completed")
    assert start_or_resume(paths, first, fresh=False).completed


def test_the_workflow_replaces_a_run_of_other_settings_and_resumes_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Snakemake's run rule could not pass --fresh: after a stopped run and a change of steps,
    every rerun was refused ("holds another run ... pass --fresh") until the folder was removed
    by hand. With ``replace_other`` (the rule's --replace-other) the other run is discarded
    with a note; the same run still resumes and a completed one is kept."""
    config = load_config(REPO / "config" / "config.yaml")
    paths = RunPaths(tmp_path)
    stopped = RunManifest.planned(paths.manifest, config, "fixed", 0, steps=250)
    stopped.write()
    (tmp_path / "resume.json").write_text("{}")
    asked = RunManifest.planned(paths.manifest, config, "fixed", 0, steps=15)
    start = start_or_resume(paths, asked, fresh=False, replace_other=True)
    assert start.manifest is asked and not start.completed and start.resume is None
    assert not (tmp_path / "resume.json").exists() and not paths.manifest.exists()
    assert capsys.readouterr().err == (
        f"note: {tmp_path}: held another run (steps_planned (was 250, now 15)); discarded it "
        "(--replace-other)\n"
    )
    asked.finish("completed")
    assert start_or_resume(paths, asked, fresh=False, replace_other=True).completed


def test_credentials_are_filtered_by_name_and_by_shape() -> None:
    data = {
        "HF_TOKEN": "anything",
        "max_new_tokens": 32,
        "authority": {"min": 0.1},
        "note": f"HUB_TOKEN={SECRET} and WANDB_API_KEY=abc123 then ghp_{'x' * 36}",
    }
    clean = redact(data)
    assert clean["HF_TOKEN"] == REDACTED and clean["max_new_tokens"] == 32
    assert clean["authority"] == {"min": 0.1}
    assert clean["note"] == f"HUB_TOKEN={REDACTED} and WANDB_API_KEY={REDACTED} then {REDACTED}"
    assert redact_text(f"Authorization: Bearer {SECRET[3:]}") == f"Authorization: {REDACTED}"


def _config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"results_dir: {tmp_path / 'results'}\nworkload:\n  checkpoint_every_steps: 2\n"
    )
    return path


@dataclass
class RunProcess:
    """A ``grpo-power run`` in a session of its own; its stderr goes to a file, since a pipe
    nobody reads blocks a run once full (a two-process run fills it fast)."""

    process: subprocess.Popen[bytes]
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_steps(self, out: Path, steps: int) -> None:
        """Until the run has logged ``steps`` steps and flushed some power samples."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and self.process.poll() is None:
            time.sleep(0.1)
            try:
                logged = len(read_step_log(out / "steps.parquet"))
                sampled = len(read_trace(out / "trace.parquet").frame)
            except (FileNotFoundError, ValueError):
                continue
            if logged >= steps and sampled > 0:
                return
        pytest.fail(f"the run never logged {steps} steps: {self.stderr()[-2000:]}")

    def finish(self, returncode: int = 0) -> str:
        """Wait for the run to end with ``returncode``; return its stderr."""
        assert self.process.wait(timeout=600) == returncode, self.stderr()[-3000:]
        return self.stderr()


def _start_run(
    tmp_path: Path, out: Path, config_file: Path | None = None, args: tuple[str, ...] = ()
) -> RunProcess:
    """``grpo-power run --arm threshold`` for :data:`STEPS` steps into ``out`` (``args``: the
    command's other arguments, or another command's whole when they start with one)."""
    env = {**os.environ, "HF_TOKEN": SECRET, "GRPO_SECRET_PASSWORD": "hunter2hunter2"}
    config_file = config_file or _config_file(tmp_path)
    command = [sys.executable, "-m", "grpo_power.cli"]
    if args and not args[0].startswith("-"):
        command += [*args, "--config", str(config_file)]
    else:
        command += ["run", "--arm", "threshold", "--steps", str(STEPS), "--out", str(out)]
        command += ["--config", str(config_file), *args]
    log = tmp_path / f"attempt-{len(list(tmp_path.glob('attempt-*.log'))) + 1}.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen(command, env=env, stderr=stderr, start_new_session=True)
    return RunProcess(process, log)


def _assert_resumed_whole(out: Path, kept_t_s: np.ndarray) -> dict[str, Any]:
    """Every step once, every sample of the earlier attempt kept, no overlap; the manifest."""
    steps = read_step_log(out / "steps.parquet")
    assert steps["step"].tolist() == list(range(1, STEPS + 1))
    assert np.all(np.diff(steps["start_s"].to_numpy()) > 0)
    trace = read_trace(out / "trace.parquet")
    assert trace.complete
    t_s = trace.frame["t"].to_numpy()
    assert np.all(np.diff(t_s) > 0)  # one GPU: strictly increasing, so no sample twice
    assert np.isin(kept_t_s, t_s).all()  # nothing written before the interruption is lost
    assert np.all(np.diff(trace.frame["energy_j"].to_numpy()) >= 0)  # one counter, run-long
    manifest = json.loads((out / "manifest.json").read_text())
    first, second = manifest["attempts"]
    assert first["t_end_s"] <= second["t_start_s"]
    assert t_s[t_s > first["t_end_s"]].min() >= second["t_start_s"]  # attempts never overlap
    assert manifest["status"] == "completed" and manifest["steps_completed"] == STEPS
    assert manifest["completion_tokens"] == int(steps["completion_tokens"].sum())
    assert not (out / "trainer").exists() and not (out / "resume.json").exists()
    for name in ("trace.parquet", "steps.parquet", "manifest.json"):  # kept as hard links
        assert (out / ".completed" / name).stat().st_ino == (out / name).stat().st_ino
    everything = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert SECRET.encode() not in everything and b"hunter2hunter2" not in everything
    return manifest


def test_sigterm_stops_after_a_checkpoint_and_the_same_command_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run = _start_run(tmp_path, out)
    run.wait_for_steps(out, 3)
    run.process.send_signal(signal.SIGTERM)
    stderr = run.finish(EXIT_INTERRUPTED)
    assert "stopped by SIGTERM after step" in stderr and "run the same command" in stderr
    assert not (out / "manifest.json").exists() and not (out / "trace.parquet").exists()
    stopped = json.loads((out / "manifest.json.partial").read_text())
    stopped_at = stopped["steps_completed"]
    assert stopped["status"] == "interrupted" and stopped["stop_signal"] == "SIGTERM"
    assert json.loads((out / "resume.json").read_text())["step"] == stopped_at
    kept_t_s = read_trace(out / "trace.parquet").frame["t"].to_numpy()
    _start_run(tmp_path, out).finish()
    manifest = _assert_resumed_whole(out, kept_t_s)
    assert [a["status"] for a in manifest["attempts"]] == ["interrupted", "completed"]
    assert manifest["attempts"][1]["resumed_from_step"] == stopped_at
    assert manifest["attempts"][1]["steps_redone"] == []


def test_sigterm_to_a_run_of_several_seeds_stops_the_seed_running(tmp_path: Path) -> None:
    """``kill`` of a run of two seeds: the seed running checkpoints and stops, the command
    exits 75, and the next seed never starts (the signal killed the command with 143 and left
    the seed's run going, orphaned, so that the same command was refused as another attempt
    writing it)."""
    out = tmp_path / "seed{seed}"
    run = _start_run(tmp_path, out, args=("--seed", "1", "--seed", "2"))
    run.wait_for_steps(tmp_path / "seed1", 2)
    run.process.send_signal(signal.SIGTERM)  # this process only, as `kill PID` does
    stderr = run.finish(EXIT_INTERRUPTED)
    assert "stopped by SIGTERM after step" in stderr
    stopped = json.loads((tmp_path / "seed1" / "manifest.json.partial").read_text())
    assert stopped["status"] == "interrupted" and stopped["stop_signal"] == "SIGTERM"
    assert not (tmp_path / "seed2").exists()


def test_ctrl_c_records_the_attempt_as_interrupted(tmp_path: Path) -> None:
    """Ctrl-C stops a run with no checkpoint (130): its attempt is recorded as interrupted by
    SIGINT with the steps it had logged, not as failed with "KeyboardInterrupt"."""
    out = tmp_path / "run"
    run = _start_run(tmp_path, out)
    run.wait_for_steps(out, 2)
    run.process.send_signal(signal.SIGINT)
    run.finish(130)
    stopped = json.loads((out / "manifest.json.partial").read_text())
    attempt = stopped["attempts"][-1]
    assert (stopped["status"], attempt["status"]) == ("interrupted", "interrupted")
    assert attempt["stop_signal"] == "SIGINT" and "error" not in attempt
    assert attempt["steps_done"] == len(read_step_log(out / "steps.parquet")) >= 2


def test_sigterm_stops_a_calibration_before_it_reads_the_unfinished_candidate(
    tmp_path: Path,
) -> None:
    """The fixed-safe calibration stopped by SIGTERM in its first candidate: the command exits
    75 and saves no setting (it exited 0 with fixed_safe.json chosen from the stopped
    candidate's few samples, which every later run then reused)."""
    config_file = _config_file(tmp_path)
    # a cap no candidate stays under: the calibration has more runs after the first, so the
    # signal lands in the command's work (at 330 W the first candidate could be chosen and the
    # command exit before the signal came, killed by it at exit: -15 in a CI run)
    config_file.write_text(config_file.read_text() + "cap_w: 250\n")
    first = tmp_path / "results" / "calibration" / "tiny" / "concurrency-32"
    run = _start_run(tmp_path, first, config_file, args=("calibrate",))
    run.wait_for_steps(first, 2)
    run.process.send_signal(signal.SIGTERM)
    stderr = run.finish(EXIT_INTERRUPTED)
    # in the first candidate, or as it completed, or before the next one started
    assert re.search(r"fixed-safe calibration of tiny, concurrency \d+: stopped by SIGTERM", stderr)
    assert not (first.parent / "fixed_safe.json").exists()


def test_a_stop_signal_as_a_run_completes_stops_the_command_before_its_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM in a calibration's or a sweep's run that came during its last step was taken by
    the run, which completed, and the command went on to its next run as if none had come (a
    calibration exited 0 after a scancel, one CI run in several); one between two runs, or to
    `run` of several seeds while a seed completed, was not seen either. Each now stops the
    command before the next run, naming the signal and what the same command does."""
    done = RunResult(RunPaths(tmp_path / "run"), "completed", 4, 100, 1.0, "SIGTERM")
    with pytest.raises(RunStopped, match=r"run A: stopped by SIGTERM as it completed its last"):
        completed(done, "run A")
    assert completed(dataclasses.replace(done, stopped_by=None), "run A") is not None
    with StopSignals() as stop:
        stop.check("run B")  # nothing came
        os.kill(os.getpid(), signal.SIGUSR1)
        with pytest.raises(RunStopped, match="run B: stopped by SIGUSR1 before it started"):
            stop.check("run B")
        with StopSignals() as run:  # a run entered after the signal (its model was loading)
            assert run.received == "SIGUSR1"  # stops after its first step
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    ignores = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3)"
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    child = run_passing_stops([sys.executable, "-c", ignores])
    assert (child.returncode, child.stopped_by) == (0, "SIGTERM")


def test_sigkill_keeps_what_was_written_and_resumes_from_the_last_checkpoint(
    tmp_path: Path,
) -> None:

    out = tmp_path / "run"
    run = _start_run(tmp_path, out)
    run.wait_for_steps(out, 5)
    os.killpg(run.process.pid, signal.SIGKILL)
    run.process.wait()
    steps_at_kill = read_step_log(out / "steps.parquet")["step"].tolist()
    trace = read_trace(out / "trace.parquet")
    assert not trace.complete and len(trace.frame) > 0
    checkpoint_step = json.loads((out / "resume.json").read_text())["step"]
    assert 2 <= checkpoint_step <= steps_at_kill[-1]
    _start_run(tmp_path, out).finish()
    manifest = _assert_resumed_whole(out, trace.frame["t"].to_numpy())
    killed, completed = manifest["attempts"]
    assert killed["status"] == "killed" and completed["status"] == "completed"
    assert completed["resumed_from_step"] == checkpoint_step
    assert completed["steps_redone"] == [s for s in steps_at_kill if s > checkpoint_step]


class FailingController:
    """Holds concurrency 8, then raises at its ``fail_at``-th decision (a crashed run)."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at, self.decisions = fail_at, 0

    def decide(self, observation: Observation) -> Action:
        self.decisions += 1
        if self.decisions == self.fail_at:
            raise RuntimeError("controller crashed")
        return Action(concurrency=8, max_new_tokens=16)


def test_a_crashed_run_closes_its_files_and_resumes(tmp_path: Path) -> None:
    config = load_config(_config_file(tmp_path))
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="controller crashed"):
        run_grpo(config, "fixed", 0, out, FailingController(5), steps=6, show_progress=False)
    trace = read_trace(out / "trace.parquet")  # closed properly: rows of the failed attempt
    assert not trace.complete and len(trace.frame) > 0
    assert not journal_path(out / "trace.parquet").exists()
    failed = json.loads((out / "manifest.json.partial").read_text())
    assert failed["status"] == "failed" and "controller crashed" in failed["error"]
    time.sleep(3.0)  # the time before it is run again is no time it ran
    result = run_grpo(config, "fixed", 0, out, FailingController(0), steps=6, show_progress=False)
    assert result.status == "completed" and result.steps == 6
    manifest = json.loads((out / "manifest.json").read_text())
    assert [a["status"] for a in manifest["attempts"]] == ["failed", "completed"]
    # the failed attempt's time is recorded (a Ctrl-C'd or crashed attempt had none: the run's
    # time and its economics counted the pause before the next attempt as time it ran)
    ran_s = sum(a["wall_s"] for a in manifest["attempts"])
    assert manifest["wall_s"] == pytest.approx(ran_s, abs=0.5)
    assert run_record(out)["wall_s"] == pytest.approx(ran_s, abs=1.0)
    assert manifest["attempts"][1]["resumed_from_step"] == 4  # checkpointed every 2 steps
    assert read_step_log(out / "steps.parquet")["step"].tolist() == list(range(1, 7))


@pytest.mark.slow
def test_a_two_process_zero3_run_stops_on_sigterm_and_resumes(tmp_path: Path) -> None:
    """SIGTERM to the relaunching process reaches both ZeRO-3 ranks through accelerate's
    launcher; they stop after a step with a checkpoint and the same command resumes."""
    config_file = _config_file(tmp_path)
    sizes = "run_sizes:\n  - {size: tiny, processes: 2, zero_stage: 3}\n"
    config_file.write_text(config_file.read_text() + sizes)
    out = tmp_path / "run"
    run = _start_run(tmp_path, out, config_file)
    run.wait_for_steps(out, 3)
    run.process.send_signal(signal.SIGTERM)  # this process only: it passes the signal on
    run.finish(EXIT_INTERRUPTED)
    kept_t_s = read_trace(out / "trace.parquet").frame["t"].to_numpy()
    _start_run(tmp_path, out, config_file).finish()
    manifest = _assert_resumed_whole(out, kept_t_s)
    assert [a["status"] for a in manifest["attempts"]] == ["interrupted", "completed"]
