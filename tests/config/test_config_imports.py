"""The configuration package's imports point one way: sections -> derived -> project -> loader.

Every import counts, including those under `if TYPE_CHECKING:` and inside functions: a cycle hidden there is
still a circle a reader has to untangle, and the next edit turns it into an ImportError.
"""

from __future__ import annotations

import ast
import graphlib
import shutil
from pathlib import Path

import pytest

CONFIG_DIR = Path(__file__).resolve().parents[2] / "skyrl_hyperpod" / "config"
# The derived layer is computed from the sections; only the root model calls it.
DERIVED_IMPORTERS = {"project"}


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """{module: the package's modules it imports} for every module of `package_dir` (a flat package)."""
    modules = {path.stem for path in package_dir.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name in sorted(modules):
        tree = ast.parse((package_dir / f"{name}.py").read_text(encoding="utf-8"))
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:  # from .x import y
                    edges.add(node.module.split(".")[0])
                else:  # from . import x
                    edges.update(alias.name if alias.name in modules else "__init__" for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                prefix = f"skyrl_hyperpod.{package_dir.name}."
                if node.module.startswith(prefix):
                    edges.add(node.module.removeprefix(prefix).split(".")[0])
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    prefix = f"skyrl_hyperpod.{package_dir.name}."
                    if alias.name.startswith(prefix):
                        edges.add(alias.name.removeprefix(prefix).split(".")[0])
        graph[name] = edges & modules - {name}
    return graph


def import_problems(package_dir: Path) -> list[str]:
    graph = import_graph(package_dir)
    problems = []
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        problems.append(f"import cycle: {' -> '.join(error.args[1])}")
    importers = sorted(name for name, edges in graph.items() if "derived" in edges)
    for name in sorted(set(importers) - DERIVED_IMPORTERS):
        problems.append(f"{name}.py imports derived.py: sections must not import the derived layer")
    return problems


def test_the_config_package_has_no_import_cycle() -> None:
    assert import_problems(CONFIG_DIR) == []


def test_the_graph_sees_the_imports_that_matter() -> None:
    graph = import_graph(CONFIG_DIR)
    assert {"serving", "training_runs", "names", "hyperpod"} <= graph["derived"]
    assert "derived" in graph["project"] and "project" in graph["loader"]


@pytest.mark.parametrize(
    ("module", "added", "expected"),
    [
        # A type-only import back from a section: the circle this test exists for.
        (
            "serving",
            "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .derived import DerivedValues\n",
            "serving.py imports derived.py",
        ),
        # A function-local import of the loader from a section the loader (through project) imports.
        ("images", "\ndef _late():\n    from .loader import ConfigError\n", "import cycle:"),
        ("derived", "\nfrom skyrl_hyperpod.config.project import ProjectConfig\n", "import cycle:"),
    ],
)
def test_a_reintroduced_cycle_is_caught(tmp_path: Path, module: str, added: str, expected: str) -> None:
    copy = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / f"{module}.py").open("a", encoding="utf-8") as stream:
        stream.write(added)
    problems = import_problems(copy)
    assert any(expected in problem for problem in problems), problems
