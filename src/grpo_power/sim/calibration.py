"""The simulator's calibration: every physical parameter with a value, a range and a source;
its file (read, written, checked against a config). The defaults are in :mod:`.defaults`, the
fit from measured runs in :mod:`.fit`.

A calibration file (JSON, labelled simulated) holds

- ``power``: GPU-level power parameters (the occupancy curve of :mod:`power_model`, the power of
  communication-bound and optimizer phases, measurement noise, and the response of the GPU to a
  hardware power limit);
- ``deployments``: per deployment (``7b`` on 1 GPU, ``14b`` on 2, ``72b`` on 4 sharded with
  ZeRO-3) the phase-time parameters of a GRPO step;
- ``fits``: what ``grpo-power identify`` fitted from measured step logs and traces, with
  residuals.

Each parameter is ``{"value", "low", "high", "source"}``. ``value`` drives the simulator;
``[low, high]`` is its uncertainty, used for domain randomisation (:func:`draw`). Defaults start
from the sourced ranges of ``docs/calibration.md`` (cited in each ``source``) and from public
A100 specifications; phase times of the larger models are scaled from the 7-8B measurements by
parameter count (decode reads every weight once per step; prefill and training are FLOP-bound).
Values not found in public sources are marked ``assumption``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_power.atomic import write_text_atomic
from grpo_power.config import Config
from grpo_power.sim.defaults import (
    DEPLOYMENT_PARAMETERS,
    POWER_PARAMETERS,
    Parameter,
    default_deployment,
    default_power,
)

CALIBRATION_KIND = "grpo-power simulator calibration"
CALIBRATION_VERSION = 1


@dataclass
class Calibration:
    """A whole calibration: GPU, power parameters, per-deployment parameters, fits."""

    gpu: dict[str, Any]
    power: dict[str, Parameter]
    # name -> {"gpus", "zero_stage", "params_b", "parameters": {name: Parameter}}
    deployments: dict[str, dict[str, Any]]
    origin: str = "defaults"
    fits: dict[str, Any] | None = None

    def deployment_parameters(self, name: str) -> dict[str, Parameter]:
        """The phase-time parameters of deployment ``name``."""
        if name not in self.deployments:
            raise ValueError(
                f"the calibration has no deployment {name!r}; it has {sorted(self.deployments)}"
            )
        return self.deployments[name]["parameters"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": CALIBRATION_KIND,
            "version": CALIBRATION_VERSION,
            "simulated": True,
            "origin": self.origin,
            "gpu": self.gpu,
            "power": {k: v.to_dict() for k, v in self.power.items()},
            "deployments": {
                name: {
                    **{k: v for k, v in d.items() if k != "parameters"},
                    "parameters": {k: p.to_dict() for k, p in d["parameters"].items()},
                }
                for name, d in self.deployments.items()
            },
            "fits": self.fits or {},
        }

    def digest(self) -> str:
        """A short hash of the calibration's content (stored with trained controllers)."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_calibration(config: Config) -> Calibration:
    """The sourced defaults for every configured deployment."""
    return Calibration(
        gpu=config.gpu.model_dump(mode="json"),
        power=default_power(config),
        deployments={
            d.name: {
                "gpus": d.gpus,
                "zero_stage": d.zero_stage,
                "params_b": d.params_b,
                "parameters": default_deployment(d),
            }
            for d in config.sim.deployments
        },
    )


def calibration_from_dict(data: dict[str, Any], where: str) -> Calibration:
    """Validate a calibration mapping; errors name the file and the parameter."""
    if not isinstance(data, dict) or data.get("kind") != CALIBRATION_KIND:
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise ValueError(
            f"{where}: kind: expected {CALIBRATION_KIND!r}, got {kind!r}: not a grpo-power "
            "calibration (write one with `grpo-power identify --out DIR`)"
        )
    try:
        gpu = dict(data["gpu"])
        power = {
            k: Parameter.from_dict(data["power"][k], f"{where}: power.{k}")
            for k in POWER_PARAMETERS
        }
        deployments = {}
        for name, d in data["deployments"].items():
            parameters = {
                k: Parameter.from_dict(d["parameters"][k], f"{where}: deployments.{name}.{k}")
                for k in DEPLOYMENT_PARAMETERS
            }
            deployments[name] = {
                "gpus": int(d["gpus"]),
                "zero_stage": int(d["zero_stage"]),
                "params_b": float(d["params_b"]),
                "parameters": parameters,
            }
        for key in ("nameplate_w", "idle_w"):
            gpu[key] = float(gpu[key])
    except KeyError as error:
        raise ValueError(f"{where}: missing calibration entry {error}") from None
    if gpu["idle_w"] >= gpu["nameplate_w"]:
        raise ValueError(f"{where}: gpu.idle_w must be below gpu.nameplate_w")
    return Calibration(
        gpu=gpu,
        power=power,
        deployments=deployments,
        origin=str(data.get("origin", "file")),
        fits=data.get("fits") or None,
    )


def load_calibration(path: Path | str) -> Calibration:
    """Read a calibration file written by :func:`save_calibration`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no calibration file; write one with `grpo-power identify --out DIR`"
        ) from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON: {error}") from None
    return calibration_from_dict(data, str(path))


def save_calibration(calibration: Calibration, path: Path | str) -> Path:
    """Write a calibration file atomically (temporary name, then rename)."""
    return write_text_atomic(path, json.dumps(calibration.to_dict(), indent=2) + "\n")


def check_calibration_matches(calibration: Calibration, config: Config, where: str) -> None:
    """Refuse a calibration made for other deployments than the config's.

    A calibration belongs to the GPU and the deployments it was identified on: its ``gpu.name``
    (where it records one) and ``gpu.nameplate_w`` must be the config's (an H100 and an H200 share
    700 W, an A100's 40 and 80 GB boards 400 W), and every deployment it shares by name with
    ``sim.deployments`` must have the same GPUs, ZeRO stage and parameter count (its phase times
    mean nothing for another shape). It must share at least one deployment name with the config.

    Raises:
        ValueError: naming the file, the field, the calibration's value and the config's.
    """
    hint = "use the calibration `grpo-power identify` wrote with this config, or rerun it"
    name = calibration.gpu.get("name")
    if name is not None and name != config.gpu.name:
        raise ValueError(
            f"{where}: gpu.name: expected {config.gpu.name!r} (the config's), got {name!r} (the "
            f"calibration's): a calibration of another GPU; {hint}"
        )
    nameplate_w = float(calibration.gpu["nameplate_w"])
    if not math.isclose(nameplate_w, config.gpu.nameplate_w, rel_tol=1e-9):
        raise ValueError(
            f"{where}: gpu.nameplate_w: expected {config.gpu.nameplate_w:g} W (the config's "
            f"{config.gpu.name}), got {nameplate_w:g} W (the calibration's "
            f"{calibration.gpu.get('name', 'GPU')}): a calibration of another GPU; {hint}"
        )
    configured = {d.name: d for d in config.sim.deployments}
    if not set(calibration.deployments) & set(configured):
        raise ValueError(
            f"{where}: deployments: expected at least one of the config's {sorted(configured)}, "
            f"got {sorted(calibration.deployments)}: a calibration of other deployments; {hint}"
        )
    for name, entry in calibration.deployments.items():
        if name not in configured:
            continue
        d = configured[name]
        for key, want in (("gpus", d.gpus), ("zero_stage", d.zero_stage), ("params_b", d.params_b)):
            if not math.isclose(float(entry[key]), float(want), rel_tol=1e-9):
                raise ValueError(
                    f"{where}: deployments.{name}.{key}: expected {want:g} (the config's "
                    f"deployment {name}: {_shape(d.gpus, d.zero_stage, d.params_b)}), got "
                    f"{float(entry[key]):g} (the calibration's deployment {name}: "
                    f"{_shape(entry['gpus'], entry['zero_stage'], entry['params_b'])}): a "
                    f"calibration of another deployment; {hint}"
                )


def _shape(gpus: int, zero_stage: int, params_b: float) -> str:
    return f"{params_b:g}B on {gpus} GPU(s), ZeRO-{zero_stage}"


def calibration_for(config: Config, path: Path | str | None = None) -> Calibration:
    """The calibration a command uses: ``path``, else ``sim.calibration``, else the defaults.

    A file must match the config's GPU and deployments (:func:`check_calibration_matches`);
    deployments configured but absent from it get their defaults.
    """
    path = path if path is not None else config.sim.calibration
    if path is None:
        return default_calibration(config)
    calibration = load_calibration(path)
    check_calibration_matches(calibration, config, str(path))
    defaults = default_calibration(config)
    for name, entry in defaults.deployments.items():
        calibration.deployments.setdefault(name, entry)
    return calibration
