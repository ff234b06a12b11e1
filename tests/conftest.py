"""Shared fixtures: the default config, read from the repository's config/config.yaml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


def checkout_copy(folder: Path) -> Path:
    """A copy of this checkout in ``folder`` (the files git tracks, and those it does not ignore),
    modification times kept, with ``.venv`` linked to this checkout's: a clean clone, where a
    user types the README's commands."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    if (REPO / ".venv").exists():
        (folder / ".venv").symlink_to(REPO / ".venv")
    return folder


def user_env() -> dict[str, str]:
    """The environment of a user who ran `make test`: this Python's bin folder first on PATH."""
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def _slurm_problem() -> str | None:
    if shutil.which("sbatch") is None:
        return "no Slurm client (sbatch) on PATH"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    if "UP" not in ping.stdout:
        return "no running slurmctld (make test starts one when run as root)"
    if "# grpo-power test cluster" not in Path("/etc/slurm/slurm.conf").read_text():
        return "the running Slurm is not the test cluster of scripts/slurm/start.sh"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    """The test Slurm of scripts/slurm/start.sh (account grpo, partition debug), or a skip."""
    problem = _slurm_problem()
    if problem:
        missing_requirement(f"the test Slurm: {problem}")
