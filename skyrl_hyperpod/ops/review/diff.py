"""The diff: BASE's and HEAD's templates resource by resource and property by property across all stacks at once,
with cross-stack reads resolved to the producer's output, and every replacement carried to the consumers whose
create-only properties read the replaced resource (in any stack) until nothing new is replaced; Kubernetes objects
field by field. The change rules (rules/) add their risks as the diff decides each change.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .model import (
    CROSS_STACK,
    MISSING,
    ChangeEvent,
    ManifestChange,
    Moment,
    Node,
    PropertyChange,
    ResourceChange,
    StackDiff,
    StackStatus,
    display_path,
    is_intrinsic,
    strip_strength,
)
from .replacement import HELM_RELEASE_TYPE, ReplacementFacts, concrete_values, helm_release_replaced, pointer_segments
from .rules import apply_change_rules

IGNORED_TYPES = frozenset({"AWS::CDK::Metadata"})
RESOURCE_ATTRIBUTES = ("Type", "DeletionPolicy", "UpdateReplacePolicy", "Condition", "DependsOn")
ACTION_ORDER = {"REPLACE": 0, "REMOVE": 1, "MODIFY": 2, "ADD": 3}  # how a stack's changes are listed


def deep_diff(old: Any, new: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
    """Leaf-level differences; intrinsic functions compare as a whole, lists index by index."""
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict) and not is_intrinsic(old) and not is_intrinsic(new):
        for key in sorted(set(old) | set(new), key=str):
            yield from deep_diff(old.get(key, MISSING), new.get(key, MISSING), (*path, key))
    elif isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            yield from deep_diff(old[i] if i < len(old) else MISSING, new[i] if i < len(new) else MISSING, (*path, i))
    else:
        yield path, old, new


# --- cross-stack references ---------------------------------------------------------------------------------------


def _export_index(stacks: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Export name -> (stack, output key)."""
    index = {}
    for stack, template in stacks.items():
        for key, output in (template.get("Outputs") or {}).items():
            name = (output.get("Export") or {}).get("Name") if isinstance(output, dict) else None
            if isinstance(name, str):
                index[name] = (stack, key)
    return index


def resolve_cross_stack(value: Any, stacks: dict[str, dict[str, Any]], exports: dict[str, tuple[str, str]]) -> Any:
    """Replace Fn::GetStackOutput (weak) and Fn::ImportValue (strong) with the producer's output value, tagged with
    the producing stack and how it is read: the same value read either way compares equal."""
    if isinstance(value, list):
        return [resolve_cross_stack(v, stacks, exports) for v in value]
    if not isinstance(value, dict):
        return value
    producer: tuple[str, str] | None = None
    strength = ""
    if set(value) == {"Fn::GetStackOutput"} and isinstance(value["Fn::GetStackOutput"], dict):
        ref = value["Fn::GetStackOutput"]
        if isinstance(ref.get("StackName"), str) and isinstance(ref.get("OutputName"), str):
            producer, strength = (ref["StackName"], ref["OutputName"]), "weak"
    elif set(value) == {"Fn::ImportValue"} and isinstance(value["Fn::ImportValue"], str):
        producer, strength = exports.get(value["Fn::ImportValue"]), "strong"
    if producer is not None:
        output = ((stacks.get(producer[0]) or {}).get("Outputs") or {}).get(producer[1])
        if isinstance(output, dict) and "Value" in output:
            export = value.get("Fn::ImportValue")
            return {
                CROSS_STACK: {
                    "Stack": producer[0],
                    "Value": output["Value"],
                    "Strength": strength,
                    **({"Export": export} if export else {}),
                }
            }
    return {k: resolve_cross_stack(v, stacks, exports) for k, v in value.items()}


def references(value: Any, stack: str) -> set[Node]:
    """Resources a value reads: Ref, Fn::GetAtt, Fn::Sub in its own stack, resolved cross-stack values in another."""
    found: set[Node] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == CROSS_STACK:
                found |= references(inner["Value"], inner["Stack"])
                continue
            if key == "Ref" and isinstance(inner, str) and not inner.startswith("AWS::"):
                found.add((stack, inner))
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) and inner else str(inner).split(".")[0]
                found.add((stack, str(target)))
            elif key == "Fn::Sub":
                template = inner[0] if isinstance(inner, list) else inner
                if isinstance(template, str):
                    found.update(
                        (stack, m.split(".")[0])
                        for m in re.findall(r"\$\{([^}!]+)\}", template)
                        if not m.startswith("AWS::")
                    )
            found |= references(inner, stack)
    elif isinstance(value, list):
        for item in value:
            found |= references(item, stack)
    return found


def _strong_exports(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        if set(value) == {CROSS_STACK} and value[CROSS_STACK].get("Export"):
            found.add(value[CROSS_STACK]["Export"])
        for inner in value.values():
            found |= _strong_exports(inner)
    elif isinstance(value, list):
        for item in value:
            found |= _strong_exports(item)
    return found


def reading_paths(properties: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, value) of every intrinsic in a resource's properties (the places that read other resources)."""
    if isinstance(properties, dict) and (is_intrinsic(properties) or set(properties) == {CROSS_STACK}):
        yield path, properties
    elif isinstance(properties, dict):
        for key, value in properties.items():
            yield from reading_paths(value, (*path, key))
    elif isinstance(properties, list):
        for i, value in enumerate(properties):
            yield from reading_paths(value, (*path, i))


# --- resources -------------------------------------------------------------------------------------------------


def _display_name(stack: str, logical_id: str, resource: dict[str, Any]) -> str:
    path = (resource.get("Metadata") or {}).get("aws:cdk:path")
    if isinstance(path, str) and path:
        return path.removesuffix("/Resource")
    return f"{stack}/{logical_id}"


def _ask_rules(
    moment: Moment, change: ResourceChange, old: dict[str, Any], new: dict[str, Any], facts: ReplacementFacts
) -> None:
    apply_change_rules(ChangeEvent(moment, change, old, new, facts))


def _mark_replaced(change: ResourceChange, old: dict[str, Any], new: dict[str, Any], facts: ReplacementFacts) -> None:
    change.action = "REPLACE"
    _ask_rules("replaced", change, old, new, facts)


def _property_changes(old: dict[str, Any], new: dict[str, Any], old_props: Any, new_props: Any) -> list[PropertyChange]:
    """Every changed property leaf, then every changed resource attribute (as `(Attribute)`)."""
    changes = [PropertyChange(p, o, n) for p, o, n in deep_diff(old_props, new_props)]
    for attribute in RESOURCE_ATTRIBUTES:
        if old.get(attribute) != new.get(attribute):
            changes.append(
                PropertyChange((f"({attribute})",), old.get(attribute, MISSING), new.get(attribute, MISSING))
            )
    return changes


def _changed_paths(old_props: Any, new_props: Any, pointer: str) -> set[tuple[Any, ...]]:
    """The concrete paths matching a schema pointer whose value differs between BASE and HEAD."""
    pattern = pointer_segments(pointer)
    before, after = concrete_values(old_props, pattern), concrete_values(new_props, pattern)
    return {p for p in set(before) | set(after) if before.get(p, MISSING) != after.get(p, MISSING)}


def _schema_replacement(
    change: ResourceChange, old_props: Any, new_props: Any, create_only: list[str], conditional: list[str]
) -> bool:
    """The resource schema's verdict: a changed create-only property replaces (a reason), a changed conditionally
    create-only one may (a possible line). True when the schema says the resource is replaced."""
    replace = False
    for pointers, definite in ((create_only, True), (conditional, False)):
        for pointer in pointers:
            changed_paths = _changed_paths(old_props, new_props, pointer)
            if not changed_paths:
                continue
            for prop in change.properties:
                if any(prop.path[: len(c)] == c or c[: len(prop.path)] == prop.path for c in changed_paths):
                    prop.create_only = definite or prop.create_only
            shown = ", ".join(f"`{display_path(p)}`" for p in sorted(changed_paths, key=str))
            if definite:
                replace = True
                change.reasons.append(f"create-only property {shown} changed (resource schema)")
            else:
                change.possible.append(f"may require replacement: conditionally create-only {shown} changed")
    return replace


def _second_source_replacement(change: ResourceChange, facts: ReplacementFacts) -> tuple[bool, bool]:
    """The other sources' verdicts (CDK service spec, botocore) on the properties the schema left alone:
    (replaced, update may fail)."""
    replace = replace_or_fail = False
    for prop in change.properties:
        if prop.create_only or prop.path[0].startswith("("):
            continue
        verdict = facts.verdict(change.resource_type, prop.path, schema=False)
        if verdict is None:
            continue
        if verdict.kind == "REPLACE":
            prop.create_only = True
            replace = True
            change.reasons.append(verdict.text)
        elif verdict.text not in change.possible:
            change.possible.append(verdict.text)
            replace_or_fail = replace_or_fail or verdict.kind == "REPLACE_OR_FAIL"
    return replace, replace_or_fail


def _diff_resource(
    stack: str, logical_id: str, old: dict[str, Any], new: dict[str, Any], facts: ReplacementFacts
) -> ResourceChange | None:
    resource_type = str(new.get("Type"))
    old_props, new_props = strip_strength(old.get("Properties") or {}), strip_strength(new.get("Properties") or {})
    changes = _property_changes(old, new, old_props, new_props)
    if not changes:
        return None
    change = ResourceChange(stack, logical_id, resource_type, "MODIFY", changes)
    if old.get("Type") != new.get("Type"):
        change.reasons.append(f"resource type changed from {old.get('Type')} to {resource_type}")
        _mark_replaced(change, old, new, facts)
        return change
    create_only, conditional, found = facts.lookup(resource_type)
    replace = _schema_replacement(change, old_props, new_props, create_only, conditional)
    second_replace, replace_or_fail = _second_source_replacement(change, facts)
    replace = second_replace or replace
    if resource_type == HELM_RELEASE_TYPE:
        replace = helm_release_replaced(change, old_props, new_props) or replace
    if not found and not resource_type.startswith("Custom::"):
        change.reasons.append("no resource schema known for this type: replacement cannot be ruled out")
    if replace:
        _mark_replaced(change, old, new, facts)
    elif replace_or_fail:
        _ask_rules("update_may_fail", change, old, new, facts)
    return change


def _propagate(
    base: dict[str, dict[str, Any]],
    head: dict[str, dict[str, Any]],
    changes: dict[Node, ResourceChange],
    facts: ReplacementFacts,
    base_imports: dict[str, set[str]],
    paths: dict[Node, str],
) -> None:
    """Replace every consumer whose create-only property reads a replaced resource, across stacks, until stable."""
    replaced = {node for node, c in changes.items() if c.action == "REPLACE"}
    grew = True
    while grew:
        grew = False
        for stack, template in head.items():
            for logical_id, resource in (template.get("Resources") or {}).items():
                node = (stack, logical_id)
                old = ((base.get(stack) or {}).get("Resources") or {}).get(logical_id)
                if old is None or resource.get("Type") in IGNORED_TYPES or node in replaced:
                    continue
                resource_type = str(resource.get("Type"))
                for path, value in reading_paths(resource.get("Properties") or {}):
                    targets = sorted(references(value, stack) & replaced)
                    if not targets:
                        continue
                    change = changes.get(node) or ResourceChange(stack, logical_id, resource_type, "MODIFY")
                    changes[node] = change
                    producer = targets[0]
                    verdict = facts.verdict(resource_type, path)
                    blocked = [e for e in _strong_exports(value) if e in base_imports]
                    shown = paths.get(producer) or f"{producer[0]}/{producer[1]}"
                    reads = f"`{display_path(path)}` reads `{shown}`, which is replaced"
                    risk = (
                        (
                            f"strong reference: CloudFormation refuses to change export {blocked[0]} while it is "
                            f"imported (by {', '.join(sorted(base_imports[blocked[0]]))}): the deploy of "
                            f"{producer[0]} fails before anything is replaced"
                        )
                        if blocked
                        else None
                    )
                    if risk and risk not in change.risks:
                        change.risks.append(risk)
                    if verdict is not None and verdict.kind == "REPLACE":
                        weak = producer[0] != stack and not blocked
                        change.reasons.append(
                            f"{reads}: {verdict.text}"
                            + (
                                "; read through a weak reference (Fn::GetStackOutput): nothing in CloudFormation stops "
                                "this deploy"
                                if weak
                                else ""
                            )
                        )
                        change.caused_by = producer
                        _mark_replaced(change, old, resource, facts)
                        replaced.add(node)
                        grew = True
                        break
                    if verdict is not None:
                        line = f"{reads}; {verdict.text}"
                        if line not in change.possible:
                            change.possible.append(line)
                    elif f"{reads}: updated in place" not in change.reasons:
                        change.reasons.append(f"{reads}: updated in place")


def resolve_platform(stacks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every stack's template with its cross-stack reads resolved (`resolve_cross_stack`)."""
    exports = _export_index(stacks)
    return {s: resolve_cross_stack(t, stacks, exports) for s, t in stacks.items()}


def _strong_imports(templates: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """Export name -> the stacks whose resources import it (Fn::ImportValue)."""
    imports: dict[str, set[str]] = {}
    for stack, template in templates.items():
        for export in _strong_exports(template.get("Resources") or {}):
            imports.setdefault(export, set()).add(stack)
    return imports


def _reviewed_resources(templates: dict[str, dict[str, Any]], stack: str) -> dict[str, dict[str, Any]]:
    """A stack's resources by logical id, without the types the review ignores."""
    return {
        k: v
        for k, v in ((templates.get(stack) or {}).get("Resources") or {}).items()
        if v.get("Type") not in IGNORED_TYPES
    }


def _resource_change(
    stack: str, logical_id: str, old: dict[str, Any] | None, new: dict[str, Any] | None, facts: ReplacementFacts
) -> ResourceChange | None:
    """One logical id's change: added, removed (the rules asked), or modified (None when nothing changed)."""
    if old is None:
        assert new is not None
        return ResourceChange(stack, logical_id, str(new.get("Type")), "ADD")
    if new is None:
        change = ResourceChange(stack, logical_id, str(old.get("Type")), "REMOVE")
        _ask_rules("removed", change, old, {}, facts)
        return change
    return _diff_resource(stack, logical_id, old, new, facts)


def _diff_stack(
    stack: str,
    base: dict[str, dict[str, Any]],
    head: dict[str, dict[str, Any]],
    facts: ReplacementFacts,
    changes: dict[Node, ResourceChange],
    paths: dict[Node, str],
) -> None:
    """One stack's resources, BASE against HEAD: their display names into `paths`, their changes into `changes`."""
    old_resources, new_resources = _reviewed_resources(base, stack), _reviewed_resources(head, stack)
    for logical_id in sorted(set(old_resources) | set(new_resources)):
        old, new = old_resources.get(logical_id), new_resources.get(logical_id)
        resource = new if new is not None else old
        assert resource is not None  # logical_id comes from one of the two sides
        paths[(stack, logical_id)] = _display_name(stack, logical_id, resource)
        change = _resource_change(stack, logical_id, old, new, facts)
        if change is not None:
            changes[(stack, logical_id)] = change


def _note_renames(own: list[ResourceChange]) -> None:
    """A removed resource whose type a resource added in the same stack has may be that one under a new id."""
    added = [c for c in own if c.action == "ADD"]
    for removed in (c for c in own if c.action == "REMOVE"):
        twins = [a.logical_id for a in added if a.resource_type == removed.resource_type]
        if twins:
            removed.reasons.append(
                f"if {', '.join(f'`{t}`' for t in twins)} is this resource under a new logical id, CloudFormation "
                "creates the new one and deletes this one (a replacement)"
            )


def _output_changes(base_template: dict[str, Any], head_template: dict[str, Any]) -> dict[str, list[str]]:
    """A stack's output keys added, removed and changed."""
    base_outputs, head_outputs = base_template.get("Outputs") or {}, head_template.get("Outputs") or {}
    return {
        "added": sorted(set(head_outputs) - set(base_outputs)),
        "removed": sorted(set(base_outputs) - set(head_outputs)),
        "changed": sorted(k for k in set(base_outputs) & set(head_outputs) if base_outputs[k] != head_outputs[k]),
    }


def _stack_diffs(
    base: dict[str, dict[str, Any]], head: dict[str, dict[str, Any]], changes: dict[Node, ResourceChange]
) -> list[StackDiff]:
    """Every stack with a changed resource or output, its changes in ACTION_ORDER then by logical id."""
    stacks: list[StackDiff] = []
    for stack in sorted(set(base) | set(head)):
        own = [c for c in changes.values() if c.stack == stack]
        _note_renames(own)
        outputs = _output_changes(base.get(stack) or {}, head.get(stack) or {})
        if own or any(outputs.values()):
            status: StackStatus = "added" if stack not in base else "removed" if stack not in head else "changed"
            resources = sorted(own, key=lambda c: (ACTION_ORDER[c.action], c.logical_id))
            stacks.append(StackDiff(stack, status, resources, outputs))
    return stacks


def diff_platform(
    base: dict[str, dict[str, Any]], head: dict[str, dict[str, Any]], facts: ReplacementFacts
) -> tuple[list[StackDiff], dict[Node, str]]:
    base_r, head_r = resolve_platform(base), resolve_platform(head)
    paths: dict[Node, str] = {}
    changes: dict[Node, ResourceChange] = {}
    for stack in sorted(set(base_r) | set(head_r)):
        _diff_stack(stack, base_r, head_r, facts, changes, paths)
    _propagate(base_r, head_r, changes, facts, _strong_imports(base_r), paths)
    for change in changes.values():
        change.cdk_path = paths.get(change.node, "")
    return _stack_diffs(base, head, changes), paths


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
