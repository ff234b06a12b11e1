"""The conda environments for clusters stay in step with pyproject.toml's pins."""

from __future__ import annotations

import tomllib

import pytest
import yaml

from tests.conftest import REPO


def _pip_specs(env_file: str) -> list[str]:
    env = yaml.safe_load((REPO / "envs" / env_file).read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    return pip[0]["pip"]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize(
    ("env_file", "groups"),
    [("training.yaml", ["dependencies", "train"]), ("analysis.yaml", ["dependencies"])],
)
def test_env_pins_equal_pyproject(env_file: str, groups: list[str]) -> None:
    project = _pyproject()
    expected = []
    for group in groups:
        expected += (
            project["dependencies"]
            if group == "dependencies"
            else (project["optional-dependencies"][group])
        )
    assert _pip_specs(env_file) == expected


def test_analysis_env_has_no_torch_or_trl() -> None:
    names = " ".join(_pip_specs("analysis.yaml"))
    assert "torch" not in names and "trl" not in names
