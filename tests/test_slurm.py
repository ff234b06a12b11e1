"""The launcher and the workflow against a real single-node Slurm (started by `make test` as
root: scripts/slurm/start.sh). Without it these tests skip with the reason; under CI=true a
skip is a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from grpo_power.config import Config, deep_merge, validate_config
from grpo_power.launch.submit import JobFailed, submit_run
from grpo_power.telemetry.store import read_trace
from tests.conftest import REPO

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
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the test Slurm: {problem}")
        pytest.skip(problem)


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


@pytest.mark.slow
def test_snakemake_slurm_profile_runs_the_study_end_to_end(slurm: None, tmp_path: Path) -> None:
    config, config_file = _slurm_config(
        tmp_path, workload={"steps": 6}, arms={"fixed_safe": {"calibration_steps": 4}}
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
