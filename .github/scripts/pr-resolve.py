#!/usr/bin/env python3
"""Which pull request a finished synthesis run belongs to, and whether a maintainer allowed a stateful
replacement on it. Run by the privileged half of the PR review gate (.github/workflows/pr-review.yml) from the
default branch's checkout:

    pr-resolve.py NUMBER_FILE

NUMBER_FILE comes from the synthesis run's artifact, which the pull request's own code wrote. It is read as a
few bytes of data and must be a pull request number; anything else fails with one line (exit 1). The number
is then believed only if GitHub's API says that pull request is open into the default branch and its head is
the commit, from the repository, that the run synthesized: a stale run (the pull request moved on) or a number
naming another pull request resolves to nothing (exit 0, no outputs), so nothing is posted on it. The labels
come from the API, never from the artifact.

Environment: REPO, HEAD_SHA, HEAD_REPO, DEFAULT_BRANCH (from the workflow_run event), ALLOW_LABEL, and
GITHUB_OUTPUT, which receives `number=N` and `allowed=true|false`. `gh` (on PATH) makes the API call.
Messages quote what they read with repr(): a line of the log cannot be made to start a workflow command.
Standard library only: it runs on the runner's python3, before anything is installed.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

# GitHub numbers issues and pull requests from 1; ten digits leave room without admitting arbitrary data.
NUMBER = re.compile(rb"[1-9][0-9]{0,9}\n?")
MAX_BYTES = 12


def fail(message: str) -> NoReturn:
    print(f"pr-resolve: {message}", file=sys.stderr)
    sys.exit(1)


def read_number(file: Path) -> int:
    try:
        # O_NOFOLLOW: a symbolic link in the artifact could point at any file on the runner.
        descriptor = os.open(file, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        fail(f"cannot open {str(file)!r} as a regular file ({error.strerror}): the artifact must hold the number")
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        fail(f"{str(file)!r} is not a regular file: the artifact must hold the pull request number")
    with os.fdopen(descriptor, "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    if not NUMBER.fullmatch(data):
        fail(f"{str(file)!r} holds {data[:MAX_BYTES]!r}: allowed is a pull request number, 1 to 10 digits")
    return int(data)


def pull_request(repo: str, number: int) -> dict[str, Any]:
    run = subprocess.run(["gh", "api", f"repos/{repo}/pulls/{number}"], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"pull request #{number} of {repo!r} could not be read: {run.stderr.strip()[:300]!r}")
    try:
        data = json.loads(run.stdout)
    except json.JSONDecodeError:
        fail(f"the API's answer for pull request #{number} is not JSON")
    if not isinstance(data, dict):
        fail(f"the API's answer for pull request #{number} is not an object")
    return data


def field(data: Any, *path: str) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def main() -> None:
    if len(sys.argv) != 2:
        fail("usage: pr-resolve.py NUMBER_FILE")
    env = {name: os.environ.get(name, "") for name in ("REPO", "HEAD_SHA", "HEAD_REPO", "DEFAULT_BRANCH")}
    missing = [name for name, value in env.items() if not value]
    if missing or "GITHUB_OUTPUT" not in os.environ:
        fail(f"set {', '.join(missing or ['GITHUB_OUTPUT'])} (the workflow_run event's values)")
    number = read_number(Path(sys.argv[1]))
    pr = pull_request(env["REPO"], number)
    expected = {
        "head commit": (field(pr, "head", "sha"), env["HEAD_SHA"]),
        "head repository": (field(pr, "head", "repo", "full_name"), env["HEAD_REPO"]),
        "base branch": (field(pr, "base", "ref"), env["DEFAULT_BRANCH"]),
        "state": (field(pr, "state"), "open"),
    }
    mismatched = [f"{what} {actual!r}, the run's {run!r}" for what, (actual, run) in expected.items() if actual != run]
    if mismatched:
        print(f"pr-resolve: pull request #{number} is not this run's ({'; '.join(mismatched)}): nothing to post")
        return
    label = os.environ.get("ALLOW_LABEL") or "allow-stateful-replacement"
    allowed = any(field(item, "name") == label for item in field(pr, "labels") or [])
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as output:
        output.write(f"number={number}\nallowed={'true' if allowed else 'false'}\n")
    print(f"pr-resolve: pull request #{number}, {label} {'set' if allowed else 'not set'}")


if __name__ == "__main__":
    main()
