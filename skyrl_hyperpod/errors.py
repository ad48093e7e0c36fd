"""The one error type of the project's own checks: one human-readable line per problem."""

from __future__ import annotations


class ProblemsError(Exception):
    """Bad input found by a check; `problems` holds one line each (printed by `runtime.fail`)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def one_line(error: BaseException) -> str:
    """A botocore/boto3 error as one readable line (no traceback)."""
    response = getattr(error, "response", None)
    if isinstance(response, dict) and "Error" in response:
        err = response["Error"]
        return f"{err.get('Code', type(error).__name__)}: {err.get('Message', '')}".strip().rstrip(":")
    text = " ".join(str(error).split())
    return text or type(error).__name__
