"""The review as Markdown for a pull-request comment."""

from __future__ import annotations

import difflib
import shlex
from typing import Any

import yaml

from skyrl_hyperpod.plumbing.yaml_loading import MANIFEST_LIMITS, ValueBudget, load_bounded

from .model import MISSING, PropertyChange, ResourceChange, Review, Section, StackDiff, display_path, display_value

MAX_PROPERTY_LINES = 25
# The sections the review rules' findings show in, in this order, after "Replacements and data-loss risks" (where
# the change rules' risks show, on each resource's entry).
SECTION_HEADINGS: dict[Section, str] = {
    "helm": "### ⚠️ Helm releases replaced or removed (the installer reinstalls, hands over or uninstalls a live release)",
    "disruptions": "### ⚠️ Disruptive updates (no replacement, but workloads are interrupted)",
}


def _property_lines(changes: list[PropertyChange], budget: ValueBudget, indent: str = "  ") -> list[str]:
    lines: list[str] = []
    for c in changes[:MAX_PROPERTY_LINES]:
        suffix = " **(replacement)**" if c.create_only else ""
        detail = _structured_diff(c.old, c.new, budget)
        if detail:
            lines.append(f"{indent}- `{display_path(c.path)}`{suffix}:")
            lines += [f"{indent}  - {line}" for line in detail]
        else:
            lines.append(
                f"{indent}- `{display_path(c.path)}`: `{display_value(c.old)}` → `{display_value(c.new)}`{suffix}"
            )
    if len(changes) > MAX_PROPERTY_LINES:
        lines.append(f"{indent}- … and {len(changes) - MAX_PROPERTY_LINES} more")
    return lines


# What the documents held in strings of one review's changed values may hold together (MANIFEST_LIMITS for each).
EMBEDDED_VALUES = 1_000_000


def _as_mapping(value: Any, budget: ValueBudget) -> dict[str, Any] | list[Any] | None:
    """A JSON or YAML document held in a string (Helm `Values`, `serveConfigV2`), else None. The string is the pull
    request's: read with the bounded loader, and shown as one value when it does not load within the limits."""
    if isinstance(value, (dict, list)):
        return value
    if not isinstance(value, str) or not value.lstrip().startswith(("{", "[")) and "\n" not in value:
        return None
    try:
        loaded = load_bounded(value, MANIFEST_LIMITS, budget)
    except (yaml.YAMLError, RecursionError):
        return None
    return loaded if isinstance(loaded, (dict, list)) else None


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{index}]"))
        return out
    return {prefix or "(value)": value}


def _arguments(value: Any) -> list[str] | None:
    """A command line's arguments (a RayJob entrypoint), when `value` is one."""
    if not isinstance(value, str) or "\n" in value.strip() or value.count(" ") < 3:
        return None
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _structured_diff(old: Any, new: Any, budget: ValueBudget) -> list[str]:
    """What changed inside a long value, one line each: a JSON/YAML document by key, a command line by
    argument. Empty when the values are short or unstructured (the one-line `old → new` says it all)."""
    if old is MISSING or new is MISSING:
        return []
    old_doc, new_doc = _as_mapping(old, budget), _as_mapping(new, budget)
    if old_doc is not None and new_doc is not None:
        before, after = _flatten(old_doc), _flatten(new_doc)
        lines = []
        for key in [*before, *(k for k in after if k not in before)]:
            if before.get(key, MISSING) != after.get(key, MISSING):
                lines.append(
                    f"`{key}`: `{display_value(before.get(key, MISSING))}` → `{display_value(after.get(key, MISSING))}`"
                )
        return _capped(lines)
    old_args, new_args = _arguments(old), _arguments(new)
    if old_args is not None and new_args is not None:
        lines = []
        matcher = difflib.SequenceMatcher(a=old_args, b=new_args, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            removed, added = " ".join(old_args[i1:i2]), " ".join(new_args[j1:j2])
            if tag == "replace":
                lines.append(f"argument `{removed}` → `{added}`")
            elif tag == "delete":
                lines.append(f"argument removed: `{removed}`")
            elif tag == "insert":
                lines.append(f"argument added: `{added}`")
        return _capped(lines)
    return []


def _capped(lines: list[str]) -> list[str]:
    if len(lines) > MAX_PROPERTY_LINES:
        return [*lines[:MAX_PROPERTY_LINES], f"… and {len(lines) - MAX_PROPERTY_LINES} more"]
    return lines


def _money(value: float) -> str:
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.2f}"


def _change(value: float) -> str:
    return ("+" if value > 0 else "") + _money(value)


def _cost_lines(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    b, h = base["totals"], head["totals"]
    lines = [
        "| | base | head | change |",
        "|---|---:|---:|---:|",
        f"| per hour | {_money(b['hourly'])} | {_money(h['hourly'])} | {_change(h['hourly'] - b['hourly'])} |",
        f"| per month | {_money(b['monthly'])} | {_money(h['monthly'])} | {_change(h['monthly'] - b['monthly'])} |",
    ]
    old_items = {i["component"]: i for i in base.get("items") or [] if isinstance(i, dict) and "component" in i}
    new_items = {i["component"]: i for i in head.get("items") or [] if isinstance(i, dict) and "component" in i}
    changed = []
    for name in [*old_items, *(n for n in new_items if n not in old_items)]:
        old, new = old_items.get(name, {}).get("monthly_usd", 0.0), new_items.get(name, {}).get("monthly_usd", 0.0)
        if abs(new - old) >= 0.005:
            changed.append(f"- {name}: {_money(old)} → {_money(new)} per month")
    if changed:
        lines += ["", *changed]
    unconfirmed = sorted(set(head.get("unconfirmed") or []) | set(base.get("unconfirmed") or []))
    region = head.get("region", "?")
    lines += [
        "",
        f"Prices for {region} as of {head.get('prices_as_of', '?')} ({head.get('price_file', '?')})"
        + (f"; unconfirmed: {', '.join(unconfirmed)}" if unconfirmed else "")
        + ".",
    ]
    return lines


def _resource_name(change: ResourceChange) -> str:
    return change.cdk_path or change.stack + "/" + change.logical_id


def _summary_line(result: Review) -> str:
    counts = {
        a: sum(1 for c in result.resource_changes if c.action == a) for a in ("ADD", "REMOVE", "MODIFY", "REPLACE")
    }
    return (
        f"**{len(result.stacks)} stack(s) changed**: {counts['ADD']} added, {counts['REMOVE']} removed, "
        f"{counts['MODIFY']} modified in place, **{counts['REPLACE']} replaced**; "
        f"{len(result.manifests)} Kubernetes object(s) changed."
    )


def _note_lines(result: Review) -> list[str]:
    return [f"> {n}" for n in result.notes]


def _stateful_lines(result: Review) -> list[str]:
    stateful = result.stateful_replacements
    if not stateful:
        return []
    return [
        "",
        f"**❌ {len(stateful)} stateful resource(s) replaced or removed**: "
        + ", ".join(f"`{_resource_name(c)}`" for c in stateful),
    ]


def _risk_entry(result: Review, change: ResourceChange) -> list[str]:
    """A resource's entry under "Replacements and data-loss risks": the cascade it follows, the first three reasons
    it is replaced and the first three it may be, and its risks."""
    action = "MAY REPLACE" if change.action == "MODIFY" and change.possible else change.action
    lines = [f"- **{action}** `{_resource_name(change)}` ({change.resource_type})"]
    chain = result.chain(change)
    if chain:
        lines.append(f"  - replaced because {' ← '.join(f'`{n}` is replaced' for n in chain)}")
    lines += [f"  - {r}" for r in (change.reasons if change.action == "REPLACE" else [])[:3]]
    lines += [f"  - {p}" for p in change.possible[:3]]
    lines += [f"  - risk: {r}" for r in change.risks]
    return lines


def _risk_section(result: Review) -> list[str]:
    risky = [c for c in result.resource_changes if c.risks or c.action == "REPLACE" or c.possible]
    if not risky:
        return []
    return ["", "### ⚠️ Replacements and data-loss risks", "", *(line for c in risky for line in _risk_entry(result, c))]


def _rule_sections(result: Review) -> list[str]:
    """The review rules' findings, under their sections' headings (SECTION_HEADINGS), empty sections left out."""
    lines: list[str] = []
    for section, heading in SECTION_HEADINGS.items():
        found = [d for d in result.disruptions if d.section == section]
        if found:
            lines += ["", heading, ""]
        for d in found:
            lines.append(f"- {d.subject}: {d.text} ([source]({d.source}))")
            lines += [f"  - {detail}" for detail in d.details]
    return lines


def _cost_section(result: Review) -> list[str]:
    return [] if result.cost is None else ["", "### Cost", "", *_cost_lines(*result.cost)]


def _resource_lines(change: ResourceChange, budget: ValueBudget) -> list[str]:
    """A resource's entry in its stack's section: every reason, possible replacement and risk, and the changed
    properties of a modified or replaced one."""
    lines = [f"- **{change.action}** {change.title}"]
    lines += [f"  - {reason}" for reason in change.reasons]
    lines += [f"  - {p}" for p in change.possible]
    lines += [f"  - risk: {risk}" for risk in change.risks]
    if change.action in ("MODIFY", "REPLACE"):
        lines += _property_lines(change.properties, budget)
    return lines


def _stack_section(stack: StackDiff, budget: ValueBudget) -> list[str]:
    lines = ["", f"### Stack `{stack.name}` ({stack.status})", ""]
    for c in stack.resources:
        lines += _resource_lines(c, budget)
    for kind, keys in stack.outputs.items():
        if keys:
            lines.append(f"- Outputs {kind}: {', '.join(f'`{k}`' for k in keys)}")
    return lines


def _manifest_section(result: Review, budget: ValueBudget) -> list[str]:
    if not result.manifests:
        return []
    lines = ["", "### Kubernetes manifests", ""]
    for m in result.manifests:
        lines.append(f"- **{m.action}** `{m.key}`")
        lines += _property_lines(m.fields, budget)
    return lines


def render_markdown(result: Review) -> str:
    budget = ValueBudget(EMBEDDED_VALUES, "the documents held in the review's changed values")
    lines = [f"## Infrastructure review: `{result.base}` → `{result.head}`", ""]
    if result.empty:
        lines.append("No changes: the CloudFormation templates and Kubernetes manifests are identical.")
        lines += [*_note_lines(result), *_cost_section(result)]
        return "\n".join(lines) + "\n"
    lines += [
        _summary_line(result),
        *_note_lines(result),
        *_stateful_lines(result),
        *_risk_section(result),
        *_rule_sections(result),
        *_cost_section(result),
        *(line for stack in result.stacks for line in _stack_section(stack, budget)),
        *_manifest_section(result, budget),
    ]
    return "\n".join(lines) + "\n"
