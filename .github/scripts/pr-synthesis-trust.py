#!/usr/bin/env python3
"""Whether the gate may believe that a pull request's synthesis is the pull request's. Run by the privileged half
of the PR review gate (.github/workflows/pr-review.yml, job `pull-request`) from the default branch's checkout,
after pr-resolve.py matched the synthesis run to its open pull request:

    pr-synthesis-trust.py CODEOWNERS_FILE

The synthesis (.github/workflows/pr-synthesis.yml) runs the pull request's own workflow, Makefile, apps and
dependency pins, so a pull request that changes one of them can upload any templates as its head synthesis (the
default branch's, say) and pass; so can a top-level module or package that shadows one the apps import (`yaml/`,
`pydantic/`, `aws_cdk/` beside app.py are found before the installed ones). When the pull request changes a file of
CARRIERS below (a path, or a renamed file's old path), the synthesis is believed only if, for every such file, a code
owner that the default branch's CODEOWNERS_FILE names for it approved the pull request's current head commit. A
Python file in a top-level directory the repository does not have is a carrier no CODEOWNERS line can name in
advance: nobody can approve it until the default branch's CODEOWNERS names an owner for that directory. CODEOWNERS follows GitHub's rules
(https://docs.github.com/en/repositories/managing-your-repositorys-settings-and-features/customizing-your-repository/about-code-owners):
the last matching pattern wins; only user owners (@login) count here, since the workflow's token cannot read team
membership; the pull request's author never approves their own change.

Environment: REPO, PR (the number pr-resolve.py confirmed), HEAD_SHA (the run's head commit), GITHUB_OUTPUT, which
receives `trust=unchanged|approved|unapproved` and `classes=` (the CARRIERS classes changed: fixed names, never a
file name of the pull request's). `gh` (on PATH) reads the pull request, its files and its reviews
(https://docs.github.com/en/rest/pulls/pulls#list-pull-requests-files,
https://docs.github.com/en/rest/pulls/reviews#list-reviews-for-a-pull-request). Exit 0 with a verdict, 1 with one
line when the API could not be read or disagrees with the run. Messages quote file names with repr(): a line of
the log cannot be made to start a workflow command. Standard library only: it runs on the runner's python3.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

# The repository's own top-level directories. The code under review (stacks/, charts/, skyrl_hyperpod/ but its
# review/) is imported by name and reviewed as content; tools/ is a carrier (the Makefile runs it); the others hold no
# module the synthesis imports, and none of docs/, tests/, docker/, config/, bench/ is a package.
CODE_UNDER_REVIEW = ("stacks", "charts", "skyrl_hyperpod")
PACKAGES = (*CODE_UNDER_REVIEW, "drill")  # the top-level directories that are packages (an __init__.py) already
REPOSITORY_DIRECTORIES = (*PACKAGES, "tools", "bench", "tests", "docs", "docker", "config", ".ci")
# What the import system loads (importlib.machinery.all_suffixes() on Linux: .py, .pyc and the .so variants).
PYTHON_SUFFIXES = (".py", ".pyc", ".so")


def shadows_an_import(path: str) -> bool:
    """A top-level module (`yaml.py`, `yaml.pyc`, `yaml.so`), an initialiser that makes a top-level directory a package
    (`tests/__init__.py`), or a Python file in a top-level directory the repository does not have (`yaml/__init__.py`,
    `pydantic/main.py`, `aws_cdk/aws_s3/__init__.py`: a new package, or a portion of a namespace package)."""
    top, _, rest = path.partition("/")
    if not path.endswith(PYTHON_SUFFIXES):
        return False
    if not rest:
        return True
    if top not in REPOSITORY_DIRECTORIES:
        return True
    return top not in PACKAGES and rest.startswith("__init__.")


# What produces or carries the synthesis that pr-synthesis.yml uploads, as (class, test of a repository path).
# The class names are what the gate's status and comment print. Top-level only where the tool reads only the top
# level: make reads GNUmakefile, makefile, then Makefile (GNU make manual, "What Name to Give Your Makefile");
# `python3 app.py` puts the repository root first on sys.path, so any top-level module or package can shadow an
# import (the Python tutorial, "The Module Search Path": https://docs.python.org/3/tutorial/modules.html#the-module-search-path).
CARRIERS: tuple[tuple[str, Any], ...] = (
    (".github/", lambda p: p.startswith(".github/")),
    ("Makefile", lambda p: p in ("Makefile", "makefile", "GNUmakefile")),
    ("tools/ (the Makefile runs it)", lambda p: p.startswith("tools/")),
    ("top-level *.py (app.py, k8s_app.py)", lambda p: "/" not in p and p.endswith(".py")),
    ("a top-level module or package that shadows an import", shadows_an_import),
    ("cdk.json, cdk8s.yaml", lambda p: p in ("cdk.json", "cdk.context.json", "cdk8s.yaml")),
    ("package*.json, .npmrc", lambda p: "/" not in p and (fnmatch.fnmatchcase(p, "package*.json") or p == ".npmrc")),
    (
        "requirements*, constraints*, pyproject.toml",
        lambda p: (
            "/" not in p and (p.startswith(("requirements", "constraints")) or p in ("pyproject.toml", "setup.cfg"))
        ),
    ),
    ("skyrl_hyperpod/ops/review/", lambda p: p.startswith("skyrl_hyperpod/ops/review/")),
)

# A GitHub login: letters, digits and single hyphens, not at either end, at most 39 characters. Anything else in
# an owner's place (a team @org/team, an e-mail, the shipped placeholder) names no user this script can check.
USER_OWNER = re.compile(r"@([A-Za-z0-9](?:-?[A-Za-z0-9]){0,38})")
# GitHub's review states; COMMENTED and PENDING do not change whether a reviewer approved.
DECISIVE = ("APPROVED", "CHANGES_REQUESTED", "DISMISSED")
# A reviewer's relation to the repository (the review's author_association). GitHub ignores a code owner without
# write access; the token cannot read permissions, so an approval counts only from an owner, a member of the
# owning organisation or an invited collaborator, never from an account that merely has a CODEOWNERS login.
TRUSTED_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")


def fail(message: str) -> NoReturn:
    print(f"pr-synthesis-trust: {message}", file=sys.stderr)
    sys.exit(1)


def carrier_class(path: str) -> str | None:
    """The CARRIERS class of a repository path, or None for a file the synthesis only reads as content."""
    return next((name for name, matches in CARRIERS if matches(path)), None)


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A CODEOWNERS pattern (gitignore's syntax, as far as CODEOWNERS supports it) as a regular expression."""
    directory = pattern.endswith("/")
    body = pattern.strip("/")
    anchored = pattern.startswith("/") or "/" in body
    out = []
    index = 0
    while index < len(body):
        if body.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif body.startswith("**", index):
            out.append(".*")
            index += 2
        elif body[index] == "*":
            out.append("[^/]*")
            index += 1
        elif body[index] == "?":
            out.append("[^/]")
            index += 1
        else:
            out.append(re.escape(body[index]))
            index += 1
    prefix = "" if anchored else "(?:.*/)?"
    suffix = "/.*" if directory else "(?:/.*)?"
    return re.compile(f"{prefix}{''.join(out)}{suffix}")


def parse_codeowners(text: str) -> list[tuple[re.Pattern[str], tuple[str, ...]]]:
    """(pattern, user owners in lower case) per rule, in file order. A rule without owners leaves its paths unowned."""
    rules = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        pattern, *owners = line.split()
        users = tuple(match.group(1).lower() for owner in owners if (match := USER_OWNER.fullmatch(owner)))
        rules.append((pattern_regex(pattern), users))
    return rules


def owners_of(rules: Sequence[tuple[re.Pattern[str], tuple[str, ...]]], path: str) -> tuple[str, ...]:
    owners: tuple[str, ...] = ()
    for pattern, users in rules:
        if pattern.fullmatch(path):
            owners = users  # the last matching pattern wins
    return owners


def approvers(reviews: Iterable[dict[str, Any]], head_sha: str, author: str) -> set[str]:
    """Who approved `head_sha`: each reviewer's latest decisive review, an approval of that very commit. A later
    push needs a new approval; the author's own reviews never count."""
    latest: dict[str, dict[str, Any]] = {}
    for review in reviews:  # GitHub lists them in chronological order
        login = str(field(review, "user", "login") or "").lower()
        if login and review.get("state") in DECISIVE:
            latest[login] = review
    return {
        login
        for login, review in latest.items()
        if review.get("state") == "APPROVED"
        and review.get("commit_id") == head_sha
        and review.get("author_association") in TRUSTED_ASSOCIATIONS
        and login != author.lower()
    }


def verdict(
    paths: Iterable[str], rules: Sequence[tuple[re.Pattern[str], tuple[str, ...]]], approved_by: set[str]
) -> tuple[str, list[str], list[str]]:
    """(trust, changed classes, one line per carrier file and who may approve it)."""
    carriers = sorted({path for path in paths if carrier_class(path)})
    if not carriers:
        return "unchanged", [], []
    classes = [name for name, _ in CARRIERS if any(carrier_class(path) == name for path in carriers)]
    lines, unapproved = [], False
    for path in carriers:
        owners = owners_of(rules, path)
        by = sorted(approved_by & set(owners))
        if by:
            lines.append(f"{path!r}: approved by {', '.join(by)}")
        elif owners:
            unapproved = True
            lines.append(f"{path!r}: needs an approval of the head commit by one of {', '.join(owners)}")
        else:
            unapproved = True
            lines.append(f"{path!r}: the default branch's CODEOWNERS names no user for it: nobody can approve it")
    return ("unapproved" if unapproved else "approved"), classes, lines


def field(data: Any, *path: str) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def gh_json(*args: str) -> Any:
    run = subprocess.run(["gh", "api", *args], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"{args[-1]!r} could not be read: {run.stderr.strip()[:300]!r}")
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError:
        fail(f"the API's answer for {args[-1]!r} is not JSON")


def pages(*args: str) -> list[dict[str, Any]]:
    """Every item of a paginated list (`--slurp`: one JSON array holding each page's array)."""
    data = gh_json("--paginate", "--slurp", *args)
    if not isinstance(data, list) or not all(isinstance(page, list) for page in data):
        fail(f"the API's answer for {args[-1]!r} is not a list of pages")
    return [item for page in data for item in page if isinstance(item, dict)]


def main() -> None:
    if len(sys.argv) != 2:
        fail("usage: pr-synthesis-trust.py CODEOWNERS_FILE")
    env = {name: os.environ.get(name, "") for name in ("REPO", "PR", "HEAD_SHA")}
    missing = [name for name, value in env.items() if not value]
    if missing or "GITHUB_OUTPUT" not in os.environ:
        fail(f"set {', '.join(missing or ['GITHUB_OUTPUT'])}")
    if not re.fullmatch(r"[1-9][0-9]{0,9}", env["PR"]):
        fail(f"PR {env['PR']!r}: allowed is a pull request number")
    codeowners = Path(sys.argv[1])
    rules = parse_codeowners(codeowners.read_text(encoding="utf-8")) if codeowners.is_file() else []
    pull = f"repos/{env['REPO']}/pulls/{env['PR']}"
    pr = gh_json(pull)
    if field(pr, "head", "sha") != env["HEAD_SHA"]:
        fail(
            f"pull request #{env['PR']} moved on to {field(pr, 'head', 'sha')!r}, the run's head is {env['HEAD_SHA']!r}"
        )
    files = pages(f"{pull}/files?per_page=100")
    paths = [str(item[key]) for item in files for key in ("filename", "previous_filename") if item.get(key)]
    author = str(field(pr, "user", "login") or "")
    approved_by = approvers(pages(f"{pull}/reviews?per_page=100"), env["HEAD_SHA"], author)
    trust, classes, lines = verdict(paths, rules, approved_by)
    listed, changed = len(files), field(pr, "changed_files")
    if not isinstance(changed, int) or listed < changed:
        # The files API lists at most 3000 files: what it leaves out cannot be classified, so it is not believed.
        trust, classes = "unapproved", classes or ["(files the API does not list)"]
        lines.append(f"the API lists {listed} of {changed!r} changed files: the rest cannot be checked")
    for line in lines:
        print(f"pr-synthesis-trust: {line}")
    print(f"pr-synthesis-trust: {trust}" + (f" ({'; '.join(classes)} changed)" if classes else ""))
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as output:
        output.write(f"trust={trust}\nclasses={'; '.join(classes)}\n")


if __name__ == "__main__":
    main()
