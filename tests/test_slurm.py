"""The launcher and the workflow against a real single-node Slurm (started by `make test` as
root: scripts/slurm/start.sh). Without it these tests skip with the reason; under CI=true a
skip is a failure."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from grpo_power.config import Config, deep_merge, validate_config
from grpo_power.launch.batch import (
    RunsInterrupted,
    run_spec,
    start_batch,
    submit_batch,
    wait_batch,
)
from grpo_power.launch.submit import JobFailed, SubmitRefused
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import read_trace
from tests.conftest import REPO, checkout_copy, user_env

pytestmark = pytest.mark.slow  # the test Slurm, real GPU-job arrays

ACCOUNT, PARTITION = "grpo", "debug"  # made by scripts/slurm/start.sh


def _slurm_config(tmp_path: Path, **overrides: object) -> tuple[Config, Path]:
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    data = deep_merge(
        base,
        {
            "results_dir": str(tmp_path / "results"),
            "launch": {
                "launcher": "submitit",
                "cluster": "slurm",
                "slurm_partition": PARTITION,
                "slurm_account": ACCOUNT,
                "job": {"cpus_per_task": 1, "mem_gb": 3, "timeout_min": 15},
                "poll_s": 1,
            },
            **overrides,
        },
    )
    config_file = tmp_path / "slurm.yaml"
    config_file.write_text(yaml.safe_dump(data))
    return validate_config(data), config_file


def _sacct(job_name_prefix: str) -> list[list[str]]:
    out = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-o", "JobID,JobName,State,AllocTRES"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [
        row.split("|") for row in out.splitlines() if row.split("|")[1].startswith(job_name_prefix)
    ]


def test_submitit_job_with_a_fake_gpu_runs_a_tiny_grpo_run(slurm: None, tmp_path: Path) -> None:
    config, config_file = _slurm_config(tmp_path)
    out = tmp_path / "run"
    log: list[str] = []
    spec = run_spec(config, config_file, "fixed", 0, out, steps=3)
    [manifest] = submit_batch(config, [spec], out / "submitit", "grpo-power-tiny-fixed", log.append)
    assert manifest["status"] == "completed" and manifest["steps_completed"] == 3
    job_id = json.loads((out / "job.json").read_text())["job_id"]  # the folder records its job
    assert f"tiny/fixed/seed0: job {job_id}" in log
    assert any(line.startswith(f"tiny/fixed/seed0: job {job_id}: ") for line in log)  # states
    for _ in range(60):  # the result is back before Slurm records the job's end
        rows = {row[0]: row for row in _sacct("grpo-power")}
        if rows[job_id][2] != "RUNNING":
            break
        time.sleep(0.5)
    assert rows[job_id][2] == "COMPLETED"
    assert "gres/gpu=1" in rows[job_id][3]  # the job held the (fake) GPU
    assert (out / "submitit").is_dir()  # submitit's folder lives in the run folder
    trace = read_trace(out / "trace.parquet")
    assert trace.frame["gpu"].unique().tolist() == [0]  # Slurm's CUDA_VISIBLE_DEVICES


def test_a_failing_job_is_a_clear_failure_with_its_stderr(slurm: None, tmp_path: Path) -> None:
    config, config_file = _slurm_config(tmp_path)
    spec = run_spec(config, config_file, "hwcap", 0, tmp_path / "bad", steps=2)
    with pytest.raises(JobFailed) as error:  # hwcap needs NVML: the job fails on the node
        submit_batch(config, [spec], tmp_path / "jobs", "grpo-power-test", lambda _: None)
    message = str(error.value)
    assert "failed" in message and "tail of the job's stderr" in message
    # the first line says why, in the run's own words, and the state sacct has now (it said
    # "failed (RUNNING): Job (task=0) failed during processing with trace:")
    first = message.splitlines()[0]
    assert "failed (FAILED): " in first, first
    assert "arm 'hwcap' sets the GPU power limit through NVML" in first, first


def _wait_for_steps(
    run: Path,
    steps: int,
    why: Callable[[], str],
    still_going: Callable[[], bool] = lambda: True,
    timeout_s: float = 300,
) -> int:
    """Wait until the run folder's step log holds ``steps`` steps; return how many it holds.
    Fail the test with ``why()`` if it does not within ``timeout_s`` or ``still_going()`` turns
    false first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and still_going():
        try:
            logged = len(read_step_log(run / "steps.parquet"))
            if logged >= steps:
                return logged
        except (FileNotFoundError, ValueError):
            pass  # not written yet, or being replaced
        time.sleep(0.2)
    pytest.fail(f"{run} never logged {steps} steps ({why()})")


def test_ctrl_c_during_the_state_query_cancels_the_jobs(
    slurm: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C that arrived while the batch's ``sacct`` ran was taken by submitit for a failed
    call ("Bypassing sacct error"): the batch waited on and the jobs ran to the end (seen on CI
    as COMPLETED jobs after Ctrl-C). It must cancel them as at any other moment."""
    config, config_file = _slurm_config(tmp_path)
    out = tmp_path / "run"
    specs = [run_spec(config, config_file, "fixed", 0, out, steps=200)]
    (job,) = start_batch(config, specs, out / "submitit", "grpo-power-tiny-fixed").values()
    _wait_for_steps(out, 2, lambda: f"job {job.job_id}: {job.stderr()}")  # the run has begun
    check_output = subprocess.check_output
    sent: list[list[str]] = []

    def ctrl_c_inside_sacct(command: list[str], **kwargs: object) -> bytes:
        if command[0] == "sacct" and not sent:
            sent.append(command)
            os.kill(os.getpid(), signal.SIGINT)  # handled here, inside submitit's try
        return check_output(command, **kwargs)

    monkeypatch.setattr(subprocess, "check_output", ctrl_c_inside_sacct)
    with pytest.raises(RunsInterrupted, match=r"^SIGINT: cancelled job\(s\) "):
        wait_batch(config, specs, {0: job}, lambda _: None)
    assert sent  # the signal came during submitit's own sacct call
    monkeypatch.undo()
    state = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", job.job_id, "-o", "State"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert state.startswith("CANCELLED"), state
    assert len(read_step_log(out / "steps.parquet")) < 200


FAULT_STEPS = 16  # a tiny run of ~20 s of steps, checkpointed every 2


def _run_with_fault(
    tmp_path: Path, inject: Callable[[str], None], timeout_min: int
) -> tuple[dict, Path]:
    """Submit a tiny run, inject a fault once 3 steps are logged, wait for it to complete."""
    config, config_file = _slurm_config(
        tmp_path,
        workload={"checkpoint_every_steps": 2},
        launch={"job": {"cpus_per_task": 1, "mem_gb": 3, "timeout_min": timeout_min}},
    )
    out = tmp_path / "run"
    specs = [run_spec(config, config_file, "threshold", 0, out, steps=FAULT_STEPS)]
    handles = start_batch(config, specs, out / "submitit", "grpo-power-tiny-threshold", print)
    job = handles[0]
    _wait_for_steps(out, 3, lambda: f"job {job.job_id}: {job.stderr()}")
    inject(job.job_id)
    return wait_batch(config, specs, handles, lambda _: None)[0], out


def _assert_resumed_once(manifest: dict, out: Path) -> list[dict]:
    """The run completed over two or more attempts: every step once, no sample twice."""
    assert manifest["status"] == "completed" and manifest["steps_completed"] == FAULT_STEPS
    steps = read_step_log(out / "steps.parquet")
    assert steps["step"].tolist() == list(range(1, FAULT_STEPS + 1))
    t_s = read_trace(out / "trace.parquet").frame["t"].to_numpy()
    assert (t_s[1:] > t_s[:-1]).all()  # one GPU: strictly increasing, no overlap
    attempts = manifest["attempts"]
    assert len(attempts) >= 2 and attempts[-1]["status"] == "completed"
    for before, after in itertools.pairwise(attempts):
        assert before["t_end_s"] <= after["t_start_s"]
    restarts = [a["environment"].get("SLURM_RESTART_COUNT", "0") for a in attempts]
    assert restarts[-1] != "0"  # the last attempt ran in the requeued job
    assert len({a["environment"]["SLURM_JOB_ID"] for a in attempts}) == 1
    return attempts


def _submitit_log(out: Path) -> str:
    return "".join(p.read_text() for p in (out / "submitit").glob("*_log.*"))


def test_usr2_checkpoints_requeues_and_resumes(slurm: None, tmp_path: Path) -> None:
    """The timeout path: with a 10 min limit submitit counts every USR2 as a timeout."""

    def usr2(job_id: str) -> None:
        subprocess.run(["scancel", "--signal=USR2", job_id], check=True)

    manifest, out = _run_with_fault(tmp_path, usr2, timeout_min=10)
    attempts = _assert_resumed_once(manifest, out)
    assert attempts[0]["status"] == "interrupted" and attempts[0]["stop_signal"] == "SIGUSR2"
    log = _submitit_log(out)
    assert "this job is timed-out" in log and "Calling checkpoint method" in log


def test_preemption_by_a_higher_priority_job_resumes(slurm: None, tmp_path: Path) -> None:
    holder: list[str] = []

    def preempt(job_id: str) -> None:
        command = ["sbatch", "--parsable", "-p", "high", "-A", ACCOUNT, "--exclusive"]
        submitted = subprocess.run(
            [*command, "-J", "grpo-preemptor", "-o", "/dev/null", "--wrap", "sleep 2"],
            capture_output=True,
            text=True,
            check=True,
        )
        holder.append(submitted.stdout.strip())

    manifest, out = _run_with_fault(tmp_path, preempt, timeout_min=15)
    attempts = _assert_resumed_once(manifest, out)
    assert attempts[0]["status"] == "interrupted" and attempts[0]["stop_signal"] == "SIGUSR2"
    assert "this job is preempted" in _submitit_log(out)
    states = {row[0]: row[2] for row in _sacct("grpo-preemptor")}
    assert states[holder[0]] == "COMPLETED"  # the high-priority job ran in between


def test_plain_requeue_resumes_from_the_runs_own_checkpoint(slurm: None, tmp_path: Path) -> None:
    """``scontrol requeue`` sends SIGTERM and never calls submitit's checkpoint."""

    def requeue(job_id: str) -> None:
        subprocess.run(["scontrol", "requeue", job_id], check=True)

    manifest, out = _run_with_fault(tmp_path, requeue, timeout_min=15)
    attempts = _assert_resumed_once(manifest, out)
    assert attempts[0]["status"] in ("interrupted", "killed")
    assert attempts[1]["resumed_from_step"] >= 2
    assert "Calling checkpoint method" not in _submitit_log(out)


def _squeue_state(job_id: str) -> str:
    """A job's state as squeue has it now (empty once it has left the queue)."""
    command = ["squeue", "-h", "-j", job_id, "-o", "%T"]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.stdout.strip()


def test_a_suspended_job_is_waited_for_not_failed(slurm: None, tmp_path: Path) -> None:
    """A site that preempts by suspending: submitit's ``done()`` counts SUSPENDED as done, so
    the wait ended, ``result()`` failed ("job ... failed (SUSPENDED)") and the rule failed while
    the job lived on, holding its run folder. The batch now waits through the suspension and
    collects the run once it is resumed and completes."""
    import threading

    config, config_file = _slurm_config(tmp_path)
    out = tmp_path / "run"
    steps = FAULT_STEPS  # suspended as it starts (before its model is loaded)
    specs = [run_spec(config, config_file, "threshold", 0, out, steps=steps)]
    handles = start_batch(config, specs, out / "submitit", "grpo-power-tiny-threshold", print)
    job = handles[0]
    seen: list[str] = []

    def suspend_then_resume() -> None:
        deadline = time.monotonic() + 300
        while _squeue_state(job.job_id) != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.2)
        subprocess.run(["scontrol", "suspend", job.job_id], check=True)
        try:
            while job.state != "SUSPENDED" and time.monotonic() < deadline:
                time.sleep(0.5)  # until the batch's own (submitit's) view says so
            seen.append(job.state)
            time.sleep(3.0)  # the batch polls it suspended (every launch.poll_s, 1 s)
        finally:
            subprocess.run(["scontrol", "resume", job.job_id], check=True)

    thread = threading.Thread(target=suspend_then_resume)
    thread.start()
    lines: list[str] = []
    try:
        (manifest,) = wait_batch(config, specs, handles, lines.append)
    finally:
        thread.join()
    assert seen == ["SUSPENDED"]
    assert any(line.endswith(": SUSPENDED") for line in lines), lines
    assert manifest["status"] == "completed" and manifest["steps_completed"] == steps


def test_a_live_job_running_other_settings_is_refused_not_reattached(
    slurm: None, tmp_path: Path
) -> None:
    """A job kept running (``launch.on_interrupt: keep``) with 250 steps was reattached to by
    a restart asking for 15, and its 250-step run reported as the 15-step study's. A live job
    whose command or settings differ is now refused, naming it and what differs."""
    config, config_file = _slurm_config(tmp_path)
    out = tmp_path / "run"
    specs = [run_spec(config, config_file, "threshold", 0, out, steps=FAULT_STEPS)]
    (job,) = start_batch(config, specs, out / "submitit", "grpo-power-tiny-threshold").values()
    try:
        deadline = time.monotonic() + 120
        while _squeue_state(job.job_id) != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.2)  # sacct knows it (a job submitted this second is UNKNOWN to it)
        asked = [run_spec(config, config_file, "threshold", 0, out, steps=FAULT_STEPS + 1)]
        with pytest.raises(JobFailed) as error:
            start_batch(config, asked, out / "submitit", "grpo-power-tiny-threshold")
        message = str(error.value)
        assert f"job {job.job_id} (" in message and f"still runs {out} with" in message
        assert f"--steps {FAULT_STEPS} (now {FAULT_STEPS + 1})" in message
        assert f"scancel {job.job_id}" in message
    finally:
        job.cancel(check=False)


def test_a_job_the_accounting_does_not_know_yet_is_reattached_not_submitted_again(
    slurm: None, tmp_path: Path
) -> None:
    """sacct knows a job only once slurmdbd has recorded it (seconds after its submission, or
    later while the accounting is down), and submitit reads such a job as UNKNOWN: a restart then
    took its run folder for free, the calibration and sweep cleared it, and a second job was
    submitted for the same folder. The controller's queue (squeue) has the job from its
    submission on; with the accounting stopped the restart now reattaches to it."""
    from grpo_power.launch.batch import live_job

    config, config_file = _slurm_config(tmp_path)
    out = tmp_path / "run"
    specs = [run_spec(config, config_file, "threshold", 0, out, steps=FAULT_STEPS)]
    pid = Path("/var/lib/grpo-power-slurm/slurmdbd.pid")
    os.kill(int(pid.read_text()), signal.SIGTERM)  # the accounting down: sacct cannot answer
    job = None
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["sacct", "-n", "-X"], capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, "slurmdbd did not stop"
            time.sleep(0.5)
        (job,) = start_batch(config, specs, out / "submitit", "grpo-power-tiny-threshold").values()
        assert job.state == "UNKNOWN"  # submitit's view: sacct has no such job
        found = live_job(out)
        assert found is not None and found.job_id == job.job_id
        again = start_batch(config, specs, out / "submitit", "grpo-power-tiny-threshold")
        assert again[0].job_id == job.job_id  # reattached: no second job for the folder
    finally:
        if job is not None:
            job.cancel(check=False)
        subprocess.run(["slurmdbd"], check=True)
        deadline = time.monotonic() + 30
        while subprocess.run(["sacct", "-n", "-X"], capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, "slurmdbd did not come back"
            time.sleep(0.5)


def test_a_rejected_submission_names_what_was_asked_and_where(slurm: None, tmp_path: Path) -> None:
    """sbatch's "Memory specification can not be satisfied" (or "Requested node configuration
    is not available" for GPUs the cluster lacks) was passed on alone, naming no setting."""
    config, config_file = _slurm_config(tmp_path)
    config.launch.job.mem_gb = 5000
    spec = run_spec(config, config_file, "fixed", 0, tmp_path / "run", steps=2)
    with pytest.raises(SubmitRefused) as error:  # a config error (exit 2), not a failed job (3)
        start_batch(config, [spec], tmp_path / "jobs", "grpo-power-test", lambda _: None)
    message = str(error.value)
    assert message.startswith("could not submit 1 run(s): ") and "\n" not in message
    assert f"asked for 1 GPU(s), 1 CPUs, 5000 GB, 15 min on partition {PARTITION}" in message
    assert "(launch.job, run_sizes[tiny].job and launch.slurm_partition" in message


# The README's commands for a longer run of one arm on the test cluster, with Ctrl-C's two modes.
LONG_RUN = (
    "snakemake results/runs/tiny/uncontrolled/seed0/trace.parquet --profile profiles/slurm "
    "--configfile config/slurm-test.yaml --config workload='{steps: 60}'"
)
LONG_RUN_KEEP = f"{LONG_RUN} launch='{{on_interrupt: keep}}'"
LONG_STEPS = 60


def _start_snakemake(command: str, checkout: Path, log: Path) -> subprocess.Popen[bytes]:
    """The command typed in a terminal: its own process group, as a shell's foreground job."""
    with log.open("ab") as out:
        return subprocess.Popen(
            command, shell=True, cwd=checkout, env=user_env(), stdout=out, stderr=out,
            start_new_session=True,
        )  # fmt: skip


def _ctrl_c_after_steps(process: subprocess.Popen[bytes], run: Path, steps: int) -> int:
    """Ctrl-C (SIGINT to the whole process group) once the run has logged ``steps`` steps;
    return the steps logged when it was sent."""
    logged = _wait_for_steps(
        run, steps, lambda: f"snakemake exit {process.poll()}", lambda: process.poll() is None
    )
    os.killpg(process.pid, signal.SIGINT)
    process.wait(timeout=200)
    return logged


def _assert_whole_run(run: Path, samples_before: int) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    steps = read_step_log(run / "steps.parquet")
    assert steps["step"].tolist() == list(range(1, LONG_STEPS + 1))  # every step once
    t_s = read_trace(run / "trace.parquet").frame["t"].to_numpy()
    assert (t_s[1:] > t_s[:-1]).all()  # no sample twice
    assert len(t_s) >= samples_before  # no sample lost


def _samples_so_far(run: Path) -> int:
    return len(read_trace(run / "trace.parquet").frame)


def _jobs_named(name: str, since: str) -> dict[str, str]:
    out = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-S", since, "--name", name, "-o", "JobID,State"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return dict(line.split("|") for line in out.splitlines() if line)


@dataclass(frozen=True)
class Interrupted:
    """A README command typed in a fresh checkout and stopped by Ctrl-C after 3 steps."""

    checkout: Path
    run: Path  # seed 0's run folder
    since: str  # for sacct: jobs submitted from then on
    log: Path  # both Snakemake processes' output
    jobs: dict[str, str]  # the arm's GPU jobs (array tasks) and their states after Ctrl-C
    steps_at_ctrl_c: int  # seed 0's steps logged when Ctrl-C was sent

    def restart(self, command: str) -> None:
        """The same command typed again; it must complete."""
        again = _start_snakemake(command, self.checkout, self.log)
        assert again.wait(timeout=600) == 0, self.log.read_text()[-4000:]


def _interrupt(command: str, tmp_path: Path) -> Interrupted:
    checkout = checkout_copy(tmp_path / "checkout")
    run = checkout / "results" / "runs" / "tiny" / "uncontrolled" / "seed0"
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    log = tmp_path / "snakemake.log"
    steps = _ctrl_c_after_steps(_start_snakemake(command, checkout, log), run, 3)
    jobs = _jobs_named("grpo-power-tiny-uncontrolled", since)
    return Interrupted(checkout, run, since, log, jobs, steps)


@pytest.mark.slow
def test_ctrl_c_cancels_the_jobs_and_the_same_command_resumes(slurm: None, tmp_path: Path) -> None:
    stopped = _interrupt(LONG_RUN, tmp_path)
    run, jobs = stopped.run, stopped.jobs
    assert jobs and all(state.startswith("CANCELLED") for state in jobs.values()), jobs
    assert (run / "resume.json").exists()  # the cancelled run saved its checkpoint
    before = _samples_so_far(run)
    steps_before = len(read_step_log(run / "steps.parquet"))
    assert 3 <= steps_before < LONG_STEPS
    stopped.restart(LONG_RUN)
    _assert_whole_run(run, before)
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["attempts"]) == 2 and manifest["attempts"][0]["status"] == "interrupted"
    after = _jobs_named("grpo-power-tiny-uncontrolled", stopped.since)
    print(
        f"cancel: jobs {jobs}, then {after}; {steps_before} steps and {before} samples "
        f"before Ctrl-C, {LONG_STEPS} steps and {_samples_so_far(run)} samples at the end"
    )


@pytest.mark.slow
def test_ctrl_c_with_keep_leaves_the_jobs_and_a_restart_reattaches(
    slurm: None, tmp_path: Path
) -> None:

    stopped = _interrupt(LONG_RUN_KEEP, tmp_path)
    run, jobs = stopped.run, stopped.jobs
    assert stopped.steps_at_ctrl_c < LONG_STEPS  # Ctrl-C came while the run had steps to go
    rule_log = stopped.checkout / "results/logs/runs/tiny/uncontrolled.log"
    assert "running (launch.on_interrupt: keep)" in rule_log.read_text()
    # left to go on: running, or (on a loaded machine, before sacct answers) already completed
    assert jobs and set(jobs.values()) <= {"RUNNING", "COMPLETED"}, jobs
    stopped.restart(LONG_RUN_KEEP)
    restarted = rule_log.read_text()
    assert "reattached to job" in restarted or "already completed" in restarted, restarted
    after = _jobs_named("grpo-power-tiny-uncontrolled", stopped.since)
    assert after.keys() == jobs.keys()  # no second job: one job per run, both seeds
    assert all(state == "COMPLETED" for state in after.values()), after
    _assert_whole_run(run, 0)
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["attempts"]) == 1  # the one job ran the run from start to end
    how = "reattached" if "reattached to job" in restarted else "found it completed"
    print(f"keep: jobs {after}; the restart {how}; {_samples_so_far(run)} samples, one attempt")


@pytest.mark.slow
def test_runs_kept_by_ctrl_c_that_complete_before_the_restart_are_not_measured_again(
    slurm: None, tmp_path: Path
) -> None:
    """The restarted Snakemake reruns the job it was waiting for and removes its outputs first;
    the rule puts the completed runs back instead of submitting them again."""
    stopped = _interrupt(LONG_RUN_KEEP, tmp_path)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        done = _jobs_named("grpo-power-tiny-uncontrolled", stopped.since)
        if all(state == "COMPLETED" for state in done.values()):
            break
        time.sleep(1)
    assert done.keys() == stopped.jobs.keys() and set(done.values()) == {"COMPLETED"}, done
    trace_inode = (stopped.run / "trace.parquet").stat().st_ino
    stopped.restart(LONG_RUN_KEEP)
    rule_log = (stopped.checkout / "results/logs/runs/tiny/uncontrolled.log").read_text()
    assert rule_log.count("are back from") == 2, rule_log  # both seeds
    assert _jobs_named("grpo-power-tiny-uncontrolled", stopped.since) == done  # no new job
    _assert_whole_run(stopped.run, 0)
    assert (stopped.run / "trace.parquet").stat().st_ino == trace_inode  # the job's own file
    manifest = json.loads((stopped.run / "manifest.json").read_text())
    assert len(manifest["attempts"]) == 1


def test_a_second_attempt_at_a_live_run_folder_is_refused_naming_it(tmp_path: Path) -> None:
    """Two writers of one run folder: the second is refused with the first's host and pid."""
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump({"results_dir": str(tmp_path / "results")}))
    out = tmp_path / "run"
    command = [sys.executable, "-m", "grpo_power.cli", "run", "--arm", "fixed", "--steps", "200",
               "--out", str(out), "--config", str(config)]  # fmt: skip
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        lock = out / ".lock"
        while not (lock.exists() and lock.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        second = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert f"another attempt is writing this run (host {os.uname().nodename}" in second.stderr
        assert f"pid {first.pid}" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        first.terminate()
        first.wait(timeout=120)
    assert not (out / ".lock").exists()  # the first let go as it ended
