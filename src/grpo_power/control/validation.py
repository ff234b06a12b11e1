"""Scoring a PPO controller in training: snapshots validated, the oracle's line, nominal returns.

``control/ppo.py`` trains the policy; the dual update meets the violation budget on average over
the randomised physics and its last iterate oscillates about it, so the saved policy is chosen
by validation, as the peers are tuned: :func:`select_snapshot` runs each :class:`Snapshot` as
deployed (:class:`~grpo_power.control.policy.PPOController`) over the deployment's budget on the
nominal physics and ``evaluate.tuning_seeds`` (never the evaluation seeds), at the deployment's
cap and at the ends of the cap range the training draws from (``control/ppo.py:
training_caps_w``), and :func:`choose_snapshot` picks one: within the budget at the
deployment's cap, the most output across the caps (else the fewest violations). Chosen at the
deployment's cap alone, the 7b controller made 53.9 % of its oracle at 305 W, a cap inside its
training's range (docs/design.md section 4, 'The saved policy is chosen by validation').

For the report's learning curve, :func:`oracle_reference` gives the oracle's plan on the nominal
physics (the line the curve is drawn against) and :func:`nominal_returns` the returns of the
trained policy, a random one and the oracle's plan over the same nominal episodes at the same
multiplier. All of it is simulated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpo_power.analysis.objective import Outcome, meets_budget, pooled, rank_key
from grpo_power.config import Config, ObjectiveConfig
from grpo_power.control.contract import Action
from grpo_power.control.env import ControlSpace, GrpoPowerEnv, observe
from grpo_power.control.policy import PPOController, actor_arrays, observation_meta, tracking_meta
from grpo_power.sim.calibration import Calibration
from grpo_power.sim.step_model import ONLINE_ACTUATORS


@dataclass(frozen=True)
class Snapshot:
    """A policy saved during training: after ``timesteps`` steps, its weights, observation
    statistics and the dual update's multiplier then, and the seed of the training it came
    from (``controller.training_seeds``)."""

    timesteps: int
    policy: dict[str, Any]
    obs_rms: Any
    multiplier: float
    seed: int


def select_snapshot(
    snapshots: list[Snapshot],
    model: Any,
    venv: Any,
    config: Config,
    calibration: Calibration,
    deployment: str,
    space: ControlSpace,
    cap_w: float,
    power_limit_w: float | None,
    other_caps_w: Sequence[float] = (),
) -> dict[str, Any]:
    """Validate each policy snapshot (see the module docstring; under the GPU power limit
    ``power_limit_w`` at ``cap_w``, None: none) at ``cap_w`` and at each of ``other_caps_w``
    (the power limit the same share of each), and return the validation of every snapshot and
    the index of the chosen one (``chosen``, :func:`choose_snapshot`). Each snapshot is run by
    loading it into ``model`` and ``venv`` (a model of the same architecture; they are left
    holding the last snapshot)."""
    from grpo_power.control.simulate import run_outcome, simulate
    from grpo_power.sim.schedule import Schedule
    from grpo_power.sim.step_model import physics_for

    physics = physics_for(calibration, deployment, config)
    budget_s = config.sim.deployment(deployment).budget_s
    schedule = Schedule.constant(budget_s, config.sim.completion_tokens)
    seeds = config.evaluate.tuning_seeds
    caps_w = [cap_w, *other_caps_w]
    candidates, outcomes = [], []
    for i, snapshot in enumerate(snapshots):
        model.policy.load_state_dict(snapshot.policy)
        venv.obs_rms = snapshot.obs_rms
        tracking = tracking_meta(config, deployment, snapshot.multiplier)
        meta = {
            "space": space.to_dict(),
            "observation": observation_meta(venv, tracking is not None),
            "budget_tracking": tracking,
        }
        controller = PPOController(meta, actor_arrays(model))
        at_caps = []
        for cap in caps_w:
            limit_w = None if power_limit_w is None else power_limit_w * cap / cap_w
            runs = [
                simulate(physics, config, controller, cap, budget_s, s, limit_w, schedule)
                for s in seeds
            ]
            at_caps.append(pooled([run_outcome(r, budget_s, config.objective) for r in runs]))
        outcomes.append(at_caps)
        rows = [
            {
                "cap_w": cap,
                "tokens_per_s": o.tokens / budget_s,
                "violation_rate": o.violation_rate,
                "breaker_excess_w": o.breaker_excess_w,
                "within_budget": meets_budget(
                    o.violation_rate, o.breaker_excess_w, config.objective
                ),
            }
            for cap, o in zip(caps_w, at_caps, strict=True)
        ]
        candidates.append(
            {
                "seed": snapshot.seed,
                "timesteps": int(snapshot.timesteps),
                "final": i == len(snapshots) - 1 or snapshots[i + 1].seed != snapshot.seed,
                **{k: v for k, v in rows[0].items() if k != "cap_w"},
                "other_caps": rows[1:],
            }
        )
    return {
        "simulated": True,
        "seeds": list(seeds),
        "budget_s": budget_s,
        "caps_w": caps_w,
        "criterion": CHOICE_CRITERION,
        "chosen": choose_snapshot(outcomes, [s.seed for s in snapshots], config.objective),
        "candidates": candidates,
    }


CHOICE_CRITERION = (
    "within the violation budget at the deployment's cap, the most of the best snapshot's tokens "
    "within the budget at each validated cap, summed over the caps; else the fewest violations "
    "at the deployment's cap"
)


def choose_snapshot(
    outcomes: Sequence[Sequence[Outcome]], seeds: Sequence[int], objective: ObjectiveConfig
) -> int:
    """The index of the snapshot :func:`select_snapshot` saves (:data:`CHOICE_CRITERION`).

    Args:
        outcomes: per snapshot, its pooled outcome at each validated cap, the deployment's first.
        seeds: per snapshot, the training seed it came from.
        objective: the violation budget and the breaker.

    Returns:
        among the snapshots within the budget at the deployment's cap, the one with the largest
        sum over the caps of its tokens as a share of the most any snapshot made within the
        budget there (a cap where it breaks the budget adds nothing); with none within it,
        the one with the fewest violations there. Ties: the later snapshot, of the first
        training where trainings tie.
    """
    within = [[rank_key(o, objective)[0] for o in row] for row in outcomes]
    best = [
        max((row[k].tokens for row, w in zip(outcomes, within, strict=True) if w[k]), default=0.0)
        for k in range(len(outcomes[0]))
    ]

    def key(i: int) -> tuple[bool, float]:
        if not within[i][0]:
            return rank_key(outcomes[i][0], objective)
        return True, sum(
            o.tokens / best[k] for k, o in enumerate(outcomes[i]) if within[i][k] and best[k] > 0
        )

    return max(range(len(outcomes)), key=lambda i: (key(i), -seeds[i], i))


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
