"""The project's error base and the error types of its own checks: one human-readable line per problem.

The cluster clients' errors (KubeError, RayApiError, ServeError, ...) are beside their clients in
skyrl_hyperpod/ops/."""

from __future__ import annotations


class ProjectError(Exception):
    """The base of every error this project raises on purpose: what the command line prints as one line (no
    traceback). The configuration's, the checks' (ProblemsError) and the cluster clients' errors derive from it."""


class ProblemsError(ProjectError):
    """Bad input found by a check; `problems` holds one line each (printed by `runtime.fail`)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class ConfigError(ProblemsError):
    """Invalid configuration: what the loader, the sections and the stacks raise for a bad configuration value.
    `problems` holds one human-readable line per problem."""


class InputError(ProblemsError):
    """A file or directory the project reads besides the configuration (the training script, the KubeRay CRDs,
    the synthesized manifests, the stack outputs file, the image's build context) is missing or not what it
    must be."""


def one_line(error: BaseException) -> str:
    """A botocore/boto3 error as one readable line (no traceback)."""
    response = getattr(error, "response", None)
    if isinstance(response, dict) and "Error" in response:
        err = response["Error"]
        return f"{err.get('Code', type(error).__name__)}: {err.get('Message', '')}".strip().rstrip(":")
    text = " ".join(str(error).split())
    return text or type(error).__name__
