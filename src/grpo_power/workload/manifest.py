"""The run manifest (docs/design.md section 7): resolved config, versions, hardware, attempts,
outcome.

A run that is preempted, requeued or killed and then resumed has several attempts; each is
recorded (host, job ids, steps, how it ended). Until the run completes the manifest is
``manifest.json.partial``, so that, like the trace and the step log, ``manifest.json`` appears
only when the run is whole (see :mod:`grpo_power.journal`). Everything written passes through
:func:`grpo_power.redact.redact`, so no credential reaches the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from grpo_power.atomic import write_json_atomic
from grpo_power.config import Config, validate_config
from grpo_power.redact import recorded_environment, redact
from grpo_power.workflow_params import RUN_SETTING_FIELDS, run_settings

PACKAGES = ("grpo-power", "torch", "trl", "transformers", "accelerate", "deepspeed", "nvidia-ml-py")
# What makes two runs the same run: a folder resumes only a run with the same values and the
# same settings its results depend on (:meth:`RunManifest.run_settings`).
IDENTITY_FIELDS = ("arm", "size", "model", "seed", "steps_planned")
# A checkpoint's weight files, whose names and sizes stand for its weights in its identity.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def checkpoint_identity(model_path: str | None) -> dict[str, Any] | None:
    """What a run's own checkpoint (``workload.model_path``) is, for its manifest and identity:
    its folder, the architectures and a digest of its ``config.json``, and each weight file's
    name and size (a file's bytes would take minutes to hash on a 72B checkpoint); None for a
    preset. A checkpoint replaced in the same folder is another run (it was "completed")."""
    if model_path is None:
        return None
    folder = Path(model_path).expanduser().absolute()
    config_file = folder / "config.json"
    text = config_file.read_text() if config_file.is_file() else "{}"
    try:
        architectures = json.loads(text).get("architectures")
    except (json.JSONDecodeError, AttributeError):
        architectures = None
    return {
        "path": str(folder),
        "architectures": architectures,
        "config_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "weights": {
            p.name: p.stat().st_size
            for p in sorted(folder.glob("*"))
            if p.is_file() and p.suffix in WEIGHT_SUFFIXES
        },
    }


def run_id_of(config: Config, arm: str, seed: int) -> str:
    """A run's id in its trace, step log and manifest: ``<size>-<arm>-seed<seed>``."""
    return f"{config.workload.size}-{arm}-seed{seed}"


def settings_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """The first setting a run's results depend on (:func:`~grpo_power.workflow_params.
    run_settings`, as a mapping) that differs, named by its config path with both values
    (``config.workload.steps (was 30, now 40)``); None: the same settings."""
    for key in sorted(old.keys() | new.keys()):
        where = f"config.{RUN_SETTING_FIELDS.get(key, key)}"
        if found := _first_difference(old.get(key), new.get(key), where):
            return found
    return None


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a run depends on (None: not installed)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return versions


def unfinished_path(path: Path) -> Path:
    """Where the manifest of a run that has not completed is kept."""
    return path.with_name(path.name + ".partial")


def _first_difference(old: Any, new: Any, where: str) -> str | None:
    """The dotted path of the first value that differs between two JSON-like values."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            found = _first_difference(old.get(key), new.get(key), f"{where}.{key}")
            if found:
                return found
        return None
    return None if old == new else f"{where} (was {old!r}, now {new!r})"


class RunManifest:
    """The manifest of one run folder, rewritten atomically at each change."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def create(
        cls, path: Path, config: Config, arm: str, seed: int, extra: dict[str, Any]
    ) -> RunManifest:
        """A manifest for a run that starts from scratch (filtered already, so that it compares
        with a written one in :meth:`same_run`)."""
        data = {
            "status": "running",
            "arm": arm,
            "size": config.workload.size,
            "model": checkpoint_identity(config.workload.model_path),
            "seed": seed,
            "started_unix_s": time.time(),
            "packages": package_versions(),
            "python": platform.python_version(),
            "config": config.model_dump(mode="json"),
            "attempts": [],
            **extra,
        }
        return cls(path, redact(data))

    @classmethod
    def read(cls, path: Path) -> RunManifest | None:
        """The manifest of a completed run in ``path``, else of an unfinished one (None: none).

        Raises:
            ValueError: the file is not a JSON manifest (the message names it).
        """
        source = path if path.exists() else unfinished_path(path)
        if not source.exists():
            return None
        try:
            data = json.loads(source.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"{source}: not a readable run manifest ({error})") from None
        if not isinstance(data, dict) or "status" not in data:
            raise ValueError(f"{source}: not a run manifest (no 'status' field)")
        data.setdefault("attempts", [])
        return cls(path, data)

    @classmethod
    def planned(
        cls, path: Path, config: Config, arm: str, seed: int, steps: int | None = None
    ) -> RunManifest:
        """The manifest a run of ``arm`` and ``seed`` under ``config`` starts with (``steps``:
        ``workload.steps`` when None): what a run folder's must match to be this run, on the
        host that runs it or the one that submits it."""
        if steps:  # as `grpo-power run --steps` records it: in the config too
            config = config.model_copy(
                update={"workload": config.workload.model_copy(update={"steps": steps})}
            )
        simulated = config.telemetry.source == "simulated"
        extra = {
            "run_id": run_id_of(config, arm, seed),
            "steps_planned": config.workload.steps,
            "power": "simulated" if simulated else "nvml",
        }
        return cls.create(path, config, arm, seed, extra)

    def run_settings(self) -> dict[str, Any]:
        """The settings this run's results depend on, from the config it records: the same
        :func:`~grpo_power.workflow_params.run_settings` as the run rule's params.

        Raises:
            ConfigError: the recorded config is not a valid config (the message names the file
                and the field).
        """
        config = validate_config(self.data.get("config"), source=f"{self.path}: config")
        return json.loads(run_settings(config, self.data.get("arm", "")))

    def same_run(self, other: RunManifest) -> str | None:
        """None when ``other`` describes the same run, else the first field that differs, with
        both values: one of :data:`IDENTITY_FIELDS`, or a setting the run's results depend on,
        named by its config path (``config.workload.steps (was 30, now 40)``). A setting no
        result depends on (``report.dpi``, ``launch``, ``workload.checkpoint_every_steps``) may
        change between attempts."""
        for name in IDENTITY_FIELDS:
            found = _first_difference(self.data.get(name), other.data.get(name), name)
            if found:
                return found
        return settings_difference(self.run_settings(), other.run_settings())

    @property
    def attempts(self) -> list[dict[str, Any]]:
        return self.data["attempts"]

    def begin_attempt(self, **fields: Any) -> int:
        """Record a new attempt (this process, host, job ids) and return its number."""
        import torch

        number = len(self.attempts) + 1
        self.attempts.append(
            {
                "attempt": number,
                "status": "running",
                "started_unix_s": time.time(),
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "environment": recorded_environment(),
                "hardware": {
                    "platform": platform.platform(),
                    "cpu_count": os.cpu_count(),
                    "cuda_devices": [
                        torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
                    ],
                },
                **fields,
            }
        )
        self.data.update(status="running", host=socket.gethostname())
        self.data["hardware"] = self.attempts[-1]["hardware"]
        self.write()
        return number

    def end_attempt(self, status: str, **fields: Any) -> None:
        """Record how the current attempt ended (``completed``, ``interrupted``, ``failed``)."""
        self.attempts[-1].update(status=status, ended_unix_s=time.time(), **fields)
        self.write()

    def mark_lost_attempt(self, **fields: Any) -> None:
        """The last attempt never recorded its end (SIGKILL, node failure): call it ``killed``."""
        if self.attempts and self.attempts[-1]["status"] == "running":
            self.attempts[-1].update(status="killed", ended_unix_s=None, **fields)

    def finish(self, status: str, **fields: Any) -> None:
        """Record the run's outcome (``completed``, ``interrupted`` or ``failed``) and figures."""
        self.data.update(status=status, ended_unix_s=time.time(), **fields)
        self.write()

    def write(self) -> None:
        """Write ``manifest.json`` when the run has completed, else its unfinished file."""
        self.data = redact(self.data)
        if self.data["status"] == "completed":
            write_json_atomic(self.path, self.data)
            unfinished_path(self.path).unlink(missing_ok=True)
        else:
            write_json_atomic(unfinished_path(self.path), self.data)
