"""How the job reports: its own lines (`train_job: ...` on stderr) and the two errors main turns into one line."""

from __future__ import annotations

import sys


class UsageError(Exception):
    """Bad command line: reported in one line, exit code 2."""


class PrepareError(Exception):
    """Preparation failed: reported in one line, exit code 1."""


def log(message: str) -> None:
    print(f"train_job: {message}", file=sys.stderr, flush=True)
