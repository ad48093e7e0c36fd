"""The root of `skyrl-hp`: the `cli` group (one-line errors, the run book's order in `--help`), `main`, and the
registration of every command; the commands themselves live in one module each, named after them."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from skyrl_hyperpod.plumbing.errors import ProblemsError, ProjectError, one_line
from skyrl_hyperpod.plumbing.runtime import fail

from .adapter import adapter
from .chart_check import chart_check
from .common import CONFIG_HELP, EXIT_BAD_INPUT, EXIT_FINDINGS, cli_state
from .config import config_group
from .cost import cost
from .dashboard import dashboard
from .fetch import fetch
from .image import image
from .kubeconfig import kubeconfig
from .nodes import nodes
from .outputs import outputs
from .preflight import preflight
from .ray import ray_group
from .review import review
from .secrets import secrets_group
from .serve import serve
from .status import status
from .teardown import teardown
from .train import train
from .validate import validate
from .verify import verify


class OneLineErrors(click.Group):
    """Click's usage errors (unknown option, missing argument, bad value) as one line naming the command and
    where its help is, exit 2, instead of the usage block; the project's own errors (ProblemsError: a bad
    configuration, a missing input file) as their lines, exit 2, instead of a traceback."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as error:
            command = error.ctx.command_path if error.ctx else "skyrl-hp"
            click.echo(f"{command}: {error.format_message()} (see {command} --help)", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except click.Abort:
            click.echo("aborted", err=True)
            sys.exit(EXIT_FINDINGS)
        except click.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        except ProblemsError as error:
            # What a command did not catch itself (e.g. a missing CRD directory): its lines, not a traceback.
            fail(error.problems, EXIT_BAD_INPUT)
        except ProjectError as error:
            # Any other error of the project's own (a cluster or Ray call a command did not catch): one line, exit 1
            # as the commands' own cluster_errors() does.
            fail([one_line(error)], EXIT_FINDINGS)
        sys.exit(0)

    # `skyrl-hp --help` lists the commands in the order of the run book (docs/runbook.md), one heading per stage,
    # instead of click's alphabetical list: a newcomer reads it top to bottom. A command not placed here (a new
    # one) still shows, under "Other commands". Click's documented hooks: Group.list_commands / format_commands.
    RUNBOOK_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("Set up", ("cost", "preflight", "fetch", "chart-check", "config")),
        ("Deploy", ("review", "outputs", "kubeconfig", "verify", "image")),
        ("Train", ("validate", "secrets", "train", "ray")),
        ("Watch", ("status", "nodes", "dashboard")),
        ("Serve", ("adapter", "serve")),
        ("Tear down", ("teardown",)),
    )

    def sections(self, ctx: click.Context) -> list[tuple[str, list[str]]]:
        """(heading, command names) in run-book order; unplaced commands last, alphabetically."""
        known = {name for name, command in self.commands.items() if not command.hidden}
        placed = [(title, [name for name in names if name in known]) for title, names in self.RUNBOOK_SECTIONS]
        rest = sorted(known - {name for _, names in placed for name in names})
        return [(title, names) for title, names in [*placed, ("Other commands", rest)] if names]

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for _, names in self.sections(ctx) for name in names]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(title, [(name, self.commands[name]) for name in names]) for title, names in self.sections(ctx)]
        longest = max((len(name) for _, pairs in rows for name, _ in pairs), default=0)
        width = formatter.width - 6 - longest
        for title, pairs in rows:
            with formatter.section(title):  # names padded alike: one column across the sections
                formatter.write_dl(
                    [(name.ljust(longest), command.get_short_help_str(width)) for name, command in pairs]
                )


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help=CONFIG_HELP
)
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None) -> None:
    """Operator tooling for the SkyRL-on-HyperPod platform.

    Every command reads the one project configuration: `skyrl-hp --config FILE COMMAND`, else
    $SKYRL_HP_CONFIG, else ./skyrl-hp.yaml, else the built-in defaults (the CDK and cdk8s apps read it the
    same way), and first prints, on stderr, which configuration, region and cluster it acts on.
    Commands that print data take --json. Exit codes: 0 fine, 1 findings (failed check, risky change,
    refused action, cluster or AWS error), 2 bad input; `review --fail-on-stateful-replacement` exits 3 for a
    stateful change (a code of its own: a traceback exits 1).
    """
    cli_state(ctx).config_path = config_path


# Every top-level command (`cli.commands` keeps this order; `--help` and docs/cli.md list them in the run book's
# order above).
COMMANDS: tuple[click.Command, ...] = (
    cost,
    preflight,
    review,
    outputs,
    status,
    teardown,
    kubeconfig,
    train,
    adapter,
    serve,
    verify,
    ray_group,
    dashboard,
    image,
    validate,
    fetch,
    chart_check,
    config_group,
    nodes,
    secrets_group,
)

for _command in COMMANDS:
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="skyrl-hp")
