"""Shared fixtures: the default config, read from the repository's config/config.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_power.config import Config, load_config

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def config() -> Config:
    return load_config(REPO / "config" / "config.yaml")
