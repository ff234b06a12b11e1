"""Keep credentials out of what grpo-power writes (manifests, job logs, error messages).

Two filters: values of mapping keys that name a secret (``HF_TOKEN``, ``api_key``,
``password``...) become ``"[redacted]"``; in free text, strings shaped like known tokens (Hugging
Face, GitHub, AWS, Slack, bearer headers, ``NAME=value`` pairs whose name says secret) are
replaced. Environment variables are never copied wholesale into an output: only
:data:`RECORDED_ENV` names are, after the same filters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"
# A name says secret when one of its _-. separated words does ("HF_TOKEN", "api-key"), so
# "max_new_tokens" or "authority" stay as they are.
SECRET_NAME = re.compile(
    r"(^|[_.-])(token|secret|passw(or)?d|api[_-]?key|access[_-]?key|credentials?|auth|"
    r"private[_-]?key)($|[_.-])",
    re.IGNORECASE,
)
TOKEN_PATTERNS = (
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),  # Hugging Face
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),  # GitHub
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b"),  # AWS access key id
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),  # Slack
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),  # API keys of the sk- kind
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{12,}"),  # Authorization headers
)
ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\S+)")
RECORDED_ENV = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_RESTART_COUNT",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_NODELIST",
    "CUDA_VISIBLE_DEVICES",
    "WORLD_SIZE",
)


def redact_text(text: str) -> str:
    """``text`` with token-shaped strings and secret ``NAME=value`` values replaced."""
    for pattern in TOKEN_PATTERNS:
        text = pattern.sub(REDACTED, text)
    return ASSIGNMENT.sub(
        lambda m: f"{m[1]}={REDACTED}" if SECRET_NAME.search(m[1]) else m[0], text
    )


def redact(value: Any) -> Any:
    """A copy of a JSON-like value with secrets replaced (keys by name, strings by shape)."""
    if isinstance(value, Mapping):
        return {
            k: REDACTED if SECRET_NAME.search(str(k)) and v not in (None, "") else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def recorded_environment() -> dict[str, str]:
    """The environment variables a manifest records (job ids, visible GPUs), filtered."""
    return redact({name: os.environ[name] for name in RECORDED_ENV if name in os.environ})
