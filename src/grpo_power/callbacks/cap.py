"""``PowerCapCallback``: a controller keeping a user's own GRPO run under a per-GPU power cap.

Before each step it observes the last ``window_s`` of power (the project's
:class:`~grpo_power.control.contract.Observation`), asks the controller for the next step's
settings, and drives the actuators the trainer has (:class:`~grpo_power.workload.actuators.
Actuators`):

- **max new tokens**, where the stock ``trl.GRPOTrainer``'s generation reads it (its
  ``generation_config``, or its vLLM generation's ``max_completion_length`` with
  ``use_vllm=True``);
- **generation concurrency**, only on the project's ``PowerAwareGRPOTrainer`` (a one-line swap
  for ``GRPOTrainer``, see the README);
- **the training chunk** (``train_micro_batch``), only on ``PowerAwareGRPOTrainer``;
- **the pause**: with ``pause_s > 0``, a step whose observation window averaged above the cap
  (or saw stale telemetry) waits ``pause_s`` first, the GPUs idle; a controller whose action
  space holds the pause actuator (a PPO controller's bounds name it) sets the pause itself;
- **the power limit** (``set_power_limit=True``): NVML's limit set to the cap at the start where
  the source is NVML and the process may (root); otherwise a warning, and the run goes on.

A setting the controller asks for and the trainer has no actuator for (concurrency on the stock
trainer; max new tokens on a trainer that does not generate, a plain HF ``Trainer`` or
``SFTTrainer``, where the pause and the power limit remain) is not applied, is warned about once
and is counted in ``power_cap/<actuator>_unavailable_steps``.

Telemetry older than ``staleness_s`` bypasses the controller for the fail-safe: every actuator
at its lower bound. A controller trained by ``grpo-power controller train`` loads by the path of
its folder. What it did is added to the logs under ``power_cap/``, with the run's share of
samples above the cap so far (``run_share_above_cap``, what a budget-tracking controller
steers), and the power its last decision observed over ``window_s`` (``obs_mean_power_w``,
``obs_share_above_cap``, ...: :data:`OBSERVED_POWER`; the ``power/`` figures of a
``PowerCallback`` are of the log interval). The tokens per second it observes are the step's
completion tokens over its wall time, as the simulator a trained controller learnt in counts
them (:mod:`grpo_power.callbacks.tokens`; logged as ``step_tokens`` and ``tokens_per_s``); on a
trainer that does not generate, the tokens
it counts (TRL's ``num_tokens``, else ``num_input_tokens_seen``:
:meth:`PowerCapCallback.tokens_seen`). Where one generation serves several steps
(``num_iterations > 1``, or ``steps_per_generation`` above ``gradient_accumulation_steps``) they
are those of the last steps one generation serves, so that a step training on the last
generation's completions does not read as a step of no tokens. The run's samples, its counts and
a stateful controller's state go into every checkpoint (the ``TrainerState``'s
``stateful_callbacks``, under :data:`STATE_KEY`), so a run resumed from one, in a new process
too, carries on with them; a ``train()`` that does not resume starts them afresh. A monitor the
callback makes for itself is told the model's phases (:mod:`grpo_power.callbacks.phases`), as a
``PowerCallback``'s is.

In a multi-process run (``torchrun``, ``accelerate launch``) the job's rank 0 decides, and
every rank applies its decision (broadcast before each step): the ranks generate and pause
alike. A monitor it makes samples on each node's local rank 0 (where the power limit is set for
the node's GPUs), the node's processes' devices where the node shows more
(:func:`~grpo_power.workload.distributed.node_gpus`). Every rank logs the settings applied and
the step's tokens; only rank 0 the run's share above the cap, which it alone counts. In a
job of several nodes the observation, the fail-safe's telemetry age and the run's share above the
cap are the job's: every node's samples, gathered from each node's sampler before each decision
(the cap is per GPU, and the hottest node's GPUs count as much as node 0's).
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections import deque
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
from accelerate.utils import broadcast_object_list, gather_object
from transformers import Trainer, TrainerCallback

from grpo_power.callbacks.binding import bound_trainer, run_first
from grpo_power.callbacks.phases import ForwardPhases, renew_phases
from grpo_power.callbacks.power import evaluation_log
from grpo_power.callbacks.tokens import GeneratedTokens, generation_cycle_steps
from grpo_power.config import ActuatorBounds, Config
from grpo_power.config.base import check_arguments
from grpo_power.control.contract import Action, Observation, RunViolations
from grpo_power.control.controllers import Controller, StatefulController
from grpo_power.telemetry.monitor import (
    PowerMonitor,
    check_cap_within_nameplate,
    check_monitor,
)
from grpo_power.telemetry.source import GpuInfo, TelemetryUnavailable
from grpo_power.workload.actuators import (
    ACTUATORS,
    Actuators,
    trainer_settings,
)
from grpo_power.workload.distributed import (
    node_gpus,
    node_share,
    process_ranks,
    warn_if_node_gpus_hidden,
)

logger = logging.getLogger(__name__)

# The callback's entry in ``TrainerState.stateful_callbacks``, which each checkpoint's
# trainer_state.json keeps; not a class name, so transformers never rebuilds a callback from it
STATE_KEY = "grpo_power.PowerCapCallback"

# the power the last decision observed, logged as power_cap/obs_<name> (as the project's runs
# log obs_<name> in steps.parquet): its window_s, which the log interval's power/ figures are not
OBSERVED_POWER = ("mean_power_w", "p95_power_w", "max_power_w", "share_above_cap", "samples")

FAR_SD = 5.0  # a trained controller's input this many standard deviations off: warned about

UNAVAILABLE_HINTS = {  # how a run gets an actuator its trainer lacks
    "concurrency": " (swap in grpo_power.workload.trainer.PowerAwareGRPOTrainer)",
    "train_micro_batch": " (PowerAwareGRPOTrainer with train_micro_batch=...)",
    "max_new_tokens": " (it does not generate)",
    "pause_s": " (a controller's pause needs bounds={'pause_s': ActuatorBounds(min=0, max=...)}; "
    "the callback's own pause_s= waits after a window above the cap, whatever the controller "
    "asks)",
}


def load_controller(controller: Controller | str | Path) -> Controller:
    """A controller object as it is, or the PPO controller in the folder a path names.

    Raises:
        TypeError: an object without a ``decide`` method.
    """
    if isinstance(controller, str | Path):
        from grpo_power.control.policy import PPOController

        return PPOController.load(controller)
    if not callable(getattr(controller, "decide", None)):
        raise TypeError(
            f"PowerCapCallback: controller: expected an object with decide(observation) -> "
            f"Action, or the folder of a controller trained by `grpo-power controller train`; "
            f"got {type(controller).__name__}"
        )
    return controller


def controller_bounds(
    controller: Controller, config: Config, settings: dict[str, int]
) -> dict[str, ActuatorBounds]:
    """The bounds a PPO controller was trained with (its action space); for a controller of
    one's own, each actuator the trainer has from the config's lower bound (or its present
    setting, if lower) up to its present setting (``settings``: the user's own max completion
    length, which a controller lowers and never exceeds), and the config's bounds for the
    others."""
    space = getattr(controller, "space", None)
    if space is not None:
        return {name: ActuatorBounds(min=lo, max=hi) for name, (lo, hi) in space.bounds.items()}
    w = config.workload
    bounds = {
        "concurrency": w.concurrency_bounds,
        "max_new_tokens": w.max_new_tokens_bounds,
        "train_micro_batch": w.train_micro_batch_bounds,
    }
    for name, value in settings.items():
        bounds[name] = ActuatorBounds(min=min(bounds[name].min, value), max=value)
    return bounds


def _warn_above_settings(
    bounds: dict[str, ActuatorBounds], settings: dict[str, int], whose: str, advice: str
) -> None:
    """Warn where ``bounds`` (``whose``: a trained controller's, or the user's ``bounds=``)
    reach above the trainer's own setting (its ``max_completion_length``, ...): the controller
    may drive the trainer there, which the user's setting may have been chosen to avoid
    (memory); ``advice`` says how to keep it lower."""
    for name, value in settings.items():
        held = bounds.get(name)
        if held is not None and held.max > value:
            logger.warning(
                "PowerCapCallback: %s let the controller set %s up to %d (bounds %d-%d), above "
                "the trainer's own %d; %s",
                whose,
                name,
                held.max,
                held.min,
                held.max,
                value,
                advice,
            )


def _warn_other_cap(controller: Controller, cap_w: float) -> None:
    """Warn where a trained controller (its ``controller.json``, ``meta``) learnt at a cap this
    run's ``cap_w`` lies outside (its cap and the training's ``cap_jitter_frac`` about it): it
    acts on power shares of a cap it never saw (at 200 W, a 320 W controller's run spent a
    quarter of its samples above the cap)."""
    meta = getattr(controller, "meta", None)
    if not isinstance(meta, dict) or not isinstance(meta.get("cap_w"), int | float):
        return
    trained_w = float(meta["cap_w"])
    jitter = float((meta.get("training") or {}).get("cap_jitter_frac") or 0.0)
    if abs(cap_w - trained_w) > jitter * trained_w + 1e-9:
        logger.warning(
            "PowerCapCallback: the controller was trained at a cap of %g W (caps within %g %% "
            "of it), this run's is %g W: it acts outside what it learnt; train one at this cap "
            "(grpo-power controller train --cap-w %g)",
            trained_w,
            100 * jitter,
            cap_w,
            cap_w,
        )


def _warn_other_part(controller: Controller, gpus: list[GpuInfo]) -> None:
    """Warn where a trained controller (its ``controller.json``'s ``gpu``: the part the
    simulator modelled in its training) runs on GPUs of another nameplate (``gpus``: the
    monitor's): it learnt another part's power (an A100-trained controller on an H200 at the
    same cap said nothing). A controller that names no part says nothing."""
    meta = getattr(controller, "meta", None)
    trained = meta.get("gpu") if isinstance(meta, dict) else None
    if not isinstance(trained, dict) or not isinstance(trained.get("nameplate_w"), int | float):
        return
    other = [g for g in gpus if g.nameplate_w != float(trained["nameplate_w"])]
    if other:
        logger.warning(
            "PowerCapCallback: the controller was trained in the simulator for %s (%g W), this "
            "run's GPUs are %s (%g W): it learnt another part's power; train one with a config "
            "naming this part (grpo-power controller train --config FILE)",
            trained.get("name", "another part"),
            float(trained["nameplate_w"]),
            other[0].name,
            other[0].nameplate_w,
        )


def held_actuators(controller: Controller) -> dict[str, int]:
    """The actuators a trained controller holds rather than drives (its action space's
    ``holds``: those without authority on its deployment), at the level it was trained with;
    none for a controller of one's own."""
    space = getattr(controller, "space", None)
    if space is None:
        return {}
    return {name: level for name, level in space.holds.items() if name not in space.actuators}


def checked_bounds(bounds: Any) -> dict[str, ActuatorBounds]:
    """The bounds a user gave ``PowerCapCallback`` (None: none), checked: a dict from actuator
    names (:data:`~grpo_power.workload.actuators.ACTUATORS`) to ``ActuatorBounds``.

    Raises:
        TypeError: another type, naming the entry and what was expected.
        ValueError: an unknown actuator name.
    """
    if bounds is None:
        return {}
    expected = "a dict such as {'max_new_tokens': grpo_power.config.ActuatorBounds(min=8, max=16)}"
    if not isinstance(bounds, dict):
        raise TypeError(f"PowerCapCallback: bounds: expected {expected}, got {bounds!r}")
    for name, value in bounds.items():
        if name not in ACTUATORS:
            raise ValueError(
                f"PowerCapCallback: bounds: {name!r}: expected one of {', '.join(ACTUATORS)}"
            )
        if not isinstance(value, ActuatorBounds):
            raise TypeError(
                f"PowerCapCallback: bounds[{name!r}]: expected grpo_power.config.ActuatorBounds"
                f"(min=..., max=...), got {value!r}"
            )
    return dict(bounds)


class PowerCapCallback(TrainerCallback):
    """Drive a trainer's actuators from a controller between steps (see the module docstring).

    Args:
        controller: an object with ``decide(observation) -> Action``, or the folder of a
            controller trained by ``grpo-power controller train``.
        cap_w: the per-GPU power cap, W.
        monitor: where power comes from (share a ``PowerCallback``'s ``monitor``); None: one
            is made (on each node's local rank 0) and runs for the training.
        trainer: the trainer to drive; None: the trainer calling this callback.
        bounds: bounds of the actuators they name (``{"max_new_tokens":
            ActuatorBounds(min=8, max=16)}``: a trained controller kept within the trainer's
            own ``max_completion_length``); the others' are a PPO controller's own, for
            another controller up to the trainer's settings when training begins (see
            :func:`controller_bounds`).
        window_s: power the observation covers, s.
        staleness_s: older telemetry bypasses the controller for the fail-safe, s.
        pause_s: the pause before a step after an over-cap window, s (0: no pause).
        set_power_limit: set the GPUs' NVML power limit to the cap where permitted.
        config: defaults for the monitor and the bounds (None: the default config).
    """

    def __init__(
        self,
        controller: Controller | str | Path,
        cap_w: float,
        monitor: PowerMonitor | None = None,
        *,
        trainer: Trainer | None = None,
        bounds: dict[str, ActuatorBounds] | None = None,
        window_s: float = 5.0,
        staleness_s: float = 2.0,
        pause_s: float = 0.0,
        set_power_limit: bool = False,
        config: Config | None = None,
    ) -> None:
        config = config or Config()
        check_arguments(
            "PowerCapCallback",
            ("pause_s",),
            ("cap_w",),
            cap_w=cap_w,
            window_s=window_s,
            staleness_s=staleness_s,
            pause_s=pause_s,
        )
        check_monitor("PowerCapCallback", monitor)
        self.controller = load_controller(controller)
        self.cap_w = float(cap_w)
        _warn_other_cap(self.controller, self.cap_w)
        rank, local_rank = process_ranks()
        self.deciding, self.sampling = rank == 0, local_rank == 0  # see the module docstring
        self._owns_monitor = monitor is None
        self.monitor = monitor or (
            PowerMonitor(gpus=node_gpus(config.telemetry.gpus), cap_w=cap_w, config=config)
            if self.sampling
            else None
        )
        if self.sampling and self.monitor is not None:
            check_cap_within_nameplate("PowerCapCallback", self.cap_w, self.monitor.source.gpus)
            _warn_other_part(self.controller, self.monitor.source.gpus)
            warn_if_node_gpus_hidden(self.monitor.source.kind)
            judged_w = self.monitor.cap_w
            if judged_w is None:
                logger.warning(
                    "PowerCapCallback: cap_w %g W, its monitor none: power/share_above_cap is not "
                    "logged (give the monitor's PowerCallback cap_w=%g too)",
                    self.cap_w,
                    self.cap_w,
                )
            elif not math.isclose(judged_w, self.cap_w):
                logger.warning(
                    "PowerCapCallback: cap_w %g W, its monitor's %g W: power/share_above_cap is "
                    "judged by the monitor's, power_cap/run_share_above_cap by %g W",
                    self.cap_w,
                    judged_w,
                    self.cap_w,
                )
        self._given_trainer = trainer
        self.trainer = trainer
        self._given_bounds, self._config = checked_bounds(bounds), config
        self.bounds = {**controller_bounds(self.controller, config, {}), **self._given_bounds}
        # each trainer's settings when first seen, before a controller changed them
        self._settings: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
        self.window_s, self.staleness_s, self.pause_s = window_s, staleness_s, pause_s
        self.set_power_limit = set_power_limit
        frac = getattr(self.controller, "power_limit_frac", None)
        if frac is not None and not set_power_limit:
            logger.warning(
                "PowerCapCallback: the controller was trained under a GPU power limit of %g of "
                "the cap (%.0f W at %g W), which set_power_limit=False leaves unset: it acts "
                "without the hardware tier it learnt over",
                frac,
                frac * cap_w,
                cap_w,
            )
        self.actuators: Actuators | None = None
        self.last_tokens_per_s = 0.0
        self._slept_s = 0.0  # the last step's pause as slept
        self.violations = RunViolations()  # the run's samples, and those above the cap
        self.counts = {"failsafe_steps": 0, "paused_s": 0.0}
        self.counts.update({f"{name}_unavailable_steps": 0 for name in ACTUATORS})
        self._step: tuple[float, float] | None = None  # (monotonic start, tokens seen) of a step
        self._generated: GeneratedTokens | None = None  # the trainer's completion tokens
        self.last_step_tokens = 0.0
        self.last_observation: Observation | None = None  # the last decision's (deciding rank)
        # (tokens, wall s) of this attempt's last steps, as many as one generation serves
        self._recent_steps: deque[tuple[float, float]] = deque(maxlen=1)
        self._phases: ForwardPhases | None = None  # the forward passes, for a monitor of its own
        self._warned_no_tokens = False
        self._warned_far: set[str] = set()  # inputs a trained controller never saw, warned of
        self._fresh = self.state_dict()  # what a run that does not resume starts from

    def state_dict(self) -> dict[str, Any]:
        """What a run resumed from a checkpoint carries on with (JSON-like): the run's samples
        and those above the cap, the counts, the last tokens per second, and a stateful
        controller's state."""
        controller = self.controller
        return {
            "violations": asdict(self.violations),
            "counts": dict(self.counts),
            "last_tokens_per_s": self.last_tokens_per_s,
            "controller": (
                controller.state_dict() if isinstance(controller, StatefulController) else {}
            ),
        }

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Carry on from :meth:`state_dict` of the run a checkpoint was saved in."""
        self.violations = RunViolations(**saved["violations"])
        self.counts.update(saved["counts"])
        self.last_tokens_per_s = float(saved["last_tokens_per_s"])
        if isinstance(self.controller, StatefulController) and saved["controller"]:
            self.controller.load_state_dict(saved["controller"])

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # resumed from a checkpoint: its state; else a new run's (not an earlier train()'s)
        self.load_state_dict((state.stateful_callbacks or {}).get(STATE_KEY) or self._fresh)
        self.last_step_tokens = 0.0
        # the calling trainer at every train(): the same callbacks may serve another trainer
        self.trainer = bound_trainer(self._given_trainer, self)
        run_first(self.trainer, self)
        settings = self._settings.setdefault(self.trainer, trainer_settings(self.trainer))
        given = self._given_bounds  # the user's, for the actuators they name
        own = controller_bounds(self.controller, self._config, settings)
        space = getattr(self.controller, "space", None)
        if space is not None:
            trained = {k: b for k, b in own.items() if k not in given and k in space.actuators}
            _warn_above_settings(
                trained,
                settings,
                "the trained controller's bounds",
                "give bounds= to keep it lower",
            )
        _warn_above_settings(given, settings, "bounds=", "lower their max to keep it there")
        self.bounds = {**own, **given}
        self.actuators = Actuators(self.trainer, self.bounds)
        self.actuators.apply(Action(**settings))  # each train() starts from the user's settings
        self._step = None  # a new attempt (a second train()): no step of it seen yet
        self.last_observation = None
        if self._generated is not None:  # an earlier train() that raised left its wrapper
            self._generated.remove()
        self._generated = GeneratedTokens(self.trainer)
        self._recent_steps = deque(maxlen=generation_cycle_steps(self.trainer))
        if self.sampling and self.monitor is not None:
            if self._owns_monitor:  # nothing else announces the phases to its signal
                model = kwargs.get("model")
                self._phases = renew_phases(self._phases, self.trainer, model, self.monitor.signal)
            self.monitor.start()
            if self.set_power_limit:
                self._limit_power(self.monitor)

    @property
    def several_processes(self) -> bool:
        """Whether the trainer runs in several processes (whose callbacks act together)."""
        return self.trainer is not None and self.trainer.accelerator.num_processes > 1

    @property
    def failsafe(self) -> Action:
        """What stale telemetry holds: every actuator at its lower bound."""
        return Action(
            **{name: bounds.min for name, bounds in self.bounds.items() if name in ACTUATORS}
        )

    @property
    def power_limit_w(self) -> float:
        """The GPU power limit ``set_power_limit`` sets, W: the cap, or for a controller trained
        under a hardware tier (``ppo+hwcap``) its share of the cap (``power_limit_frac``), as
        the project's runs set it (:func:`~grpo_power.config.arms.power_limit_w`)."""
        return self.cap_w * (getattr(self.controller, "power_limit_frac", None) or 1.0)

    def _limit_power(self, monitor: PowerMonitor) -> None:
        setter = getattr(monitor.source, "set_power_limit_w", None)
        if setter is None:
            logger.warning(
                "PowerCapCallback: no power limit set: the power source is %s, not NVML",
                monitor.source.kind,
            )
            return
        try:
            setter(self.power_limit_w)
        except TelemetryUnavailable as error:
            logger.warning("PowerCapCallback: no power limit set: %s", error)

    def job_power(self, window_s: float) -> tuple[np.ndarray, float]:
        """The per-GPU power samples of the last ``window_s`` seconds (0: none) and the age of
        the newest sample, s (of the node whose telemetry is oldest): this node's, or in a job
        of several nodes every node's, gathered from each node's sampler (a collective: every
        rank calls it at the same point)."""
        mine = None
        if self.sampling and self.monitor is not None:
            power_w = self.monitor.recent(window_s).power_w if window_s > 0 else np.empty(0)
            mine = (power_w, self.monitor.age_s())
        if self.several_processes and node_share() < 1:
            nodes = [node for node in gather_object([mine]) if node is not None]
        else:
            nodes = [mine] if mine is not None else []
        if not nodes:  # a rank that neither samples nor gathers
            return np.empty(0), 0.0
        return np.concatenate([power_w for power_w, _ in nodes]), max(age for _, age in nodes)

    def observe(self, power_w: np.ndarray) -> Observation:
        """The observation the controller gets of the job's per-GPU samples ``power_w`` (on the
        deciding rank)."""
        assert self.actuators is not None
        values = self.actuators.values()

        held = held_actuators(self.controller)

        def setting(name: str) -> int:
            """An actuator's value: one a trained controller holds at its hold level (a constant
            of its training, whatever the trainer's setting: read as the trainer's or a bound,
            7b's training chunk of 1 read 8, 18 standard deviations off, and it paused 7 s
            before every step); one the trainer lacks at its upper bound (0 unbounded)."""
            if name in held:
                return held[name]
            if name in values:
                return values[name]
            return self.bounds[name].max if name in self.bounds else 0

        # every setting, the micro-batch and pause too: a trained controller's observation
        # is the simulator's (they read 0, about 2.5 standard deviations off its training)
        return Observation.from_power(
            power_w,
            self.cap_w,
            setting("concurrency"),
            setting("max_new_tokens"),
            self.last_tokens_per_s,
            train_micro_batch=setting("train_micro_batch"),
            pause_s=setting("pause_s"),
            run=self.violations,
        )

    def _warn_far_inputs(self, observation: Observation) -> None:
        """Warn, once a field, where a trained controller sees an input far from all it was
        trained on (:data:`FAR_SD` standard deviations: a trainer far from the simulated
        deployment's, such as a tiny model's tokens per second), which it acts on unreliably;
        not at a decision before any sample (the simulator's first steps have none either)."""
        far_inputs = getattr(self.controller, "far_inputs", None)
        if far_inputs is None or observation.samples == 0:
            return
        for name, value, score in far_inputs(observation, FAR_SD):
            if name not in self._warned_far:
                self._warned_far.add(name)
                logger.warning(
                    "PowerCapCallback: the trained controller sees %s = %.4g, %.0f standard "
                    "deviations from its training's mean: it acts on inputs it never saw "
                    "(train it for this run's deployment: the config's sim and workload)",
                    name,
                    value,
                    abs(score),
                )

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        assert self.actuators is not None
        # the decision and the pause are part of the step, as in the simulator and the run's hook
        started_s = time.monotonic()
        decided: list[Any] = [None, False, False]  # action, stale telemetry, window above cap
        # before this attempt's first step, no samples: they would be of loading, not of the
        # run, and the simulator a controller is trained in has none there either
        power_w, age_s = self.job_power(self.window_s if self._step is not None else 0.0)
        if self.deciding:
            observation = self.observe(power_w)
            stale = age_s > self.staleness_s
            action = self.failsafe if stale else self.controller.decide(observation)
            if not isinstance(action, Action):
                raise TypeError(
                    f"PowerCapCallback: {type(self.controller).__name__}.decide returned "
                    f"{type(action).__name__}; expected a grpo_power.control.contract.Action"
                )
            if not stale:  # the fail-safe holds every actuator low, held ones too
                # a trained controller's held actuators keep the trainer's own settings (hold
                # levels are the simulator's, not the user's: 14b's 64 new tokens on a trainer
                # of 16)
                action = replace(action, **dict.fromkeys(held_actuators(self.controller)))
            decided = [action, stale, observation.mean_power_w > self.cap_w]
            self.last_observation = observation
            self._warn_far_inputs(observation)
        if self.several_processes:
            broadcast_object_list(decided, from_process=0)  # every rank acts alike
        action, stale, hot = decided
        applied = self.actuators.apply(action)
        self.counts["failsafe_steps"] += int(stale)
        for name in ACTUATORS:
            if applied.requested[name] is not None and applied.applied[name] is None:
                self._unavailable(name)
        pause_s = float(applied.applied["pause_s"] or 0)  # the controller's pause, if any
        if self.pause_s > 0 and (stale or hot):
            pause_s = max(pause_s, self.pause_s)
        self._slept_s = pause_s
        if pause_s > 0:
            if self.monitor is not None:
                self.monitor.signal.set("idle")
            time.sleep(pause_s)
            self.counts["paused_s"] += pause_s
        self._step = (started_s, self.tokens_seen(state))

    def tokens_seen(self, state: Any) -> float:
        """The tokens the trainer has counted so far, the job's: TRL's own count where it keeps
        one (``SFTTrainer``, ``DPOTrainer``: the ``num_tokens`` they log), else
        ``num_input_tokens_seen`` (a plain ``Trainer`` counts it with
        ``include_num_input_tokens_seen``)."""
        trl_count = getattr(self.trainer, "_total_train_tokens", None)
        if isinstance(trl_count, int | float):
            return float(trl_count)
        return float(state.num_input_tokens_seen or 0)

    def step_tokens(self, state: Any, seen_before: float) -> float:
        """The step's tokens, the job's, as the simulator counts them: the completion tokens a
        GRPO trainer generated (:class:`~grpo_power.callbacks.tokens.GeneratedTokens`, summed
        over the job's processes: a collective), else the tokens the trainer counts
        (:meth:`tokens_seen`) since ``seen_before``."""
        generated = self._generated
        if generated is None or not generated.available:
            tokens = self.tokens_seen(state) - seen_before
            if tokens <= 0 and not self._warned_no_tokens:
                self._warned_no_tokens = True
                logger.warning(
                    "PowerCapCallback: %s counted no tokens in the step: the controller sees 0 "
                    "tokens/s (give a plain Trainer include_num_input_tokens_seen=True)",
                    type(self.trainer).__name__,
                )
            return tokens
        count = generated.take()
        return float(sum(gather_object([count])) if self.several_processes else count)

    def _unavailable(self, name: str) -> None:
        """Count a step whose setting of actuator ``name`` was not applied; warn on the first."""
        key = f"{name}_unavailable_steps"
        if not self.counts[key]:
            logger.warning(
                "PowerCapCallback: %s has no %s actuator%s; the controller's %s is not applied "
                "(counted in power_cap/%s)",
                type(self.trainer).__name__,
                name,
                UNAVAILABLE_HINTS.get(name, ""),
                name,
                key,
            )
        self.counts[key] += 1

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._phases is not None:
            self._phases.idle()
        if self._step is not None:
            started_s, seen_before = self._step
            wall_s = max(1e-9, time.monotonic() - started_s)
            self.last_step_tokens = self.step_tokens(state, seen_before)
            self._recent_steps.append((self.last_step_tokens, wall_s))
            tokens, walls_s = np.sum(self._recent_steps, axis=0)
            self.last_tokens_per_s = float(tokens / walls_s)
            # the step's samples (a step longer than the sampler's history, 300 s by default,
            # counts its last 300 s)
            power_w, _ = self.job_power(wall_s)
            if self.deciding:
                self.violations.add(power_w, self.cap_w)
        if self.deciding:  # in the checkpoint this step may save (rank 0 writes it)
            state.stateful_callbacks[STATE_KEY] = self.state_dict()

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if logs is None or self.actuators is None:
            return
        if evaluation_log(logs):
            return
        entries = {f"power_cap/{name}": float(v) for name, v in self.actuators.values().items()}
        if "power_cap/pause_s" in entries or self.pause_s > 0:  # the pause slept, the
            entries["power_cap/pause_s"] = self._slept_s  # callback's own after a hot window
        entries.update({f"power_cap/{name}": float(v) for name, v in self.counts.items()})
        entries["power_cap/cap_w"] = float(self.cap_w)
        entries["power_cap/step_tokens"] = self.last_step_tokens
        entries["power_cap/tokens_per_s"] = self.last_tokens_per_s
        if self.deciding:  # the run's violations are counted where the decisions are taken
            entries["power_cap/run_share_above_cap"] = self.violations.share
        seen = self.last_observation
        if seen is not None:  # what the last decision saw: its window, not the log interval's
            entries.update(
                {f"power_cap/obs_{name}": float(getattr(seen, name)) for name in OBSERVED_POWER}
            )
        logs.update(entries)
        history = state.log_history
        if history and history[-1].get("step") == state.global_step:
            history[-1].update(entries)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._generated is not None:
            self._generated.remove()
            self._generated = None
        if self._phases is not None:
            self._phases.remove()
            self._phases = None
        if self._owns_monitor and self.monitor is not None:
            self.monitor.stop()
