"""Phases of any HF model's work, seen from its forward passes: prefill, generate or train.

A forward pre-hook (``torch.nn.Module.register_forward_pre_hook``) on the model announces each
forward pass to the monitor's :class:`~grpo_power.telemetry.signals.WorkloadSignal`: a pass with
gradients is ``train`` (the batch: the input's first dimension); one without is ``generate``
where it reads one token a sequence (a decode step of GRPO's rollouts, the batch its sequences)
and ``prefill`` where it reads several (a rollout's prompt, GRPO's no-grad log-probability
passes of the old and reference policies; the batch: its tokens, as the simulator's prefill
counts them), so that neither reads as a decode step of a few sequences. A phase lasts until the
next pass of another kind or batch, or until the step ends (``idle``). A ``trl.GRPOTrainer``
with ``use_vllm=True`` generates outside the model, in vLLM: each call of its
``vllm_generation.generate`` is announced as ``generate`` too (the batch: its prompts). That is
all a stock trainer shows; the project's :class:`~grpo_power.workload.trainer.PowerAwareGRPOTrainer`
announces its phases itself, scoring included. The signal drives the simulated A100 and the phase
split of :class:`~grpo_power.telemetry.monitor.Measurement`.
"""

from __future__ import annotations

from typing import Any

import torch

from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.workload.actuators import vllm_generation

# the keyword arguments that hold a forward pass's sequences, [batch, tokens, ...], where a
# caller names them; otherwise the first tensor passed is (position ids or a cache position
# passed first would give the wrong batch)
_INPUT_NAMES = ("input_ids", "inputs_embeds")


class ForwardPhases:
    """Announces ``prefill``/``generate``/``train`` per forward pass of ``model``, and
    ``generate`` per call of ``engine.generate`` (TRL's vLLM generation; None: none), until
    :meth:`remove`."""

    def __init__(
        self, model: torch.nn.Module, signal: WorkloadSignal, engine: Any | None = None
    ) -> None:
        self.signal = signal
        self._last: tuple[str, int] | None = None
        self._handle = model.register_forward_pre_hook(self._announce, with_kwargs=True)
        self._engine = engine
        if engine is not None:
            generate = engine.generate

            def announced_generate(prompts: list, *args: Any, **kwargs: Any) -> Any:
                self._set("generate", len(prompts))
                return generate(prompts, *args, **kwargs)

            engine.generate = announced_generate  # an instance attribute, deleted by remove()

    def _set(self, phase: str, batch: int) -> None:
        if (phase, batch) != self._last:  # announce changes only: the signal keeps a history
            self._last = (phase, batch)
            self.signal.set(phase, batch)

    def _announce(self, module: torch.nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
        named = (kwargs.get(name) for name in _INPUT_NAMES)
        tensor = next(
            (
                v
                for v in (*named, *args, *kwargs.values())
                if isinstance(v, torch.Tensor) and v.dim()
            ),
            None,
        )
        batch = int(tensor.shape[0]) if tensor is not None else 1
        tokens = int(tensor.shape[1]) if tensor is not None and tensor.dim() > 1 else 1
        if torch.is_grad_enabled():
            self._set("train", batch)
        elif tokens > 1:
            self._set("prefill", batch * tokens)
        else:
            self._set("generate", batch)

    def idle(self) -> None:
        """The step ended: nothing runs until the next forward pass."""
        self._last = None
        self.signal.set("idle")

    def remove(self) -> None:
        self._handle.remove()
        if self._engine is not None:
            del self._engine.generate


def renew_phases(
    earlier: ForwardPhases | None,
    trainer: Any,
    model: torch.nn.Module | None,
    signal: WorkloadSignal,
) -> ForwardPhases | None:
    """The announcer of a new ``trainer.train()``: ``model``'s forward passes and ``trainer``'s
    vLLM generation (if any) announced to ``signal``, the ``earlier`` announcer removed (a
    ``train()`` that raised leaves its hooks); None where there is no ``model`` to watch."""
    if earlier is not None:
        earlier.remove()
    return None if model is None else ForwardPhases(model, signal, vllm_generation(trainer))
