"""Multi-process runs: ``grpo-power run`` relaunches itself under ``accelerate launch``.

With ``workload.processes > 1`` the command starts one process per GPU (DeepSpeed ZeRO-3 when
``workload.zero_stage`` is 3); inside the launch ``WORLD_SIZE`` is set and the run proceeds. The
command is an argument list, never a shell string.
"""

from __future__ import annotations

import os
import subprocess
import sys

from grpo_power.config import WorkloadConfig


def relaunch_needed(workload: WorkloadConfig) -> bool:
    """True when the run needs several processes and this is not yet one of them."""
    return workload.processes > 1 and "WORLD_SIZE" not in os.environ


def accelerate_command(workload: WorkloadConfig, cli_args: list[str]) -> list[str]:
    """The ``accelerate launch`` argument list that reruns ``grpo-power CLI_ARGS``."""
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--num_processes",
        str(workload.processes),
        "--num_machines",
        "1",
    ]
    if workload.zero_stage == 3:
        command += ["--use_deepspeed", "--zero_stage", "3"]
    return [*command, "-m", "grpo_power.cli", *cli_args]


def relaunch_with_accelerate(workload: WorkloadConfig, cli_args: list[str]) -> int:
    """Run the command under accelerate and return its exit code."""
    return subprocess.run(accelerate_command(workload, cli_args), check=False).returncode
