"""Which CloudFormation stacks are this deployment's: the ownership marker every stack the CDK app deploys carries,
and how a stack deployed before the marker is still recognised.

A stack name alone proves nothing: with `name_prefix: prod`, another application's `prod-storage` has this
project's name. So the app gives every stack an output, `SkyrlHpOwnership`, whose value names who manages it, the
name_prefix and the component (`ownership_marker`), and `skyrl-hp teardown` and `skyrl-hp preflight` act only on
stacks whose marker says this configuration's (docs/teardown.md, "Which stacks are this deployment's").

An output rather than stack tags: with `@aws-cdk/core:explicitStackTags` on (cdk.json) `Tags.of(stack)` tags only the
resources, never the stack (aws-cdk-lib's cx-api/FEATURE_FLAGS.md), and a tag set on the stack itself is applied by
CloudFormation to every resource of the stack that takes tags
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-console-add-tags.html), so adding one would
re-tag every resource of a deployed platform; an output changes nothing but the stack's own record.

Stacks deployed before the marker (`legacy_ownership`) count as this deployment's when both of what every earlier
version emitted is there: the network stack's `ConfigFingerprint` output (this project's own key) and, in the stack's
template, resources tagged `project: <name_prefix>` (stacks/compose.py has always tagged every stack's resources so).
The next `cdk deploy` adds the marker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..config import ProjectConfig
from ..config.names import PROJECT_TAG_KEY
from .stack_outputs import OperatorOutputKey

# Who manages a stack that carries the marker: this project's CDK app and `skyrl-hp`.
MANAGED_BY = "skyrl-hp"
OWNERSHIP_OUTPUT_KEY = OperatorOutputKey.STACK_OWNERSHIP.value


def ownership_marker(config: ProjectConfig, component: str) -> str:
    """The value of the ownership output of `component`'s stack: compact JSON, the same for every deploy."""
    fields = {"managed-by": MANAGED_BY, PROJECT_TAG_KEY: config.name_prefix, "component": component}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Ownership:
    """Whether a stack with one of this configuration's names is this deployment's, and what shows it (or why not)."""

    ours: bool
    evidence: str


def _outputs(stack: dict[str, Any]) -> dict[str, str]:
    return {str(o.get("OutputKey")): str(o.get("OutputValue")) for o in stack.get("Outputs") or []}


def marker_ownership(stack: dict[str, Any], config: ProjectConfig, component: str) -> Ownership | None:
    """From the stack's describe_stacks entry: ours when its marker is this configuration's; None without a marker
    (then only `legacy_ownership` can tell)."""
    value = _outputs(stack).get(OWNERSHIP_OUTPUT_KEY)
    if value is None:
        return None
    if value == ownership_marker(config, component):
        return Ownership(True, f"its {OWNERSHIP_OUTPUT_KEY} output")
    return Ownership(False, f"its {OWNERSHIP_OUTPUT_KEY} output is {value}, not {ownership_marker(config, component)}")


def has_config_fingerprint(network_stack: dict[str, Any] | None) -> bool:
    return network_stack is not None and OperatorOutputKey.CONFIG_FINGERPRINT.value in _outputs(network_stack)


def _tags(properties: dict[str, Any]) -> dict[str, Any]:
    tags = properties.get("Tags")
    if isinstance(tags, list):
        return {str(t.get("Key")): t.get("Value") for t in tags if isinstance(t, dict)}
    return tags if isinstance(tags, dict) else {}


def legacy_ownership(template: dict[str, Any], config: ProjectConfig, *, fingerprinted_network: bool) -> Ownership:
    """For a stack without the marker: ours when the network stack carries ConfigFingerprint and the stack's template
    tags its resources `project: <name_prefix>`."""
    why_not = (
        f"it has no {OWNERSHIP_OUTPUT_KEY} output, and no earlier version's traces either (a network stack "
        f"{config.names.stack('network')} with the {OperatorOutputKey.CONFIG_FINGERPRINT.value} output, resources "
        f"tagged {PROJECT_TAG_KEY}: {config.name_prefix})"
    )
    if not fingerprinted_network:
        return Ownership(False, why_not)
    resources = (template.get("Resources") or {}).values()
    if not any(_tags(r.get("Properties") or {}).get(PROJECT_TAG_KEY) == config.name_prefix for r in resources):
        return Ownership(False, why_not)
    return Ownership(
        True,
        f"deployed before the {OWNERSHIP_OUTPUT_KEY} output, recognised by the network stack's "
        f"{OperatorOutputKey.CONFIG_FINGERPRINT.value} output and resources tagged {PROJECT_TAG_KEY}: "
        f"{config.name_prefix}; the next cdk deploy adds the marker",
    )
