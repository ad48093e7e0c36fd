"""What the review is made of: the changes the diff finds, the findings the rules add, and how a value is shown.

Every other module of the review reads these; this one imports none of them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from skyrl_hyperpod.plumbing.errors import ProblemsError

ResourceAction = Literal["ADD", "REMOVE", "MODIFY", "REPLACE"]
ManifestAction = Literal["ADD", "REMOVE", "MODIFY"]
StackStatus = Literal["added", "removed", "changed"]
Node = tuple[str, str]  # (stack, logical id)
Template = dict[str, Any]
Templates = dict[str, Template]  # stack name -> template
Objects = dict[str, dict[str, Any]]  # "Kind namespace/name" -> Kubernetes object

MISSING: Any = object()  # a side of a diff that has no value at this path
MAX_VALUE_CHARS = 80
CROSS_STACK = "Review::CrossStack"  # stands for a value another stack's output holds


class ReviewError(ProblemsError):
    """Unreadable input; `problems` holds one line each."""


# --- the changes ------------------------------------------------------------------------------------------------


@dataclass
class PropertyChange:
    path: tuple[Any, ...]
    old: Any
    new: Any
    create_only: bool = False


@dataclass
class ResourceChange:
    stack: str
    logical_id: str
    resource_type: str
    action: ResourceAction
    properties: list[PropertyChange] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)
    stateful_loss: bool = False
    cdk_path: str = ""
    caused_by: Node | None = None  # the replaced resource this replacement follows from
    possible: list[str] = field(default_factory=list)  # MAY_REPLACE / REPLACE_OR_FAIL findings

    @property
    def node(self) -> Node:
        return (self.stack, self.logical_id)

    @property
    def title(self) -> str:
        return f"`{self.logical_id}` ({self.resource_type})"


@dataclass
class StackDiff:
    name: str
    status: StackStatus
    resources: list[ResourceChange]
    outputs: dict[str, list[str]]


@dataclass
class ManifestChange:
    key: str
    action: ManifestAction
    fields: list[PropertyChange]


# --- the findings of the rules ------------------------------------------------------------------------------------

# Where a finding shows in the Markdown (render.SECTION_HEADINGS holds each section's heading):
# "risks": the replaced or removed resource's own entry under "Replacements and data-loss risks";
# "helm": "Helm releases replaced or removed"; "disruptions": "Disruptive updates" (in place, no replacement).
Section = Literal["risks", "helm", "disruptions"]
# When the diff asks a change rule about a resource: it is replaced, it is removed, or an update may fail or
# replace it (a field the service's update operation has no field for).
Moment = Literal["replaced", "removed", "update_may_fail"]


@dataclass
class Disruption:
    subject: str
    text: str
    source: str
    details: tuple[str, ...] = ()  # one sub-bullet each (per instance type, the verdict)
    section: Section = "disruptions"  # set by the rule that found it


class Facts(Protocol):
    """What the change rules ask of the replacement facts (replacement.ReplacementFacts)."""

    def stateful_reason(self, resource_type: str) -> str | None: ...

    def name_property(self, resource_type: str) -> str | None: ...


@dataclass(frozen=True)
class ChangeEvent:
    """One resource change at the moment the diff decides it; a change rule adds risks to `change`."""

    moment: Moment
    change: ResourceChange
    old: Template  # the resource in BASE (cross-stack reads resolved)
    new: Template  # the resource in HEAD; empty when removed
    facts: Facts


@dataclass(frozen=True)
class ReviewContext:
    """Both sides after the diff, for the rules that read the whole review."""

    stacks: list[StackDiff]  # the resource changes, per stack
    base_templates: Templates | None  # cross-stack reads resolved; None unless both sides have an assembly
    head_templates: Templates | None
    head_assembly: Templates | None  # HEAD's templates as read, when HEAD has an assembly
    base_manifests: Objects | None  # None unless both sides have dist/
    head_manifests: Objects | None
    gpu_fallback: dict[str, int]  # GPUs per instance type from the configuration, when HEAD has no templates

    @property
    def replaced(self) -> set[Node]:
        return {c.node for s in self.stacks for c in s.resources if c.action == "REPLACE"}


@dataclass(frozen=True)
class ChangeRule:
    """A rule the diff asks about each resource change at the moments it names; it adds risk lines to the change
    (and marks a stateful loss, which fails `--fail-on-stateful-replacement`)."""

    name: str
    flags: str  # what it flags, one line
    section: Section
    moments: frozenset[Moment]
    check: Callable[[ChangeEvent], None]


@dataclass(frozen=True)
class ReviewRule:
    """A rule that reads the whole review after the diff and returns its findings."""

    name: str
    flags: str  # what it flags, one line
    section: Section
    check: Callable[[ReviewContext], list[Disruption]]


Rule = ChangeRule | ReviewRule


# --- the review ---------------------------------------------------------------------------------------------------


@dataclass
class Review:
    base: str
    head: str
    stacks: list[StackDiff]
    manifests: list[ManifestChange]
    notes: list[str]
    disruptions: list[Disruption] = field(default_factory=list)
    cost: tuple[dict[str, Any], dict[str, Any]] | None = None
    paths: dict[Node, str] = field(default_factory=dict)

    @property
    def resource_changes(self) -> list[ResourceChange]:
        return [r for s in self.stacks for r in s.resources]

    @property
    def stateful_replacements(self) -> list[ResourceChange]:
        return [r for r in self.resource_changes if r.stateful_loss]

    @property
    def stateful_key(self) -> str:
        """16 hex digits that name this set of stateful replacements and removals (each resource's stack, logical id,
        type and action): what a maintainer's acceptance names, so that it accepts these and no others
        (docs/review-gate.md, "Accepting a stateful change")."""
        lines = sorted(f"{c.action} {c.stack}/{c.logical_id} {c.resource_type}" for c in self.stateful_replacements)
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]

    @property
    def empty(self) -> bool:
        return not any(s.resources or any(s.outputs.values()) for s in self.stacks) and not self.manifests

    def chain(self, change: ResourceChange) -> list[str]:
        """Display names from this resource back to the change that started the cascade."""
        by_node = {c.node: c for c in self.resource_changes}
        chain: list[str] = []
        seen: set[Node] = set()
        current = change.caused_by
        while current is not None and current not in seen:
            seen.add(current)
            chain.append(self.paths.get(current) or f"{current[0]}/{current[1]}")
            current = by_node[current].caused_by if current in by_node else None
        return chain


# --- template values and how they are shown ------------------------------------------------------------------------


def is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref", "Condition"))


def strip_strength(value: Any) -> Any:
    """Values compared between BASE and HEAD: how a cross-stack value is read does not change the value."""
    if isinstance(value, list):
        return [strip_strength(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {CROSS_STACK}:
            inner = value[CROSS_STACK]
            return {CROSS_STACK: {"Stack": inner["Stack"], "Value": inner["Value"]}}
        return {k: strip_strength(v) for k, v in value.items()}
    return value


def display_path(path: tuple[Any, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(whole value)"


def _display_form(value: Any) -> Any:
    """A resolved cross-stack read shown as what it reads: {"<producer stack>:": <its output value>}."""
    if isinstance(value, list):
        return [_display_form(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {CROSS_STACK}:
            return {f"{value[CROSS_STACK]['Stack']}:": _display_form(value[CROSS_STACK]["Value"])}
        return {k: _display_form(v) for k, v in value.items()}
    return value


def display_value(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    text = json.dumps(_display_form(value), sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"
