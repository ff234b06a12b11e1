"""``PowerCallback``: GPU power in any HF ``Trainer``'s logs, and the run's power trace.

Added to a trainer (``callbacks=[PowerCallback(...)]``, the stock ``trl.GRPOTrainer`` included)
it samples power in the background with a :class:`~grpo_power.telemetry.monitor.PowerMonitor`
and, at every logging step, adds to the trainer's ``logs`` the figures of the interval since the
last one (names under ``power/``, units in the names; an evaluation's logs get none, its power
counts in the next interval's):

``mean_w``, ``p95_w``, ``max_w`` (per GPU), ``energy_j`` (all GPUs), ``share_above_cap``,
``tokens_per_mj`` (tokens as the trainer counts them: TRL's ``num_tokens``, else
``num_input_tokens_seen``, when either grows; where one GRPO generation serves several steps,
``num_iterations > 1`` or ``steps_per_generation`` above ``gradient_accumulation_steps``, its
tokens are shared evenly among the steps it serves, so that the step that generated does not
count them all over its own energy and the others none), ``simulated`` (1 when the power is the
simulated A100's), and per announced phase ``<phase>_energy_j`` and ``<phase>_mean_w``.

It moves itself to the front of the trainer's callbacks (:mod:`grpo_power.callbacks.binding`), so
the reporting integrations that ``report_to`` adds (TensorBoard, W&B, trackio, CodeCarbon) log
these like TRL's own metrics, and adds them to ``state.log_history`` (so ``trainer_state.json``
holds them). Phases are seen from the model's forward passes (:mod:`grpo_power.callbacks.phases`)
unless the trainer announces them itself (``announce_phases=False``; the project's runner).

In a multi-process run (``torchrun``, ``accelerate launch``) only each node's local rank 0
samples, for the node's GPUs, and logs power; the other ranks' callbacks do nothing. The job's
rank 0 writes the trace it was given, another node's local rank 0 ``<stem>-<host><suffix>``.
The power in the logs is the logging node's; ``tokens_per_mj`` counts the node's share of the
job's tokens (:func:`~grpo_power.workload.distributed.node_share`). Not told its GPUs, local
rank 0 measures the node's processes' devices, ``cuda:0`` to ``cuda:LOCAL_WORLD_SIZE-1``, where
the node shows more (:func:`~grpo_power.workload.distributed.node_gpus`). It must see the node's
GPUs: where each process sees GPUs of its own (``srun --gpus-per-task``) a warning says so
(:func:`~grpo_power.workload.distributed.warn_if_node_gpus_hidden`).
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque
from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback

from grpo_power.callbacks.binding import calling_trainer, run_first
from grpo_power.callbacks.phases import ForwardPhases, renew_phases
from grpo_power.callbacks.tokens import generation_cycle_steps
from grpo_power.config import Config, TelemetrySource
from grpo_power.telemetry.monitor import (
    OWN_WINDOW_PREFIX,
    Measurement,
    PowerMonitor,
    check_monitor,
)
from grpo_power.workload.distributed import (
    node_gpus,
    node_share,
    process_ranks,
    warn_if_node_gpus_hidden,
)

INTERVAL_WINDOW = f"{OWN_WINDOW_PREFIX}log-interval"


def power_metrics(m: Measurement, tokens: float | None, prefix: str = "power/") -> dict[str, float]:
    """The log entries of one interval's measurement (see the module docstring); ``tokens``:
    tokens processed in it, or None when the trainer counts none."""
    metrics = {
        "mean_w": m.mean_power_w,
        "p95_w": m.p95_power_w,
        "max_w": m.peak_power_w,
        "energy_j": m.energy_j,
        "simulated": float(m.simulated),
    }
    if m.share_above_cap is not None:
        metrics["share_above_cap"] = m.share_above_cap
    if tokens is not None and tokens > 0 and m.energy_j > 0:
        metrics["tokens_per_mj"] = tokens / (m.energy_j / 1e6)
    n_gpus = max(1, len(m.gpu_energy_j))
    for phase, share in m.phases.items():
        metrics[f"{phase}_energy_j"] = share.energy_j
        if share.time_s > 0:
            metrics[f"{phase}_mean_w"] = share.energy_j / share.time_s / n_gpus
    return {f"{prefix}{name}": float(value) for name, value in metrics.items()}


def evaluation_log(logs: dict[str, Any]) -> bool:
    """Whether ``logs`` are an evaluation's metrics (``eval_*``), which the callbacks add
    nothing to: reporting integrations file the rest under ``train/``, a second point at the
    step (the evaluation's power goes into the next training log)."""
    return any(key.startswith("eval_") for key in logs)


def node_trace(trace: Path) -> Path:
    """The trace a node other than the job's first writes instead of ``trace``: the host's name
    added to its stem, so that nodes sharing a file system write files of their own."""
    return trace.with_name(f"{trace.stem}-{socket.gethostname()}{trace.suffix}")


class PowerCallback(TrainerCallback):
    """Power metrics in the trainer's logs at every logging step; the power trace on disk.

    Args:
        monitor: the monitor to read (shared with a
            :class:`~grpo_power.callbacks.cap.PowerCapCallback`); None: one is made from the
            other arguments, started at the start of training and stopped at its end.
        trace: the trace file the monitor it makes writes (None: none); a second
            ``trainer.train()`` writes ``<stem>-2<suffix>``, and so on (another node:
            :func:`node_trace`).
        source, gpus, period_s, cap_w, config: for the monitor it makes (see
            :class:`~grpo_power.telemetry.monitor.PowerMonitor`).
        announce_phases: announce generate/train from the model's forward passes (False when
            the trainer announces its phases to ``monitor.signal`` itself).
        prefix: prefix of the log entries.
    """

    def __init__(
        self,
        monitor: PowerMonitor | None = None,
        *,
        trace: Path | str | None = None,
        source: TelemetrySource = "auto",
        gpus: list[int] | None = None,
        period_s: float | None = None,
        cap_w: float | None = None,
        config: Config | None = None,
        announce_phases: bool = True,
        prefix: str = "power/",
    ) -> None:
        check_monitor("PowerCallback", monitor)
        rank, local_rank = process_ranks()
        self.sampling = local_rank == 0  # one sampler a node (see the module docstring)
        if trace is not None and rank != 0:
            trace = node_trace(Path(trace))
        self._owns_monitor = monitor is None
        self.monitor = monitor or PowerMonitor(
            gpus=node_gpus(gpus),
            period_s=period_s,
            source=source,
            trace=trace if self.sampling else None,
            cap_w=cap_w,
            config=config,
        )
        if self.sampling:
            warn_if_node_gpus_hidden(self.monitor.source.kind)
        self.announce_phases = announce_phases
        self.prefix = prefix
        self.last_metrics: dict[str, float] = {}
        self._phases: ForwardPhases | None = None
        self._tokens_at_last_log: float | None = None
        self._step_at_last_log = -1
        # one generation's tokens shared among the steps it serves (see the module docstring)
        self._cycle_steps = 1
        self._owed_tokens: deque[float] = deque([0.0])  # to this step and the next ones
        self._tokens_at_last_step = 0.0
        self._interval_tokens = 0.0  # shared to the steps since the last log

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.sampling:
            return
        trainer: Trainer | None = calling_trainer()
        if trainer is not None:
            run_first(trainer, self)
        model = kwargs.get("model") if self.announce_phases else None
        self._phases = renew_phases(self._phases, trainer, model, self.monitor.signal)
        # an earlier train() that raised left it open (ValueError: in a session since ended)
        with contextlib.suppress(KeyError, ValueError):
            self.monitor.end_window(INTERVAL_WINDOW)
        self.monitor.start()
        self._tokens_at_last_log = float(state.num_input_tokens_seen or 0)
        self._step_at_last_log = -1
        self._cycle_steps = generation_cycle_steps(trainer) if trainer is not None else 1
        self._owed_tokens = deque([0.0] * self._cycle_steps)
        self._tokens_at_last_step = self._tokens_at_last_log
        self._interval_tokens = 0.0
        self.monitor.begin_window(INTERVAL_WINDOW)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._phases is not None:
            self._phases.idle()
        if self._cycle_steps > 1:
            self._share_generated_tokens(state)

    def _share_generated_tokens(self, state: Any) -> None:
        """At a step's end: the tokens a generation in it counted (TRL's GRPO trainers count
        them in ``num_input_tokens_seen`` as they generate) are owed in equal parts to it and
        the next steps of its generation cycle; this step's part goes to the interval."""
        now = float(state.num_input_tokens_seen or 0)
        grown, self._tokens_at_last_step = now - self._tokens_at_last_step, now
        if grown > 0:
            share = grown / self._cycle_steps
            self._owed_tokens = deque(owed + share for owed in self._owed_tokens)
        self._interval_tokens += self._owed_tokens.popleft()
        self._owed_tokens.append(0.0)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if logs is None or not self.sampling:
            return
        if evaluation_log(logs) or self._repeats_last_log(logs, state):
            return
        self._step_at_last_log = state.global_step
        measurement = self.monitor.end_window(INTERVAL_WINDOW)
        self.monitor.begin_window(INTERVAL_WINDOW)
        tokens_now = logs.get("num_tokens", state.num_input_tokens_seen)
        tokens = None
        if self._cycle_steps > 1:  # the generations' tokens shared among the steps they serve
            tokens, self._interval_tokens = self._interval_tokens * node_share(), 0.0
        elif tokens_now and self._tokens_at_last_log is not None:
            # the job's tokens, of which this node's GPUs, measured here, processed their share
            tokens = (float(tokens_now) - self._tokens_at_last_log) * node_share()
            self._tokens_at_last_log = float(tokens_now)
        self.last_metrics = power_metrics(measurement, tokens, self.prefix)
        logs.update(self.last_metrics)
        history = state.log_history
        if history and history[-1].get("step") == state.global_step:
            history[-1].update(self.last_metrics)  # the trainer copied the logs before on_log

    def _repeats_last_log(self, logs: dict[str, Any], state: Any) -> bool:
        """Whether ``logs`` are the run's closing summary (``train_runtime``) where no step ran
        since the last log (it would repeat that step with an interval of milliseconds)."""
        return "train_runtime" in logs and state.global_step == self._step_at_last_log

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.sampling:
            return
        self.monitor.end_window(INTERVAL_WINDOW)
        if self._phases is not None:
            self._phases.remove()
            self._phases = None
        if self._owns_monitor:
            self.monitor.stop()
