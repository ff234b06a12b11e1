"""The oracle arm (simulator only): the best static setting given the true model.

The simulated workload is stationary (every step at a setting has the same phases; only noise
and jitter differ), so the best achievable policy for a reward scored on rates is a static
setting. The oracle knows the physics of the run it controls (no randomisation, the true cap)
and scores every combination of every online actuator's integer values with the noise-free
plan's expected rates (:func:`~grpo_power.sim.step_model.expected_rates`: readings are Gaussian
around each phase's power), under the same reward the PPO controller is trained on. It is the
limit a learned controller is compared to, not a deployable controller.
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_power.config import Config
from grpo_power.control.env import step_reward
from grpo_power.sim.step_model import ExpectedRates, Physics, StepModel, expected_rates


@dataclass(frozen=True)
class OracleSetting:
    """The oracle's choice and its expected rates (simulated)."""

    concurrency: int
    max_new_tokens: int
    reward: float
    rates: ExpectedRates


def oracle_setting(
    physics: Physics, config: Config, cap_w: float, power_limit_w: float | None = None
) -> OracleSetting:
    """The static (concurrency, max new tokens) with the best expected reward on ``physics``."""
    w = config.workload
    model = StepModel(physics, w, config.sim.prompt_tokens, power_limit_w)
    noise_w = physics.model.params.noise_w
    reference = expected_rates(
        model.plan(w.concurrency, w.max_new_tokens, w.num_generations), cap_w, noise_w
    )
    best: OracleSetting | None = None
    for concurrency in range(w.concurrency_bounds.min, w.concurrency_bounds.max + 1):
        for max_new_tokens in range(w.max_new_tokens_bounds.min, w.max_new_tokens_bounds.max + 1):
            rates = expected_rates(
                model.plan(concurrency, max_new_tokens, w.num_generations), cap_w, noise_w
            )
            reward = step_reward(
                config.controller.reward,
                tokens_per_s=rates.tokens_per_s,
                violation_rate=rates.violation_rate,
                power_w=rates.power_w * physics.gpus,
                ref_tokens_per_s=reference.tokens_per_s,
                ref_power_w=reference.power_w * physics.gpus,
            )
            if best is None or reward > best.reward:
                best = OracleSetting(concurrency, max_new_tokens, reward, rates)
    assert best is not None  # bounds are never empty (validated by the config)
    return best
