"""How a callback reaches the trainer that calls it, and goes first in its callback list.

A ``TrainerCallback`` is handed the model, the optimizer and the data loaders, never the trainer.
A callback that must act on the trainer (:class:`~grpo_power.callbacks.cap.PowerCapCallback`
sets ``trainer.generation_config``) or must run before the reporting integrations (the metrics
:class:`~grpo_power.callbacks.power.PowerCallback` adds to the logs reach TensorBoard, W&B,
trackio or CodeCarbon only if it runs first) takes the trainer it was given, or else the
``transformers.Trainer`` whose event it is handling, found among its callers' frames.
"""

from __future__ import annotations

import inspect
from typing import Any

from transformers import Trainer, TrainerCallback

CALLER_DEPTH = 12  # frames from a callback's event up to the trainer's training loop


def calling_trainer() -> Trainer | None:
    """The ``transformers.Trainer`` among the callers of the current event, or None."""
    frame = inspect.currentframe()
    try:
        for _ in range(CALLER_DEPTH):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return None
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, Trainer):
                return candidate
        return None
    finally:
        del frame


def bound_trainer(given: Trainer | None, callback: TrainerCallback) -> Trainer:
    """``given``, else the calling trainer (see the module docstring).

    Raises:
        RuntimeError: neither: the callback was called from outside a ``Trainer``.
    """
    trainer = given or calling_trainer()
    if trainer is None:
        raise RuntimeError(
            f"{type(callback).__name__}: no transformers.Trainer is calling this callback; pass "
            "the trainer: `trainer.add_callback(...(trainer=trainer, ...))`"
        )
    return trainer


def run_first(trainer: Any, callback: TrainerCallback) -> None:
    """Move ``callback`` to the front of ``trainer``'s callbacks, so that what it adds to the
    logs in ``on_log`` reaches every reporting integration. Safe during an event: the callbacks
    after it keep their places in the list being iterated."""
    callbacks = trainer.callback_handler.callbacks
    if callback in callbacks and callbacks[0] is not callback:
        callbacks.remove(callback)
        callbacks.insert(0, callback)
