"""Generate the command-line reference (docs/cli.md) from the click command tree itself.

`make docs` (tools/generate_docs.py) writes docs/cli.md; tests/test_docs.py fails when the file
is stale. Every command, group and subcommand of `skyrl-hp`, with its help, usage, options and arguments, as
click renders them for `--help` (`get_help_record`: an option's metavar, choices, range, default and the
`show_default` text), so the page says what `--help` says. mkdocs-click and sphinx-click render the same tree
but are plugins of site generators this project does not use.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator

import click

from skyrl_hyperpod.cli.main import cli

PROG = "skyrl-hp"


def _walk(command: click.Command, parent: click.Context | None, name: str) -> Iterator[click.Context]:
    """The context of `command` and of every command below it, depth first, subcommands in the order `--help` lists
    them (the root group's: the run book's)."""
    # The command's own context_settings (the root's `-h`), as `make_context` applies them when the command runs.
    ctx = click.Context(command, info_name=name, parent=parent, **command.context_settings)
    yield ctx
    if isinstance(command, click.Group):
        for sub_name in command.list_commands(ctx):
            sub = command.commands[sub_name]
            if not sub.hidden:
                yield from _walk(sub, ctx, sub_name)


def _help_text(command: click.Command) -> str:
    """The command's help as `--help` shows it: up to click's `\\f` cut, without its `\\b` no-rewrap markers."""
    text = inspect.cleandoc((command.help or "").split("\f")[0])
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()


def _markdown(text: str) -> str:
    """Help text as Markdown that shows it verbatim: outside `code spans`, `<name>` is not an HTML tag and `*` not
    emphasis."""
    parts = text.split("`")
    for index in range(0, len(parts), 2):
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")
    return "`".join(parts) if len(parts) % 2 else text.replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: str) -> str:
    return _markdown(" ".join(text.split())).replace("|", "\\|")


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _section(ctx: click.Context) -> list[str]:
    command = ctx.command
    path = ctx.command_path
    usage = " ".join([path, *command.collect_usage_pieces(ctx)])
    lines = [f"## `{path}`", "", "```text", usage, "```", ""]
    help_text = _help_text(command)
    if help_text:
        lines += [_markdown(help_text), ""]
    if isinstance(command, click.Group):
        subcommands = [(name, command.commands[name]) for name in command.list_commands(ctx)]
        subcommands = [(name, sub) for name, sub in subcommands if not sub.hidden]
        lines += ["| command | what it does |", "|---|---|"]
        for name, sub in subcommands:
            title = f"{path} {name}"
            lines.append(f"| [`{title}`](#{anchor(title)}) | {_cell(sub.get_short_help_str(limit=200))} |")
        lines.append("")
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if arguments:
        lines += ["| argument | type | required | default |", "|---|---|---|---|"]
        for argument in arguments:
            default = None if argument.required else argument.get_default(ctx, call=False)
            shown = "" if default is None or callable(default) else f"`{default}`"
            lines.append(
                f"| `{argument.human_readable_name}` | {_cell(argument.type.name)} | "
                f"{'yes' if argument.required else 'no'} | {shown} |"
            )
        lines.append("")
    options = [p for p in command.params if isinstance(p, click.Option)]
    if command.add_help_option and ctx.help_option_names:
        # Built here rather than taken from `get_params`: click keeps the first help option a command was given,
        # so a command that already ran outside its group (a test) would show that one's names instead.
        options.append(click.Option(ctx.help_option_names, is_flag=True, help="Show this message and exit."))
    records = [record for option in options if (record := option.get_help_record(ctx)) is not None]
    if records:
        lines += ["| option | description |", "|---|---|"]
        lines += [f"| `{' '.join(opts.split())}` | {_cell(text)} |" for opts, text in records]
        lines.append("")
    return lines


def render(root: click.Command = cli, prog: str = PROG) -> str:
    """The whole reference: a table of contents, then one `## <command path>` section per command."""
    contexts = list(_walk(root, None, prog))
    header = [
        "# Command-line reference",
        "",
        "Generated from the click command tree of `skyrl_hyperpod/cli/` by `make docs`;",
        "do not edit by hand. What each command is for, with sample output: [commands.md](commands.md).",
        "",
    ]
    toc = [f"- [`{ctx.command_path}`](#{anchor(ctx.command_path)})" for ctx in contexts]
    body: list[str] = []
    for ctx in contexts:
        body += _section(ctx)
    return "\n".join([*header, *toc, "", *body]).rstrip("\n") + "\n"


def commands(root: click.Command = cli, prog: str = PROG) -> list[str]:
    """Every command path the reference documents, groups included."""
    return [ctx.command_path for ctx in _walk(root, None, prog)]
