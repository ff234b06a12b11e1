"""The PPO meta-controller: trained in the simulator, deployed through ``decide(observation)``.

Training (:func:`train_controller`) runs stable-baselines3 PPO on vectorised
:class:`~grpo_power.control.env.GrpoPowerEnv` copies with observation (and reward)
normalisation (``VecNormalize``), domain-randomised physics, conditions that change within
episodes (``controller.conditions``: completions ending early, a lower cap, derating), and the
action space the authority table gives for the deployment. A controller folder holds:

- ``policy.zip``: the SB3 model (to continue training or inspect);
- ``vecnormalize.pkl``: the SB3 normalisation statistics;
- ``policy.npz``: the actor's weights as arrays, for fast decisions without SB3;
- ``controller.json``: the action space, observation statistics, the authority rows it was
  built on, the calibration digest, training settings, and an evaluation against a random
  policy (all labelled simulated);
- ``learning_curve.csv``: after each rollout, the mean return of the recent training episodes,
  the throughput and violation rate of its steps under the nominal conditions, and the Lagrange
  multiplier (``timesteps``, ``episode_return``, ``tokens_per_s``, ``violation_rate``,
  ``multiplier``; simulated, domain-randomised); ``controller.json`` holds the oracle's
  throughput, violation rate and setting on the nominal physics (``oracle``) and, in
  ``evaluation``, the returns of the trained policy, a random one and the oracle's setting over
  the same nominal episodes at the same multiplier: the lines the report draws the curve against.

The reward's Lagrange multiplier follows a multiplicative dual update: after each rollout it is
multiplied by ``1 + reward.multiplier_lr`` when the rollout's violation rate is above
``objective.violation_budget`` and divided by it when below (within ``multiplier_bounds``), and
set in every environment, so training drives the violation rate to the budget (the step is
relative, so a multiplier grown during the random early rollouts comes back as fast). The
violation rate (and the learning curve's throughput) counts the steps under the nominal
conditions only: a drawn lower cap may be out of reach of every setting, and a rate that
counted it would drive the multiplier to its maximum and the policy to its floor everywhere;
under changed conditions the same multiplier prices the violations.

The ``ppo+hwcap`` arm's controller (``hardware_tier=True``) is trained the same way under a GPU
power limit, the hardware tier under it, tuned first (``control/hardware_tier.py``): its
``controller.json`` holds the limit as a share of the cap (``power_limit_frac``) and the tuning
table (``hardware_tier``); the arm runs under that share of its cap.

The dual update meets the budget on average over the randomised physics, and its last iterate
oscillates about it, so the saved policy is chosen by validation, as the peers are tuned: the
policy is snapshotted ``controller.validation_snapshots`` times over the second half of training
(and at its end), each snapshot runs the deployment's budget on the nominal physics over
``evaluate.tuning_seeds`` (never the evaluation seeds), and the objective picks one (most tokens
within the budget; else the fewest violations). ``controller.json`` lists every snapshot's
validation and the index of the one saved (``selection``: ``candidates``, ``chosen``).

With budget tracking (``controller.budget_tracking``) the policy takes the log of the multiplier
as its last input, trained over a spread of prices about the dual update's
(``control/env.py``); ``controller.json``'s ``budget_tracking`` holds the saved snapshot's
multiplier and the deployment law, and the controller sets the price before each decision from
the run's share of samples above the cap so far (:func:`tracked_multiplier`), so it spends the
run's violation budget: more output while the run is under its target, less while over it.

:class:`PPOController` loads ``policy.npz`` and ``controller.json`` and implements the controller
protocol (``decide(observation) -> Action``) in a few microseconds of numpy: normalise, run the
actor network, take its mean action (deterministic), map it onto the actuators.
"""

from __future__ import annotations

import copy
import json
import math
import time
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grpo_power.atomic import write_atomic, write_text_atomic
from grpo_power.config import Config
from grpo_power.control.contract import ARRAY_FIELDS, Action, Observation
from grpo_power.control.env import (
    ControlSpace,
    GrpoPowerEnv,
    deployment_cap_w,
    observation_size,
    observe,
    tracks_budget,
)
from grpo_power.layout import CONTROLLER
from grpo_power.sim.calibration import Calibration
from grpo_power.sim.step_model import ONLINE_ACTUATORS
from grpo_power.stage_files import read_json, require_keys

CONTROLLER_KIND = "grpo-power PPO controller"
CURVE_COLUMNS = ["timesteps", "episode_return", "tokens_per_s", "violation_rate", "multiplier"]


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


def _actor_arrays(model: Any) -> dict[str, np.ndarray]:
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


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train_controller` did."""

    folder: Path
    space: ControlSpace
    timesteps: int
    train_s: float
    evaluation: dict[str, float]
    power_limit_w: float | None = None


def episode_return(env: GrpoPowerEnv, decide: Any, seed: int) -> dict[str, float]:
    """Return, output and violation rate of one episode driven by ``decide(obs_array)``, an
    action vector of the environment's space or an :class:`Action`."""
    obs, _ = env.reset(seed=seed)
    total = tokens = over = samples = 0.0
    done = False
    while not done:
        chosen = decide(obs)
        step = env.act(chosen) if isinstance(chosen, Action) else env.step(chosen)
        obs, reward, terminated, truncated, info = step
        total += reward
        tokens += info["tokens"]
        over += info["samples_over_cap"]
        samples += info["samples"]
        done = terminated or truncated
    return {"return": total, "tokens": tokens, "violation_rate": over / max(samples, 1.0)}


def train_controller(
    config: Config,
    calibration: Calibration,
    deployment: str,
    authority_rows: Iterable[Mapping[str, Any]],
    out: Path,
    cap_w: float | None = None,
    total_timesteps: int | None = None,
    eval_episodes: int = 4,
    hardware_tier: bool = False,
) -> TrainResult:
    """Train the PPO meta-controller of one deployment in the simulator and save it to ``out``.

    Args:
        config: settings (``controller`` section: PPO, reward, domain randomisation).
        calibration: the physics the simulator runs (and randomises over).
        deployment: deployment name.
        authority_rows: the authority table (its rows for ``deployment`` build the action space).
        out: the controller folder.
        cap_w: the cap trained for, W (``None``: the deployment's configured cap).
        total_timesteps: overrides ``controller.total_timesteps`` (either is multiplied by the
            deployment's ``training_steps_factor``).
        eval_episodes: nominal-physics episodes the trained and a random policy are scored on.
        hardware_tier: the controller of the ``ppo+hwcap`` arm: the GPU power limit is tuned
            first (``control/hardware_tier.py``) and the controller trained, validated and
            scored under it; False: no limit (the ``ppo`` arm).
    """
    import pandas as pd
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    settings = config.controller
    torch.set_num_threads(settings.torch_threads)
    rows = [dict(r) for r in authority_rows]
    space = ControlSpace.from_authority(rows, deployment, config.workload)
    cap_w = float(cap_w if cap_w is not None else deployment_cap_w(config, deployment))
    seed = settings.seed if settings.seed is not None else config.seed
    factor = config.sim.deployment(deployment).training_steps_factor
    timesteps = int((total_timesteps or settings.total_timesteps) * factor)
    tier = _tune_hardware_tier(config, calibration, deployment, cap_w) if hardware_tier else None
    power_limit_frac = None if tier is None else tier["power_limit_frac"]

    def make(rank: int) -> Any:
        def build() -> Any:
            env = GrpoPowerEnv(
                config,
                calibration,
                deployment,
                space,
                cap_w,
                settings.domain_randomization,
                power_limit_frac,
                changing=True,
            )
            env.reset(seed=seed * 1000 + rank)
            return Monitor(env)

        return build

    venv = VecNormalize(
        DummyVecEnv([make(rank) for rank in range(settings.n_envs)]),
        norm_obs=True,
        norm_reward=True,
        gamma=settings.gamma,
    )
    venv.seed(seed)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=settings.n_steps,
        batch_size=settings.batch_size,
        n_epochs=settings.n_epochs,
        learning_rate=settings.learning_rate,
        gamma=settings.gamma,
        ent_coef=settings.ent_coef,
        policy_kwargs={
            "net_arch": list(settings.net_arch),
            "log_std_init": settings.log_std_init,
        },
        seed=seed,
        device="cpu",
        verbose=0,
    )
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default makes a /tmp folder
    curve: list[dict[str, float]] = []
    budget = config.objective.violation_budget
    rollouts = math.ceil(timesteps / (settings.n_steps * settings.n_envs))
    snapshot_at = set(
        np.linspace(rollouts // 2, rollouts, settings.validation_snapshots).astype(int).tolist()
    )
    snapshots: list[Snapshot] = []

    class _Curve(BaseCallback):
        """Adapts the multiplier and records the learning curve after every rollout."""

        multiplier = settings.reward.violation_weight
        totals = np.zeros(4)  # tokens, step seconds, samples over the cap, samples
        rollouts_done = 0

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                if not info["nominal"]:  # the budget binds under the conditions trained for
                    continue
                self.totals += (
                    info["tokens"],
                    info["step_s"],
                    info["samples_over_cap"],
                    info["samples"],
                )
            return True

        def _on_rollout_end(self) -> None:
            tokens, step_s, over, samples = self.totals
            violation_rate = over / max(samples, 1.0)
            self.totals = np.zeros(4)
            r = settings.reward
            factor = 1.0 + r.multiplier_lr
            moved = (
                self.multiplier * factor if violation_rate > budget else self.multiplier / factor
            )
            self.multiplier = min(r.multiplier_max, max(r.multiplier_min, moved))
            venv.env_method("set_multiplier", self.multiplier)
            self.rollouts_done += 1
            if self.rollouts_done in snapshot_at:
                snapshots.append(
                    Snapshot(
                        self.num_timesteps,
                        copy.deepcopy(self.model.policy.state_dict()),
                        copy.deepcopy(venv.obs_rms),
                        self.multiplier,
                    )
                )
            episodes = self.model.ep_info_buffer
            curve.append(
                {
                    "timesteps": self.num_timesteps,
                    "episode_return": np.mean([float(e["r"]) for e in episodes])
                    if episodes
                    else float("nan"),
                    "tokens_per_s": tokens / max(step_s, 1e-9),
                    "violation_rate": violation_rate,
                    "multiplier": self.multiplier,
                }
            )

    started = time.perf_counter()
    dual = _Curve()
    model.learn(total_timesteps=timesteps, callback=dual, progress_bar=settings.progress_bar)
    train_s = time.perf_counter() - started
    snapshots.append(
        Snapshot(
            model.num_timesteps,
            copy.deepcopy(model.policy.state_dict()),
            copy.deepcopy(venv.obs_rms),
            dual.multiplier,
        )
    )
    limit_w = None if power_limit_frac is None else power_limit_frac * cap_w
    selection = _select_snapshot(
        snapshots, model, venv, config, calibration, deployment, space, cap_w, limit_w
    )
    tracking = _tracking_meta(config, deployment, snapshots[selection["chosen"]].multiplier)

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    arrays = _actor_arrays(model)

    def save_model(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            model.save(handle)

    def save_arrays(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            np.savez(handle, **arrays)

    write_atomic(out / CONTROLLER.policy_zip, save_model)
    write_atomic(out / CONTROLLER.normalization, venv.save)
    write_atomic(out / CONTROLLER.policy_npz, save_arrays)
    write_atomic(
        out / CONTROLLER.learning_curve,
        lambda tmp: pd.DataFrame(curve, columns=CURVE_COLUMNS).to_csv(tmp, index=False),
    )
    oracle = oracle_reference(config, calibration, deployment, cap_w, hardware_tier)
    meta = {
        "kind": CONTROLLER_KIND,
        "simulated": True,
        "deployment": deployment,
        "cap_w": cap_w,
        "arm": "ppo+hwcap" if hardware_tier else "ppo",
        "power_limit_frac": power_limit_frac,
        "power_limit_w": limit_w,
        "hardware_tier": tier,
        "space": space.to_dict(),
        "observation": _observation_meta(venv, tracking is not None),
        "budget_tracking": tracking,
        "authority": [r for r in rows if r["deployment"] == deployment],
        "calibration_digest": calibration.digest(),
        "calibration_origin": calibration.origin,
        "reward": settings.reward.model_dump(),
        "objective": config.objective.model_dump(),
        "oracle": oracle,
        "selection": selection,
        "training": {
            **settings.model_dump(exclude={"reward"}),
            "timesteps": timesteps,
            "seed": seed,
            "train_s": train_s,
        },
    }
    write_text_atomic(out / CONTROLLER.controller, json.dumps(meta, indent=2))
    controller = PPOController.load(out)
    evaluation = nominal_returns(
        config,
        calibration,
        deployment,
        space,
        cap_w,
        controller,
        eval_episodes,
        seed,
        power_limit_frac,
        oracle,
    )
    meta["evaluation"] = evaluation
    write_text_atomic(out / CONTROLLER.controller, json.dumps(meta, indent=2))
    return TrainResult(out, space, timesteps, train_s, evaluation, limit_w)


def _tune_hardware_tier(
    config: Config, calibration: Calibration, deployment: str, cap_w: float
) -> dict[str, Any]:
    """The ``ppo+hwcap`` controller's GPU power limit, tuned on the nominal physics over the
    deployment's budget (``control/hardware_tier.py``)."""
    from grpo_power.control.hardware_tier import tune_power_limit
    from grpo_power.sim.schedule import Schedule
    from grpo_power.sim.step_model import physics_for

    budget_s = config.sim.deployment(deployment).budget_s
    schedule = Schedule.constant(budget_s, config.sim.completion_tokens)
    return tune_power_limit(physics_for(calibration, deployment, config), config, cap_w, schedule)


def _observation_meta(venv: Any, tracking: bool) -> dict[str, Any]:
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


def _tracking_meta(config: Config, deployment: str, multiplier: float) -> dict[str, Any] | None:
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


@dataclass(frozen=True)
class Snapshot:
    """A policy saved during training: after ``timesteps`` steps, its weights, observation
    statistics and the dual update's multiplier then."""

    timesteps: int
    policy: dict[str, Any]
    obs_rms: Any
    multiplier: float


def _select_snapshot(
    snapshots: list[Snapshot],
    model: Any,
    venv: Any,
    config: Config,
    calibration: Calibration,
    deployment: str,
    space: ControlSpace,
    cap_w: float,
    power_limit_w: float | None,
) -> dict[str, Any]:
    """Validate each policy snapshot (see the module docstring; under the GPU power limit
    ``power_limit_w``, None: none), load the chosen one into ``model`` and ``venv``, and return
    the validation of every snapshot and the choice."""
    from grpo_power.analysis.objective import meets_budget, pooled, rank_key
    from grpo_power.control.simulate import run_outcome, simulate
    from grpo_power.sim.schedule import Schedule
    from grpo_power.sim.step_model import physics_for

    physics = physics_for(calibration, deployment, config)
    budget_s = config.sim.deployment(deployment).budget_s
    schedule = Schedule.constant(budget_s, config.sim.completion_tokens)
    seeds = config.evaluate.tuning_seeds
    candidates, keys = [], []
    for snapshot in snapshots:
        model.policy.load_state_dict(snapshot.policy)
        venv.obs_rms = snapshot.obs_rms
        tracking = _tracking_meta(config, deployment, snapshot.multiplier)
        meta = {
            "space": space.to_dict(),
            "observation": _observation_meta(venv, tracking is not None),
            "budget_tracking": tracking,
        }
        controller = PPOController(meta, _actor_arrays(model))
        outcome = pooled(
            [
                run_outcome(
                    simulate(
                        physics, config, controller, cap_w, budget_s, s, power_limit_w, schedule
                    ),
                    budget_s,
                    config.objective,
                )
                for s in seeds
            ]
        )
        keys.append(rank_key(outcome, config.objective))
        within = meets_budget(outcome.violation_rate, outcome.breaker_excess_w, config.objective)
        candidates.append(
            {
                "timesteps": int(snapshot.timesteps),
                "final": len(candidates) == len(snapshots) - 1,
                "tokens_per_s": outcome.tokens / budget_s,
                "violation_rate": outcome.violation_rate,
                "breaker_excess_w": outcome.breaker_excess_w,
                "within_budget": within,
            }
        )
    best = max(range(len(snapshots)), key=lambda i: (keys[i], i))  # ties: the later snapshot
    model.policy.load_state_dict(snapshots[best].policy)
    venv.obs_rms = snapshots[best].obs_rms
    return {
        "simulated": True,
        "seeds": list(seeds),
        "budget_s": budget_s,
        "criterion": "most tokens within the violation budget, else the fewest violations",
        "chosen": best,
        "candidates": candidates,
    }


def oracle_reference(
    config: Config, calibration: Calibration, deployment: str, cap_w: float, hardware: bool
) -> dict[str, Any]:
    """The oracle's plan on the nominal physics and the deployment's budget (simulated): the
    line a learning curve is drawn against. ``hardware``: the oracle of the hardware tier (the
    GPU power limit searched too), else the workload actuators'.

    Returns:
        ``{"tokens_per_s", "violation_rate", "feasible", "settings"}``: the plan's rates (its
        settings' outcomes weighted by their time shares; the plan may time-share settings to
        reach the budget) and each setting (actuator values, ``power_limit_w``, ``share``).
    """
    from grpo_power.control.oracle import search_oracle
    from grpo_power.sim.schedule import Schedule
    from grpo_power.sim.step_model import physics_for

    physics = physics_for(calibration, deployment, config)
    budget_s = config.sim.deployment(deployment).budget_s
    schedule = Schedule.constant(budget_s, config.sim.completion_tokens)
    result = search_oracle(physics, config, cap_w, schedule, config.evaluate.tuning_seeds, hardware)
    shares = [(s.end_s - s.start_s) / budget_s for s in result.segments]
    return {
        "tokens_per_s": sum(
            share * s.outcome.tokens / budget_s
            for share, s in zip(shares, result.segments, strict=True)
        ),
        "violation_rate": sum(
            share * s.outcome.violation_rate
            for share, s in zip(shares, result.segments, strict=True)
        ),
        "feasible": result.feasible,
        "settings": [
            {**s.values, "power_limit_w": s.power_limit_w, "share": share}
            for share, s in zip(shares, result.segments, strict=True)
        ],
    }


def nominal_returns(
    config: Config,
    calibration: Calibration,
    deployment: str,
    space: ControlSpace,
    cap_w: float,
    controller: PPOController,
    episodes: int,
    seed: int,
    power_limit_frac: float | None = None,
    oracle: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    """Mean episode return, output and violation rate of the trained and of a uniformly random
    policy on nominal physics (simulated; under the GPU power limit at ``power_limit_frac`` of
    the cap, None: no limit), and of the oracle's plan when ``oracle`` is given
    (:func:`oracle_reference`: each setting under its own limit, weighted by its time share):
    the same episodes at the same multiplier, so the three returns compare (the training
    curve's multiplier moves). The trained policy decides as deployed (with budget tracking at
    the price the episode's violation share so far sets)."""
    env = GrpoPowerEnv(config, calibration, deployment, space, cap_w, False, power_limit_frac)
    rng = np.random.default_rng(seed)
    seeds = [10_000 + seed + k for k in range(episodes)]
    mixes = {
        "trained": [(1.0, env, lambda _o: controller.decide(observe(env.run)))],
        "random": [(1.0, env, lambda _o: rng.uniform(-1, 1, len(space.actuators)))],
    }
    if oracle is not None:
        mixes["oracle"] = []
        for setting in oracle["settings"]:
            limit_w = setting["power_limit_w"]
            frac = None if limit_w is None else limit_w / cap_w
            action = Action(**{name: int(setting[name]) for name in ONLINE_ACTUATORS})
            own = GrpoPowerEnv(config, calibration, deployment, space, cap_w, False, frac)
            mixes["oracle"].append((setting["share"], own, lambda _o, a=action: a))
    out: dict[str, float] = {"episodes": float(episodes)}
    for name, mix in mixes.items():
        for key in ("return", "tokens", "violation_rate"):
            out[f"{name}_{key}"] = 0.0
        for share, episode_env, decide in mix:
            results = [episode_return(episode_env, decide, s) for s in seeds]
            for key in ("return", "tokens", "violation_rate"):
                out[f"{name}_{key}"] += share * float(np.mean([r[key] for r in results]))
    return out


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
        """Load a controller folder written by :func:`train_controller`.

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
