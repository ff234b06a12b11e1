"""The package's structure: no import cycle, every dependency pointing down the layers, and the
analysis side free of torch and TRL."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "src" / "grpo_power"

# Modules and packages at the bottom, each with what it may import of grpo-power (a prefix).
LEAVES = {
    "grpo_power.layout": (),
    "grpo_power.version": (),
    "grpo_power.stats": (),
    "grpo_power.atomic": (),
    "grpo_power.listing": (),
    "grpo_power.signal_handlers": (),
    "grpo_power.sim": (
        "grpo_power.sim",
        "grpo_power.config",
        "grpo_power.stats",
        "grpo_power.layout",
        "grpo_power.atomic",
        "grpo_power.listing",
    ),
    "grpo_power.config": (
        "grpo_power.config",
        "grpo_power.layout",
        "grpo_power.user_paths",
        "grpo_power.atomic",
    ),
}
# The file-reading side: it never imports the side that trains (torch, TRL, SB3).
FILE_SIDE = (
    "grpo_power.analysis",
    "grpo_power.economics",
    "grpo_power.report",
    "grpo_power.planner",
)
TRAINING_SIDE = ("grpo_power.workload", "grpo_power.launch", "grpo_power.control.ppo")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The grpo-power modules ``path`` imports anywhere (top level or inside a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import sub` imports the submodule when there is one
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in modules
                else node.module
                for alias in node.names
            ]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def test_the_import_graph_has_no_cycle() -> None:
    graph = _graph()
    assert len(graph) > 50  # the whole package was read
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")
    assert set(order) == set(graph)


def test_a_cycle_is_found() -> None:
    """The check above can fail: the same sorter on a graph with a cycle."""
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter({"a": {"b"}, "b": {"c"}, "c": {"a"}}).static_order())


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_the_bottom_layers_import_nothing_above_them(leaf: str) -> None:
    allowed = LEAVES[leaf]
    graph = _graph()
    members = [name for name in graph if name == leaf or name.startswith(f"{leaf}.")]
    assert members, leaf
    above = {
        (member, imported)
        for member in members
        for imported in graph[member]
        if not imported.startswith(allowed) or not allowed
    }
    assert not above, sorted(above)


def test_the_file_side_never_imports_the_training_side() -> None:
    graph = _graph()
    crossing = sorted(
        (name, imported)
        for name, imports in graph.items()
        if name.startswith(FILE_SIDE)
        for imported in imports
        if imported.startswith(TRAINING_SIDE)
    )
    assert not crossing, crossing


def test_analysis_stages_never_import_torch_or_trl() -> None:
    code = (
        "import sys, grpo_power.economics.stage, grpo_power.report.stage, grpo_power.cli; "
        "bad = [m for m in ('torch', 'trl', 'transformers') if m in sys.modules]; "
        "assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
