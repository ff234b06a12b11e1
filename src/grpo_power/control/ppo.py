"""Training the PPO meta-controller in the simulator (stable-baselines3); the deployed form is
``control/policy.py``, the validation of its snapshots ``control/validation.py``.

Training (:func:`train_controller`) runs stable-baselines3 PPO on vectorised
:class:`~grpo_power.control.env.GrpoPowerEnv` copies with observation (and reward)
normalisation (``VecNormalize``), domain-randomised physics, conditions that change within
episodes (``controller.conditions``: completions ending early, a lower cap, derating), and the
action space the authority table gives for the deployment: its selected actuators driven, the
others held at the oracle's setting on the nominal physics where the oracle meets the budget
(:func:`oracle_holds`; ``controller.json``'s ``holds_from``), weighed over the caps the training
draws (:func:`robust_holds`; ``holds_caps_w``), else at the table's hold level.
A controller folder holds:

- ``policy.zip``: the SB3 model (to continue training or inspect);
- ``vecnormalize.pkl``: the SB3 normalisation statistics;
- ``policy.npz``: the actor's weights as arrays, for fast decisions without SB3
  (``control/policy.py``);
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
oscillates about it, so the policy is snapshotted ``controller.validation_snapshots`` times over
the second half of training (and at its end) and the saved one is chosen by validation on the
tuning seeds, at the deployment's cap and the ends of the training's cap range
(``control/validation.py``). ``controller.json`` lists every snapshot's validation
and the index of the one saved (``selection``: ``candidates``, ``chosen``). With
``controller.training_seeds`` above 1, PPO trains once per seed (``seed``, ``seed + 1``, ...) and
the validation chooses among every training's snapshots, as the study kept one of its three PPO
seeds; the learning curve saved is the chosen training's (``training.seed``).

With budget tracking (``controller.budget_tracking``) the policy takes the log of the multiplier
as its last input, trained over a spread of prices about the dual update's
(``control/env.py``); ``controller.json``'s ``budget_tracking`` holds the saved snapshot's
multiplier and the deployment law the deployed controller follows (``control/policy.py``).
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grpo_power.atomic import write_atomic, write_text_atomic
from grpo_power.config import Config
from grpo_power.config.workload import ActuatorBounds
from grpo_power.control.env import ControlSpace, GrpoPowerEnv
from grpo_power.control.policy import (
    CONTROLLER_KIND,
    PPOController,
    actor_arrays,
    observation_meta,
    tracking_meta,
)
from grpo_power.control.validation import (
    Snapshot,
    nominal_returns,
    oracle_reference,
    select_snapshot,
)
from grpo_power.layout import CONTROLLER
from grpo_power.sim.calibration import Calibration

CURVE_COLUMNS = ["timesteps", "episode_return", "tokens_per_s", "violation_rate", "multiplier"]
HOLD_GAIN = 0.01  # a held level other than the oracle's at the cap: over 1 % more across the caps


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train_controller` did."""

    folder: Path
    space: ControlSpace
    timesteps: int
    train_s: float
    evaluation: dict[str, float]
    power_limit_w: float | None = None


def oracle_holds(oracle: Mapping[str, Any], space: ControlSpace) -> dict[str, int]:
    """The levels ``space``'s held actuators are held at where the oracle (``oracle``: its
    plan, :func:`~grpo_power.control.validation.oracle_reference`) meets the budget: its
    longest-held setting's, the static part of the plan the controller then acts about; {}
    where the oracle cannot meet the budget (the authority table's hold levels stand)."""
    if not oracle["feasible"] or not oracle["settings"]:
        return {}
    setting = max(oracle["settings"], key=lambda s: s["share"])
    return {name: int(setting[name]) for name in space.holds if setting.get(name) is not None}


def training_caps_w(config: Config, cap_w: float) -> list[float]:
    """The caps the training draws from, W, ascending: ``cap_w`` and, with domain
    randomisation, the ends of ``controller.cap_jitter_frac`` about it, within idle and the
    nameplate (the range :class:`GrpoPowerEnv` draws in)."""
    jitter = config.controller.cap_jitter_frac
    if not config.controller.domain_randomization or jitter <= 0:
        return [cap_w]
    low_w, high_w = config.gpu.idle_w + 1.0, config.gpu.nameplate_w
    ends = [min(high_w, max(low_w, cap_w * f)) for f in (1.0 - jitter, 1.0 + jitter)]
    return sorted({*ends, cap_w})


def robust_holds(
    config: Config,
    calibration: Calibration,
    deployment: str,
    cap_w: float,
    hardware_tier: bool,
    space: ControlSpace,
    oracle: Mapping[str, Any],
) -> dict[str, int]:
    """The held actuators' levels across the caps the controller trains under
    (:func:`training_caps_w` about ``cap_w``), from ``oracle``, the oracle's plan at ``cap_w``
    (:func:`~grpo_power.control.validation.oracle_reference`): its longest-held setting's
    (:func:`oracle_holds`) where every cap's plan holds the actuator alike; else, one actuator
    at a time, among the candidate levels that make as much as it at ``cap_w`` (within
    ``HOLD_GAIN``, the search's noise), the one that makes the most summed over the caps (each
    cap's oracle with the actuator held there and the others at their holds; an infeasible cap
    makes nothing), where that is over ``HOLD_GAIN`` more than the longest-held level makes.
    The candidates: each cap's longest-held level, and every level from the lowest to the
    highest that the plan at ``cap_w`` time-shares.

    On 7b (simulated, 2026-12-07, the study's calibration) the plan at 320 W held the training
    chunk at 4 and made 440.8 tokens/s, at 1 442.4: a tie, but 4 makes 171.6 at 305 W where 1
    makes 213.9, and none within the budget at 294.4 W; it is held at 1. A level that loses at
    the deployment's own cap is not taken for what it makes under the others: 72b's max new
    tokens at 36, which the plan at the lowest training cap holds, cost its controller a quarter
    of its output in the study (68.5 % of its oracle, 92.1 % at the plan's 49). The plan at 220 W
    time-shares 72b's max new tokens at 49 (60 %) and 47 (40 %) to meet the budget; held at 48
    between them it runs one setting throughout (concurrency 32, chunks of 4) and makes 73.0
    tokens/s against 73.3 at 49, and the plan at 202.4 W then has a setting within the budget
    where 49 has none: it is held at 48."""
    holds = oracle_holds(oracle, space)
    caps_w = training_caps_w(config, cap_w)
    if not holds or len(caps_w) == 1:
        return holds
    plans = [
        oracle_holds(oracle_reference(config, calibration, deployment, c, hardware_tier), space)
        for c in caps_w
        if c != cap_w
    ]
    for name in holds:
        shared = [int(s[name]) for s in oracle["settings"] if s.get(name) is not None]
        between = range(min(shared), max(shared) + 1)
        levels = sorted({holds[name], *between, *(p[name] for p in plans if name in p)})
        if len(levels) == 1:
            continue
        made = {
            level: [
                _held_rate(config, calibration, deployment, c, hardware_tier, holds | {name: level})
                for c in caps_w
            ]
            for level in levels
        }
        own = caps_w.index(cap_w)
        tied = [  # levels as good as the oracle's at the deployment's own cap
            level
            for level in levels
            if made[level][own] >= (1.0 - HOLD_GAIN) * made[holds[name]][own]
        ]
        best = max(tied, key=lambda level: sum(made[level]))
        if sum(made[best]) > (1.0 + HOLD_GAIN) * sum(made[holds[name]]):
            holds[name] = best
    return holds


def _held_rate(
    config: Config,
    calibration: Calibration,
    deployment: str,
    cap_w: float,
    hardware_tier: bool,
    levels: Mapping[str, int],
) -> float:
    """The oracle's tokens/s under ``cap_w`` with the actuators in ``levels`` held there (its
    bounds and default that level); 0 where it cannot meet the budget."""
    # constructed: a pause held at 0 has bounds [0, 0], which a config may not give
    held = {
        f"{name}_bounds": ActuatorBounds.model_construct(min=v, max=v) for name, v in levels.items()
    }
    held.update(levels)
    fixed = config.model_copy(update={"workload": config.workload.model_copy(update=held)})
    oracle = oracle_reference(fixed, calibration, deployment, cap_w, hardware_tier)
    return float(oracle["tokens_per_s"]) if oracle["feasible"] else 0.0


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

    settings = config.controller
    torch.set_num_threads(settings.torch_threads)
    rows = [dict(r) for r in authority_rows]
    cap_w = float(cap_w if cap_w is not None else config.deployment_cap_w(deployment))
    oracle = oracle_reference(config, calibration, deployment, cap_w, hardware_tier)
    space = ControlSpace.from_authority(rows, deployment, config.workload)
    oracle_levels = robust_holds(
        config, calibration, deployment, cap_w, hardware_tier, space, oracle
    )
    space = space.held_at(oracle_levels)
    seed = settings.seed if settings.seed is not None else config.seed
    factor = config.sim.deployment(deployment).training_steps_factor
    timesteps = int((total_timesteps or settings.total_timesteps) * factor)
    tier = _tune_hardware_tier(config, calibration, deployment, cap_w) if hardware_tier else None
    power_limit_frac = None if tier is None else tier["power_limit_frac"]

    trainings = [
        _train_seed(config, calibration, deployment, space, cap_w, timesteps, power_limit_frac, s)
        for s in range(seed, seed + settings.training_seeds)
    ]
    snapshots = [snapshot for training in trainings for snapshot in training.snapshots]
    limit_w = None if power_limit_frac is None else power_limit_frac * cap_w
    first = trainings[0]
    selection = select_snapshot(
        snapshots,
        first.model,
        first.venv,
        config,
        calibration,
        deployment,
        space,
        cap_w,
        limit_w,
        [c for c in training_caps_w(config, cap_w) if c != cap_w],
    )
    chosen = snapshots[selection["chosen"]]
    training = next(t for t in trainings if t.seed == chosen.seed)
    model, venv, curve = training.model, training.venv, training.curve
    model.policy.load_state_dict(chosen.policy)
    venv.obs_rms = chosen.obs_rms
    tracking = tracking_meta(config, deployment, chosen.multiplier)
    train_s = sum(t.train_s for t in trainings)

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    arrays = actor_arrays(model)

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
        lambda tmp: (
            pd.DataFrame(curve, columns=CURVE_COLUMNS)
            .assign(data="simulated")
            .to_csv(tmp, index=False)
        ),
    )
    meta = {
        "kind": CONTROLLER_KIND,
        "simulated": True,
        "deployment": deployment,
        "cap_w": cap_w,
        # the part the simulator modelled: the callback warns on GPUs of another nameplate
        "gpu": {"name": config.gpu.name, "nameplate_w": config.gpu.nameplate_w},
        "arm": "ppo+hwcap" if hardware_tier else "ppo",
        "power_limit_frac": power_limit_frac,
        "power_limit_w": limit_w,
        "hardware_tier": tier,
        "space": space.to_dict(),
        "holds_from": "oracle" if oracle_levels else "authority",
        "holds_caps_w": training_caps_w(config, cap_w),  # the caps robust_holds weighed
        "observation": observation_meta(venv, tracking is not None),
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
            "seed": chosen.seed,  # the training the validated snapshot came from
            "seeds": [t.seed for t in trainings],
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


@dataclass
class _Training:
    """One PPO training of :func:`train_controller`: its model and normalised environments (left
    at the end of training), its snapshots, learning curve and wall time."""

    seed: int
    model: Any
    venv: Any
    snapshots: list[Snapshot]
    curve: list[dict[str, float]]
    train_s: float


def _train_seed(
    config: Config,
    calibration: Calibration,
    deployment: str,
    space: ControlSpace,
    cap_w: float,
    timesteps: int,
    power_limit_frac: float | None,
    seed: int,
) -> _Training:
    """Train PPO once from ``seed`` (see :func:`train_controller`) and snapshot it
    ``controller.validation_snapshots`` times over the second half of training and at its end."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    settings = config.controller

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
                        seed,
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
            seed,
        )
    )
    return _Training(seed, model, venv, snapshots, curve, train_s)


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
