"""Operator command-line interface: `skyrl-hp` / `python -m skyrl_hyperpod.cli`.

The commands: `skyrl-hp --help` lists them in the run book's order (`RUNBOOK_SECTIONS` in main.py), docs/cli.md
in full (generated, kept current by tests/test_docs.py).

Layout: main.py holds the root group and registers the commands; each command or command group lives in the
module named after it (chart-check in chart_check.py); common.py holds what they share (configuration, options,
output, AWS clients, the connection to the cluster); tools/cli_reference.py generates docs/cli.md. The work is done
in skyrl_hyperpod/ops/ and the modules each command names.
"""

from .main import cli

# `main` (the console entry, skyrl_hyperpod.cli.main:main in pyproject.toml) is not re-exported: the name would
# hide the submodule main.py.
__all__ = ["cli"]
