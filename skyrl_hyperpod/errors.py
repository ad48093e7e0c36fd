"""The one error type of the project's own checks: one human-readable line per problem."""

from __future__ import annotations


class ProblemsError(Exception):
    """Bad input found by a check; `problems` holds one line each (printed by `runtime.fail`)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))
