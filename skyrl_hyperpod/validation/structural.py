"""Kubernetes structural-schema semantics on top of `jsonschema`.

The API server treats a CRD's openAPIV3Schema differently from plain JSON Schema: it drops null
values of non-nullable fields, applies `default`s, and prunes every field the schema does not
declare (unless `x-kubernetes-preserve-unknown-fields`). A silently pruned field is a bug in a
manifest, so `strict_schema` turns pruning into rejection (`additionalProperties: false`) and
`apply_defaults` mirrors defaulting before validation.
"""

from __future__ import annotations

import copy
from typing import Any

from jsonschema import ValidationError

from ..plumbing.json_types import JsonObject
from .report import did_you_mean, show

# Marks an ObjectMeta position (the root `metadata`, or that of an embedded resource): the API
# server validates it as ObjectMeta, not with the CRD schema (which only says `type: object`).
OBJECT_META = "x-skyrl-object-meta"

# OpenAPI v3 keywords that carry over to JSON Schema draft 4 unchanged.
_VALUE_KEYWORDS = (
    "type", "enum", "pattern", "maxLength", "minLength", "maximum", "minimum", "exclusiveMaximum",
    "exclusiveMinimum", "multipleOf", "maxItems", "minItems", "uniqueItems", "maxProperties",
    "minProperties", "required",
)  # fmt: skip
_INT_OR_STRING = "x-kubernetes-int-or-string"


def apply_defaults(value: Any, schema: JsonObject) -> None:
    """Default `value` in place the way the API server does (recursively, nulls pruned first)."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, sub in properties.items():
            if key in value and value[key] is None and not sub.get("nullable"):
                del value[key]
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                apply_defaults(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in properties:
                    apply_defaults(item, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


def strict_schema(crd_schema: JsonObject) -> JsonObject:
    """A draft-4 JSON Schema that rejects what the API server would reject or silently prune."""
    converted = _convert(crd_schema)
    converted.setdefault("properties", {})["metadata"] = {"type": "object", OBJECT_META: True}
    return converted


def _convert(node: JsonObject) -> JsonObject:
    out: dict[str, Any] = {key: node[key] for key in _VALUE_KEYWORDS if key in node}
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if node.get(_INT_OR_STRING):
        out[_INT_OR_STRING] = True
    if isinstance(node.get("properties"), dict):
        out["properties"] = {key: _convert(sub) for key, sub in node["properties"].items()}
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = _convert(extra)
    elif isinstance(extra, bool):
        out["additionalProperties"] = extra
    if isinstance(node.get("items"), dict):
        out["items"] = _convert(node["items"])
    for combinator in ("anyOf", "allOf", "oneOf"):
        if isinstance(node.get(combinator), list):
            out[combinator] = [_convert(branch) for branch in node[combinator]]
    if isinstance(node.get("not"), dict):
        out["not"] = _convert(node["not"])
    if node.get("x-kubernetes-embedded-resource"):
        properties = out.setdefault("properties", {})
        properties.setdefault("apiVersion", {"type": "string"})
        properties.setdefault("kind", {"type": "string"})
        properties["metadata"] = {"type": "object", OBJECT_META: True}
    is_object = node.get("type") == "object" or "properties" in node
    if is_object and "additionalProperties" not in out and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def describe(error: ValidationError) -> list[tuple[list[Any], str]]:
    """(path, message) pairs for one jsonschema error, worded for someone editing a manifest."""
    path = list(error.absolute_path)
    instance, schema = error.instance, error.schema
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        declared = schema.get("properties") or {}
        return [
            (
                path + [key],
                "unknown field: the API server would drop it silently"
                + (did_you_mean(key, declared) if declared else " (this object declares no fields)"),
            )
            for key in instance
            if key not in declared
        ]
    if error.validator == "required" and isinstance(instance, dict):
        return [(path + [key], "required field is missing") for key in error.validator_value if key not in instance]
    if error.validator == "type":
        expected = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return [(path, f"{show(instance)} is {_json_type(instance)}, expected {' or '.join(expected)}")]
    if error.validator == "anyOf" and schema.get(_INT_OR_STRING):
        return [(path, f"{show(instance)} must be an integer or a string{_pattern_hint(schema)}")]
    if error.validator == "pattern" and schema.get(_INT_OR_STRING):
        return [(path, f"{show(instance)} is not a Kubernetes quantity (for example 4, 500m, 8Gi)")]
    if error.validator == "enum":
        return [(path, f"{show(instance)} is not one of {', '.join(show(v) for v in error.validator_value)}")]
    return [(path, error.message)]


def _pattern_hint(schema: JsonObject) -> str:
    pattern = schema.get("pattern")
    return f" matching {pattern}" if pattern else ""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
