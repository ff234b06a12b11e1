"""Multi-process runs: ``grpo-power run`` relaunches itself under ``accelerate launch``.

When the run size has several processes (``run_sizes`` in the config) the command starts one
process per GPU (DeepSpeed ZeRO-3 when its ``zero_stage`` is 3); inside the launch ``WORLD_SIZE``
is set and the run proceeds. The command is an argument list, never a shell string.
"""

from __future__ import annotations

import os
import subprocess
import sys

from grpo_power.config import RunSize


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


def relaunch_with_accelerate(run_size: RunSize, cli_args: list[str]) -> int:
    """Run the command under accelerate and return its exit code."""
    return subprocess.run(accelerate_command(run_size, cli_args), check=False).returncode
