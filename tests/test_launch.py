"""The cluster path without a cluster: job resources per run size as sbatch sees them, the
settings each measured rule's params hold, the content-named config, and the run-folder lock."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from grpo_power.config import Config, deep_merge, validate_config, write_resolved_config
from grpo_power.launch.submit import make_executor, run_command
from grpo_power.workflow_params import calibration_settings, real_sweep_settings, run_settings
from grpo_power.workload.lock import RunFolderBusy, RunLock, lock_holder
from tests.conftest import REPO


def _a100(**overrides: object) -> Config:
    data = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    data = deep_merge(data, yaml.safe_load((REPO / "config" / "a100-slurm.yaml").read_text()))
    return validate_config(deep_merge(data, overrides))


def _sbatch(config: Config, size: str, tmp_path: Path) -> str:
    """The sbatch script submitit would submit for a run of ``size``."""
    sized = config.model_copy(deep=True)
    sized.workload.size = size
    executor = make_executor(sized, tmp_path / size, f"grpo-power-{size}-fixed")
    return executor._executor._make_submission_file_text("python run.py", "uid")


def test_each_run_size_asks_for_its_own_resources(tmp_path: Path) -> None:
    config = _a100()
    small, large = _sbatch(config, "qwen2.5-7b", tmp_path), _sbatch(config, "qwen2.5-72b", tmp_path)
    assert "#SBATCH --cpus-per-task=8" in small and "#SBATCH --mem=120GB" in small
    assert "#SBATCH --gpus-per-node=1" in small and "#SBATCH --time=720" in small
    assert "#SBATCH --cpus-per-task=32" in large and "#SBATCH --mem=480GB" in large
    assert "#SBATCH --gpus-per-node=4" in large and "#SBATCH --time=1440" in large
    for script in (small, large):  # account and GPU partition from launch, written once
        assert "#SBATCH --account=your-account" in script
        assert "#SBATCH --partition=gpu" in script
        assert "#SBATCH --open-mode=append" in script


def test_gpu_type_qos_constraint_setup_and_sbatch_pass_through(tmp_path: Path) -> None:
    job = {
        "gpu_type": "a100",
        "qos": "high",
        "constraint": "a100-80gb",
        "setup": ["module load cuda/12.4"],
        "additional_parameters": {"reservation": "study"},
    }
    script = _sbatch(_a100(launch={"job": job}), "qwen2.5-14b", tmp_path)
    assert "#SBATCH --gres=gpu:a100:2" in script and "--gpus-per-node" not in script
    assert "#SBATCH --qos=high" in script and "#SBATCH --constraint=a100-80gb" in script
    assert "#SBATCH --reservation=study" in script
    assert script.index("module load cuda/12.4") < script.index("python run.py")
    assert "#SBATCH --mem=240GB" in script  # the size's own setting still holds


def test_a_run_size_override_beats_launch_job_and_null_inherits() -> None:
    config = _a100(launch={"job": {"mem_gb": 99, "qos": "low"}})
    resources = config.job_resources("qwen2.5-7b")
    assert resources.mem_gb == 120  # run_sizes[].job wins
    assert resources.qos == "low"  # inherited from launch.job
    assert resources.gpus == 1  # the size's processes
    assert config.job_resources("tiny").mem_gb == 99  # a size without an entry


def test_result_free_settings_never_change_a_runs_params() -> None:
    base = _a100()
    arms = ["uncontrolled", "fixed", "fixed-safe", "threshold", "ppo"]
    before = {arm: run_settings(base, arm) for arm in arms}
    changed = _a100(
        telemetry={"flush_s": 9.0},
        workload={"checkpoint_every_steps": 3, "cache_dir": "/elsewhere"},
        launch={"job": {"mem_gb": 1}, "poll_s": 1, "slurm_partition": "other"},
    )
    assert {arm: run_settings(changed, arm) for arm in arms} == before
    assert calibration_settings(changed) == calibration_settings(base)
    assert real_sweep_settings(changed) == real_sweep_settings(base)


def test_an_arm_setting_changes_only_that_arms_params() -> None:
    base = _a100()
    arms = ["uncontrolled", "fixed", "fixed-safe", "threshold", "ppo"]
    threshold = _a100(arms={"threshold": {"increase_step": 3}})
    assert [a for a in arms if run_settings(threshold, a) != run_settings(base, a)] == ["threshold"]
    cap = _a100(cap_w=300)  # the arms that act on the cap
    moved = [a for a in arms if run_settings(cap, a) != run_settings(base, a)]
    assert moved == ["fixed-safe", "threshold", "ppo"]
    steps = _a100(workload={"steps": 7})  # what every run measures
    assert all(run_settings(steps, a) != run_settings(base, a) for a in arms)


def test_resolved_config_is_named_by_its_content(tmp_path: Path) -> None:
    first = write_resolved_config(_a100(), tmp_path)
    mtime_ns = first.stat().st_mtime_ns
    assert write_resolved_config(_a100(), tmp_path) == first
    assert first.stat().st_mtime_ns == mtime_ns  # not rewritten
    other = write_resolved_config(_a100(cap_w=300), tmp_path)
    assert other != first and first.exists()  # another config never touches the first
    assert yaml.safe_load(other.read_text())["cap_w"] == 300


def test_the_run_lock_refuses_a_second_holder_and_names_the_first(tmp_path: Path) -> None:
    with RunLock(tmp_path):
        holder = lock_holder(tmp_path)
        assert holder is not None and holder["pid"] == os.getpid()
        with pytest.raises(RunFolderBusy, match=rf"another attempt .* pid {os.getpid()}"):
            RunLock(tmp_path).__enter__()
    assert lock_holder(tmp_path) is None
    assert not (tmp_path / ".lock").exists()  # the folder is left as the run left it
    (tmp_path / ".lock").write_text(json.dumps({"pid": 1}))  # left by a killed attempt
    with RunLock(tmp_path):  # nobody holds it: taken over
        assert lock_holder(tmp_path)["pid"] == os.getpid()


def test_a_resumed_run_may_change_resources_but_not_what_it_measures(tmp_path: Path) -> None:
    from grpo_power.workload.manifest import RunManifest

    def manifest(config: Config) -> RunManifest:
        return RunManifest.create(tmp_path / "manifest.json", config, "fixed", 0, {})

    base = manifest(_a100())
    more = _a100(launch={"job": {"mem_gb": 999}}, telemetry={"flush_s": 9.0})
    assert base.same_run(manifest(more)) is None
    other = base.same_run(manifest(_a100(workload={"train_micro_batch": 8})))
    assert other is not None and other.startswith("config.workload.train_micro_batch")


def test_fresh_on_a_cluster_is_refused_while_an_attempt_writes_the_run(tmp_path: Path) -> None:
    """``run --fresh --launcher submitit`` clears the folder only under its lock."""
    import subprocess
    import sys

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"results_dir": str(tmp_path / "results")}))
    out = tmp_path / "run"
    out.mkdir()
    (out / "steps.parquet.partial").write_bytes(b"rows a live attempt is writing")
    command = [sys.executable, "-m", "grpo_power.cli", "run", "--arm", "fixed", "--fresh",
               "--launcher", "submitit", "--out", str(out), "--config", str(config)]  # fmt: skip
    with RunLock(out):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert f"another attempt is writing this run (host {os.uname().nodename}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert (out / "steps.parquet.partial").exists()


def test_a_setup_line_that_fails_ends_the_job_naming_it(tmp_path: Path) -> None:
    """``module load`` of a missing module and ``source`` of a missing file printed their
    errors into the job's stderr, and the run went on without them. In the job script (the
    lines before its command, run by bash as sbatch does) a failing line now ends the job with
    a line naming it; the lines that work keep their effect (an exported variable)."""
    import subprocess

    setup = ["export GRPO_SETUP_TEST=kept", "source /nonexistent/bin/activate", "echo never"]
    script = _sbatch(_a100(launch={"job": {"setup": setup}}), "qwen2.5-14b", tmp_path)
    before_run = script[: script.index("python run.py")]
    lines = before_run[before_run.index("{ export") :]
    done = subprocess.run(
        ["bash", "-c", f"{lines}\necho reached $GRPO_SETUP_TEST"], capture_output=True, text=True
    )
    assert done.returncode == 1 and "reached" not in done.stdout and "never" not in done.stdout
    assert done.stderr.splitlines()[-1] == (
        "error: launch.job.setup: `source /nonexistent/bin/activate` failed (exit 1)"
    )
    ok = subprocess.run(
        ["bash", "-c", f"{lines.split('{ source')[0]}\necho reached $GRPO_SETUP_TEST"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and ok.stdout.strip() == "reached kept"


def test_a_job_runs_the_fixed_setting_its_run_was_planned_with(tmp_path: Path) -> None:
    """`grpo-power run --launcher submitit --train-micro-batch 1` recorded a chunk of 1 in its
    planned manifest while its job ran the config file's 4: the job's command, which passes the
    config file, carried concurrency and max new tokens but not the training chunk."""
    config = _a100(workload={"concurrency": 8, "max_new_tokens": 256, "train_micro_batch": 1})
    command = run_command(config, tmp_path / "config.yaml", "fixed", 0, tmp_path / "run")
    for option, value in (("--concurrency", 8), ("--max-new-tokens", 256)):
        assert command[command.index(option) + 1] == str(value)
    assert command[command.index("--train-micro-batch") + 1] == "1"
