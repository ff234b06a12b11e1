"""A batch of runs submitted with submitit's local executor (real jobs, each a tiny GRPO run in a
process of its own): a run a stopped workflow left to complete is put back, not measured again,
after Snakemake removed its files; once a batch has collected it, a removed run is measured anew.
The same code on the test Slurm: tests/test_slurm.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import submitit
import yaml

from grpo_power.config import Config, deep_merge, validate_config
from grpo_power.launch.batch import RunSpec, run_spec, start_batch, submit_batch, uncollected
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # two tiny GRPO runs

FILES = ("trace.parquet", "steps.parquet", "manifest.json")


def _local_batch(tmp_path: Path, steps: int) -> tuple[Config, list[RunSpec]]:
    data = deep_merge(
        yaml.safe_load((REPO / "config" / "config.yaml").read_text()),
        {
            "results_dir": str(tmp_path / "results"),
            "launch": {"launcher": "submitit", "cluster": "local", "poll_s": 1},
        },
    )
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(data))
    config = validate_config(data)
    return config, [run_spec(config, config_file, "fixed", 0, tmp_path / "run", steps)]


def _remove_outputs(run: Path) -> None:
    """What Snakemake does before it reruns a job: remove the rule's outputs."""
    for name in FILES:
        (run / name).unlink()


def test_a_run_completed_uncollected_is_put_back_and_a_collected_one_measured_anew(
    tmp_path: Path,
) -> None:
    config, specs = _local_batch(tmp_path, steps=3)
    run = specs[0].folder
    jobs = tmp_path / "jobs"
    (job,) = start_batch(config, specs, jobs, "grpo-power-test").values()
    assert isinstance(job, submitit.Job)  # submitted; no workflow waits for it (stopped)
    deadline = time.monotonic() + 300
    while not job.done() and time.monotonic() < deadline:
        time.sleep(1)
    assert job.state == "FINISHED", job.stderr()
    assert json.loads((run / "job.json").read_text())["collected"] is False
    assert uncollected(specs[0])  # a calibration or sweep restart keeps it too
    inodes = {name: (run / name).stat().st_ino for name in FILES}
    _remove_outputs(run)  # the restarted workflow reruns the job it was waiting for

    lines: list[str] = []
    (manifest,) = submit_batch(config, specs, jobs, "grpo-power-test", log=lines.append)
    assert manifest["status"] == "completed" and len(manifest["attempts"]) == 1
    assert {name: (run / name).stat().st_ino for name in FILES} == inodes  # the same files
    assert any("are back from" in line for line in lines), lines
    assert not any("submitted" in line for line in lines), lines
    assert json.loads((run / "job.json").read_text())["collected"] is True
    assert not uncollected(specs[0])

    _remove_outputs(run)  # snakemake --forcerun run: now a new measurement
    (job,) = start_batch(config, specs, jobs, "grpo-power-test", log=lines.append).values()
    assert isinstance(job, submitit.Job)
    job.cancel(check=False)


def test_an_earlier_runs_completed_copy_never_stands_in_for_a_cancelled_job(
    tmp_path: Path,
) -> None:
    """A Slurm user's restart: a seed had completed 15 steps; asked again for 120, its new job
    was cancelled while it still waited in the queue (Ctrl-C), and the restart put the 15-step
    run back from ``.completed`` as the 120-step run ("completed by job ... while no workflow
    waited"), which Snakemake then took as done."""
    config, specs = _local_batch(tmp_path, steps=3)
    jobs = tmp_path / "jobs"
    run = specs[0].folder
    submit_batch(config, specs, jobs, "grpo-power-test", log=lambda _: None)
    assert (run / ".completed" / "manifest.json").exists()  # the 3-step run's copy
    _remove_outputs(run)  # the run rule reruns: its steps changed
    longer = run_spec(config, specs[0].config_file, "fixed", 0, run, 4, replace_other=True)
    (job,) = start_batch(config, [longer], jobs, "grpo-power-test", log=lambda _: None).values()
    job.cancel(check=False)  # the workflow stopped while the job waited
    deadline = time.monotonic() + 60
    while not job.done() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not (run / ".completed").exists()  # the new job replaced the 3-step run's copy
    lines: list[str] = []
    (again,) = start_batch(config, [longer], jobs, "grpo-power-test", log=lines.append).values()
    assert isinstance(again, submitit.Job), lines  # measured, not the 3-step run put back
    assert not any("are back from" in line for line in lines), lines
    again.cancel(check=False)


def test_a_changed_config_is_measured_anew_even_uncollected(tmp_path: Path) -> None:
    config, specs = _local_batch(tmp_path, steps=3)
    run = specs[0].folder
    (job,) = start_batch(config, specs, tmp_path / "jobs", "grpo-power-test").values()
    job.result()
    _remove_outputs(run)
    changed = specs[0].config_file.read_text().replace("poll_s: 1", "poll_s: 2")
    specs[0].config_file.write_text(changed)
    (again,) = start_batch(config, specs, tmp_path / "jobs", "grpo-power-test").values()
    assert isinstance(again, submitit.Job) and again.job_id != job.job_id
    again.cancel(check=False)


def test_a_folder_holding_another_run_is_refused_or_replaced_before_any_job(
    tmp_path: Path,
) -> None:
    """A completed 3-step run asked for again with 4 steps was "already completed" (the 3-step
    manifest handed back as the 4-step run's). It is refused before anything is queued, as the
    run itself refuses it; with ``replace_other`` (the workflow's run rule) it is discarded
    with a note and the run submitted."""
    from grpo_power.launch.submit import JobFailed

    config, specs = _local_batch(tmp_path, steps=3)
    jobs = tmp_path / "jobs"
    (manifest,) = submit_batch(config, specs, jobs, "grpo-power-test", log=lambda _: None)
    assert manifest["steps_planned"] == 3
    other = run_spec(config, specs[0].config_file, "fixed", 0, specs[0].folder, 4)
    lines: list[str] = []
    with pytest.raises(JobFailed, match=r"holds another run \(steps_planned \(was 3, now 4\)\)"):
        start_batch(config, [other], jobs, "grpo-power-test", log=lines.append)
    assert lines == [] and (specs[0].folder / "manifest.json").exists()
    replacing = run_spec(
        config, specs[0].config_file, "fixed", 0, specs[0].folder, 4, replace_other=True
    )
    (job,) = start_batch(config, [replacing], jobs, "grpo-power-test", log=lines.append).values()
    assert isinstance(job, submitit.Job)
    job.cancel(check=False)
    assert "held another run (steps_planned (was 3, now 4)); discarded it" in lines[0]
    assert "--replace-other" in replacing.command


def test_a_job_timed_out_too_often_says_so_and_what_to_raise() -> None:
    """A run requeued after each time limit until submitit gave up failed with "job 1675_0
    failed (FAILED): - .../1675_0_0_log.out": the cause, "Job not requeued because: timed-out
    too many times.", was deep in submitit's traceback, with nothing naming timeout_min."""
    from submitit.core.utils import FailedJobError

    from grpo_power.launch.batch import _reason

    log = "/work/results/runs/tiny/fixed/submitit-fixed/1675_0_0_log.out"
    error = FailedJobError(
        "Job (task=0) failed during processing with trace:\n"
        "----------------------\n"
        "Traceback (most recent call last):\n"
        '  File ".../submitit/core/job_environment.py", line 226, in checkpoint_and_try_requeue\n'
        "    raise utils.UncompletedJobError(message)\n"
        "submitit.core.utils.UncompletedJobError: Job not requeued because: timed-out too many "
        "times.\n\n----------------------\n"
        "You can check full logs with 'job.stderr(0)' and 'job.stdout(0)'or at paths:\n"
        f"  - {log.replace('.out', '.err')}\n  - {log}"
    )
    stderr = "FutureWarning: `torch_dtype` is deprecated! Use `dtype` instead!\n"
    reason = _reason(error, stderr)
    assert reason.startswith("submitit did not requeue it: timed-out too many times: ")
    assert "timeout_min" in reason and "launch.max_timeouts" in reason
    assert "resumes from the run's checkpoint" in reason
    # the run's own error line still comes first; any other reason is given as it is
    assert _reason(error, "error: workload.steps: expected ...\n") == "workload.steps: expected ..."
    other = FailedJobError("Job not requeued because: timed-out and not checkpointable.")
    assert _reason(other, "") == "submitit did not requeue it: timed-out and not checkpointable"
