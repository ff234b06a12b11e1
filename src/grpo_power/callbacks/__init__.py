"""Callbacks for a user's own training script, on the stock ``trl.GRPOTrainer`` or any HF
``Trainer``: :class:`PowerCallback` (power metrics in the trainer's logs, and the trace) and
:class:`PowerCapCallback` (a controller keeping the run under a power cap).

``from grpo_power.callbacks import PowerCallback, PowerCapCallback``. These import
``transformers`` (and torch); the analysis, economics and report packages never do.
"""

from grpo_power.callbacks.cap import PowerCapCallback
from grpo_power.callbacks.power import PowerCallback

__all__ = ["PowerCallback", "PowerCapCallback"]
