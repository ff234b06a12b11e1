"""What every config section shares: the strict base model, the error type and the value
types with units (``PositiveFloat``, ``WindowSeconds``, ``Fraction``, ``PathName``,
``ExistingFile``).

The bottom of the config package: it imports nothing of grpo-power.
"""

from __future__ import annotations

import math
import numbers
import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

PositiveFloat = Annotated[float, Field(gt=0)]
MAX_NAMEPLATE_W = 3000.0  # no GPU board is rated higher (B200: 1000 W, GB300: 1400 W)
MAX_WINDOW_S = 7 * 24 * 3600.0  # a week: the longest averaging window or bin that means anything
WindowSeconds = Annotated[float, Field(gt=0, le=MAX_WINDOW_S)]
Fraction = Annotated[float, Field(ge=0, le=1)]
# A name that becomes a file or folder name under results/: no separators, no "..", no leading dot.
PathName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$", max_length=64)]


def _existing_file(path: Path) -> Path:
    """``path`` where it is a file; a ValueError saying what it is otherwise."""
    if path.is_file():
        return path
    found = "a folder" if path.is_dir() else "no such file"
    raise ValueError(f"expected an existing file, found {found}")


# An input file the config names (a calibration): checked when the config is read, so a
# misspelt path stops the command or workflow at once (it was read later, or never).
ExistingFile = Annotated[Path, AfterValidator(_existing_file)]


class ConfigError(ValueError):
    """A configuration file could not be read or failed validation."""


class Strict(BaseModel):
    """Base of every config section: unknown keys are errors, values are re-validated on set."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=False, allow_inf_nan=False
    )


def is_multiple(value: float, step: float) -> bool:
    """Whether ``value`` is an integer multiple of ``step`` (to floating-point tolerance)."""
    ratio = value / step
    if not math.isfinite(ratio):
        return False
    return abs(ratio - round(ratio)) <= 1e-9 * max(1.0, ratio) and round(ratio) >= 1


FIELD_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")  # a field's (dotted) name
# a number in exponent form without a point (1e5): YAML 1.1, which PyYAML and Snakemake read,
# takes it for text, and an integer field refuses the text
YAML_TEXT_EXPONENT = re.compile(r"[+-]?\d+[eE][+-]?\d+")


def validation_problems(error: ValidationError) -> list[str]:
    """One ``<field path>: <reason> (got <value>)`` string per bad field of a pydantic error (an
    unknown key says to check its spelling; a missing field or a whole mapping shows no value)."""
    problems = []
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"])
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown key (check its spelling and section)"
        given = item.get("input")
        shown = "" if isinstance(given, dict) or item["type"] == "missing" else f" (got {given!r})"
        if item["type"] == "value_error":  # a check of the schema's own: its words alone
            lines = _own_check_problems(path, message.removeprefix("Value error, "))
            problems += [f"{line}{shown}" for line in lines]
            continue
        if isinstance(given, str) and YAML_TEXT_EXPONENT.fullmatch(given.strip()):
            number = float(given)
            whole = f"{number:.0f}" if number.is_integer() and abs(number) < 1e16 else f"{number!r}"
            message += f"; YAML reads {given} as text: write {whole}"
        problems.append(f"{path or '(top level)'}: {message}{shown}")
    return problems


def _own_check_problems(path: str, message: str) -> list[str]:
    """The lines of a schema check's own error at ``path``: one per bad field where the check
    names several on lines of their own (``<field>: <reason>``), each under the section."""
    if not path:  # across sections: the message names its fields
        return message.split("\n")
    problems = []
    for line in message.split("\n"):
        head, said, rest = line.partition(": ")
        if said and FIELD_NAME.fullmatch(head):  # a section's check naming its field
            problems.append(f"{head if head.startswith(f'{path}.') else f'{path}.{head}'}: {rest}")
        else:
            problems.append(f"{path}: {line}")
    return problems


def check_arguments(
    owner: str,
    non_negative: tuple[str, ...] = (),
    required: tuple[str, ...] = (),
    **values: float | None,
) -> None:
    """Refuse a library call's numeric argument that is not a finite number above 0 (at or
    above 0 for the names in ``non_negative``; None: not given, refused for the names in
    ``required``), naming ``owner`` (the class), the argument and what was expected in one line.
    A string of a number (``"320"``) is refused too: the argument is used as a number.

    Raises:
        ValueError: the first bad argument.
    """
    for name, value in values.items():
        if value is None and name not in required:
            continue
        low = "at or above 0" if name in non_negative else "above 0"
        number = (
            float(value)
            if isinstance(value, numbers.Real) and not isinstance(value, bool)
            else math.nan
        )
        if not math.isfinite(number) or number < 0 or (number == 0 and name not in non_negative):
            raise ValueError(f"{owner}: {name}: expected a finite number {low}, got {value!r}")
