"""Operator command-line interface: `skyrl-hp` / `python -m skyrl_hyperpod.cli`.

Every top-level command, as `skyrl-hp --help` lists them (the run book's order):

- Set up: cost, preflight, fetch, chart-check, config
- Deploy: review, outputs, kubeconfig, verify, image
- Train: validate, secrets, train, ray
- Watch: status, nodes, dashboard
- Serve: adapter, serve
- Tear down: teardown

Layout: main.py holds the root group and registers the commands; each command or command group lives in the
module named after it (chart-check in chart_check.py); common.py holds what they share (configuration, options,
output, AWS clients, the connection to the cluster); reference.py generates docs/cli.md. The work itself is done
in skyrl_hyperpod/ops/ and the modules each command names.
"""

from .main import cli, main

__all__ = ["cli", "main"]
