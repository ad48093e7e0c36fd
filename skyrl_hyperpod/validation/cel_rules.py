"""The CRDs' own CEL rules (`x-kubernetes-validations`), evaluated the way the API server does on create.

Kubernetes evaluates each rule with `self` bound to the (defaulted) value at the rule's place in the
schema, once per list item or map value below it, and only where that value is present
(https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules).
A rule that refers to `oldSelf` is a transition rule: it compares with the stored object, so the API
server applies it only to updates. Such rules are listed as not evaluated, never counted as passed.

CEL itself is Google's C++ implementation through `cel-expr-python`, with its type checker: a rule is
a transition rule when the checker finds an `oldSelf` reference, and a rule that needs a function this
environment lacks (Kubernetes' own CEL libraries: quantity, url, ip, ...) is reported as skipped.
This module reads and evaluates the rules of any schema; crds.kind_cel_rules, beside the CRD files it
reads, compiles each kind's rules once per process.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any, Protocol

from ..plumbing.json_types import JsonArray, JsonObject, JsonPath
from .report import json_path

CHECK_NAME = "CRD CEL rule"
VALIDATIONS_KEY = "x-kubernetes-validations"
OLD_SELF = "oldSelf"
# Schema path steps: a property name, or one of these for "every list item" / "every map value".
EACH_ITEM = "[*]"
EACH_VALUE = "{*}"


class CelResult(Protocol):
    """What this module reads of an evaluation result (cel-expr-python ships no type information)."""

    def type(self) -> object: ...
    def value(self) -> object: ...


class CelProgram(Protocol):
    def eval(self, *, data: dict[str, object]) -> CelResult: ...


class CelEnvironment(Protocol):
    def compile(self, expression: str, /) -> CelProgram: ...


@dataclass(frozen=True)
class CelRule:
    kind: str
    schema_path: tuple[str, ...]
    rule: str
    message: str
    message_expression: str
    field_path: str
    optional_old_self: bool = False

    @property
    def where(self) -> str:
        """The schema path as a JSON path with wildcards: spec.deletionStrategy.deletionRules[*].condition"""
        text = ""
        for step in self.schema_path:
            text += step if step == EACH_ITEM else ".*" if step == EACH_VALUE else f".{step}"
        return text.lstrip(".") or "."

    @property
    def name(self) -> str:
        """How reports name the rule: its place in the schema and its own message."""
        return f"{self.kind} {self.where}: {self.message or self.rule!r}"


@dataclass(frozen=True)
class CompiledRules:
    on_create: tuple[tuple[CelRule, CelProgram], ...]
    update_only: tuple[CelRule, ...]  # transition rules (refer to oldSelf)
    unsupported: tuple[tuple[CelRule, str], ...]  # (rule, the checker's reason)


def schema_rules(kind: str, schema: JsonObject) -> list[CelRule]:
    """Every x-kubernetes-validations rule of a CRD's openAPIV3Schema, with its schema path."""
    found: list[CelRule] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        for entry in node.get(VALIDATIONS_KEY) or ():
            found.append(
                CelRule(
                    kind=kind,
                    schema_path=path,
                    rule=str(entry.get("rule", "")),
                    message=str(entry.get("message") or ""),
                    message_expression=str(entry.get("messageExpression") or ""),
                    field_path=str(entry.get("fieldPath") or ""),
                    optional_old_self=entry.get("optionalOldSelf") is True,
                )
            )
        for key, sub in (node.get("properties") or {}).items():
            walk(sub, (*path, key))
        walk(node.get("items"), (*path, EACH_ITEM))
        walk(node.get("additionalProperties"), (*path, EACH_VALUE))

    walk(schema, ())
    return found


@cache
def _environment() -> tuple[ModuleType, CelEnvironment]:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_strings

    # Kubernetes enables CEL's strings extension for CRD rules; `self` is typed per schema node there,
    # dynamic here (values are plain JSON, so has() and field selection behave the same).
    return cel, cel.NewEnv(variables={"self": cel.Type.DYN}, extensions=[ext_strings.ExtStrings()])


def compile_rules(rules: list[CelRule]) -> CompiledRules:
    _, env = _environment()
    on_create, update_only, unsupported = [], [], []
    for rule in rules:
        if rule.optional_old_self:  # evaluated on create too, with oldSelf an empty optional
            unsupported.append((rule, "optionalOldSelf rules are not modelled here"))
            continue
        try:
            on_create.append((rule, env.compile(rule.rule)))
        except RuntimeError as error:  # the checker's verdict: INVALID_ARGUMENT with its error lines
            reason = _first_error(str(error))
            if f"undeclared reference to '{OLD_SELF}'" in reason:
                update_only.append(rule)
            else:
                unsupported.append((rule, reason))
    return CompiledRules(tuple(on_create), tuple(update_only), tuple(unsupported))


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if "ERROR:" in line:
            return line.split("ERROR:", 1)[1].strip()
    return text.splitlines()[0] if text else "does not compile"


def _values_at(value: Any, schema_path: tuple[str, ...], path: JsonPath) -> Iterator[tuple[JsonArray, Any]]:
    """(JSON path, value) of every present, non-null value the schema path selects."""
    if value is None:
        return
    if not schema_path:
        yield path, value
        return
    step, rest = schema_path[0], schema_path[1:]
    if step == EACH_ITEM:
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from _values_at(item, rest, [*path, index])
    elif step == EACH_VALUE:
        if isinstance(value, dict):
            for key, item in value.items():
                yield from _values_at(item, rest, [*path, key])
    elif isinstance(value, dict) and step in value:
        yield from _values_at(value[step], rest, [*path, step])


def evaluate(rules: CompiledRules, defaulted: JsonObject) -> list[str]:
    """Problems (" <json path>: <message>") of every on-create rule that fails on a defaulted object."""
    cel, _ = _environment()
    problems = []
    for rule, program in rules.on_create:
        for path, value in _values_at(defaulted, rule.schema_path, []):
            try:
                result = program.eval(data={"self": value})
                failed = result.value() if result.type() == cel.Type.ERROR else None
            except (RuntimeError, TypeError, ValueError) as error:  # a value CEL has no type for (a YAML date)
                failed = str(error).splitlines()[0] if str(error) else type(error).__name__
            if failed is not None:
                problems.append(f"{json_path(path)}: rule {rule.rule!r} cannot be evaluated here: {failed}")
            elif result.value() is not True:
                where = (
                    json_path([*path, *rule.field_path.lstrip(".").split(".")]) if rule.field_path else json_path(path)
                )
                problems.append(f"{where}: {_message(rule, value)} (CRD rule: {rule.rule})")
    return problems


def _message(rule: CelRule, value: Any) -> str:
    if rule.message_expression:
        _, env = _environment()
        try:
            result = env.compile(rule.message_expression).eval(data={"self": value}).value()
        except RuntimeError:
            result = None
        if isinstance(result, str) and result.strip():
            return result
    # The API server's wording for a rule without a message.
    return rule.message or f"failed rule: {rule.rule}"


def not_evaluated_reason(rules: CompiledRules) -> str | None:
    """One sentence naming every rule of a kind that a create cannot be checked against, or None."""
    parts = []
    if rules.update_only:
        # One short line: every synth prints it, and it asks nothing of the user. The rules and what they guard
        # are described in docs/validation.md.
        parts.append(
            f"{len(rules.update_only)} apply only to updates of a live object ({OLD_SELF}); nothing to do "
            "(docs/validation.md)"
        )
    if rules.unsupported:
        names = "; ".join(f"{rule.where} {rule.rule!r}: {reason}" for rule, reason in rules.unsupported)
        parts.append(f"{len(rules.unsupported)} need what this CEL environment lacks: {names}")
    return "; ".join(parts) or None
