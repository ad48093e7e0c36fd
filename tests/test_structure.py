"""The package's shape, kept true: imports point one way (no cycle between modules, counting imports inside
functions and under TYPE_CHECKING too), no module reaches into another's private names, every error the
project raises on purpose derives from its one base, `skyrl_hyperpod.plumbing.errors.ProjectError`, and two
modules share a file name only when they are one thing in two roles (docs/development.md).

The drill's site package (drill/site/: sitecustomize, drill_site) runs inside the drill's own interpreter, on SkyRL's and
Ray's classes, and is not part of the package's import graph; the Lambda handlers under stacks/ are assets.
"""

from __future__ import annotations

import ast
import graphlib
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import drill
import skyrl_hyperpod
from skyrl_hyperpod.plumbing.errors import ProjectError

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "skyrl_hyperpod"
# The product and, beside it, its tooling (the drill, the Makefile's tools): one import graph.
GRAPH_ROOTS = (PACKAGE, REPO / "drill", REPO / "tools")
# Loaded into another interpreter (sitecustomize and drill_site, from PYTHONPATH), not imported by the package.
OUTSIDE_THE_GRAPH = ("drill.site",)


def module_name(path: Path) -> str:
    parts = (path.relative_to(REPO) if path.is_relative_to(REPO) else Path(path.name)).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    found = {module_name(path): path for root in GRAPH_ROOTS for path in root.rglob("*.py")}
    return {name: path for name, path in found.items() if not name.startswith(OUTSIDE_THE_GRAPH)}


def resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative levels resolved against `importer`)."""
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(name: str, path: Path, modules: set[str]) -> list[tuple[str, list[str]]]:
    """(imported module of the package, the names taken from it) for every import in the file, and for every
    attribute read through a name bound to an imported module (`module._name`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, list[str]]] = []
    bound: dict[str, str] = {}  # local name -> module of the package it is bound to
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    found.append((alias.name, []))
                    if alias.asname:
                        bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            target = resolve(name, is_package, node)
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in modules:
                    found.append((submodule, []))
                    bound[alias.asname or alias.name] = submodule
                elif target in modules:
                    found.append((target, [alias.name]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            found.append((bound[node.value.id], [node.attr]))
    return found


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        # A package's __init__ importing its own submodules is how a package exposes them, not a dependency back.
        edges = {target for target, _ in imports_of(name, path, set(modules))}
        graph[name] = {target for target in edges if target != name and not target.startswith(f"{name}.")}
    return graph


def test_no_import_cycle_between_the_packages_modules() -> None:
    graph = import_graph()
    assert len(graph) > 100 and "skyrl_hyperpod.config.project" in graph["skyrl_hyperpod.config.loader"]
    assert (
        "drill.training_cluster" in graph["drill.scenarios"] and "tools.cli_reference" in graph["tools.generate_docs"]
    )
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(root: Path, modules: dict[str, Path]) -> list[str]:
    """`file: module.name` for each leading-underscore name a file under `root` imports from another module."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "__snapshots__" in path.parts:
            continue
        name = module_name(path)
        for target, names in imports_of(name, path, set(modules)):
            found += [f"{path.name}: {target}.{n}" for n in names if private(n) and target != name]
    return found


@pytest.mark.parametrize("root", ["skyrl_hyperpod", "drill", "tools", "stacks", "charts", "tests"])
def test_no_module_imports_another_modules_private_names(root: str) -> None:
    assert private_imports(REPO / root, package_modules()) == []


def test_the_private_import_check_sees_one(tmp_path: Path) -> None:
    (tmp_path / "user.py").write_text(
        "from skyrl_hyperpod.config.loader import _describe\nfrom skyrl_hyperpod.config import loader\nloader._yaml_error\n"
    )
    assert private_imports(tmp_path, package_modules()) == [
        "user.py: skyrl_hyperpod.config.loader._describe",
        "user.py: skyrl_hyperpod.config.loader._yaml_error",
    ]


def project_exceptions() -> dict[str, type]:
    """Every exception class (warnings aside) defined in the package and the drill (importing each module), by
    qualified name."""
    found = {}
    walked = [
        *pkgutil.walk_packages(skyrl_hyperpod.__path__, "skyrl_hyperpod."),
        *pkgutil.walk_packages(drill.__path__, "drill."),
    ]
    for info in walked:
        if info.name.startswith(OUTSIDE_THE_GRAPH) or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            is_error = inspect.isclass(value) and issubclass(value, Exception) and not issubclass(value, Warning)
            if is_error and value.__module__ == info.name:
                found[f"{info.name}.{value.__qualname__}"] = value
    return found


def test_every_error_the_package_raises_derives_from_the_one_base() -> None:
    exceptions = project_exceptions()
    assert (
        "skyrl_hyperpod.ops.kube.KubeError" in exceptions and "skyrl_hyperpod.plumbing.errors.ConfigError" in exceptions
    )
    assert sorted(name for name, cls in exceptions.items() if not issubclass(cls, ProjectError)) == []


# Two modules may share a file name when they are one thing in two roles, each pair of directories for a reason:
ROLE_PAIRS = {
    # a command (parses, prints) and the work it runs
    frozenset({"skyrl_hyperpod/cli", "skyrl_hyperpod/ops"}),
    # a configuration section and the CDK component it configures
    frozenset({"skyrl_hyperpod/config", "stacks/components"}),
    # the chart that makes a KubeRay kind and the operator's checks of that kind
    frozenset({"charts", "skyrl_hyperpod/validation/kuberay_operator"}),
}
# Lambda's handler setting names the file: each function's asset directory holds an index.py ("index.handler").
LAMBDA_ENTRY = "index.py"
NAMED_ROOTS = ("skyrl_hyperpod", "drill", "tools", "bench", "stacks", "charts")


def shared_names(paths: list[Path]) -> list[str]:
    """`name: dir, dir` for each file name two directories use for different things (not a role pair)."""
    by_name: dict[str, set[str]] = {}
    for path in paths:
        if path.name in ("__init__.py", "__main__.py") or path.name == LAMBDA_ENTRY and "stacks" in path.parts:
            continue
        by_name.setdefault(path.name, set()).add(path.parent.as_posix())
    clashes = []
    for name, dirs in sorted(by_name.items()):
        ordered = sorted(dirs)
        pairs = [frozenset({a, b}) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]
        if any(pair not in ROLE_PAIRS for pair in pairs):
            clashes.append(f"{name}: {', '.join(ordered)}")
    return clashes


def test_two_modules_share_a_name_only_as_one_thing_in_two_roles() -> None:
    paths = [
        path.relative_to(REPO)
        for root in NAMED_ROOTS
        for path in (REPO / root).rglob("*.py")
        if "__pycache__" not in path.parts
    ]
    assert len(paths) > 150
    assert shared_names(paths) == []


def test_the_shared_name_check_sees_one() -> None:
    paths = [Path("skyrl_hyperpod/ops/serve.py"), Path("skyrl_hyperpod/cli/serve.py"), Path("drill/serve.py")]
    assert shared_names(paths) == ["serve.py: drill, skyrl_hyperpod/cli, skyrl_hyperpod/ops"]
    assert shared_names(paths[:2]) == []
    assert shared_names([Path("stacks/components/a/index.py"), Path("stacks/components/b/index.py")]) == []


def test_what_the_documented_local_flows_write_is_ignored_by_git():
    """make synth, skyrl-hp outputs and `skyrl-hp cost --json > cost.json` (docs/review-gate.md) write these
    into the checkout: each is configuration-specific output, never a file to commit."""
    import fnmatch

    root = Path(__file__).resolve().parents[1]
    patterns = [line.strip() for line in (root / ".gitignore").read_text().splitlines() if line.strip()]

    def ignored(name: str, directory: bool) -> bool:
        for pattern in patterns:
            bare = pattern.lstrip("/")
            if bare.endswith("/"):
                if directory and fnmatch.fnmatch(name, bare.rstrip("/")):
                    return True
            elif fnmatch.fnmatch(name, bare):
                return True
        return False

    assert ignored("cdk.out", True) and ignored("dist", True)
    assert ignored("outputs.json", False) and ignored("cost.json", False)
