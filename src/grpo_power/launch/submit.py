"""Submit GRPO runs as submitit jobs and wait for them.

A run is one job with one task per node; inside it ``grpo-power run`` relaunches itself under
``accelerate`` when the workload has several processes. The submitit folder (sbatch script, logs,
pickled results) lives inside the run's folder. While waiting, the job's state changes are
written to the log (Snakemake's rule log); a failed job raises :class:`JobFailed` carrying the
tail of the job's stderr (credentials filtered out). Commands are argument lists, never shell
strings.

Preemption and timeouts: the job runs a :class:`RunJob`, which submitit checkpoints on its
signal (USR2, sent ``signal_delay_s`` before the time limit and, with Slurm's
``preempt_send_user_signal``, at preemption) and requeues; the requeued job resumes the run from
its folder. A plain ``scontrol requeue`` never calls the checkpoint: the run resumes from its own
last checkpoint (see :mod:`grpo_power.workload.resume`).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import submitit
from submitit.helpers import Checkpointable, DelayedSubmission

from grpo_power.config import Config, LaunchConfig
from grpo_power.redact import redact_text
from grpo_power.workload.resume import EXIT_INTERRUPTED

STDERR_TAIL_CHARS = 3000


class JobFailed(RuntimeError):
    """A submitted job failed; the message holds its id, state and the tail of its stderr."""


def _ignore_checkpoint_signals() -> None:
    """In the run's process before it starts: USR1/USR2 must not kill it while it imports;
    it installs its own handlers once it can save a checkpoint."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


class RunJob(Checkpointable):
    """What a run's job executes: one ``grpo-power run`` command in a child process.

    Args:
        grace_s: on preemption or timeout, how long :meth:`checkpoint` waits for the run to save
            a checkpoint at the end of its current step, s.
    """

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._process: subprocess.Popen[bytes] | None = None

    def __call__(self, command: list[str], run_folder: Path) -> dict[str, Any]:
        """Run the command; return the run's manifest (status, steps, tokens)."""
        self._process = subprocess.Popen(command, preexec_fn=_ignore_checkpoint_signals)
        # Poll rather than wait(): a blocking wait() holds the Popen's lock, and submitit's signal
        # handler, which runs on top of it, could then never see the run exit (checkpoint()).
        while (returncode := self._process.poll()) is None:
            time.sleep(0.5)
        if returncode == EXIT_INTERRUPTED:
            # Stopped by SIGTERM (scontrol requeue, scancel, preemption) with its checkpoint
            # saved. Exit without a result: Slurm requeues the job (the same command resumes)
            # or, if it was cancelled, the submitter reports the run's message.
            message = f"grpo-power: the run stopped with its checkpoint saved (exit {returncode})"
            print(message, file=sys.stderr)
            sys.exit(returncode)
        if returncode != 0:
            raise RuntimeError(f"`grpo-power run` exited with {returncode}")
        return json.loads((Path(run_folder) / "manifest.json").read_text())

    def checkpoint(self, command: list[str], run_folder: Path) -> DelayedSubmission:
        """Called by submitit on USR2: let the run save its state, then requeue the command."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGUSR2)  # stop after this step, with a checkpoint
            deadline_s = time.monotonic() + self.grace_s
            while process.poll() is None and time.monotonic() < deadline_s:
                time.sleep(0.2)
        return DelayedSubmission(RunJob(self.grace_s), command, run_folder)

    def __getstate__(self) -> dict[str, Any]:
        return {"grace_s": self.grace_s, "_process": None}


def resolve_cluster(launch: LaunchConfig) -> str:
    """``slurm`` when asked, or when ``auto`` finds ``sbatch``; else ``local`` (or ``debug``)."""
    if launch.cluster != "auto":
        return launch.cluster
    return "slurm" if shutil.which("sbatch") else "local"


def make_executor(config: Config, folder: Path) -> submitit.AutoExecutor:
    """A submitit executor with the resources of ``config.launch`` for one run."""
    launch = config.launch
    executor = submitit.AutoExecutor(
        folder=folder, cluster=resolve_cluster(launch), slurm_max_num_timeout=launch.max_timeouts
    )
    parameters: dict[str, Any] = {
        "name": f"grpo-power-{config.workload.size}",
        "timeout_min": launch.timeout_min,
        "nodes": 1,
        "tasks_per_node": 1,  # one task per node: accelerate starts the per-GPU processes
        "cpus_per_task": launch.cpus_per_task,
        "mem_gb": launch.mem_gb,
        "gpus_per_node": launch.gpus_per_node or config.run_size(config.workload.size).processes,
    }
    if resolve_cluster(launch) == "slurm":
        # a requeued job appends to its logs, so every attempt's output is kept
        parameters["slurm_additional_parameters"] = {"open-mode": "append"}
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
    return redact_text(text[-STDERR_TAIL_CHARS:])


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


def start_run(
    config: Config,
    config_file: Path,
    arm: str,
    seed: int,
    out: Path,
    steps: int | None = None,
) -> submitit.Job:
    """Submit one run as a resumable job (:class:`RunJob`) and return it without waiting."""
    executor = make_executor(config, out / "submitit")
    command = run_command(config, config_file, arm, seed, out, steps)
    try:
        return executor.submit(RunJob(config.launch.checkpoint_grace_s), command, out)
    except submitit.core.utils.FailedJobError as error:
        raise JobFailed(f"could not submit the run: {error}") from None


def submit_run(
    config: Config,
    config_file: Path,
    arm: str,
    seed: int,
    out: Path,
    log: Callable[[str], None] = print,
    steps: int | None = None,
) -> dict[str, Any]:
    """Submit one run, wait for it (across requeues) and return its manifest."""
    job = start_run(config, config_file, arm, seed, out, steps)
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
        job = RunJob(config.launch.checkpoint_grace_s)
        jobs = executor.map_array(job, commands, [out for _, _, out in runs])
    except submitit.core.utils.FailedJobError as error:
        raise JobFailed(f"could not submit the job array: {error}") from None
    log(f"submitted {len(jobs)} runs as a job array ({resolve_cluster(config.launch)})")
    return [wait(job, config.launch.poll_s, log) for job in jobs]
