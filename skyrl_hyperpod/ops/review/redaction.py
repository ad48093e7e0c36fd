"""Environment values never reach the review's comment: each side's manifests and templates are read with every
environment variable's value replaced by a tag before they are compared.

The configuration refuses a credential in a plain variable (skyrl_hyperpod/config/credentials.py), but the review
reads a pull request's output, made by its own code: it shows which variable changed, never its value. A tag is an
HMAC of the value under a key drawn for this process and never shown: within one review the same value has the same
tag (a change of value is still a change), and a tag says nothing about the value, not even to someone who guesses it.

Where the values are: a container's `env` (`value`), a RayJob's `entrypoint` (`env NAME=VALUE ... python ...`, as
charts/rayjob.py writes it), the `env_vars` of a Ray runtime environment (a RayJob's `runtimeEnvYAML`, a RayService's
`serveConfigV2`), and in the templates a Lambda function's `Environment.Variables` and a CodeBuild project's
`Environment.EnvironmentVariables`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import shlex
from typing import Any

import yaml

from skyrl_hyperpod.plumbing.yaml_loading import MANIFEST_LIMITS, ValueBudget, load_bounded

_KEY = secrets.token_bytes(32)
TAG_PREFIX = "redacted:"
_ENV_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
# Strings that hold a Ray runtime environment or a Serve config as YAML.
_EMBEDDED_YAML_FIELDS = frozenset({"runtimeEnvYAML", "serveConfigV2"})


def tag(value: str) -> str:
    """What the review shows for an environment variable's value."""
    digest = hmac.new(_KEY, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:8]
    return f"{TAG_PREFIX}{digest}"  # characters a shell word needs no quotes for (an entrypoint's NAME=VALUE)


def _env_list(entries: list[Any], value_key: str) -> list[Any]:
    return [
        {**entry, value_key: tag(entry[value_key])}
        if isinstance(entry, dict) and isinstance(entry.get(value_key), str)
        else entry
        for entry in entries
    ]


def _entrypoint(command: str) -> str:
    """`env A=1 B=2 python ...` with each value tagged; a command that does not start so is left as it is."""
    try:
        words = shlex.split(command)
    except ValueError:
        return tag(command) if command.lstrip().startswith("env ") else command
    if not words or words[0] != "env":
        return command
    for index in range(1, len(words)):
        assignment = _ENV_ASSIGNMENT.fullmatch(words[index])
        if assignment is None:
            break
        words[index] = f"{assignment.group(1)}={tag(assignment.group(2))}"
    return shlex.join(words)


def _embedded(text: str, budget: ValueBudget) -> str:
    """A YAML document in a string with its environment values tagged; the whole string tagged when it does not
    load within the limits (it cannot be shown without showing what it may hold)."""
    try:
        document = load_bounded(text, MANIFEST_LIMITS, budget)
    except (yaml.YAMLError, RecursionError):
        return tag(text)
    redacted = redact_manifest(document, budget)
    if redacted == document:
        return text
    return yaml.safe_dump(redacted, sort_keys=False, width=1_000_000)


def redact_manifest(value: Any, budget: ValueBudget) -> Any:
    """A Kubernetes object (or any part of one) with its environment values tagged."""
    if isinstance(value, list):
        return [redact_manifest(item, budget) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if key == "env" and isinstance(item, list):
            item = _env_list(item, "value")
        elif key == "env_vars" and isinstance(item, dict):
            item = {name: tag(text) if isinstance(text, str) else text for name, text in item.items()}
        elif key == "entrypoint" and isinstance(item, str):
            item = _entrypoint(item)
        elif key in _EMBEDDED_YAML_FIELDS and isinstance(item, str):
            item = _embedded(item, budget)
        out[key] = redact_manifest(item, budget)
    return out


def redact_template(template: dict[str, Any]) -> dict[str, Any]:
    """A CloudFormation template with the literal values of its resources' environment variables tagged (a value
    that reads another resource, `Ref` or `Fn::*`, is a reference, not a value, and stays)."""
    resources = template.get("Resources")
    if not isinstance(resources, dict):
        return template
    redacted = {}
    for logical_id, resource in resources.items():
        properties = resource.get("Properties") if isinstance(resource, dict) else None
        environment = properties.get("Environment") if isinstance(properties, dict) else None
        if isinstance(properties, dict) and isinstance(environment, dict):
            environment = dict(environment)
            if isinstance(environment.get("Variables"), dict):  # AWS::Lambda::Function
                environment["Variables"] = {
                    name: tag(text) if isinstance(text, str) else text
                    for name, text in environment["Variables"].items()
                }
            if isinstance(environment.get("EnvironmentVariables"), list):  # AWS::CodeBuild::Project
                environment["EnvironmentVariables"] = _env_list(environment["EnvironmentVariables"], "Value")
            resource = {**resource, "Properties": {**properties, "Environment": environment}}
        redacted[logical_id] = resource
    return {**template, "Resources": redacted}
