"""A gymnasium environment over the GRPO simulator, with the real run's controller contract.

One environment step is one GRPO step: the agent sees the same :class:`Observation` a real run's
controller hook gives (``Observation.to_array()``: recent power over the cap, share above it,
the actuators' values, tokens per second), and its action is turned into the same
:class:`Action` the hook applies, so a policy trained here runs unchanged in a real run.

The action space is built from the authority table (:class:`ControlSpace`): one dimension in
[-1, 1] per online actuator whose measured authority on the deployment clears the threshold,
mapped linearly onto the actuator's bounds; online actuators without authority are held at the
level the table chose for them from their sweep. Nothing here names which actuators matter.

Reward of a step follows the study's objective (``analysis/objective.py``: most completion
tokens within a violation budget and no breaker window above the cap) as a Lagrangian::

    tokens_weight * (tokens / step_s) / ref_tokens_per_s
    - multiplier * (violation share of the step - violation_budget + breaker)
    - energy_weight * (mean power of the step) / ref_power_w

where ``breaker`` is 1 when the mean power of the last ``breaker_window_s`` seconds is above the
cap, ``ref_*`` are the fixed arm's expected rates on the same physics, and the multiplier
starts at ``reward.violation_weight`` and is adapted during training (a multiplicative dual
update, ``control/ppo.py``): it grows while the policy's violation share exceeds the budget
and shrinks when it is below, so the policy is pushed to the budget rather than to a hand-set
trade-off.
Episodes last ``controller.episode_steps`` steps
(a fixed count: with rate rewards a time-limited episode would favour short steps). With
domain randomisation every episode draws the physics from the calibration's ranges and the cap
within ``cap_jitter_frac``. With changing conditions (``controller.conditions``, training only)
the conditions a step runs under are redrawn every ``change_every_steps`` steps on average:
nominal, or one of completions ending early, a lower cap, slower phases
(:func:`draw_conditions`); a GPU power limit follows the cap down as ``control/simulate.py``
has it. With budget tracking (``controller.budget_tracking``) each training episode draws its
own multiplier about the dual update's, and the observation vector ends with its logarithm
(:func:`observation_size`), so the policy learns the trade at every price. Everything here is
simulated.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from grpo_power.config import Config, RewardConfig, TrainingConditionsConfig, WorkloadConfig
from grpo_power.control.contract import (
    ARRAY_FIELDS,
    Action,
    Observation,
    RunViolations,
    power_observation_fields,
)
from grpo_power.sim.calibration import Calibration
from grpo_power.sim.grpo_sim import SimRun
from grpo_power.sim.schedule import Conditions, Schedule
from grpo_power.sim.step_model import ONLINE_ACTUATORS, StepModel, expected_rates, physics_for

OBSERVATION_SIZE = len(ARRAY_FIELDS)


def observation_size(budget_tracking: bool) -> int:
    """Length of a policy's input: the observation's array, and with budget tracking the log
    of the Lagrange multiplier after it."""
    return OBSERVATION_SIZE + int(budget_tracking)


def observe(run: SimRun) -> Observation:
    """The observation a controller gets before the next step of a simulated run (the cap is
    the one the next step runs under)."""
    run.conditions()
    return Observation(
        **power_observation_fields(run.recent_power_w(), run.cap_w),
        concurrency=run.concurrency,
        max_new_tokens=run.max_new_tokens,
        tokens_per_s=run.last_tokens_per_s,
        cap_w=run.cap_w,
        train_micro_batch=run.train_micro_batch,
        pause_s=run.pause_s,
        run_share_above_cap=RunViolations(run.samples_run, run.samples_over_run).share,
        run_samples=run.samples_run,
    )


def _bounds(workload: WorkloadConfig, actuator: str) -> tuple[int, int]:
    """Inclusive (min, max) of an actuator's ``<name>_bounds``."""
    bounds = getattr(workload, f"{actuator}_bounds")
    return int(bounds.min), int(bounds.max)


@dataclass(frozen=True)
class ControlSpace:
    """Which actuators a controller drives on a deployment, and how actions map onto them.

    Attributes:
        deployment: the deployment the space was built for.
        actuators: the driven actuators, in action-vector order.
        bounds: inclusive (min, max) of every online actuator.
        holds: value of each online actuator that is not driven (the table's hold level, or
            the oracle's setting of it: :meth:`held_at`).
        fallback: True when no actuator cleared the threshold and the one with the most
            authority was taken instead.
    """

    deployment: str
    actuators: tuple[str, ...]
    bounds: dict[str, tuple[int, int]]
    holds: dict[str, int]
    fallback: bool = False

    @classmethod
    def from_authority(
        cls, rows: Iterable[Mapping[str, Any]], deployment: str, workload: WorkloadConfig
    ) -> ControlSpace:
        """Build the space from authority-table rows (``analysis/authority.py``).

        Driven: online actuators of ``deployment`` marked ``selected`` in the simulated rows.
        If none is, the online actuator with the largest authority is driven (``fallback``).
        The others are held at the table's ``hold_level`` (duration-only actuators are set
        once, from their measured sweep).

        Raises:
            ValueError: the table has no simulated rows for the deployment, or holds an
                actuator outside the workload's bounds (a table of another config).
        """
        mine = [r for r in rows if r["deployment"] == deployment and r.get("data") == "simulated"]
        if not mine:
            raise ValueError(
                f"the authority table has no simulated rows for deployment {deployment!r}; "
                "run `grpo-power identify` for it"
            )
        online = [r for r in mine if r["actuator"] in ONLINE_ACTUATORS]
        driven = [r["actuator"] for r in online if _truthy(r["selected"])]
        fallback = not driven
        if fallback:
            best = max(online, key=lambda r: abs(float(r["authority"])))
            driven = [best["actuator"]]
        ordered = tuple(a for a in ONLINE_ACTUATORS if a in driven)
        bounds = {a: _bounds(workload, a) for a in ONLINE_ACTUATORS}
        holds = {
            r["actuator"]: int(r["hold_level"]) for r in online if r["actuator"] not in ordered
        }
        for name, level in holds.items():
            low, high = bounds[name]
            if not low <= level <= high:
                raise ValueError(
                    f"rows: {name} on {deployment}: hold_level {level} is outside "
                    f"workload.{name}_bounds [{low}, {high}]; expected a table measured with "
                    "this config (rerun `grpo-power identify` with it)"
                )
        return cls(deployment, ordered, bounds, holds, fallback)

    def held_at(self, levels: Mapping[str, int]) -> ControlSpace:
        """This space with its held actuators named in ``levels`` held there instead (each
        clipped into its bounds; a driven actuator's entry is ignored)."""
        holds = {
            name: min(self.bounds[name][1], max(self.bounds[name][0], int(levels.get(name, level))))
            for name, level in self.holds.items()
        }
        return replace(self, holds=holds)

    def to_action(self, vector: np.ndarray) -> Action:
        """The action for a vector in [-1, 1]^k (clipped), linear onto each actuator's bounds
        (a logarithmic map and one onto the sizes that change a step's chunk count did better
        at 305 W and worse at 7b's own 320 W: docs/design.md section 4, 'How the action maps
        onto concurrency')."""
        values = dict(self.holds)
        for name, x in zip(self.actuators, np.clip(vector, -1.0, 1.0), strict=True):
            low, high = self.bounds[name]
            value = low + (float(x) + 1.0) / 2.0 * (high - low)
            values[name] = min(high, max(low, round(value)))
        return Action(**{name: values.get(name) for name in ONLINE_ACTUATORS})

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment,
            "actuators": list(self.actuators),
            "bounds": {k: list(v) for k, v in self.bounds.items()},
            "holds": self.holds,
            "fallback": self.fallback,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControlSpace:
        return cls(
            deployment=str(data["deployment"]),
            actuators=tuple(data["actuators"]),
            bounds={k: (int(v[0]), int(v[1])) for k, v in data["bounds"].items()},
            holds={k: int(v) for k, v in data["holds"].items()},
            fallback=bool(data.get("fallback", False)),
        )


def _truthy(value: Any) -> bool:
    """A table cell as a boolean (CSV readers give strings)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


class GrpoPowerEnv(gym.Env):
    """GRPO steps on one simulated deployment under a power cap (see the module docstring).

    Args:
        config: settings (workload, sim, telemetry period, observation window, reward).
        calibration: the physics and its ranges.
        deployment: deployment name.
        space: the action space built from the authority table.
        cap_w: the cap, W (``None``: the config's cap for this deployment).
        randomize: draw physics and cap per episode (domain randomisation).
        power_limit_frac: run under the GPU power limit set to this share of the episode's cap
            (the hardware tier of the ``ppo+hwcap`` arm, which the controller works above);
            None: no limit.
        changing: redraw the conditions within episodes (``controller.conditions``); False:
            the nominal conditions throughout (``sim.completion_tokens``, the cap, full speed).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - gymnasium's convention

    def __init__(
        self,
        config: Config,
        calibration: Calibration,
        deployment: str,
        space: ControlSpace,
        cap_w: float | None = None,
        randomize: bool = True,
        power_limit_frac: float | None = None,
        changing: bool = False,
    ) -> None:
        super().__init__()
        self.config = config
        self.calibration = calibration
        self.deployment = config.sim.deployment(deployment)
        self.space = space
        self.cap_w = float(cap_w if cap_w is not None else config.deployment_cap_w(deployment))
        self.randomize = randomize
        self.power_limit_frac = power_limit_frac
        self.changing = changing and config.controller.conditions.change_every_steps > 0
        self.nominal = Conditions(completion_tokens=config.sim.completion_tokens)
        self.episode_steps = config.controller.episode_steps
        self.tracking = config.controller.budget_tracking
        self.tracks_budget = tracks_budget(config, deployment)
        self.observation_space = spaces.Box(
            low=-np.finfo(np.float32).max if self.tracks_budget else 0.0,
            high=np.finfo(np.float32).max,
            shape=(observation_size(self.tracks_budget),),
            dtype=np.float32,
        )
        self.action_space = spaces.Box(
            low=-1.0, high=1.0, shape=(len(space.actuators),), dtype=np.float32
        )
        self.run: SimRun | None = None
        self.multiplier = config.controller.reward.violation_weight
        self.dual_multiplier = self.multiplier  # the trainer's; an episode's own with tracking
        self._breaker: deque[tuple[float, float, float]] = deque()  # end s, duration s, excess W

    def set_multiplier(self, value: float) -> None:
        """The Lagrange multiplier of the violation budget (adapted by the trainer): from now
        on, or with budget tracking the centre of the next episodes' draws."""
        self.dual_multiplier = float(value)
        if not self.tracks_budget:
            self.multiplier = self.dual_multiplier

    def _draw_multiplier(self) -> float:
        """An episode's multiplier: log-uniform within ``budget_tracking.spread`` e-folds of
        the dual update's (randomised training only), within the reward's bounds."""
        spread = self.tracking.spread if self.randomize else 0.0
        r = self.config.controller.reward
        drawn = self.dual_multiplier * math.exp(self.np_random.uniform(-spread, spread))
        return min(r.multiplier_max, max(r.multiplier_min, drawn))

    def _observation(self) -> np.ndarray:
        """The policy's input now (:func:`observation_size`)."""
        array = observe(self.run).to_array()
        if not self.tracks_budget:
            return array
        return np.append(array, np.float32(math.log(self.multiplier)))

    def _breaker_over(self, end_s: float, duration_s: float, excess_w: float) -> float:
        """1 when the mean power of the last breaker window is above the cap, else 0."""
        self._breaker.append((end_s, duration_s, excess_w))
        window_s = self.config.objective.breaker_window_s
        while self._breaker and self._breaker[0][0] < end_s - window_s:
            self._breaker.popleft()
        total_s = sum(d for _, d, _ in self._breaker)
        if total_s < window_s:
            return 0.0
        return float(sum(d * e for _, d, e in self._breaker) / total_s > 0.0)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        rng = self.np_random
        physics = physics_for(
            self.calibration, self.deployment.name, self.config, rng if self.randomize else None
        )
        cap_w = self.cap_w
        if self.randomize and self.config.controller.cap_jitter_frac > 0:
            jitter = self.config.controller.cap_jitter_frac
            cap_w *= float(rng.uniform(1.0 - jitter, 1.0 + jitter))
        cap_w = min(physics.model.gpu.nameplate_w, max(physics.idle_w + 1.0, cap_w))
        self._models: dict[float, StepModel] = {}
        model = self._model(physics, cap_w)
        w = self.config.workload
        reference = expected_rates(
            model.plan(w.concurrency, w.max_new_tokens, w.num_generations),
            cap_w,
            physics.model.params.noise_w,
        )
        self._ref_tokens_per_s = reference.tokens_per_s
        self._ref_power_w = reference.power_w * physics.gpus
        self.run = SimRun(
            model,
            w,
            self.config.telemetry.period_s,
            self.config.arms.observation_window_s,
            cap_w,
            seed=int(rng.integers(2**31)),
            jitter=self.config.sim.step_jitter,
        )
        self._set_conditions(self._draw() if self.changing else self.nominal)
        self._breaker.clear()
        if self.tracks_budget:
            self.multiplier = self._draw_multiplier()
        return self._observation(), {"cap_w": cap_w}

    def _model(self, physics: Any, cap_w: float) -> StepModel:
        """The step model under the power limit at ``cap_w`` (no limit without a tier)."""
        if cap_w not in self._models:
            frac = self.power_limit_frac
            limit_w = None if frac is None else frac * cap_w
            self._models[cap_w] = StepModel(
                physics, self.config.workload, self.config.sim.prompt_tokens, limit_w
            )
        return self._models[cap_w]

    def _draw(self) -> Conditions:
        """New conditions from ``controller.conditions`` (:func:`draw_conditions`)."""
        return draw_conditions(
            self.np_random,
            self.config.controller.conditions,
            self.nominal,
            self.config.workload.max_new_tokens_bounds.max,
        )

    def _set_conditions(self, conditions: Conditions) -> None:
        """Run the next steps under ``conditions`` (the power limit following the cap)."""
        run = self.run
        assert run is not None
        run.schedule = _steady(conditions)
        run.model = self._model(run.model.physics, run.base_cap_w * conditions.cap_frac)

    def _maybe_redraw(self) -> None:
        """Redraw the conditions with the chance that makes their mean span
        ``change_every_steps`` steps."""
        if self.changing:
            every = self.config.controller.conditions.change_every_steps
            if self.np_random.random() < 1.0 / every:
                self._set_conditions(self._draw())

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One GRPO step at the action vector's actuator values (gymnasium's ``step``)."""
        return self.act(self.space.to_action(np.asarray(action, dtype=float)))

    def act(self, chosen: Action) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One GRPO step at ``chosen``'s actuator values, whatever the action space (a static
        setting such as the oracle's); returns what :meth:`step` returns."""
        if self.run is None:
            raise RuntimeError("call reset() before step()")
        nominal = self.run.conditions() == self.nominal
        record = self.run.step(**chosen.settings())
        step_s = record.end_s - record.start_s
        over = record.over_cap()
        violation_rate = over / max(1, record.power_w.size)
        # the step's readings above the cap each is judged by, on average
        excess_w = (
            float((record.power_w - record.sample_cap_w[:, None]).mean())
            if record.power_w.size
            else 0.0
        )
        breaker = self._breaker_over(record.end_s, step_s, excess_w)
        reward = step_reward(
            self.config.controller.reward,
            self.multiplier,
            self.config.objective.violation_budget,
            tokens_per_s=record.tokens / step_s,
            violation_rate=violation_rate,
            breaker=breaker,
            power_w=record.energy_j / step_s,
            ref_tokens_per_s=self._ref_tokens_per_s,
            ref_power_w=self._ref_power_w,
        )
        info = {
            "tokens": record.tokens,
            "step_s": step_s,
            "samples_over_cap": over,
            "samples": record.power_w.size,
            "breaker": breaker,
            "energy_j": record.energy_j,
            "concurrency": record.concurrency,
            "max_new_tokens": record.max_new_tokens,
            "train_micro_batch": record.train_micro_batch,
            "pause_s": record.pause_s,
            "nominal": nominal,
        }
        truncated = self.run.step_count >= self.episode_steps
        self._maybe_redraw()
        return self._observation(), float(reward), False, truncated, info


def draw_conditions(
    rng: np.random.Generator,
    settings: TrainingConditionsConfig,
    nominal: Conditions,
    max_new_tokens: int,
) -> Conditions:
    """One draw of training conditions (``controller.conditions``).

    Args:
        rng: the episode's generator.
        settings: the ranges and the nominal share.
        nominal: the conditions without change (``sim.completion_tokens``, the cap, full speed).
        max_new_tokens: the upper bound of max new tokens, tokens.

    Returns:
        ``nominal`` with probability ``nominal_share``; otherwise ``nominal`` with one factor
        moved: completions ending at a median length log-uniform in
        [``completion_frac_min``, 1] x ``max_new_tokens``, a cap share uniform in
        [``cap_frac_min``, 1], or a slowdown uniform in [1, ``slowdown_max``].
    """
    if rng.random() < settings.nominal_share:
        return nominal
    factor = int(rng.integers(3))
    if factor == 0:
        low = math.log(settings.completion_frac_min * max_new_tokens)
        tokens = round(math.exp(rng.uniform(low, math.log(max_new_tokens))))
        return replace(nominal, completion_tokens=max(1, tokens))
    if factor == 1:
        return replace(nominal, cap_frac=float(rng.uniform(settings.cap_frac_min, 1.0)))
    return replace(nominal, slowdown=float(rng.uniform(1.0, settings.slowdown_max)))


def _steady(conditions: Conditions) -> Schedule:
    """A schedule holding ``conditions`` from now on (the environment redraws it per step)."""
    return Schedule((0.0,), (conditions,), math.inf)


def step_reward(
    weights: RewardConfig,
    multiplier: float,
    violation_budget: float,
    tokens_per_s: float,
    violation_rate: float,
    breaker: float,
    power_w: float,
    ref_tokens_per_s: float,
    ref_power_w: float,
) -> float:
    """The Lagrangian reward of one step's rates (see the module docstring).

    Args:
        weights: reward weights.
        multiplier: the current Lagrange multiplier of the violation budget.
        violation_budget: ``objective.violation_budget``.
        tokens_per_s: completion tokens per second, all GPUs.
        violation_rate: share of the step's per-GPU samples above the cap.
        breaker: 1 when the last breaker window's mean power is above the cap, else 0.
        power_w: mean power of all GPUs together, W.
        ref_tokens_per_s, ref_power_w: the same rates of the fixed arm.
    """
    return (
        weights.tokens_weight * tokens_per_s / ref_tokens_per_s
        - multiplier * (violation_rate - violation_budget + breaker)
        - weights.energy_weight * power_w / ref_power_w
    )


def tracks_budget(config: Config, deployment: str) -> bool:
    """Whether a deployment's controller is trained and deployed with budget tracking: its own
    ``budget_tracking``, else ``controller.budget_tracking.enabled``."""
    own = config.sim.deployment(deployment).budget_tracking
    return own if own is not None else config.controller.budget_tracking.enabled
