"""The launcher and the workflow against a real single-node Slurm (started by `make test` as
root: scripts/slurm/start.sh). Without it these tests skip with the reason; under CI=true a
skip is a failure."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from grpo_power.config import Config, deep_merge, validate_config
from grpo_power.launch.submit import JobFailed, start_run, submit_run, wait
from grpo_power.telemetry.store import read_trace
from grpo_power.workload.steplog import read_step_log
from tests.conftest import REPO, missing_requirement

ACCOUNT, PARTITION = "grpo", "debug"  # made by scripts/slurm/start.sh


def _slurm_problem() -> str | None:
    if shutil.which("sbatch") is None:
        return "no Slurm client (sbatch) on PATH"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    if "UP" not in ping.stdout:
        return "no running slurmctld (make test starts one when run as root)"
    if "# grpo-power test cluster" not in Path("/etc/slurm/slurm.conf").read_text():
        return "the running Slurm is not the test cluster of scripts/slurm/start.sh"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    problem = _slurm_problem()
    if problem:
        missing_requirement(f"the test Slurm: {problem}")


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
                "cpus_per_task": 2,
                "mem_gb": 4,
                "poll_s": 1,
                "timeout_min": 15,
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
    manifest = submit_run(config, config_file, "fixed", 0, out, log=log.append, steps=3)
    assert manifest["status"] == "completed" and manifest["steps_completed"] == 3
    job_id = log[0].split("job ")[1].split(" ")[0]
    assert any(line.startswith(f"job {job_id}: ") for line in log[1:])  # states were streamed
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
    with pytest.raises(JobFailed) as error:  # hwcap needs NVML: the job fails on the node
        submit_run(config, config_file, "hwcap", 0, tmp_path / "bad", log=lambda _: None, steps=2)
    message = str(error.value)
    assert "failed" in message and "tail of the job's stderr" in message
    assert "arm 'hwcap' sets the GPU power limit through NVML" in message


FAULT_STEPS = 16  # a tiny run of ~20 s of steps, checkpointed every 2


def _run_with_fault(
    tmp_path: Path, inject: Callable[[str], None], timeout_min: int
) -> tuple[dict, Path]:
    """Submit a tiny run, inject a fault once 3 steps are logged, wait for it to complete."""
    config, config_file = _slurm_config(
        tmp_path, workload={"checkpoint_every_steps": 2}, launch={"timeout_min": timeout_min}
    )
    out = tmp_path / "run"
    job = start_run(config, config_file, "threshold", 0, out, steps=FAULT_STEPS)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if len(read_step_log(out / "steps.parquet")) >= 3:
                break
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.2)
    else:
        pytest.fail(f"job {job.job_id} never logged 3 steps: {job.stderr()}")
    inject(job.job_id)
    return wait(job, poll_s=1, log=lambda _: None), out


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


@pytest.mark.slow
def test_snakemake_slurm_profile_runs_the_study_end_to_end(slurm: None, tmp_path: Path) -> None:
    config, config_file = _slurm_config(
        # 15-step runs (a few seconds) so every trace holds whole 0.5 s bins for the windows
        # stage even when start-up starves the sampler once; 6 steps (1.5 s) sometimes did not
        tmp_path,
        workload={"steps": 15},
        arms={"fixed_safe": {"calibration_steps": 4}},
    )
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    profile["default-resources"].update(
        slurm_partition=PARTITION, slurm_account=ACCOUNT, mem_mb=2000, cpus_per_task=1, runtime=15
    )
    for resources in profile["set-resources"].values():
        resources.update(mem_mb=2000, cpus_per_task=1)
    profile.update(
        {
            "slurm-init-seconds-before-status-checks": 2,
            "seconds-between-status-checks": 2,
            "jobs": 4,
        }
    )
    profile_dir = tmp_path / "profile"
    profile_dir.mkdir()
    (profile_dir / "config.yaml").write_text(yaml.safe_dump(profile))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    done = subprocess.run(
        [
            "snakemake",
            "--profile",
            str(profile_dir),
            "--configfile",
            str(config_file),
            "--directory",
            str(REPO),
            "--cores",
            "2",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = Path(config.results_dir)
    for arm in config.arms.run:
        assert (results / "runs" / "tiny" / arm / "seed0" / "manifest.json").exists()
    assert (results / "fleet" / "comparison.md").exists()
    assert (results / "report" / "index.html").exists()  # rule all builds the report
    names = {row[1] for row in _sacct("")}
    assert any(name.startswith("grpo-power-tiny") for name in names)  # submitit's GPU runs
    assert len(names - {n for n in names if n.startswith("grpo-power-tiny")}) >= 1  # plugin jobs
