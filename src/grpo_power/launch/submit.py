"""The submitit side of a GPU run: the job it executes, the executor that submits it.

A run is one job with one task per node; inside it ``grpo-power run`` relaunches itself under
``accelerate`` when the workload has several processes. The executor asks for the resources of
the run's size (``run_sizes[].job`` over ``launch.job``) with the account and GPU partition of
``launch``. :mod:`grpo_power.launch.batch` submits, records, reattaches to and waits for the
jobs. Commands are argument lists, never shell strings.

Preemption and timeouts: the job runs a :class:`RunJob`, which submitit checkpoints on its
signal (USR2, sent ``signal_delay_s`` before the time limit and, with Slurm's
``preempt_send_user_signal``, at preemption) and requeues; the requeued job resumes the run from
its folder. A plain ``scontrol requeue`` never calls the checkpoint: the run resumes from its own
last checkpoint (see :mod:`grpo_power.workload.resume`).
"""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import submitit
from submitit.helpers import Checkpointable, DelayedSubmission

from grpo_power.config import Config, LaunchConfig
from grpo_power.redact import redact_text
from grpo_power.workload.resume import EXIT_INTERRUPTED, RunPaths

STDERR_TAIL_CHARS = 3000


class JobFailed(RuntimeError):
    """A submitted job failed; the message holds its id, state and the tail of its stderr."""


class SubmitRefused(ValueError):
    """The cluster refused a submission (its partition, account, QOS or resources: sbatch's
    reason and what was asked, in one line): a config error, exit 2, where a job that ran and
    failed is :class:`JobFailed`, exit 3."""


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
        """Run the command; return the completed run's manifest (status, steps, tokens), read
        from its copy when a workflow manager has removed it from the folder meanwhile."""
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
        manifest = RunPaths(Path(run_folder)).completed_manifest(copy=True)
        if manifest is None:
            raise RuntimeError(f"{run_folder}: `grpo-power run` exited 0 without a completed run")
        return manifest

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


def checked_setup_line(line: str) -> str:
    """A ``launch.job.setup`` line as the job script runs it: one that fails ends the job with
    a line saying which (``module load`` of a missing module, a missing file to ``source``
    were ignored, and the run went on in an environment without them)."""
    quoted = shlex.quote(f"error: launch.job.setup: `{line}` failed")
    return f'{{ {line}\n}} || {{ status=$?; echo {quoted}" (exit $status)" >&2; exit 1; }}'


def resolve_cluster(launch: LaunchConfig) -> str:
    """``slurm`` when asked, or when ``auto`` finds ``sbatch``; else ``local`` (or ``debug``)."""
    if launch.cluster != "auto":
        return launch.cluster
    return "slurm" if shutil.which("sbatch") else "local"


def make_executor(config: Config, folder: Path, name: str) -> submitit.AutoExecutor:
    """A submitit executor for GPU jobs of ``config.workload.size`` named ``name``: the size's
    resources (:meth:`Config.job_resources`), the account and GPU partition of ``config.launch``.
    """
    launch = config.launch
    cluster = resolve_cluster(launch)
    resources = config.job_resources(config.workload.size)
    executor = submitit.AutoExecutor(
        folder=folder, cluster=cluster, slurm_max_num_timeout=launch.max_timeouts
    )
    parameters: dict[str, Any] = {
        "name": name,
        "nodes": 1,
        "tasks_per_node": 1,  # one task per node: accelerate starts the per-GPU processes
    }
    for name in ("timeout_min", "cpus_per_task", "mem_gb"):
        if getattr(resources, name) is not None:
            parameters[name] = getattr(resources, name)
    if resources.gpu_type and cluster == "slurm":
        parameters["slurm_gres"] = f"gpu:{resources.gpu_type}:{resources.gpus}"
    else:
        parameters["gpus_per_node"] = resources.gpus
    if cluster == "slurm":
        slurm: dict[str, Any] = {
            "partition": launch.slurm_partition,
            "account": launch.slurm_account,
            "qos": resources.qos,
            "constraint": resources.constraint,
            "setup": [checked_setup_line(line) for line in resources.setup or ()] or None,
            "array_parallelism": launch.array_parallelism,
            # a requeued job appends to its logs, so every attempt's output is kept
            "additional_parameters": {
                "open-mode": "append",
                **(resources.additional_parameters or {}),
            },
        }
        parameters.update({f"slurm_{k}": v for k, v in slurm.items() if v is not None})
    executor.update_parameters(**parameters)
    return executor


def run_command(
    config: Config,
    config_file: Path,
    arm: str,
    seed: int,
    out: Path,
    steps: int | None = None,
    replace_other: bool = False,
) -> list[str]:
    """The ``grpo-power run`` argument list a job executes (direct launcher inside the job).

    The fixed arm's setting (``workload.concurrency``, ``max_new_tokens`` and
    ``train_micro_batch``) travels with it, and ``--replace-other`` where the run replaces a run
    of other settings in its folder.
    """
    return [
        sys.executable, "-m", "grpo_power.cli", "run",
        "--arm", arm, "--seed", str(seed), "--size", config.workload.size,
        "--steps", str(steps or config.workload.steps),
        "--concurrency", str(config.workload.concurrency),
        "--max-new-tokens", str(config.workload.max_new_tokens),
        "--train-micro-batch", str(config.workload.train_micro_batch),
        "--out", str(out), "--config", str(Path(config_file).resolve()), "--launcher", "direct",
        *(["--replace-other"] if replace_other else []),
    ]  # fmt: skip


def stderr_tail(job: submitit.Job) -> str:
    """The end of a job's stderr, credentials filtered out."""
    text = job.stderr() or ""
    return redact_text(text[-STDERR_TAIL_CHARS:])
