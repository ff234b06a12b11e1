"""Every arm of the study run in the simulator, with the tuning of fixed-safe and threshold.

This module drives simulated runs (:class:`~grpo_power.sim.grpo_sim.SimRun`) with the same
controllers a real run uses and writes what happened to files; ``analysis/evaluate.py`` turns
the files into metrics, so analysis never imports torch, SB3 or the simulator.

Arms (docs/design.md section 4) in the simulator:

| arm          | controller                                                                  |
|--------------|-----------------------------------------------------------------------------|
| uncontrolled | fixed at the upper bounds of concurrency and max new tokens                 |
| fixed        | fixed at the workload's configured defaults                                 |
| fixed-safe   | the tuned static setting below (p99 under the cap)                         |
| threshold    | AIMD on concurrency (:class:`ThresholdController`), tuned as below          |
| ppo          | the trained PPO meta-controller (``controller.json`` + ``policy.npz``)      |
| hwcap        | uncontrolled settings with the GPU power limit set to the cap              |
| ppo+hwcap    | its own PPO controller, trained under the tuned GPU power limit (the       |
|              | hardware tier, ``hardware_tier.py``), the limit set to its share of the cap |
|              | (and to the share tuned at each cap a schedule lowers it to)                |
| oracle       | the best setting per segment in hindsight, by simulation (``oracle.py``)   |
| oracle+hwcap | the same search with the GPU power limit too (limit of the hardware tier)  |

Tuning (documented procedures, on seeds never used for evaluation, ``evaluate.tuning_seeds``,
runs of ``tuning_budget_frac`` of the deployment's budget):

- fixed-safe: every concurrency in its bounds x every max-new-tokens level (powers of two and
  the bounds) runs; a setting is safe when the percentile ``arms.fixed_safe.percentile`` of its
  per-GPU readings is under the cap (the run stage's criterion); the safe setting with the most
  output wins (the lowest p99 if none is safe). This is stronger than the run stage's search,
  which varies concurrency only.
- threshold: every combination of ``evaluate.threshold_grid`` (high and low thresholds, decrease
  factor) x every max-new-tokens level runs; the best by the study's objective
  (``analysis/objective.py``: most output within the violation budget, pooled over the tuning
  seeds) wins.

In a scenario with a schedule (``sim/schedule.py``) every run, the tuning runs included, follows
the schedule (scaled to the run's length).

Per deployment the output folder gets ``<arm>.samples.parquet`` (seed, gpu, sample index,
power_w; ``t = sample * period_s``), ``<arm>.steps.parquet`` (one row per step) and
``arms.json`` (every arm's settings, tuning tables, cap, budget). Samples carry the cap they were
taken under (``cap_w``; a schedule changes it). All simulated.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from grpo_power.analysis.objective import pooled, rank_key
from grpo_power.atomic import write_json_atomic, write_parquet_atomic
from grpo_power.config import (
    ORACLE_ARMS,
    STATIC_ARMS,
    Config,
    ThresholdArmConfig,
    power_limit_w,
    static_setting,
    uses_hardware_tier,
)
from grpo_power.control.controllers import Controller, FixedController, ThresholdController
from grpo_power.control.hardware_tier import limits_by_cap
from grpo_power.control.oracle import search_oracle
from grpo_power.control.policy import PPOController
from grpo_power.control.simulate import run_outcome, simulate
from grpo_power.layout import SIM_RUN, SIM_RUN_METADATA_KEY
from grpo_power.sim.calibration import Calibration
from grpo_power.sim.grpo_sim import SimRun
from grpo_power.sim.schedule import Schedule
from grpo_power.sim.step_model import Physics, physics_for


@dataclass(frozen=True)
class ArmPlan:
    """How one arm runs on one deployment: a controller factory and the GPU power limit (at
    the deployment's cap; ``limit_shares``: the share of each cap a schedule sets, by its
    ``cap_frac``, where the hardware tier is tuned per cap)."""

    arm: str
    make: Callable[[], Controller]
    power_limit_w: float | None
    settings: dict[str, Any]
    limit_shares: dict[float, float] | None = None

    def run(
        self,
        physics: Physics,
        config: Config,
        cap_w: float,
        budget_s: float,
        seed: int,
        schedule: Schedule,
    ) -> SimRun:
        """One simulated run of the arm (:func:`~grpo_power.control.simulate.simulate`)."""
        return simulate(
            physics,
            config,
            self.make(),
            cap_w,
            budget_s,
            seed,
            self.power_limit_w,
            schedule,
            self.limit_shares,
        )


def tune_fixed_safe(
    physics: Physics, config: Config, cap_w: float, schedule: Schedule
) -> dict[str, Any]:
    """The fixed-safe setting by the documented grid search (see the module docstring)."""
    w = config.workload
    budget_s = schedule.budget_s * config.evaluate.tuning_budget_frac
    tuning = schedule.scaled(budget_s)
    percentile = config.arms.fixed_safe.percentile
    rows = []
    for concurrency in range(w.concurrency_bounds.min, w.concurrency_bounds.max + 1):
        for max_new_tokens in w.max_new_tokens_bounds.levels():
            controller = FixedController(concurrency, max_new_tokens)
            power, tokens = [], 0.0
            for seed in config.evaluate.tuning_seeds:
                run = simulate(physics, config, controller, cap_w, budget_s, seed, None, tuning)
                excess_w = [(s.power_w - s.sample_cap_w[:, None]).ravel() for s in run.steps]
                power.append(np.concatenate(excess_w) + cap_w)
                tokens += run_outcome(run, budget_s, config.objective).tokens
            p_w = float(np.percentile(np.concatenate(power), percentile))
            rows.append(
                {
                    "concurrency": concurrency,
                    "max_new_tokens": max_new_tokens,
                    f"p{percentile:g}_power_w": p_w,
                    "safe": p_w < cap_w,
                    "tokens_per_s": tokens / (budget_s * len(config.evaluate.tuning_seeds)),
                }
            )
    table = pd.DataFrame(rows)
    safe = table[table["safe"]]
    if len(safe):
        best = safe.sort_values(["tokens_per_s", "concurrency"], ascending=False).iloc[0]
    else:
        best = table.sort_values(f"p{percentile:g}_power_w").iloc[0]
    return {
        "concurrency": int(best["concurrency"]),
        "max_new_tokens": int(best["max_new_tokens"]),
        "under_cap": bool(len(safe)),
        "criterion": f"p{percentile:g} of per-GPU readings < cap, most output",
        "candidates": rows,
    }


def _threshold_grid(config: Config) -> list[ThresholdArmConfig]:
    grid = config.evaluate.threshold_grid
    out = []
    for high, low, factor in itertools.product(
        grid.high_frac_of_cap, grid.low_frac_of_cap, grid.decrease_factor
    ):
        if low < high:
            out.append(
                ThresholdArmConfig(
                    high_frac_of_cap=high,
                    low_frac_of_cap=low,
                    decrease_factor=factor,
                    increase_step=config.arms.threshold.increase_step,
                )
            )
    return out


def tune_threshold(
    physics: Physics, config: Config, cap_w: float, schedule: Schedule
) -> dict[str, Any]:
    """The threshold arm's settings by the documented grid search (see the module docstring)."""
    w = config.workload
    budget_s = schedule.budget_s * config.evaluate.tuning_budget_frac
    tuning = schedule.scaled(budget_s)
    rows = []
    best: tuple[tuple[bool, float], ThresholdArmConfig, int] | None = None
    for settings in _threshold_grid(config):
        for max_new_tokens in w.max_new_tokens_bounds.levels():
            outcomes = []
            for seed in config.evaluate.tuning_seeds:
                controller = ThresholdController(
                    settings, w.concurrency_bounds, w.concurrency, max_new_tokens
                )
                run = simulate(physics, config, controller, cap_w, budget_s, seed, None, tuning)
                outcomes.append(run_outcome(run, budget_s, config.objective))
            outcome = pooled(outcomes)
            key = rank_key(outcome, config.objective)
            rows.append(
                {
                    **settings.model_dump(),
                    "max_new_tokens": max_new_tokens,
                    "tokens": outcome.tokens,
                    "violation_rate": outcome.violation_rate,
                    "breaker_excess_w": outcome.breaker_excess_w,
                    "within_budget": key[0],
                }
            )
            if best is None or key > best[0]:
                best = (key, settings, max_new_tokens)
    assert best is not None  # the grid always holds low < high pairs (validated below)
    return {
        "settings": best[1].model_dump(),
        "max_new_tokens": best[2],
        "start_concurrency": w.concurrency,
        "criterion": "the objective on the tuning seeds: most output within the budget",
        "candidates": rows,
    }


def arm_plans(
    arms: list[str],
    physics: Physics,
    config: Config,
    cap_w: float,
    controllers: dict[str, Path],
    schedule: Schedule,
    seeds: list[int],
) -> list[ArmPlan]:
    """How each arm runs on the deployment of ``physics`` (tuning the arms that need it).

    Args:
        arms: arm names; ``ppo``, ``ppo+hwcap`` and any ``ppo-*`` need a folder in
            ``controllers``.
        controllers: arm name -> PPO controller folder for this deployment.
        schedule: the conditions over an evaluation run (tuning runs scale it).
        seeds: the evaluation seeds (the oracle's hindsight).
    """
    w = config.workload
    plans = []
    statics: list[tuple[int, int]] = []  # the static peers' settings: the oracle's finalists
    # the oracles last: the static peers' settings are among their finalists
    for arm in [a for a in arms if a not in ORACLE_ARMS] + [a for a in arms if a in ORACLE_ARMS]:
        if arm in STATIC_ARMS:
            c, m = static_setting(arm, w)
            limit = power_limit_w(arm, cap_w)
            settings = {"concurrency": c, "max_new_tokens": m, "power_limit_w": limit}
            plans.append(ArmPlan(arm, lambda c=c, m=m: FixedController(c, m), limit, settings))
            statics.append((c, m))
        elif arm == "fixed-safe":
            tuned = tune_fixed_safe(physics, config, cap_w, schedule)
            c, m = tuned["concurrency"], tuned["max_new_tokens"]
            plans.append(ArmPlan(arm, lambda c=c, m=m: FixedController(c, m), None, tuned))
            statics.append((c, m))
        elif arm == "threshold":
            tuned = tune_threshold(physics, config, cap_w, schedule)
            settings_t = ThresholdArmConfig(**tuned["settings"])
            m = tuned["max_new_tokens"]

            def make_threshold(s: ThresholdArmConfig = settings_t, m: int = m) -> Controller:
                return ThresholdController(s, w.concurrency_bounds, w.concurrency, m)

            plans.append(ArmPlan(arm, make_threshold, None, tuned))
        elif arm in ORACLE_ARMS:
            hardware = uses_hardware_tier(arm)
            result = search_oracle(physics, config, cap_w, schedule, seeds, hardware, statics)
            plans.append(ArmPlan(arm, lambda r=result: r.controller(), None, result.settings()))
        elif arm.startswith("ppo"):
            plans.append(_ppo_plan(arm, physics, config, controllers, cap_w, schedule))
        else:
            raise ValueError(f"unknown simulator arm {arm!r}")
    return sorted(plans, key=lambda plan: arms.index(plan.arm))


def _ppo_plan(
    arm: str,
    physics: Physics,
    config: Config,
    controllers: dict[str, Path],
    cap_w: float,
    schedule: Schedule,
) -> ArmPlan:
    """The plan of a PPO arm: its trained controller; for ``ppo+hwcap`` under the hardware
    tier's limit at each cap the run is given (``hardware_tier.limits_by_cap``: the share it
    was trained under at ``cap_w``, the share tuned at each cap a schedule lowers it to)."""
    if arm not in controllers:
        raise ValueError(f"arm {arm!r} needs its trained controller folder")
    controller = PPOController.load(controllers[arm], physics.name)
    frac = controller.power_limit_frac
    if uses_hardware_tier(arm) != (frac is not None):
        raise ValueError(
            f"{controllers[arm]}/controller.json: power_limit_frac: arm {arm!r} expected a "
            f"controller trained {'under' if uses_hardware_tier(arm) else 'without'} the GPU "
            f"power limit, got {frac!r}; train it with `grpo-power controller train --arm {arm}`"
        )
    limits = None if frac is None else limits_by_cap(physics, config, cap_w, schedule, frac)
    limit_w = power_limit_w(arm, cap_w, frac)
    settings = {
        "folder": str(controllers[arm]),
        "actuators": list(controller.space.actuators),
        "holds": controller.space.holds,
        "trained_cap_w": controller.meta["cap_w"],
        "calibration_digest": controller.meta["calibration_digest"],
        "power_limit_frac": frac,
        "power_limit_w": limit_w,
        "power_limit_by_cap": limits,
    }
    shares = None if limits is None else {r["cap_frac"]: r["power_limit_frac"] for r in limits}
    return ArmPlan(arm, lambda c=controller: c, limit_w, settings, shares)


def run_arm(
    plan: ArmPlan,
    physics: Physics,
    config: Config,
    cap_w: float,
    seeds: list[int],
    out: Path,
    schedule: Schedule,
) -> None:
    """Run one arm over ``seeds`` and write its samples and steps into ``out``."""
    budget_s = schedule.budget_s
    sample_frames, step_frames = [], []
    for seed in tqdm(seeds, desc=f"{physics.name} {plan.arm}", unit="seed", leave=False):
        run = plan.run(physics, config, cap_w, budget_s, seed, schedule)
        index = np.concatenate([s.sample_index for s in run.steps])
        power = np.concatenate([s.power_w for s in run.steps])
        caps = np.concatenate([s.sample_cap_w for s in run.steps])
        keep = index * run.period_s < budget_s
        index, power, caps = index[keep], power[keep], caps[keep]
        gpus = power.shape[1]
        sample_frames.append(
            pd.DataFrame(
                {
                    "seed": np.full(power.size, seed, dtype=np.int32),
                    "gpu": np.tile(np.arange(gpus, dtype=np.int16), len(index)),
                    "sample": np.repeat(index.astype(np.int64), gpus),
                    "power_w": power.ravel(),
                    "cap_w": np.repeat(caps.astype(np.float32), gpus),
                }
            )
        )
        step_frames.append(
            pd.DataFrame(
                {
                    "seed": seed,
                    "step": np.arange(1, len(run.steps) + 1),
                    "start_s": [s.start_s for s in run.steps],
                    "end_s": [s.end_s for s in run.steps],
                    "concurrency": [s.concurrency for s in run.steps],
                    "max_new_tokens": [s.max_new_tokens for s in run.steps],
                    "train_micro_batch": [s.train_micro_batch for s in run.steps],
                    "pause_s": [s.pause_s for s in run.steps],
                    "num_generations": [s.num_generations for s in run.steps],
                    "tokens": [s.tokens for s in run.steps],
                    "energy_j": [s.energy_j for s in run.steps],
                    "cap_w": [s.cap_w for s in run.steps],
                }
            )
        )
    metadata = {
        "simulated": True,
        "deployment": physics.name,
        "arm": plan.arm,
        "gpus": physics.gpus,
        "cap_w": cap_w,
        "budget_s": budget_s,
        "period_s": config.telemetry.period_s,
        "nameplate_w": physics.model.gpu.nameplate_w,
        "idle_w": physics.idle_w,
        "power_limit_w": plan.power_limit_w,
    }
    out.mkdir(parents=True, exist_ok=True)
    key_value = {SIM_RUN_METADATA_KEY: json.dumps(metadata).encode()}
    write_parquet_atomic(out / SIM_RUN.samples(plan.arm), pd.concat(sample_frames), key_value)
    write_parquet_atomic(out / SIM_RUN.steps(plan.arm), pd.concat(step_frames), key_value)


def evaluate_deployment(
    config: Config,
    calibration: Calibration,
    deployment: str,
    out: Path,
    arms: list[str],
    controllers: dict[str, Path],
    cap_w: float | None = None,
    seeds: list[int] | None = None,
    schedule: list[Any] | None = None,
) -> dict[str, Any]:
    """Tune and run every arm on one deployment (nominal physics); write files into ``out``.

    Args:
        schedule: the scenario's schedule segments (``evaluate.scenarios[].schedule``); None or
            empty = constant conditions.

    Returns the arms' settings (also written to ``out/arms.json``).
    """
    physics = physics_for(calibration, deployment, config)
    cap_w = float(cap_w if cap_w is not None else config.deployment_cap_w(deployment))
    seeds = list(seeds if seeds is not None else config.evaluate.seeds)
    budget_s = config.sim.deployment(deployment).budget_s
    timeline = Schedule.from_segments(schedule or [], budget_s, config.sim.completion_tokens)
    plans = arm_plans(arms, physics, config, cap_w, controllers, timeline, seeds)
    for plan in tqdm(plans, desc=f"{deployment} arms", unit="arm"):
        run_arm(plan, physics, config, cap_w, seeds, out, timeline)
    info = {
        "simulated": True,
        "deployment": deployment,
        "gpus": physics.gpus,
        "cap_w": cap_w,
        "budget_s": budget_s,
        "seeds": seeds,
        "objective": config.objective.model_dump(),
        "schedule": [{"start_s": a, "end_s": b, **vars(c)} for a, b, c in timeline.segments()],
        "calibration_digest": calibration.digest(),
        "calibration_origin": calibration.origin,
        "arms": {plan.arm: plan.settings for plan in plans},
    }
    write_json_atomic(out / SIM_RUN.arms, info)
    return info
