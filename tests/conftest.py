"""Shared fixtures: the default config, read from the repository's config/config.yaml."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grpo_power.config import Config, load_config

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def config() -> Config:
    return load_config(REPO / "config" / "config.yaml")


def missing_requirement(reason: str) -> None:
    """A test needs something this machine lacks (Slurm, chromium, snakemake): under CI=true,
    where `.ci/run` installs all of it, that is a failure; elsewhere a skip giving ``reason``."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)
