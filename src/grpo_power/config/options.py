"""Command-line options validated as the config fields they stand for: the same types, the
same ranges, the same checks between fields."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    ConfigDict,
    TypeAdapter,
    ValidationError,
)

from grpo_power.config.base import ConfigError
from grpo_power.config.schema import Config


def _field_info(dotted: str) -> Any:
    model: Any = Config
    info = None
    for part in dotted.split("."):
        info = model.model_fields[part]
        model = info.annotation
    return info


def _bounds(metadata: list[Any]) -> list[str]:
    words = []
    for item in metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(item, attr, None)
            if value is not None:
                words.append(f"{sign} {value:g}")
    return words


def validate_option(option: str, dotted: str, value: Any, unit: str) -> Any:
    """Validate a command-line option with the type of the config field ``dotted`` (finite,
    and within the field's range); raise a one-line :class:`ConfigError` naming the option."""
    info = _field_info(dotted)
    kind = info.annotation
    adapter = TypeAdapter(Annotated[kind, *info.metadata], config=ConfigDict(allow_inf_nan=False))
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        reason = error.errors()[0]["msg"]
    except OverflowError:
        reason = "out of range"
    bounds = " and ".join(_bounds(info.metadata))
    finite = ", finite" if kind is float else ""
    raise ConfigError(
        f"{option}: expected {unit} {bounds}{finite}, as the config's {dotted}: {reason} "
        f"(got {value!r})"
    )


def validate_setting(config: Config, option: str, dotted: str, value: Any) -> None:
    """Check that the config stays valid with ``dotted`` set to an option's value (the checks
    between fields: a cap above idle and at most the nameplate, ...)."""
    data = config.model_dump()
    _set_dotted(data, dotted, value)
    try:
        Config.model_validate(data)
    except ValidationError as error:
        reason = error.errors()[0]["msg"].removeprefix("Value error, ")
        shown = f"{value:g}" if isinstance(value, float) else repr(value)
        raise ConfigError(f"{option}: {reason} (got {shown})") from None


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[key]
    data[last] = value
