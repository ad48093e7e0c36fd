#!/usr/bin/env python3
"""`make test-changed`: the fast loop's tests that the change since the last run can break.

    .venv/bin/python -m tools.test_changed [pytest arguments]

pytest-testmon (https://testmon.org, https://github.com/tarpas/pytest-testmon) records, per test, the Python files
and the blocks in them that the test ran in its own process, and selects the tests whose recorded blocks changed
since (plus new and failed ones). It cannot see what it did not trace, so the whole fast loop runs instead, and
refreshes the data, when:
- there is no dependency data yet;
- a file that is not Python changed since the data was written (YAML, the cdk8s and Helm inputs, templates, the
  Makefile, the pins, the docs the tests compare): the tests read those, they do not execute them;
- a Python file outside tests/ changed that the data does not know: new, or run only in child processes (the apps
  under the CDK and cdk8s CLIs, the image's scripts, Lambda handlers, the drill's sitecustomize.py hook).

The data is `.testmondata` in the checkout (gitignored; TESTMON_DATAFILE names another file). CI and `make test` run
every test and never read it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATAFILE = ".testmondata"
FAST_LOOP = ["-m", "not long_running"]


@dataclass(frozen=True)
class Plan:
    select: bool  # True: only the affected tests; False: the whole fast loop, recording fresh data
    reason: str

    def pytest_args(self) -> list[str]:
        if not self.select:
            return [*FAST_LOOP, "--testmon-noselect"]
        # testmon turns its selection off when -m is given, unless forced to combine both. A selection leaves some
        # of a module's snapshots unused, which syrupy otherwise counts as a failure.
        return [*FAST_LOOP, "--testmon-forceselect", "--snapshot-warn-unused"]


def datafile(repo: Path, environ: dict[str, str]) -> Path:
    return repo / environ.get("TESTMON_DATAFILE", DEFAULT_DATAFILE)


def checkout_files(repo: Path) -> tuple[list[str], list[str]]:
    """(the files git tracks or would track, as paths relative to repo; the tracked ones deleted from the tree)."""

    def listed(*args: str) -> list[str]:
        done = subprocess.run(
            ["git", "ls-files", "-z", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=60
        )
        return [name for name in done.stdout.split("\0") if name]

    deleted = listed("--deleted")
    gone = set(deleted)
    return [name for name in listed("--cached", "--others", "--exclude-standard") if name not in gone], deleted


def known_files(data: Path) -> set[str] | None:
    """The files testmon's data holds fingerprints of (relative to the checkout), None when it cannot be read."""
    try:
        with sqlite3.connect(f"file:{data}?mode=ro", uri=True) as connection:
            return {row[0] for row in connection.execute("SELECT DISTINCT filename FROM file_fp")}
    except sqlite3.Error:
        return None


def plan(repo: Path, data: Path, files: list[str], deleted: list[str]) -> Plan:
    """What to run: the affected tests, or the whole fast loop and why."""
    if not data.is_file():
        return Plan(False, f"no dependency data yet ({data.name}): the whole fast loop, recording it")
    # SQLite in write-ahead mode writes the -wal file beside the data and the main file only at checkpoints.
    recorded = max(path.stat().st_mtime for path in [data, *data.parent.glob(f"{data.name}-wal")])
    for name in deleted:
        if not name.endswith(".py"):
            return Plan(False, f"{name} was deleted: the whole fast loop")
    own = data.relative_to(repo).as_posix() if data.is_relative_to(repo) else None
    changed = [
        name
        for name in files
        # SQLite's -wal and -shm files beside the data are testmon's, not an input.
        if not (own and name.startswith(own)) and (repo / name).is_file() and (repo / name).stat().st_mtime > recorded
    ]
    for name in changed:
        if not name.endswith(".py"):
            return Plan(False, f"{name} changed and is not Python: the whole fast loop")
    outside_tests = [name for name in changed if not name.startswith("tests/")]
    if outside_tests:
        known = known_files(data)
        if known is None:
            return Plan(False, f"{data.name} is unreadable: the whole fast loop, recording it again")
        for name in outside_tests:
            if name not in known:
                return Plan(
                    False,
                    f"{name} changed and no test ran it in-process (new, or run in a child process): the whole fast loop",
                )
    return Plan(True, f"{len(changed)} changed Python file(s): the tests that ran them")


def run(repo: Path, argv: list[str], environ: dict[str, str]) -> int:
    data = datafile(repo, environ)
    files, deleted = checkout_files(repo)
    chosen = plan(repo, data, files, deleted)
    print(f"test-changed: {chosen.reason}", file=sys.stderr, flush=True)
    # testmon ends a run whose tests it all deselected with pytest's OK ("no tests ran"), not NO_TESTS_COLLECTED.
    return subprocess.call([sys.executable, "-m", "pytest", *chosen.pytest_args(), *argv], cwd=repo, env=environ)


def main(argv: list[str]) -> int:
    return run(REPO, argv, dict(os.environ))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
