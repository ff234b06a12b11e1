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
from grpo_power.layout import CONTROLLER, CONTROLLERS_FOLDER
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


def _train_command(folder: Path, deployment: str | None) -> str:
    """The command that trains the controller ``folder`` holds (a ``<deployment>+hwcap``
    folder: the ``ppo+hwcap`` arm's), for messages."""
    name = deployment or folder.name
    base, plus, tier = name.partition("+")
    if deployment is None and folder.parent.name != CONTROLLERS_FOLDER and not plus:
        base = "DEPLOYMENT"  # a folder of one's own (`user/`): its name says no deployment
    arm = f" --arm ppo+{tier}" if plus else ""
    return f"`grpo-power controller train --deployment {base}{arm} --out {folder}`"


def _check_statistics(observation: Mapping[str, Any], size: int, path: Path) -> None:
    """Refuse observation statistics a policy cannot normalise with: ``var`` of another length
    than ``mean`` (``size``) or negative, a non-positive ``epsilon`` or ``clip``.

    Raises:
        ValueError: naming ``path``, the field and what was expected.
    """
    var = np.asarray(observation["var"], dtype=float)
    if var.shape != (size,) or not (np.isfinite(var) & (var >= 0)).all():
        raise ValueError(
            f"{path}: observation.var: expected {size} finite values >= 0 (one per observation "
            f"field, as mean), got {observation['var']!r}"
        )
    for name in ("epsilon", "clip"):
        value = observation[name]
        if not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"{path}: observation.{name}: expected a number > 0, got {value!r}")


def _space(data: Any, path: Path) -> ControlSpace:
    """The action space ``controller.json`` holds, every driven actuator with its bounds.

    Raises:
        ValueError: a field missing or malformed (naming ``path`` and the field).
    """
    try:
        space = ControlSpace.from_dict(data)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise ValueError(
            f"{path}: space: expected deployment, actuators, bounds (name: [min, max]) and "
            f"holds (name: level), got an unreadable space ({type(error).__name__}: {error})"
        ) from None
    reversed_ = {name: [lo, hi] for name, (lo, hi) in space.bounds.items() if lo > hi}
    if reversed_:
        raise ValueError(
            f"{path}: space.bounds: expected [min, max] with min <= max, got {reversed_}"
        )
    unbounded = [name for name in space.actuators if name not in space.bounds]
    if unbounded:
        raise ValueError(
            f"{path}: space.bounds: expected [min, max] of every driven actuator "
            f"{list(space.actuators)}, got none for {unbounded}"
        )
    return space


def _check_layers(
    arrays: Mapping[str, np.ndarray], inputs: int, outputs: int, arrays_path: Path, path: Path
) -> None:
    """Refuse actor arrays that do not chain from the observation (``inputs`` values) to one
    output per driven actuator (``outputs``): a ``policy.npz`` of another training than its
    ``controller.json`` (they failed at the first decision, in numpy).

    Raises:
        ValueError: naming ``arrays_path``, the layer and the shapes.
    """
    layers = sum(1 for k in arrays if k.startswith("w"))
    width = inputs
    for i in range(layers):
        w, b = arrays.get(f"w{i}"), arrays.get(f"b{i}")
        if w is None or b is None:
            raise ValueError(f"{arrays_path}: w{i}, b{i}: expected both of layer {i}")
        if w.ndim != 2 or w.shape[1] != width or b.shape != (w.shape[0],):
            raise ValueError(
                f"{arrays_path}: w{i}: expected a layer taking {width} inputs (shape "
                f"[n, {width}], b{i} [n]), got {list(w.shape)} and {list(b.shape)}: the "
                f"actor does not match {path}"
            )
        width = w.shape[0]
    if width != outputs:
        raise ValueError(
            f"{arrays_path}: w{layers - 1}: expected {outputs} outputs (one per driven actuator "
            f"in {path}), got {width}: the actor does not match its controller.json"
        )


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
        if folder.is_file():  # the controller.json itself, a natural slip
            raise ValueError(
                f"{folder}: a file; expected the controller's folder, the one holding "
                f"{CONTROLLER.controller} and {CONTROLLER.policy_npz} (here {folder.parent})"
            )
        command = _train_command(folder, deployment)
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
        observation = meta["observation"]
        if not isinstance(observation, dict):
            raise ValueError(f"{path}: observation: expected a mapping, got {observation!r}")
        size = len(observation.get("mean", []))
        expected_size = observation_size(meta.get("budget_tracking") is not None)
        if size != expected_size:  # first: an older version's controller.json lacks more
            raise ValueError(
                f"{path}: observation.mean: expected {expected_size} values (the observation "
                f"of this version), got {size}: the controller predates an actuator; retrain it "
                f"with {command}"
            )
        require_keys(
            observation,
            ("var", "epsilon", "clip"),
            f"{path}: observation",
            "the policy's observation statistics",
        )
        _check_statistics(observation, size, path)
        space = _space(meta["space"], path)
        _check_layers(arrays, size, len(space.actuators), arrays_path, path)
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

    def far_inputs(self, observation: Observation, sd: float) -> list[tuple[str, float, float]]:
        """The inputs of ``observation`` more than ``sd`` standard deviations from their mean
        over the controller's training (where it acts on what it never saw): (field name, the
        value, how many standard deviations off), in the policy's input order."""
        values = self.policy_input(observation)
        scores = (np.asarray(values, dtype=np.float64) - self._mean) * self._scale
        names = list(self.meta["observation"].get("fields") or range(len(values)))
        return [
            (str(names[i]), float(values[i]), float(scores[i]))
            for i in np.flatnonzero(np.abs(scores) > sd)
        ]

    def decide(self, observation: Observation) -> Action:
        """The actuator values of the next step."""
        return self.space.to_action(self.action_vector(self.policy_input(observation)))
