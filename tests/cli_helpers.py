"""Run `skyrl-hp` in the test process, its output on sys.stdout/sys.stderr (so `capsys` sees it)."""

from __future__ import annotations

from skyrl_hyperpod.cli import cli


def skyrl_hp(*args: str) -> int:
    """The exit code of `skyrl-hp ARGS`."""
    try:
        cli.main(args=list(args), prog_name="skyrl-hp", standalone_mode=False)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0
