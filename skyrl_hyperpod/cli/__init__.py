"""Operator command-line interface: `skyrl-hp` / `python -m skyrl_hyperpod.cli`.

Subcommands: cost, preflight, review, outputs, status, teardown.
"""

from .app import cli, main

__all__ = ["cli", "main"]
