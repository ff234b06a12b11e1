"""The repository's own documents: no reference points outside it, the design's map names files
that exist, and the calibration page lists every default the simulator has and every source row
the code cites."""

from __future__ import annotations

import re
import subprocess

import pytest

from grpo_power.config import SimulatedPowerConfig
from grpo_power.sim.defaults import DEPLOYMENT_PARAMETERS, POWER_PARAMETERS
from tests.conftest import REPO

DESIGN = REPO / "docs" / "design.md"
CALIBRATION = REPO / "docs" / "calibration.md"


def _tracked_text_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    suffixes = (".py", ".smk", ".md", ".yaml", ".rst", ".json", ".toml", ".sh", ".cfg")
    return [
        name
        for name in listed
        if (name.endswith(suffixes) or name in ("Snakefile", "Makefile"))
        and (REPO / name).is_file()
    ]


def test_no_file_points_outside_the_repository() -> None:
    dead = re.compile(r"DESIGN\.md|CALIBRATION\.md|shared/(?!data/real-traces)")
    found = [
        f"{name}:{number}"
        for name in _tracked_text_files()
        if name != "tests/test_docs.py"
        for number, line in enumerate((REPO / name).read_text(errors="replace").splitlines(), 1)
        if dead.search(line)
    ]
    assert not found, found


def test_the_design_map_names_files_that_exist() -> None:
    text = DESIGN.read_text()
    section = text[text.index("## 6. Where things are") : text.index("## 7.")]
    rules = re.findall(r"`([a-z_]+\.smk)`", section)
    modules = re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", section)
    packages = re.findall(r"`((?:[a-z_]+/)*[a-z_]+)/`", section)
    assert len(rules) >= 8 and len(modules) >= 15 and packages
    for rule in rules:
        assert (REPO / "workflow" / "rules" / rule).is_file(), rule
    code = REPO / "src" / "grpo_power"
    for module in modules:
        assert (code / module).is_file() or (REPO / module).is_file(), module
    top = {path.name for path in code.iterdir() if path.is_dir()}
    for package in (p for p in packages if p.split("/")[0] in top):  # not results/ folders
        assert (code / package).is_dir(), package


def test_the_calibration_page_lists_every_default() -> None:
    text = CALIBRATION.read_text()
    names = [*POWER_PARAMETERS, *DEPLOYMENT_PARAMETERS]
    names += [f"telemetry.simulated.{field}" for field in SimulatedPowerConfig.model_fields]
    missing = [name for name in names if name.split(".")[-1] not in text]
    assert not missing, missing


def _source_rows() -> set[str]:
    text = CALIBRATION.read_text()
    table = text[text.index("## Published sources") : text.index("## The GPU")]
    return {match.strip() for match in re.findall(r"^\| ([^|]+) \|", table, re.M)} - {"row"}


def test_every_row_the_code_cites_is_on_the_calibration_page() -> None:
    rows = _source_rows()
    assert "7-8B decode" in rows and "prefill" in rows
    cited = set()
    for name in _tracked_text_files():
        if name.startswith(("src/", "config/")):
            text = (REPO / name).read_text()
            cited |= set(re.findall(r"docs/calibration\.md\s*(?:\"\s*\")?\s*'([^']+)'", text))
    assert len(cited) >= 5, cited
    assert cited <= rows, sorted(cited - rows)


@pytest.mark.parametrize("section", ["## 1.", "## 5. Stages", "## 6. Where things are", "## 7."])
def test_the_design_has_its_sections(section: str) -> None:
    assert section in DESIGN.read_text()


def test_the_config_readme_describes_every_section() -> None:
    from grpo_power.config import Config

    text = (REPO / "config" / "README.md").read_text()
    table = text[text.index("## Sections") :]
    described = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.M))
    assert described == set(Config.model_fields)
    for module in re.findall(r"\| `([a-z_]+\.py)` \|$", table, re.M):
        assert (REPO / "src" / "grpo_power" / "config" / module).is_file(), module
