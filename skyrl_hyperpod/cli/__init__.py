"""Operator command-line interface: `skyrl-hp` / `python -m skyrl_hyperpod.cli` (cost, preflight, review, outputs)."""

from .app import cli, main

__all__ = ["cli", "main"]
