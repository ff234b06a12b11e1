"""A trained PPO meta-controller as a run deploys it: ``decide(observation) -> Action`` in numpy.

Training (``control/ppo.py``) saves a controller folder; this module defines the deployed part of
it and reads it back:

- ``policy.npz``: the actor's weights as arrays (:func:`actor_arrays`), for decisions without SB3
  or torch;
- ``controller.json``: the action space, the observation statistics the policy normalises with
  (:func:`observation_meta`), the budget-tracking law where the deployment tracks its budget
  (:func:`tracking_meta`), and what training recorded (all labelled simulated).

:class:`PPOController` loads the two and implements the controller protocol in a few
microseconds: normalise, run the actor network, take its mean action (deterministic), map it
onto the actuators. With budget tracking (``controller.budget_tracking``) the policy takes the
log of the Lagrange multiplier as its last input, and the controller sets that price before each
decision from the run's share of samples above the cap so far (:func:`tracked_multiplier`), so
it spends the run's violation budget: more output while the run is under its target, less while
over it. The simulator, the run's controller hook and ``PowerCapCallback`` all drive it here.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from grpo_power.config import Config
from grpo_power.control.contract import ARRAY_FIELDS, Action, Observation
from grpo_power.control.env import ControlSpace, observation_size, tracks_budget
from grpo_power.layout import CONTROLLER
from grpo_power.stage_files import read_json, require_keys

CONTROLLER_KIND = "grpo-power PPO controller"


def deployment_for_size(config: Config, size: str) -> str:
    """The simulated deployment whose trained controller a real run of ``size`` uses."""
    for deployment in config.sim.deployments:
        if size in deployment.sizes:
            return deployment.name
    raise ValueError(
        f"no simulated deployment lists workload size {size!r} in its `sizes`; add it to one "
        "of sim.deployments in the config"
    )


def controller_folder(config: Config, deployment: str, arm: str = "ppo") -> Path:
    """Where ``grpo-power controller train`` saves a deployment's controller of ``arm``
    (``ppo`` or ``ppo+hwcap``) by default."""
    return config.layout.controller(deployment, arm)


def actor_arrays(model: Any) -> dict[str, np.ndarray]:
    """The actor network of an SB3 PPO policy as arrays: ``w0, b0, ..., act0, ...``."""
    import torch

    arrays: dict[str, np.ndarray] = {}
    layers = [*model.policy.mlp_extractor.policy_net, model.policy.action_net]
    linear = 0
    activations = []
    for layer in layers:
        if isinstance(layer, torch.nn.Linear):
            arrays[f"w{linear}"] = layer.weight.detach().cpu().numpy().astype(np.float64)
            arrays[f"b{linear}"] = layer.bias.detach().cpu().numpy().astype(np.float64)
            linear += 1
        elif isinstance(layer, torch.nn.Tanh):
            activations.append((linear - 1, "tanh"))
        elif isinstance(layer, torch.nn.ReLU):
            activations.append((linear - 1, "relu"))
        else:
            raise ValueError(f"unsupported layer in the PPO actor: {layer}")
    arrays["activations"] = np.array([f"{i}:{name}" for i, name in activations])
    return arrays


def observation_meta(venv: Any, tracking: bool) -> dict[str, Any]:
    """The observation statistics a :class:`PPOController` normalises with, from ``venv``
    (``tracking``: the log multiplier is the last input)."""
    stats = venv.obs_rms
    return {
        "fields": [*ARRAY_FIELDS, *(["log_multiplier"] if tracking else [])],
        "mean": stats.mean.tolist(),
        "var": stats.var.tolist(),
        "epsilon": float(venv.epsilon),
        "clip": float(venv.clip_obs),
    }


def tracking_meta(config: Config, deployment: str, multiplier: float) -> dict[str, Any] | None:
    """``controller.json``'s ``budget_tracking``: the deployment law's settings and the trained
    ``multiplier`` it centres on; None where ``deployment`` does not track the budget."""
    settings = config.controller.budget_tracking
    if not tracks_budget(config, deployment):
        return None
    r = config.controller.reward
    return {
        "multiplier": multiplier,
        "target": settings.target_frac * config.objective.violation_budget,
        "gain": settings.gain,
        "multiplier_min": r.multiplier_min,
        "multiplier_max": r.multiplier_max,
    }


def tracked_multiplier(tracking: Mapping[str, Any], observation: Observation) -> float:
    """The Lagrange multiplier a budget-tracking controller decides at: ``tracking``'s
    (``controller.json``'s ``budget_tracking``) trained multiplier times ``exp(gain x (run share
    above the cap - target) / target)``, within its bounds; the trained multiplier before the
    run has samples."""
    error = 0.0
    if observation.run_samples > 0:
        error = (observation.run_share_above_cap - tracking["target"]) / tracking["target"]
    moved = tracking["multiplier"] * math.exp(min(50.0, tracking["gain"] * error))
    return min(tracking["multiplier_max"], max(tracking["multiplier_min"], moved))


class PPOController:
    """A trained PPO meta-controller behind the controller protocol (see the module docstring).

    Use :meth:`load`; decisions take microseconds and need neither SB3 nor torch.
    """

    def __init__(self, meta: dict[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        self.meta = meta
        self.space = ControlSpace.from_dict(meta["space"])
        self.tracking: dict[str, Any] | None = meta.get("budget_tracking")
        obs = meta["observation"]
        self._mean = np.asarray(obs["mean"], dtype=np.float64)
        self._scale = 1.0 / np.sqrt(np.asarray(obs["var"], dtype=np.float64) + obs["epsilon"])
        self._clip = float(obs["clip"])
        n_linear = sum(1 for k in arrays if k.startswith("w"))
        self._weights = [np.asarray(arrays[f"w{i}"]) for i in range(n_linear)]
        self._biases = [np.asarray(arrays[f"b{i}"]) for i in range(n_linear)]
        activation: dict[int, str] = {}
        for item in arrays["activations"]:
            index, name = str(item).split(":")
            activation[int(index)] = name
        self._activation = activation

    @classmethod
    def load(cls, folder: Path | str, deployment: str | None = None) -> PPOController:
        """Load a controller folder written by ``control/ppo.py``'s ``train_controller``.

        Args:
            folder: the controller folder.
            deployment: the deployment it must have been trained for (None: any).

        Raises:
            FileNotFoundError: the folder lacks a file; the message names it and the command
                that creates it.
            ValueError: a file is not a controller's, or the controller was trained for
                another deployment (the message names the file, the field and both values).
        """
        folder = Path(folder)
        command = (
            f"`grpo-power controller train --deployment {deployment or folder.name} --out {folder}`"
        )
        for name in (CONTROLLER.controller, CONTROLLER.policy_npz):
            if not (folder / name).exists():
                raise FileNotFoundError(
                    f"no trained PPO controller at {folder / name}; create it with {command} "
                    f"(or `snakemake {folder / 'controller.json'}`)"
                )
        path = folder / CONTROLLER.controller
        expected = f"a PPO controller's controller.json, written by {command}"
        meta = read_json(path, expected, ("kind",))
        if meta["kind"] != CONTROLLER_KIND:
            raise ValueError(f"{path}: kind: expected {CONTROLLER_KIND!r}, got {meta['kind']!r}")
        require_keys(meta, ("deployment", "space", "observation"), str(path), expected)
        if deployment is not None and meta["deployment"] != deployment:
            raise ValueError(
                f"{path}: deployment: expected {deployment!r}, got {meta['deployment']!r}: this "
                f"controller was trained for deployment {meta['deployment']!r}, not "
                f"{deployment!r}; train one with {command}"
            )
        arrays_path = folder / CONTROLLER.policy_npz
        try:
            with np.load(arrays_path) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            raise ValueError(
                f"{arrays_path}: expected the actor's arrays written by {command}, got an "
                f"unreadable file ({type(error).__name__})"
            ) from None
        require_keys(arrays, ("w0", "b0", "activations"), str(arrays_path), "the actor's arrays")
        size = len(meta["observation"].get("mean", []))
        expected_size = observation_size(meta.get("budget_tracking") is not None)
        if size != expected_size:
            raise ValueError(
                f"{path}: observation.mean: expected {expected_size} values (the observation "
                f"of this version), got {size}: the controller predates an actuator; retrain it "
                f"with {command}"
            )
        return cls(meta, arrays)

    @property
    def power_limit_frac(self) -> float | None:
        """The share of the cap the GPU power limit is set to under this controller (the
        ``ppo+hwcap`` arm's hardware tier); None: trained without a limit (``ppo``)."""
        frac = self.meta.get("power_limit_frac")
        return None if frac is None else float(frac)

    def action_vector(self, observation_array: np.ndarray) -> np.ndarray:
        """The deterministic action in [-1, 1]^k for a raw observation vector."""
        x = np.clip(
            (np.asarray(observation_array, dtype=np.float64) - self._mean) * self._scale,
            -self._clip,
            self._clip,
        )
        for i, (w, b) in enumerate(zip(self._weights, self._biases, strict=True)):
            x = w @ x + b
            kind = self._activation.get(i)
            if kind == "tanh":
                x = np.tanh(x)
            elif kind == "relu":
                x = np.maximum(x, 0.0)
        return np.clip(x, -1.0, 1.0)

    def policy_input(self, observation: Observation) -> np.ndarray:
        """The raw vector the policy reads for ``observation``: its array, and with budget
        tracking the log of the multiplier the run's violation share so far sets
        (:func:`tracked_multiplier`)."""
        array = observation.to_array()
        if self.tracking is None:
            return array
        return np.append(array, math.log(tracked_multiplier(self.tracking, observation)))

    def decide(self, observation: Observation) -> Action:
        """The actuator values of the next step."""
        return self.space.to_action(self.action_vector(self.policy_input(observation)))
