"""Multi-process runs: ``grpo-power run`` relaunches itself under ``accelerate launch``.

When the run size has several processes (``run_sizes`` in the config) the command starts one
process per GPU (DeepSpeed ZeRO-3 when its ``zero_stage`` is 3); inside the launch ``WORLD_SIZE``
is set and the run proceeds. The command is an argument list, never a shell string.

:func:`process_ranks` tells a process its place in any launch (the run's, or a user's own script
under ``torchrun``): power is sampled on each node's local rank 0, and decisions are taken on rank
0 and broadcast.

Stop signals: every rank stops after its current step with a checkpoint on SIGTERM, SIGUSR1 or
SIGUSR2 (:mod:`grpo_power.workload.resume`). Under Slurm every process of the job gets the
signal; elsewhere the relaunching process passes one it receives on to the launcher as SIGTERM,
which hands it to the ranks. Either way a run that stopped with its checkpoint saved exits with
:data:`~grpo_power.workload.resume.EXIT_INTERRUPTED`, as a single-process run does.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from grpo_power.config import RunSize
from grpo_power.layout import RUN
from grpo_power.signal_handlers import handling
from grpo_power.telemetry.nvml import visible_gpu_count, visible_gpu_ids
from grpo_power.workload.manifest import RunManifest
from grpo_power.workload.resume import EXIT_INTERRUPTED, StopSignals


def process_ranks() -> tuple[int, int]:
    """(rank in the job, rank on its node) of this process, as ``torchrun``, ``accelerate
    launch`` and DeepSpeed's launcher set them (``RANK``, ``LOCAL_RANK``); (0, 0) outside one."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))


def node_share() -> float:
    """This node's share of the job's processes, ``LOCAL_WORLD_SIZE / WORLD_SIZE`` as
    ``torchrun`` and ``accelerate launch`` set them (1 outside a launch, or without them): the
    share of a data-parallel job's tokens its node's GPUs process."""
    world, local = os.environ.get("WORLD_SIZE"), os.environ.get("LOCAL_WORLD_SIZE")
    if not world or not local:
        return 1.0
    return min(1.0, int(local) / max(1, int(world)))


def node_gpus(gpus: list[int] | None = None) -> list[int] | None:
    """The CUDA devices a node's power sampler measures: ``gpus`` where given; in a launch
    (``torchrun``, ``accelerate launch``: ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` set) on a node
    that shows more GPUs than it runs processes, devices 0 to ``LOCAL_WORLD_SIZE - 1`` (each
    process drives ``cuda:LOCAL_RANK``, as ``Trainer`` and accelerate place it), so that GPUs the
    job does not use are not measured as its own; else None (every visible GPU)."""
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    if gpus is not None or "WORLD_SIZE" not in os.environ or not local.isdigit():
        return gpus
    count = visible_gpu_count()
    return list(range(int(local))) if count is not None and count > int(local) > 0 else None


def warn_if_node_gpus_hidden(source_kind: str) -> None:
    """Warn (``RuntimeWarning``, once) where this node's one sampler, local rank 0, reading
    ``source_kind`` power (``nvml``), may not see the node's GPUs: ``CUDA_VISIBLE_DEVICES``
    shows it fewer GPUs than the node runs processes, as when each process is given GPUs of its
    own (``srun --gpus-per-task``); the node's power and trace are then its GPUs only."""
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    visible = visible_gpu_ids()
    if source_kind != "nvml" or not local.isdigit() or visible is None:
        return
    if len(visible) < int(local):
        _warn_once(
            f"{local} processes on this node, but CUDA_VISIBLE_DEVICES={','.join(visible)!r} "
            f"shows local rank 0, the node's one power sampler, {len(visible)} GPU(s): if each "
            "process was given GPUs of its own (srun --gpus-per-task), the node's power and "
            "trace are local rank 0's GPUs only; launch one task a node (torchrun, accelerate "
            "launch), whose processes see the node's GPUs"
        )


@functools.cache
def _warn_once(message: str) -> None:
    """A ``RuntimeWarning`` once a process (both callbacks may ask for the same one)."""
    warnings.warn(message, RuntimeWarning, stacklevel=4)


def relaunch_needed(run_size: RunSize) -> bool:
    """True when the run needs several processes and this is not yet one of them."""
    return run_size.processes > 1 and "WORLD_SIZE" not in os.environ


def accelerate_command(run_size: RunSize, cli_args: list[str]) -> list[str]:
    """The ``accelerate launch`` argument list that reruns ``grpo-power CLI_ARGS``."""
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--num_processes",
        str(run_size.processes),
        "--num_machines",
        "1",
    ]
    if run_size.zero_stage == 3:
        command += ["--use_deepspeed", "--zero_stage", "3"]
    return [*command, "-m", "grpo_power.cli", *cli_args]


@dataclass(frozen=True)
class ChildRun:
    """How a child process of :func:`run_passing_stops` ended."""

    returncode: int
    stopped_by: str | None  # the first stop signal this process got while the child ran


def run_passing_stops(command: list[str], as_signal: int | None = None) -> ChildRun:
    """Run ``command`` as a child process to its end. A stop signal this process gets (SIGTERM,
    SIGUSR1, SIGUSR2) is passed on to the child (as ``as_signal`` where given), so that it
    checkpoints and stops as a run of its own does, and is recorded (a child that completed as
    it came exits 0: the caller stops before its next child); under Slurm every process of the
    job gets the signal itself, so none is passed on."""
    process = subprocess.Popen(command)
    received: list[str] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        if "SLURM_JOB_ID" not in os.environ and process.poll() is None:
            process.send_signal(as_signal or signum)

    with handling(StopSignals.SIGNALS, forward):
        while (returncode := process.poll()) is None:  # poll: handlers run between polls
            time.sleep(0.5)
    return ChildRun(returncode, received[0] if received else None)


def relaunch_with_accelerate(run_size: RunSize, cli_args: list[str], run_folder: Path) -> int:
    """Run the command under accelerate and return its exit code (see the module's note on
    stop signals: the launcher is passed any of them as SIGTERM)."""
    launch = run_passing_stops(accelerate_command(run_size, cli_args), signal.SIGTERM)
    returncode = launch.returncode
    manifest = RunManifest.read(run_folder / RUN.manifest)
    if returncode != 0 and manifest is not None and manifest.data["status"] == "interrupted":
        return EXIT_INTERRUPTED
    return returncode
