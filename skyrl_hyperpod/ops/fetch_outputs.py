"""`outputs`: write the stack-outputs file the charts read, from CloudFormation, in `cdk deploy --outputs-file` format.

For users who deployed without `--outputs-file`. The file is validated with `load_stack_outputs` (the
same reader the cdk8s app uses) before it replaces anything on disk.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.plumbing.errors import InputError, ProblemsError
from skyrl_hyperpod.values.stack_outputs import StackOutputs, load_stack_outputs

from .preflight import deployed_project_stacks

DEFAULT_OUTPUTS_FILE = Path("outputs.json")


class OutputsError(ProblemsError):
    """Stack outputs that cannot be fetched or written; `problems` holds one line each."""


def fetch_stack_outputs(cloudformation: Any, config: ProjectConfig) -> tuple[dict[str, dict[str, str]], list[str]]:
    """({stack name: {output key: value}}, warnings) for every live stack of this deployment: named exactly
    `<name_prefix>-<component>` (`deployed_project_stacks`), never `<name_prefix>-*`, which also matches the stacks
    of a deployment whose name_prefix starts with `<name_prefix>-`."""
    stacks = deployed_project_stacks(cloudformation, config)
    warnings = [
        f"warning: stack {name} is {stack['StackStatus']}: its outputs may be stale or missing"
        for name, stack in sorted(stacks.items())
        if not stack["StackStatus"].endswith("_COMPLETE") or "ROLLBACK" in stack["StackStatus"]
    ]
    content = {
        name: {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        for name, stack in sorted(stacks.items())
    }
    return content, warnings


def write_outputs_file(content: dict[str, dict[str, str]], file: Path, config: ProjectConfig) -> StackOutputs:
    """Validate, then atomically write. Refuses (OutputsError) when a required output is missing."""
    if not content:
        raise OutputsError(
            [
                f"outputs error: none of this deployment's CloudFormation stacks ({config.name_prefix}-<component>: "
                f"{config.names.stack('network')}, {config.names.stack('eks')}, ...) found "
                "(deploy first: cdk deploy --all)"
            ]
        )
    file.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{file.name}.", dir=file.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(content, stream, indent=2, sort_keys=True)
            stream.write("\n")
        try:
            outputs = load_stack_outputs(temporary, config)
        except InputError as error:
            raise OutputsError(
                [
                    p.replace(temporary, "CloudFormation").replace(
                        "outputs error: ", "outputs error: refusing to write " + str(file) + ": "
                    )
                    for p in error.problems
                ]
            ) from None
        os.replace(temporary, file)
        return outputs
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def describe(outputs: StackOutputs) -> list[str]:
    return [
        f"{name}: {value}"
        for name, value in outputs.model_dump(exclude={"is_placeholder"}).items()
        if value is not None  # an optional stack's output while that stack is off
    ]
