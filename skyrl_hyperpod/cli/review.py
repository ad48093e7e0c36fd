"""`review BASE HEAD`: offline diff of two synthesized outputs, as Markdown for a pull-request comment.

BASE and HEAD are each a cloud assembly directory (`cdk.out`, holding manifest.json) or a directory that
holds `cdk.out/` and/or the cdk8s `dist/` manifests. CloudFormation templates are compared resource by
resource and property by property; a change is flagged as a REPLACEMENT when it touches one of the
resource type's `createOnlyProperties` from the CloudFormation resource provider schemas that cfn-lint
ships (no hand-written list). A logical-id change is a removal plus an addition, i.e. a replacement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# Types whose replacement or removal loses data unless retained (issue 5 names these three explicitly).
STATEFUL_TYPES = frozenset({"AWS::FSx::FileSystem", "AWS::S3::Bucket", "AWS::ECR::Repository"})
RETAIN_POLICIES = frozenset({"Retain", "RetainExceptOnCreate"})
IGNORED_TYPES = frozenset({"AWS::CDK::Metadata"})
RESOURCE_ATTRIBUTES = ("Type", "DeletionPolicy", "UpdateReplacePolicy", "Condition", "DependsOn")
DEFAULT_SCHEMA_REGION = "us-east-1"
MAX_PROPERTY_LINES = 25
MAX_VALUE_CHARS = 80
_MISSING = object()


class ReviewError(Exception):
    """Unreadable input; `problems` holds one line each."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


# --- loading -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SynthOutput:
    root: Path
    stacks: dict[str, dict[str, Any]] | None  # stack name -> template; None = no cloud assembly here
    manifests: dict[str, dict[str, Any]] | None  # "Kind namespace/name" -> object; None = no dist/ here


def _read_json(file: Path, what: str) -> Any:
    if not file.is_file():
        raise ReviewError([f"review error: {what} {file} does not exist"])
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReviewError([f"review error: {what} {file} is not valid JSON (line {exc.lineno})"]) from None


def read_assembly(directory: Path) -> dict[str, dict[str, Any]]:
    """Stack name -> template, following nested assemblies (CDK stages)."""
    manifest = _read_json(directory / "manifest.json", "cloud assembly manifest")
    artifacts = manifest.get("artifacts") if isinstance(manifest, dict) else None
    if not isinstance(artifacts, dict):
        raise ReviewError([f"review error: {directory / 'manifest.json'} has no 'artifacts' mapping: not a cloud assembly"])
    stacks: dict[str, dict[str, Any]] = {}
    for artifact_id, artifact in artifacts.items():
        if not isinstance(artifact, dict):
            raise ReviewError([f"review error: artifact {artifact_id!r} in {directory / 'manifest.json'} is not a mapping"])
        properties = artifact.get("properties") or {}
        if artifact.get("type") == "aws:cloudformation:stack":
            template_file = properties.get("templateFile")
            if not isinstance(template_file, str):
                raise ReviewError([f"review error: stack artifact {artifact_id!r} in {directory} names no templateFile"])
            template = _read_json(directory / template_file, f"template of stack {artifact_id}")
            if not isinstance(template, dict) or not isinstance(template.get("Resources", {}), dict):
                raise ReviewError([f"review error: {directory / template_file} is not a CloudFormation template"])
            stacks[properties.get("stackName") or artifact_id] = template
        elif artifact.get("type") == "cdk:cloud-assembly" and isinstance(properties.get("directoryName"), str):
            stacks.update(read_assembly(directory / properties["directoryName"]))
    return stacks


def manifest_key(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{obj['kind']} {namespace + '/' if namespace else ''}{metadata['name']}"


def read_manifests(directory: Path) -> dict[str, dict[str, Any]]:
    objects: dict[str, dict[str, Any]] = {}
    for file in sorted([*directory.rglob("*.yaml"), *directory.rglob("*.yml")]):
        try:
            documents = list(yaml.safe_load_all(file.read_text(encoding="utf-8")))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise ReviewError(
                [f"review error: {file} is not valid YAML" + (f" at line {mark.line + 1}" if mark else "")]
            ) from None
        for number, obj in enumerate(documents, start=1):
            if obj is None:
                continue
            if not isinstance(obj, dict) or "kind" not in obj or not (obj.get("metadata") or {}).get("name"):
                raise ReviewError([f"review error: document {number} of {file} is not a Kubernetes object (kind, metadata.name)"])
            objects[manifest_key(obj)] = obj
    return objects


def load_synth_output(path: Path) -> SynthOutput:
    if not path.is_dir():
        raise ReviewError([f"review error: {path} is not a directory (expected cdk.out or a folder holding cdk.out/ and dist/)"])
    assembly = path if (path / "manifest.json").exists() else path / "cdk.out" if (path / "cdk.out").is_dir() else None
    dist = path / "dist" if (path / "dist").is_dir() else None
    if assembly is None and dist is None:
        raise ReviewError([f"review error: {path} holds neither a cloud assembly (manifest.json, cdk.out/) nor dist/ manifests"])
    return SynthOutput(
        root=path,
        stacks=read_assembly(assembly) if assembly else None,
        manifests=read_manifests(dist) if dist else None,
    )


# --- create-only properties from the CloudFormation resource schemas ------------------------------------------


class CreateOnlySchemas:
    """createOnlyProperties per resource type, from cfn-lint's bundled provider schemas.

    `extra_dir` may hold resource schema JSON files (as `aws cloudformation describe-type` returns them) that
    take precedence over the bundled ones for their typeName, e.g. to review against a newer schema.
    """

    def __init__(self, region: str = DEFAULT_SCHEMA_REGION, extra_dir: Path | None = None):
        self.region = region
        self._extra: dict[str, dict[str, Any]] = {}
        self._cache: dict[str, tuple[list[str], list[str], bool]] = {}
        if extra_dir is not None:
            if not extra_dir.is_dir():
                raise ReviewError([f"review error: schema directory {extra_dir} does not exist"])
            for file in sorted(extra_dir.glob("*.json")):
                schema = _read_json(file, "resource schema")
                if not isinstance(schema, dict) or not isinstance(schema.get("typeName"), str):
                    raise ReviewError([f"review error: {file} is not a resource schema (no typeName)"])
                self._extra[schema["typeName"]] = schema

    def lookup(self, resource_type: str) -> tuple[list[str], list[str], bool]:
        """(createOnlyProperties, conditionalCreateOnlyProperties, schema found)."""
        if resource_type not in self._cache:
            schema = self._extra.get(resource_type)
            if schema is None and not resource_type.startswith("Custom::"):
                from cfnlint.schema import PROVIDER_SCHEMA_MANAGER
                from cfnlint.schema._exceptions import ResourceNotFoundError

                try:
                    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(self.region, resource_type).schema
                except ResourceNotFoundError:
                    schema = None
            if schema is None:
                self._cache[resource_type] = ([], [], False)
            else:
                self._cache[resource_type] = (
                    list(schema.get("createOnlyProperties", [])),
                    list(schema.get("conditionalCreateOnlyProperties", [])),
                    True,
                )
        return self._cache[resource_type]


def pointer_segments(pointer: str) -> tuple[str, ...]:
    """'/properties/InstanceGroups/*/InstanceType' -> ('InstanceGroups', '*', 'InstanceType')."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.strip("/").split("/")]
    return tuple(parts[1:]) if parts and parts[0] == "properties" else tuple(parts)


def concrete_values(document: Any, pattern: tuple[str, ...], prefix: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    """Every concrete path in `document` that matches `pattern` ('*' = any list index or key) -> its value."""
    if not pattern:
        return {prefix: document}
    head, rest = pattern[0], pattern[1:]
    found: dict[tuple[Any, ...], Any] = {}
    if isinstance(document, list):
        indices = range(len(document)) if head == "*" else [int(head)] if head.isdigit() and int(head) < len(document) else []
        for i in indices:
            found.update(concrete_values(document[i], rest, (*prefix, i)))
    elif isinstance(document, dict) and not _is_intrinsic(document):
        keys = list(document) if head == "*" else [head] if head in document else []
        for key in keys:
            found.update(concrete_values(document[key], rest, (*prefix, key)))
    elif isinstance(document, dict) and prefix:
        # An intrinsic (If, Ref, ...) stands for the whole subtree: its value decides the create-only field.
        found[prefix] = document
    return found


# --- diffing ---------------------------------------------------------------------------------------------------


def _is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref", "Condition"))


def deep_diff(old: Any, new: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
    """Leaf-level differences; intrinsic functions compare as a whole, lists index by index."""
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict) and not _is_intrinsic(old) and not _is_intrinsic(new):
        for key in sorted(set(old) | set(new), key=str):
            yield from deep_diff(old.get(key, _MISSING), new.get(key, _MISSING), (*path, key))
    elif isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            yield from deep_diff(old[i] if i < len(old) else _MISSING, new[i] if i < len(new) else _MISSING, (*path, i))
    else:
        yield path, old, new


def display_path(path: tuple[Any, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(whole value)"


def display_value(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _references(value: Any) -> set[str]:
    """Logical ids a value points at through Ref, Fn::GetAtt or Fn::Sub."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) and inner else str(inner).split(".")[0]
                found.add(str(target))
            elif key == "Fn::Sub":
                template = inner[0] if isinstance(inner, list) else inner
                if isinstance(template, str):
                    found.update(m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", template))
            found |= _references(inner)
    elif isinstance(value, list):
        for item in value:
            found |= _references(item)
    return found


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
    action: str  # ADD | REMOVE | MODIFY | REPLACE
    properties: list[PropertyChange] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)
    stateful_loss: bool = False

    @property
    def title(self) -> str:
        return f"`{self.logical_id}` ({self.resource_type})"


@dataclass
class StackDiff:
    name: str
    status: str  # added | removed | changed
    resources: list[ResourceChange]
    outputs: dict[str, list[str]]


@dataclass
class ManifestChange:
    key: str
    action: str  # ADD | REMOVE | MODIFY
    fields: list[PropertyChange]


@dataclass
class Review:
    base: str
    head: str
    stacks: list[StackDiff]
    manifests: list[ManifestChange]
    notes: list[str]

    @property
    def resource_changes(self) -> list[ResourceChange]:
        return [r for s in self.stacks for r in s.resources]

    @property
    def stateful_replacements(self) -> list[ResourceChange]:
        return [r for r in self.resource_changes if r.stateful_loss]

    @property
    def empty(self) -> bool:
        return not any(s.resources or any(s.outputs.values()) for s in self.stacks) and not self.manifests


def _is_stateful(resource: dict[str, Any]) -> bool:
    return resource.get("Type") in STATEFUL_TYPES


def _removal_risks(change: ResourceChange, resource: dict[str, Any]) -> None:
    policy = resource.get("DeletionPolicy", "Delete")
    if policy in RETAIN_POLICIES:
        change.risks.append(f"retained, orphaned (DeletionPolicy {policy}): the old resource stays and is no longer managed")
        change.stateful_loss = True
    elif policy == "Snapshot":
        change.risks.append("deleted after a final snapshot (DeletionPolicy Snapshot)")
        change.stateful_loss = _is_stateful(resource)
    elif _is_stateful(resource):
        change.risks.append(f"DATA LOSS: the {resource.get('Type')} is deleted with its data")
        change.stateful_loss = True


def _replacement_risks(change: ResourceChange, old: dict[str, Any], create_only: list[str]) -> None:
    policy = old.get("UpdateReplacePolicy", "Delete")
    if policy in RETAIN_POLICIES:
        change.risks.append(f"retained, orphaned (UpdateReplacePolicy {policy}): the old resource stays, a new empty one is created")
        change.stateful_loss = True
    elif policy == "Snapshot":
        change.risks.append("old resource deleted after a snapshot (UpdateReplacePolicy Snapshot)")
        change.stateful_loss = _is_stateful(old)
    elif _is_stateful(old):
        change.risks.append(f"DATA LOSS: the old {old.get('Type')} is deleted with its data")
        change.stateful_loss = True
    if old.get("DeletionPolicy") in RETAIN_POLICIES and not change.stateful_loss:
        change.risks.append("retained, orphaned on replacement (DeletionPolicy Retain)")
        change.stateful_loss = True
    # A custom name that stays the same blocks the replacement: CloudFormation creates the new resource first.
    props = old.get("Properties") or {}
    for pointer in create_only:
        segments = pointer_segments(pointer)
        if len(segments) == 1 and segments[0].endswith("Name") and segments[0] in props:
            if not any(p.path[:1] == segments for p in change.properties):
                change.risks.append(
                    f"custom name {segments[0]} is unchanged: CloudFormation cannot replace a custom-named resource; "
                    "change the name too or delete the resource first"
                )


def _diff_resource(stack: str, logical_id: str, old: dict[str, Any], new: dict[str, Any], schemas: CreateOnlySchemas
                   ) -> ResourceChange | None:
    resource_type = str(new.get("Type"))
    changes = [PropertyChange(p, o, n) for p, o, n in deep_diff(old.get("Properties") or {}, new.get("Properties") or {})]
    for attribute in RESOURCE_ATTRIBUTES:
        if old.get(attribute) != new.get(attribute):
            changes.append(PropertyChange((f"({attribute})",), old.get(attribute, _MISSING), new.get(attribute, _MISSING)))
    if not changes:
        return None
    change = ResourceChange(stack, logical_id, resource_type, "MODIFY", changes)
    if old.get("Type") != new.get("Type"):
        change.action = "REPLACE"
        change.reasons.append(f"resource type changed from {old.get('Type')} to {resource_type}")
        _replacement_risks(change, old, [])
        return change
    create_only, conditional, found = schemas.lookup(resource_type)
    old_props, new_props = old.get("Properties") or {}, new.get("Properties") or {}
    for pointers, definite in ((create_only, True), (conditional, False)):
        for pointer in pointers:
            pattern = pointer_segments(pointer)
            before, after = concrete_values(old_props, pattern), concrete_values(new_props, pattern)
            changed_paths = {p for p in set(before) | set(after) if before.get(p, _MISSING) != after.get(p, _MISSING)}
            if not changed_paths:
                continue
            for prop in changes:
                if any(prop.path[: len(c)] == c or c[: len(prop.path)] == prop.path for c in changed_paths):
                    prop.create_only = True
            shown = ", ".join(f"`{display_path(p)}`" for p in sorted(changed_paths, key=str))
            if definite:
                change.action = "REPLACE"
                change.reasons.append(f"create-only property {shown} changed")
            else:
                change.reasons.append(f"may require replacement: conditionally create-only {shown} changed")
    if not found:
        change.reasons.append("no resource schema known for this type: replacement cannot be ruled out")
    if change.action == "REPLACE":
        _replacement_risks(change, old, create_only)
    return change


def _propagate_replacements(stack: str, base: dict[str, Any], head: dict[str, Any], changes: dict[str, ResourceChange],
                            schemas: CreateOnlySchemas) -> None:
    """A create-only property that points at a replaced resource gets a new value at deploy time."""
    replaced = {lid for lid, c in changes.items() if c.action in ("REPLACE", "REMOVE")}
    grew = True
    while grew:
        grew = False
        for logical_id, resource in head.items():
            if logical_id not in base or resource.get("Type") in IGNORED_TYPES:
                continue
            if logical_id in changes and changes[logical_id].action == "REPLACE":
                continue
            create_only, _, _ = schemas.lookup(str(resource.get("Type")))
            for pointer in create_only:
                values = concrete_values(resource.get("Properties") or {}, pointer_segments(pointer))
                targets = {t for v in values.values() for t in _references(v)} & replaced
                if not targets:
                    continue
                change = changes.get(logical_id) or ResourceChange(stack, logical_id, str(resource.get("Type")), "MODIFY")
                change.action = "REPLACE"
                change.reasons.append(
                    f"create-only `{'/'.join(pointer_segments(pointer))}` references {', '.join(sorted(targets))}, "
                    "which is replaced"
                )
                _replacement_risks(change, base[logical_id], create_only)
                changes[logical_id] = change
                replaced.add(logical_id)
                grew = True
                break


def diff_templates(stack: str, base: dict[str, Any] | None, head: dict[str, Any] | None, schemas: CreateOnlySchemas
                   ) -> StackDiff:
    base_resources = {k: v for k, v in ((base or {}).get("Resources") or {}).items() if v.get("Type") not in IGNORED_TYPES}
    head_resources = {k: v for k, v in ((head or {}).get("Resources") or {}).items() if v.get("Type") not in IGNORED_TYPES}
    changes: dict[str, ResourceChange] = {}
    for logical_id in sorted(set(base_resources) | set(head_resources)):
        old, new = base_resources.get(logical_id), head_resources.get(logical_id)
        if old is None:
            changes[logical_id] = ResourceChange(stack, logical_id, str(new.get("Type")), "ADD")
        elif new is None:
            change = ResourceChange(stack, logical_id, str(old.get("Type")), "REMOVE")
            _removal_risks(change, old)
            changes[logical_id] = change
        else:
            diff = _diff_resource(stack, logical_id, old, new, schemas)
            if diff is not None:
                changes[logical_id] = diff
    _propagate_replacements(stack, base_resources, head_resources, changes, schemas)

    # Same type removed and added in one stack: most likely a renamed logical id, which CloudFormation replaces.
    added = [c for c in changes.values() if c.action == "ADD"]
    for removed in (c for c in changes.values() if c.action == "REMOVE"):
        twins = [a.logical_id for a in added if a.resource_type == removed.resource_type]
        if twins:
            removed.reasons.append(
                f"if {', '.join(f'`{t}`' for t in twins)} is this resource under a new logical id, CloudFormation "
                "creates the new one and deletes this one (a replacement)"
            )

    base_outputs, head_outputs = (base or {}).get("Outputs") or {}, (head or {}).get("Outputs") or {}
    outputs = {
        "added": sorted(set(head_outputs) - set(base_outputs)),
        "removed": sorted(set(base_outputs) - set(head_outputs)),
        "changed": sorted(k for k in set(base_outputs) & set(head_outputs) if base_outputs[k] != head_outputs[k]),
    }
    status = "added" if base is None else "removed" if head is None else "changed"
    order = {"REPLACE": 0, "REMOVE": 1, "MODIFY": 2, "ADD": 3}
    return StackDiff(stack, status, sorted(changes.values(), key=lambda c: (order[c.action], c.logical_id)), outputs)


def diff_manifests(base: dict[str, dict[str, Any]], head: dict[str, dict[str, Any]]) -> list[ManifestChange]:
    changes: list[ManifestChange] = []
    for key in sorted(set(base) | set(head)):
        if key not in base:
            changes.append(ManifestChange(key, "ADD", []))
        elif key not in head:
            changes.append(ManifestChange(key, "REMOVE", []))
        else:
            fields = [PropertyChange(p, o, n) for p, o, n in deep_diff(base[key], head[key])]
            if fields:
                changes.append(ManifestChange(key, "MODIFY", fields))
    return changes


def review(base_dir: Path, head_dir: Path, schemas: CreateOnlySchemas) -> Review:
    base, head = load_synth_output(base_dir), load_synth_output(head_dir)
    notes: list[str] = []
    stacks: list[StackDiff] = []
    if base.stacks is not None and head.stacks is not None:
        for name in sorted(set(base.stacks) | set(head.stacks)):
            diff = diff_templates(name, base.stacks.get(name), head.stacks.get(name), schemas)
            if diff.resources or any(diff.outputs.values()):
                stacks.append(diff)
    elif (base.stacks is None) != (head.stacks is None):
        notes.append("only one side has a cloud assembly: CloudFormation templates were not compared")
    manifests: list[ManifestChange] = []
    if base.manifests is not None and head.manifests is not None:
        manifests = diff_manifests(base.manifests, head.manifests)
    elif (base.manifests is None) != (head.manifests is None):
        notes.append("only one side has dist/ manifests: Kubernetes manifests were not compared")
    return Review(str(base_dir), str(head_dir), stacks, manifests, notes)


# --- Markdown ------------------------------------------------------------------------------------------------


def _property_lines(changes: list[PropertyChange], indent: str = "  ") -> list[str]:
    lines = [
        f"{indent}- `{display_path(c.path)}`: `{display_value(c.old)}` → `{display_value(c.new)}`"
        + (" **(create-only)**" if c.create_only else "")
        for c in changes[:MAX_PROPERTY_LINES]
    ]
    if len(changes) > MAX_PROPERTY_LINES:
        lines.append(f"{indent}- … and {len(changes) - MAX_PROPERTY_LINES} more")
    return lines


def render_markdown(result: Review) -> str:
    changes = result.resource_changes
    counts = {a: sum(1 for c in changes if c.action == a) for a in ("ADD", "REMOVE", "MODIFY", "REPLACE")}
    lines = [f"## Infrastructure review: `{result.base}` → `{result.head}`", ""]
    if result.empty:
        lines.append("No changes: the CloudFormation templates and Kubernetes manifests are identical.")
        lines += [f"> {n}" for n in result.notes]
        return "\n".join(lines) + "\n"
    lines.append(
        f"**{len(result.stacks)} stack(s) changed**: {counts['ADD']} added, {counts['REMOVE']} removed, "
        f"{counts['MODIFY']} modified in place, **{counts['REPLACE']} replaced**; "
        f"{len(result.manifests)} Kubernetes object(s) changed."
    )
    lines += [f"> {n}" for n in result.notes]
    risky = [c for c in changes if c.risks or c.action == "REPLACE"]
    if risky:
        lines += ["", "### ⚠️ Replacements and data-loss risks", ""]
        for c in risky:
            lines.append(f"- **{c.action}** `{c.stack}` / {c.title}: {'; '.join(c.risks or c.reasons)}")
    for stack in result.stacks:
        lines += ["", f"### Stack `{stack.name}` ({stack.status})", ""]
        for c in stack.resources:
            lines.append(f"- **{c.action}** {c.title}")
            lines += [f"  - {reason}" for reason in c.reasons]
            lines += [f"  - risk: {risk}" for risk in c.risks]
            if c.action in ("MODIFY", "REPLACE"):
                lines += _property_lines(c.properties)
        for kind, keys in stack.outputs.items():
            if keys:
                lines.append(f"- Outputs {kind}: {', '.join(f'`{k}`' for k in keys)}")
    if result.manifests:
        lines += ["", "### Kubernetes manifests", ""]
        for m in result.manifests:
            lines.append(f"- **{m.action}** `{m.key}`")
            lines += _property_lines(m.fields)
    return "\n".join(lines) + "\n"
