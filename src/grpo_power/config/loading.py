"""Reading a config: YAML without duplicate keys, validation with one line per bad field,
the working folder's or the packaged default, overrides, and the resolved config the workflow's
jobs read."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from grpo_power.config.base import ConfigError, validation_problems
from grpo_power.config.schema import Config

DEFAULT_CONFIG_PATH = Path("config/config.yaml")
# The same file, shipped inside the package: src/grpo_power/default_config.yaml is a symbolic link
# to the repository's config/config.yaml (a wheel holds its content; see pyproject.toml).
PACKAGED_CONFIG_NAME = "default_config.yaml"


def validate_config(data: dict[str, Any], source: str = "<config>") -> Config:
    """Validate a config mapping; raise :class:`ConfigError` naming each bad field."""
    try:
        return Config.model_validate(data)
    except ValidationError as error:
        raise ConfigError("\n".join(f"{source}: {p}" for p in validation_problems(error))) from None


def packaged_config_path() -> Path:
    """The default config shipped in the package: the repository's ``config/config.yaml``."""
    return Path(str(files("grpo_power").joinpath(PACKAGED_CONFIG_NAME)))


def default_config_path(folder: Path | str | None = None) -> Path:
    """``config/config.yaml`` in ``folder`` (default: the working folder) when it exists, else
    the packaged default (:func:`packaged_config_path`)."""
    local = DEFAULT_CONFIG_PATH if folder is None else Path(folder) / DEFAULT_CONFIG_PATH
    return local if local.is_file() else packaged_config_path()


class DuplicateKeyError(yaml.YAMLError):
    """A mapping of a YAML file names the same key twice."""

    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(f"line {line}: duplicate key {key!r} (first at line {first_line})")
        self.key, self.first_line, self.line = key, first_line, line


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (plain YAML keeps the
    last value silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise DuplicateKeyError(key, seen[key], line)
                seen[key] = line
            except TypeError:  # an unhashable key: the base class reports it
                continue
        return super().construct_mapping(node, deep)


def yaml_error_message(path: Path | str, error: yaml.YAMLError) -> str:
    """One line for a YAML error: the file, the line (and column), and the problem."""
    if isinstance(error, DuplicateKeyError):
        return (
            f"{path}: line {error.line}: duplicate key {error.key!r} (first at line "
            f"{error.first_line}); expected each key once (YAML would keep only the last value)"
        )
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    detail = f"{problem} ({context})" if context else problem
    return f"{path}: not valid YAML{where}: {' '.join(str(detail).split())}"


def read_yaml(path: Path | str) -> Any:
    """Parse a YAML file (UTF-8, a byte-order mark allowed) refusing duplicate keys; errors are
    one-line :class:`ConfigError` naming the file and the line."""
    from grpo_power.user_paths import path_problem

    path = Path(path)
    problem = path_problem(path, "a YAML config file", ("config.yaml",))
    if problem:
        raise ConfigError(problem)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: expected a YAML config file, got bytes that are not text (byte {error.start})"
        ) from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file ({error.strerror})") from None
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as error:
        raise ConfigError(yaml_error_message(path, error)) from None
    except (RecursionError, OverflowError, ValueError) as error:
        raise ConfigError(f"{path}: not valid YAML: {type(error).__name__}") from None


def load_config(
    path: Path | str = DEFAULT_CONFIG_PATH, overrides: dict[str, Any] | None = None
) -> Config:
    """Load and validate a YAML config file, optionally deep-merged with ``overrides``."""
    path = Path(path)
    data = read_yaml(path)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of settings at the top level, got {type(data).__name__}"
        )
    if overrides:
        data = deep_merge(data, overrides)
    try:
        return validate_config(data, str(path))
    except (OverflowError, RecursionError) as error:
        raise ConfigError(f"{path}: a value is out of range ({error})") from None


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``overrides`` merged in, recursing into nested mappings."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def write_resolved_config(config: Config, folder: Path | str) -> Path:
    """Write the validated config as YAML into ``folder``, named by its content
    (``config-<sha256 prefix>.yaml``); an existing file of the same content is left as it is.

    Returns the file's path. Two configs never share a file, so writing one (a dry run with
    another config, say) never changes the file a running workflow's jobs read.
    """
    import hashlib

    from grpo_power.atomic import write_text_atomic

    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = Path(folder) / f"config-{digest}.yaml"
    if not path.exists():
        write_text_atomic(path, text)
    return path
