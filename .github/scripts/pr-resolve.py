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

The label alone accepts nothing: it stays on the pull request through every later push. While it is set, the
pull request's comments are read (https://docs.github.com/en/rest/issues/comments#list-issue-comments) for lines
`allow-stateful-replacement HEAD_SHA KEY`, each a line of its own, by a person (not a bot) who is an owner, a member
or a collaborator of the repository (author_association), naming the run's head commit in full: each such KEY is
the acceptance key of a set of stateful resources (`skyrl-hp review` prints it) that pr-review.sh then lets pass,
at this commit and for exactly those resources. An outsider cannot write such a comment that counts, nor set the
label (that takes triage access); a push makes every earlier acceptance name another commit.

Environment: REPO, HEAD_SHA, HEAD_REPO, DEFAULT_BRANCH (from the workflow_run event), ALLOW_LABEL, and
GITHUB_OUTPUT, which receives `number=N`, `allowed=true|false` (the label is set) and, when a comment accepts
something at this head, `accepted=KEY ...`. `gh` (on PATH) makes the API calls.
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
# An acceptance: the label's name, the head commit in full (a prefix could be matched by a crafted commit) and the
# 16 hex digits of the review's acceptance key, alone on its line.
ACCEPTANCE = re.compile(r"(?P<label>[\w.-]+) (?P<sha>[0-9a-f]{40}) (?P<key>[0-9a-f]{16})")
# Who may accept (a comment's author_association): as for the code owners' approvals in pr-synthesis-trust.py, the
# token cannot read permissions, so only an owner, a member of the owning organisation or an invited collaborator.
TRUSTED_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")


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


def gh_json(args: list[str], what: str) -> Any:
    """`gh api ARGS` as JSON; one line naming `what` when it cannot be read."""
    run = subprocess.run(["gh", "api", *args], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"{what} could not be read: {run.stderr.strip()[:300]!r}")
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError:
        fail(f"the API's answer for {what} is not JSON")


def pull_request(repo: str, number: int) -> dict[str, Any]:
    data = gh_json([f"repos/{repo}/pulls/{number}"], f"pull request #{number} of {repo!r}")
    if not isinstance(data, dict):
        fail(f"the API's answer for pull request #{number} is not an object")
    return data


def comments(repo: str, number: int) -> list[dict[str, Any]]:
    """Every comment of the pull request (`--slurp`: one JSON array holding each page's array)."""
    endpoint = f"repos/{repo}/issues/{number}/comments?per_page=100"
    data = gh_json(["--paginate", "--slurp", endpoint], f"the comments of pull request #{number}")
    if not isinstance(data, list) or not all(isinstance(page, list) for page in data):
        fail(f"the API's answer for the comments of pull request #{number} is not a list of pages")
    return [item for page in data for item in page if isinstance(item, dict)]


def accepted_keys(items: list[dict[str, Any]], label: str, head_sha: str) -> list[tuple[str, str]]:
    """(key, login) per acceptance of `head_sha` in a comment that counts, in the order they were written."""
    found = []
    for item in items:
        login = field(item, "user", "login")
        if field(item, "user", "type") != "User" or item.get("author_association") not in TRUSTED_ASSOCIATIONS:
            continue
        for line in str(item.get("body") or "").splitlines():
            match = ACCEPTANCE.fullmatch(line.strip())
            if match and match["label"] == label and match["sha"] == head_sha:
                found.append((match["key"], str(login)))
    return found


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
    accepted = accepted_keys(comments(env["REPO"], number), label, env["HEAD_SHA"]) if allowed else []
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as output:
        output.write(f"number={number}\nallowed={'true' if allowed else 'false'}\n")
        if accepted:
            output.write(f"accepted={' '.join(sorted({key for key, _ in accepted}))}\n")
    print(f"pr-resolve: pull request #{number}, {label} {'set' if allowed else 'not set'}")
    for key, login in accepted:
        print(f"pr-resolve: {login!r} accepts the stateful changes with key {key} at {env['HEAD_SHA']}")
    if allowed and not accepted:
        print(
            f"pr-resolve: no maintainer's comment accepts a stateful change at {env['HEAD_SHA']}: the label alone does not"
        )


if __name__ == "__main__":
    main()
