"""Operator command-line interface: `skyrl-hp` / `python -m skyrl_hyperpod.cli`.

Subcommands: cost, preflight, review, outputs, status, teardown (skyrl_hyperpod/ops/), and image,
validate, fetch, chart-check, config (offline.py).
"""

from .app import cli, main

__all__ = ["cli", "main"]
