"""Submit GRPO runs as submitit jobs and wait for them.

A run is one job with one task per node; inside it ``grpo-power run`` relaunches itself under
``accelerate`` when the workload has several processes. The submitit folder (sbatch script, logs,
pickled results) lives inside the run's folder. While waiting, the job's state changes are
written to the log (Snakemake's rule log); a failed job raises :class:`JobFailed` carrying the
tail of the job's stderr. Commands are argument lists, never shell strings.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import submitit

from grpo_power.config import Config, LaunchConfig

STDERR_TAIL_CHARS = 3000


class JobFailed(RuntimeError):
    """A submitted job failed; the message holds its id, state and the tail of its stderr."""


def run_job(command: list[str], run_folder: Path) -> dict[str, Any]:
    """What a job runs: one ``grpo-power run`` command in the job's environment.

    Returns the run's manifest (status, steps, tokens) so the submitter sees the result.
    """
    completed = subprocess.run(command, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"`grpo-power run` exited with {completed.returncode}")
    return json.loads((Path(run_folder) / "manifest.json").read_text())


def resolve_cluster(launch: LaunchConfig) -> str:
    """``slurm`` when asked, or when ``auto`` finds ``sbatch``; else ``local`` (or ``debug``)."""
    if launch.cluster != "auto":
        return launch.cluster
    return "slurm" if shutil.which("sbatch") else "local"


def make_executor(config: Config, folder: Path) -> submitit.AutoExecutor:
    """A submitit executor with the resources of ``config.launch`` for one run."""
    launch = config.launch
    executor = submitit.AutoExecutor(folder=folder, cluster=resolve_cluster(launch))
    parameters: dict[str, Any] = {
        "name": f"grpo-power-{config.workload.size}",
        "timeout_min": launch.timeout_min,
        "nodes": 1,
        "tasks_per_node": 1,  # one task per node: accelerate starts the per-GPU processes
        "cpus_per_task": launch.cpus_per_task,
        "mem_gb": launch.mem_gb,
        "gpus_per_node": launch.gpus_per_node or config.run_size(config.workload.size).processes,
    }
    if launch.slurm_partition:
        parameters["slurm_partition"] = launch.slurm_partition
    if launch.slurm_account:
        parameters["slurm_account"] = launch.slurm_account
    executor.update_parameters(**parameters)
    return executor


def run_command(
    config: Config, config_file: Path, arm: str, seed: int, out: Path, steps: int | None = None
) -> list[str]:
    """The ``grpo-power run`` argument list a job executes (direct launcher inside the job).

    The fixed arm's setting (``workload.concurrency`` and ``max_new_tokens``) travels with it.
    """
    return [
        sys.executable, "-m", "grpo_power.cli", "run",
        "--arm", arm, "--seed", str(seed), "--size", config.workload.size,
        "--steps", str(steps or config.workload.steps),
        "--concurrency", str(config.workload.concurrency),
        "--max-new-tokens", str(config.workload.max_new_tokens),
        "--out", str(out), "--config", str(Path(config_file).resolve()), "--launcher", "direct",
    ]  # fmt: skip


def _stderr_tail(job: submitit.Job) -> str:
    text = job.stderr() or ""
    return text[-STDERR_TAIL_CHARS:]


def wait(job: submitit.Job, poll_s: float, log: Callable[[str], None]) -> Any:
    """Wait for a job, logging each state change; return its result or raise :class:`JobFailed`."""
    last_state = None
    while not job.done():
        state = job.state
        if state != last_state:
            log(f"job {job.job_id}: {state}")
            last_state = state
        time.sleep(poll_s)
    log(f"job {job.job_id}: {job.state}")
    try:
        return job.result()
    except Exception as error:  # submitit raises FailedJobError / UncompletedJobError
        raise JobFailed(
            f"job {job.job_id} failed ({job.state}): {str(error).splitlines()[0]}\n"
            f"--- tail of the job's stderr ---\n{_stderr_tail(job)}"
        ) from None


def submit_run(
    config: Config,
    config_file: Path,
    arm: str,
    seed: int,
    out: Path,
    log: Callable[[str], None] = print,
    steps: int | None = None,
) -> dict[str, Any]:
    """Submit one run, wait for it and return its manifest."""
    executor = make_executor(config, out / "submitit")
    command = run_command(config, config_file, arm, seed, out, steps)
    try:
        job = executor.submit(run_job, command, out)
    except submitit.core.utils.FailedJobError as error:
        raise JobFailed(f"could not submit the run: {error}") from None
    log(
        f"submitted {config.workload.size}/{arm}/seed{seed} as job {job.job_id} "
        f"({resolve_cluster(config.launch)})"
    )
    return wait(job, config.launch.poll_s, log)


def submit_sweep(
    config: Config,
    config_file: Path,
    runs: Sequence[tuple[str, int, Path]],
    folder: Path,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Submit several runs (arm, seed, folder) as one job array (``map_array``) and wait."""
    executor = make_executor(config, folder)
    commands = [run_command(config, config_file, arm, seed, out) for arm, seed, out in runs]
    try:
        jobs = executor.map_array(run_job, commands, [out for _, _, out in runs])
    except submitit.core.utils.FailedJobError as error:
        raise JobFailed(f"could not submit the job array: {error}") from None
    log(f"submitted {len(jobs)} runs as a job array ({resolve_cluster(config.launch)})")
    return [wait(job, config.launch.poll_s, log) for job in jobs]
