"""PPO controller decision latency, simulator speed, and the controller's targets against the
oracle and the classic peers (issues 4 and 16; everything SIMULATED).

- decision latency: ``PPOController.decide(observation)`` (numpy actor, what a real run calls
  between steps; target under 1 ms), next to SB3's own ``model.predict`` on the same policy;
- simulator: GRPO steps per second of :class:`SimRun` (with telemetry) on each deployment, and
  environment steps per second of :class:`GrpoPowerEnv` (what PPO training consumes).

- the targets: read from the study's evaluation under ``results/`` when the study has run
  (``benchmarks/controller_targets.py``; ``config/controller-targets.yaml`` adds the issue's
  scenarios), else reported as skipped. They are the benchmark's assertions (:func:`missed`):
  ``python -m benchmarks controller`` exits 1 when one is missed, after writing its result.

A short PPO training (a few thousand steps, seconds) provides the policy; latencies are
per-call percentiles over many calls. Run: ``python -m benchmarks controller``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import save_result
from benchmarks.controller_targets import missed_targets, print_targets, read_targets
from grpo_power.config import load_config
from grpo_power.control.contract import random_observations
from grpo_power.control.env import ControlSpace, GrpoPowerEnv
from grpo_power.control.policy import PPOController
from grpo_power.control.ppo import train_controller
from grpo_power.sim.calibration import default_calibration
from grpo_power.sim.grpo_sim import SimRun
from grpo_power.sim.step_model import StepModel, physics_for

TARGET_DECISION_S = 1e-3
ROWS = [
    {
        "deployment": "7b",
        "actuator": name,
        "data": "simulated",
        "selected": True,
        "authority": 0.2,
        "hold_level": 0,
    }
    for name in ("concurrency", "max_new_tokens")
]


def _percentiles_us(times_s: list[float]) -> dict[str, float]:
    values = np.array(times_s) * 1e6
    return {
        "median_us": round(float(np.median(values)), 2),
        "p99_us": round(float(np.percentile(values, 99)), 2),
        "mean_us": round(float(values.mean()), 2),
        "calls": len(values),
    }


def decision_latency(folder: Path, calls: int = 20_000) -> dict[str, Any]:
    """Per-call latency of the deployed controller and of SB3's predict on the same policy."""
    import pickle

    from stable_baselines3 import PPO

    controller = PPOController.load(folder)
    observations = random_observations(calls, np.random.default_rng(0))
    for obs in observations[:100]:  # warm up
        controller.decide(obs)
    ours = []
    for obs in observations:
        started = time.perf_counter()
        controller.decide(obs)
        ours.append(time.perf_counter() - started)
    model = PPO.load(folder / "policy.zip", device="cpu")
    with (folder / "vecnormalize.pkl").open("rb") as handle:
        normalizer = pickle.load(handle)
    sb3 = []
    for obs in observations[: calls // 10]:
        started = time.perf_counter()
        raw = controller.policy_input(obs)[None, :]
        model.predict(normalizer.normalize_obs(raw), deterministic=True)
        sb3.append(time.perf_counter() - started)
    return {"ppo_controller_decide": _percentiles_us(ours), "sb3_predict": _percentiles_us(sb3)}


def simulator_speed(seconds: float = 3.0) -> dict[str, Any]:
    """GRPO steps per second of the simulator (with telemetry) per deployment, and environment
    steps per second (observation, reward) on 7b."""
    config = load_config()
    calibration = default_calibration(config)
    out: dict[str, Any] = {}
    for name in ("7b", "14b", "72b"):
        physics = physics_for(calibration, name, config)
        run = SimRun(
            StepModel(physics, config.workload, config.sim.prompt_tokens),
            config.workload,
            config.telemetry.period_s,
            config.arms.observation_window_s,
            config.cap_w,
            seed=0,
            jitter=config.sim.step_jitter,
        )
        rng = np.random.default_rng(0)
        steps, samples = 0, 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            record = run.step(int(rng.integers(1, 33)), int(rng.integers(8, 65)))
            steps += 1
            samples += record.power_w.size
        elapsed = time.perf_counter() - started
        out[f"sim_{name}"] = {
            "steps_per_s": round(steps / elapsed),
            "samples_per_s": round(samples / elapsed),
            "simulated_s_per_wall_s": round(run.t_s / elapsed),
        }
    space = ControlSpace.from_authority(ROWS, "7b", config.workload)
    env = GrpoPowerEnv(config, calibration, "7b", space)
    env.reset(seed=0)
    steps = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        *_, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if truncated:
            env.reset()
    out["env_7b_steps_per_s"] = round(steps / (time.perf_counter() - started))
    return out


def main() -> dict[str, Any]:
    config = load_config(overrides={"controller": {"total_timesteps": 4096, "n_envs": 4}})
    # the steps trained: the setting times 7b's training_steps_factor (8,192 by default)
    steps = int(4096 * config.sim.deployment("7b").training_steps_factor)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        train_controller(config, default_calibration(config), "7b", ROWS, Path(tmp) / "7b")
        train_s = time.perf_counter() - started
        latency = decision_latency(Path(tmp) / "7b")
    speed = simulator_speed()
    targets = read_targets(load_config().layout)
    decide = latency["ppo_controller_decide"]
    result = {
        "simulated": True,
        "decision_latency": latency,
        "simulator": speed,
        "ppo_training_steps": steps,
        # the whole training call: PPO's steps, its snapshots' validation and the evaluation
        "ppo_training_s": round(train_s, 2),
        "target_decision_s": TARGET_DECISION_S,
        "meets_decision_target": decide["p99_us"] * 1e-6 < TARGET_DECISION_S,
        "controller_targets": targets,
        "load_average_1min": os.getloadavg()[0],
    }
    print(
        f"decision latency: median {decide['median_us']} us, p99 {decide['p99_us']} us "
        f"(SB3 predict median {latency['sb3_predict']['median_us']} us); "
        f"simulator 7b {speed['sim_7b']['steps_per_s']} steps/s, "
        f"72b {speed['sim_72b']['steps_per_s']} steps/s; env {speed['env_7b_steps_per_s']} steps/s"
    )
    print_targets(targets)
    return save_result("controller", result)


def missed(result: dict[str, Any]) -> list[str]:
    """The controller targets ``result`` misses, one line each (none when skipped)."""
    return missed_targets(result["controller_targets"])


if __name__ == "__main__":
    main()
