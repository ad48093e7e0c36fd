"""docs/development.md's map of the package ("Where things live") is the package: every module of the package, the
drill and the tools belongs to one kind of the table, and every import between kinds is one the table allows."""

from __future__ import annotations

import re
from pathlib import Path

from test_structure import import_graph, package_modules

REPO = Path(__file__).resolve().parent.parent
MAP_ROW = re.compile(r"^\| (?P<kind>[a-z ]+) \| (?P<modules>[^|]+) \| [^|]+ \| (?P<imports>[a-z ,]+) \|$")


def development_map() -> tuple[dict[str, str], dict[str, set[str]]]:
    """({package of skyrl_hyperpod, or drill/tools: its kind}, {kind: the kinds it may import})."""
    text = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    section = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    kinds: dict[str, str] = {}
    allowed: dict[str, set[str]] = {}
    for line in section.splitlines():
        row = MAP_ROW.match(line)
        if row is None or row["kind"] == "kind":
            continue
        kind = row["kind"]
        allowed[kind] = {name.strip() for name in row["imports"].split(",")} | {kind}
        # Each code span names a module or a package (`config/` -> config).
        for entry in re.findall(r"`([a-z_]+)/?`", row["modules"]):
            kinds[entry] = kind
    return kinds, allowed


def top(module: str) -> str:
    """The map's entry of a module: its package under skyrl_hyperpod, or the tooling's top-level package."""
    parts = module.split(".")
    return parts[1] if parts[0] == "skyrl_hyperpod" and len(parts) > 1 else parts[0]


def test_every_module_of_the_package_is_on_the_map() -> None:
    kinds, allowed = development_map()
    assert len(allowed) == 7 and set(kinds.values()) == set(allowed)
    modules = {top(name) for name in package_modules() if name != "skyrl_hyperpod"}
    assert sorted(modules - set(kinds)) == []
    assert sorted(set(kinds) - modules) == []


def test_every_import_between_kinds_is_one_the_map_allows() -> None:
    kinds, allowed = development_map()
    wrong = sorted(
        f"{importer} imports {imported} ({kinds[top(importer)]} -> {kinds[top(imported)]})"
        for importer, imported_modules in import_graph().items()
        if importer != "skyrl_hyperpod"
        for imported in imported_modules
        if imported != "skyrl_hyperpod" and kinds[top(imported)] not in allowed[kinds[top(importer)]]
    )
    assert wrong == []


def test_the_map_check_sees_a_wrong_way_import() -> None:
    kinds, allowed = development_map()
    # configuration importing the command line would be a layer pointing up.
    assert kinds["config"] == "configuration" and kinds["cli"] == "command line"
    assert "command line" not in allowed["configuration"] and "plumbing" in allowed["configuration"]
