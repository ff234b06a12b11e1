"""Config sections of the actuator authority sweep (``authority``) and the PPO
meta-controller (``controller``, with its reward)."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
)

from grpo_power.config.base import (
    Fraction,
    PositiveFloat,
    Strict,
)


class AuthorityConfig(Strict):
    """The authority stage (``analysis/authority.py``, docs/design.md section 2)."""

    threshold: Fraction = Field(
        0.05,
        description="Authority (share of nameplate - idle) an actuator needs to enter a "
        "deployment's controller action space.",
    )
    reference: str = Field(
        "7b", description="Single-GPU deployment that retained authority is relative to."
    )
    real_sweep_steps: Annotated[int, Field(ge=0)] = Field(
        3,
        description="Steps of each real-workload sweep run (every actuator at its bounds) that "
        "identify measures and fits from; 0 = simulated sweeps only.",
    )


class RewardConfig(Strict):
    """Reward of the PPO meta-controller: the study's objective as a Lagrangian, scored on a
    step's rates against the fixed arm's (``control/env.py``)::

        tokens_weight * tokens_per_s / fixed tokens_per_s
        - multiplier * (violation share - objective.violation_budget + breaker)
        - energy_weight * power / fixed power

    The multiplier starts at ``violation_weight`` and follows a multiplicative dual update
    during training (``control/ppo.py``)."""

    tokens_weight: Annotated[float, Field(ge=0)] = 1.0
    violation_weight: Annotated[float, Field(ge=0)] = Field(
        10.0,
        description="Initial Lagrange multiplier of the violation budget (10: one point of "
        "violation share over the budget costs 10 % of the fixed arm's output).",
    )
    multiplier_lr: Annotated[float, Field(ge=0)] = Field(
        0.1,
        description="Relative dual step of the multiplier after each rollout: x (1 + lr) when "
        "the rollout's violation share is above the budget, / (1 + lr) when below; 0 = a fixed "
        "penalty.",
    )
    multiplier_min: Annotated[float, Field(gt=0)] = Field(
        1.0, description="Lowest the multiplier may fall to."
    )
    multiplier_max: Annotated[float, Field(gt=0)] = Field(
        200.0, description="Highest the multiplier may grow to."
    )
    energy_weight: Annotated[float, Field(ge=0)] = Field(
        0.0,
        description="Penalty on power relative to the fixed arm's (0: the objective counts "
        "tokens only).",
    )


class TrainingConditionsConfig(Strict):
    """Conditions that change within PPO training episodes (``control/env.py``): an episode
    starts under a draw and redraws after a geometric number of steps (mean
    ``change_every_steps``). A draw is the nominal conditions with probability
    ``nominal_share``; otherwise one factor, chosen uniformly, moves to a value drawn within its
    range: completions end early (EOS), the cap drops, or the phases slow down (derating). The
    draws know nothing of the evaluation's scenarios: the controller meets the kinds of change,
    at random depths and times, so that it learns to follow them rather than one schedule."""

    change_every_steps: Annotated[int, Field(ge=0)] = Field(
        0,
        description="Mean GRPO steps between redraws of the conditions (geometric); 0 (the "
        "default) = constant nominal conditions in every episode. Opt-in: at the default "
        "training length it cost the study's nominal output (docs/design.md).",
    )
    nominal_share: Fraction = Field(
        0.5, description="Chance that a draw is the nominal conditions."
    )
    completion_frac_min: Annotated[float, Field(gt=0, le=1)] = Field(
        0.1,
        description="Completions that end early end at a median length log-uniform between "
        "this share and all of max_new_tokens' upper bound (sim.completion_tokens_sigma "
        "spreads them about it).",
    )
    cap_frac_min: Annotated[float, Field(gt=0, le=1)] = Field(
        0.7, description="A lowered cap is uniform between this share and all of the episode's."
    )
    slowdown_max: Annotated[float, Field(ge=1, le=3)] = Field(
        1.5,
        description="Derated phases last uniformly 1 to this many times longer (and draw that "
        "much less power above idle).",
    )


class BudgetTrackingConfig(Strict):
    """A controller that spends the run's violation budget (``control/ppo.py``). Training draws
    each episode's Lagrange multiplier about the dual update's (``spread``) and gives the policy
    its logarithm as one more input, so the policy learns the trade at every price; the deployed
    controller then sets the price from the run's share of samples above the cap so far::

        multiplier = trained multiplier x exp(gain x (run share - target) / target)
        target = target_frac x objective.violation_budget

    (within ``reward.multiplier_min``..``multiplier_max``): below the target it asks for more
    output, above it for less, so the run ends near the budget however the workload, the cap or
    the GPUs changed. ``enabled`` is every deployment's default; a deployment may set its own
    (``sim.deployments[].budget_tracking``: 7b on; measured in docs/design.md 'Budget
    tracking')."""

    enabled: bool = Field(
        False,
        description="Train and deploy the budget-tracking controller on every deployment "
        "without a budget_tracking of its own; false (the default): one multiplier, the "
        "policy's input is the observation alone.",
    )
    spread: Annotated[float, Field(ge=0, le=5)] = Field(
        2.0,
        description="Training episodes draw the multiplier log-uniformly within +-this many "
        "e-folds of the dual update's (the range the deployed price may move in).",
    )
    target_frac: Annotated[float, Field(gt=0, le=1)] = Field(
        0.9,
        description="The run's violation share the deployed controller steers to, as a share "
        "of objective.violation_budget (below 1: a margin for the last steps' overshoot).",
    )
    gain: Annotated[float, Field(gt=0)] = Field(
        20.0,
        description="e-folds of the multiplier per relative error of the run's violation share "
        "(20: a run 5 % over its target pays e = 2.7 times the trained price).",
    )


class ControllerConfig(Strict):
    """PPO meta-controller training in the simulator (``control/ppo.py``)."""

    reward: RewardConfig = Field(default_factory=RewardConfig)
    total_timesteps: Annotated[int, Field(ge=64)] = Field(
        40_000, description="Environment steps (GRPO steps) of PPO training per deployment."
    )
    episode_steps: Annotated[int, Field(ge=2)] = Field(
        64,
        description="GRPO steps per training episode (rewards are rates, so every step "
        "weighs the same whatever its length).",
    )
    n_envs: Annotated[int, Field(ge=1)] = Field(8, description="Vectorised environments.")
    n_steps: Annotated[int, Field(ge=2)] = Field(64, description="Steps per env per update.")
    batch_size: Annotated[int, Field(ge=2)] = 128
    n_epochs: Annotated[int, Field(ge=1)] = 8
    learning_rate: PositiveFloat = 1e-3
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.5
    net_arch: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [32, 32])
    log_std_init: float = Field(
        -1.0, description="Initial log standard deviation of the Gaussian policy's actions."
    )
    ent_coef: Annotated[float, Field(ge=0)] = 0.0
    domain_randomization: bool = Field(
        True, description="Draw the physics from the calibration's ranges every episode."
    )
    cap_jitter_frac: Annotated[float, Field(ge=0, le=0.3)] = Field(
        0.08, description="Training caps are drawn within +-this share of cap_w."
    )
    conditions: TrainingConditionsConfig = Field(default_factory=TrainingConditionsConfig)
    budget_tracking: BudgetTrackingConfig = Field(default_factory=BudgetTrackingConfig)
    validation_snapshots: Annotated[int, Field(ge=1)] = Field(
        10,
        description="Policy snapshots taken evenly over the second half of PPO training; each, "
        "and the final policy, is validated on the nominal physics over evaluate.tuning_seeds "
        "and the objective picks the one saved.",
    )
    training_seeds: Annotated[int, Field(ge=1)] = Field(
        1,
        description="PPO trainings of each controller, from seeds seed, seed+1, ...; the "
        "validation picks the saved policy among every training's snapshots (the study trained "
        "three seeds and kept the one that passed validation).",
    )
    torch_threads: Annotated[int, Field(ge=1)] = 1
    progress_bar: bool = Field(
        True, description="Show SB3's training progress bar (tqdm and rich) on the terminal."
    )
    seed: Annotated[int, Field(ge=0)] | None = Field(None, description="null = top-level seed.")
