"""The run manifest (DESIGN.md section 7): resolved config, versions, hardware, outcome."""

from __future__ import annotations

import os
import platform
import socket
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from grpo_power.atomic import write_json_atomic
from grpo_power.config import Config

PACKAGES = ("grpo-power", "torch", "trl", "transformers", "accelerate", "deepspeed", "nvidia-ml-py")


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a run depends on (None: not installed)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return versions


class RunManifest:
    """A manifest written at the start of a run and updated when it ends."""

    def __init__(
        self, path: Path, config: Config, arm: str, seed: int, extra: dict[str, Any]
    ) -> None:
        import torch

        self.path = path
        self.data: dict[str, Any] = {
            "status": "running",
            "arm": arm,
            "size": config.workload.size,
            "seed": seed,
            "started_unix_s": time.time(),
            "host": socket.gethostname(),
            "hardware": {
                "platform": platform.platform(),
                "cpu_count": os.cpu_count(),
                "cuda_devices": [
                    torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
                ],
            },
            "packages": package_versions(),
            "python": platform.python_version(),
            "config": config.model_dump(mode="json"),
            **extra,
        }
        write_json_atomic(self.path, self.data)

    def finish(self, status: str, **fields: Any) -> None:
        """Record the outcome (``completed`` or ``failed``) and final figures."""
        self.data.update(status=status, ended_unix_s=time.time(), **fields)
        write_json_atomic(self.path, self.data)
