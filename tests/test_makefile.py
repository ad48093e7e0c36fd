"""The Makefile's setup, as a newcomer meets it: `make synth` builds only what synthesis uses, and each setup
stage says what it installs and how long it took. Checked with `make -n` (what would run) in a copy of the
checkout's Makefile and its pin files, with nothing installed: nothing runs and nothing is downloaded."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PIN_FILES = [
    "Makefile",
    *(p.name for p in REPO_ROOT.glob("requirements*.txt")),
    *(p.name for p in REPO_ROOT.glob("constraints*.txt")),
    "package.json",
    "package-lock.json",
    "pyproject.toml",  # the project's own install (its `skyrl-hp` entry point)
]


@pytest.fixture(scope="module")
def bare_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkout")
    for name in PIN_FILES:
        shutil.copy(REPO_ROOT / name, root / name)
    (root / "skyrl_hyperpod" / "config").mkdir(parents=True)
    (root / "skyrl_hyperpod" / "plumbing").mkdir(parents=True, exist_ok=True)
    shutil.copy(
        REPO_ROOT / "skyrl_hyperpod" / "plumbing" / "upstream.py", root / "skyrl_hyperpod" / "plumbing" / "upstream.py"
    )
    shutil.copy(REPO_ROOT / "skyrl_hyperpod" / "config" / "version_lock.py", root / "skyrl_hyperpod" / "config")
    return root


def dry_run(checkout: Path, *targets: str) -> str:
    done = subprocess.run(
        ["make", "-n", *targets], cwd=checkout, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_synth_does_not_build_the_scanners_environment(bare_checkout):
    commands = dry_run(bare_checkout, "synth-cdk", "synth-k8s")
    assert "python3 -m venv .venv\n" in commands and "npm ci" in commands
    assert ".venv-scan" not in commands


def test_setup_builds_the_scanners_environment_for_the_tests(bare_checkout):
    assert "python3 -m venv .venv-scan" in dry_run(bare_checkout, "setup")


def test_every_setup_stage_announces_itself_and_its_duration(bare_checkout):
    lines = dry_run(bare_checkout, "setup").splitlines()
    started = [line for line in lines if line.startswith('echo "setup: [') and line.split('"')[1].endswith(" ...")]
    finished = [line for line in lines if " done in " in line]
    assert [line.split("]")[0] for line in started] == ['echo "setup: [1/3', 'echo "setup: [2/3', 'echo "setup: [3/3']
    assert len(finished) == 3
    # Each stage's start comes before its first install command.
    assert lines.index(started[0]) < next(i for i, line in enumerate(lines) if "pip install" in line)
    assert lines.index(started[1]) < next(i for i, line in enumerate(lines) if line.startswith("npm ci"))


def test_a_failed_k8s_synth_ends_with_the_apps_one_line_error_not_a_node_stack_trace(tmp_path):
    """`make synth-k8s` pipes the cdk8s CLI through the Makefile's filter: the CLI's stack trace after the app's
    own error goes, everything else (the summary, the error, any other Node error) stays, and the exit code is the
    CLI's."""
    cli_output = (
        "Synthesizing application\n"
        "config error: training: cluster.worker_gpus = 9: ml.g7e.12xlarge has 2 GPUs per instance\n"
        'Error: command "python k8s_app.py " at /somewhere returned a non-zero exit code 2\n'
        "    at ChildProcess.<anonymous> (node_modules/cdk8s-cli/lib/util.js:77:27)\n"
        "    at Object.onceWrapper (node:events:631:26)\n"
        "TypeError: something else\n"
        "    at other (x.js:1:1)\n"
    )
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "cdk8s").write_text(f"#!/bin/sh\ncat <<'EOF'\n{cli_output}EOF\nexit 1\n")
    (fake / "cdk8s").chmod(0o755)
    makefile = (REPO_ROOT / "Makefile").read_text()
    [definition] = [line for line in makefile.splitlines() if line.startswith("CDK8S_APP_FAILED := ")]
    recipe = makefile.split("\nsynth-k8s:", 1)[1].split("\n\n", 1)[0]
    assert "set -o pipefail; cdk8s synth --no-check-upgrade 2>&1 | $(CDK8S_APP_FAILED)" in recipe
    (tmp_path / "Makefile").write_text(
        f"SHELL := /bin/bash\nexport PATH := {fake}:$(PATH)\n{definition}\n"
        "synth-k8s:\n\tset -o pipefail; cdk8s synth --no-check-upgrade 2>&1 | $(CDK8S_APP_FAILED)\n"
    )
    done = subprocess.run(["make", "-s", "synth-k8s"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stdout.splitlines() == [
        "Synthesizing application",
        "config error: training: cluster.worker_gpus = 9: ml.g7e.12xlarge has 2 GPUs per instance",
        "TypeError: something else",
        "    at other (x.js:1:1)",
    ]
