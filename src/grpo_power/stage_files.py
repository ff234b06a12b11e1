"""Readers of the files one stage hands to another (JSON and CSV), shared by every stage.

The counterpart of :mod:`grpo_power.atomic`: where that module writes a stage's outputs, this
one reads them back as the next stage's inputs. A file that is missing, unreadable, of the wrong
kind or short of a key or column is refused with one message that names the file, the key or
column, and what was expected (which stage writes it), in the form
``<file>: <field>: expected ..., got ...``; the CLI prints it and exits non-zero.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_power.user_paths import path_problem


def read_json(path: Path | str, expected: str, keys: Iterable[str] = ()) -> dict[str, Any]:
    """Read a JSON object a stage wrote.

    Args:
        path: the file.
        expected: what it should be, for messages (e.g. "the fleet stage's summary.json,
            written by `grpo-power fleet`").
        keys: top-level keys it must have.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not JSON, not an object, or a key is missing.
    """
    path = Path(path)
    problem = path_problem(path, expected)
    if problem:
        raise ValueError(problem)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file; expected {expected}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: expected {expected}, got a binary file") from None
    except OSError as error:  # a folder, no permission
        raise ValueError(
            f"{path}: cannot read it ({error.strerror}); expected {expected}"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}: expected {expected}, got invalid JSON ({error.msg} at line {error.lineno})"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected {expected} (a JSON object), got {type(data).__name__}")
    require_keys(data, keys, str(path), expected)
    return data


def require_keys(data: dict[str, Any], keys: Iterable[str], where: str, expected: str) -> None:
    """Raise ``ValueError`` naming ``where`` and the first of ``keys`` missing from ``data``."""
    missing = [k for k in keys if k not in data]
    if missing:
        raise ValueError(
            f"{where}: {missing[0]}: expected {expected} with key(s) {missing}, got only "
            f"{sorted(data)[:12]}"
        )


def require_data_label(data: dict[str, Any], where: str, meaning: str) -> None:
    """Raise ``ValueError`` naming ``where`` unless ``data["simulated"]`` is true or false
    (``meaning``: what it says); unlabelled power is never taken as measured."""
    if not isinstance(data.get("simulated"), bool):
        raise ValueError(
            f"{where}: simulated: expected true or false ({meaning}), got {data.get('simulated')!r}"
        )


def read_csv(path: Path | str, expected: str, columns: Iterable[str] = ()) -> pd.DataFrame:
    """Read a CSV table a stage wrote.

    Args:
        path: the file.
        expected: what it should be, for messages.
        columns: columns it must have.

    Raises:
        FileNotFoundError: no such file.
        ValueError: empty, not CSV text, or a column is missing.
    """
    path = Path(path)
    problem = path_problem(path, expected)
    if problem:
        raise ValueError(problem)
    try:
        frame = pd.read_csv(path, encoding="utf-8-sig")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file; expected {expected}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: expected {expected}, got an empty file") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"{path}: expected {expected}, got unreadable CSV ({reason})") from None
    except OSError as error:  # a folder, no permission
        raise ValueError(
            f"{path}: cannot read it ({error.strerror}); expected {expected}"
        ) from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: {missing[0]}: expected {expected} with column(s) {missing}, got "
            f"{list(frame.columns)[:12]}"
        )
    return frame
