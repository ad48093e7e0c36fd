"""Placeholder outputs: fine for reviews and tests, never for `kubectl apply`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..plumbing.json_types import JsonPath
from .report import json_path, object_label

# StackOutputs.placeholder marks every fake value with this word.
PLACEHOLDER_MARK = "placeholder"


def deployability_problems(docs: list[Any]) -> list[str]:
    """One line per string value that still carries a placeholder stack output."""
    problems = []
    for index, doc in enumerate(docs):
        label = object_label(doc, index)
        for path, value in _strings(doc, []):
            if PLACEHOLDER_MARK in value.lower():
                problems.append(
                    f"{label}: {json_path(path)}: placeholder value {_excerpt(value)} "
                    "(synthesize with the deployed stack outputs: cdk deploy --outputs-file ...)"
                )
    return problems


def _strings(value: Any, path: JsonPath) -> Iterator[tuple[JsonPath, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, [*path, key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, [*path, index])


def _excerpt(value: str, width: int = 40) -> str:
    if len(value) <= 2 * width:
        return repr(value)
    at = value.lower().index(PLACEHOLDER_MARK)
    start, end = max(0, at - width), at + len(PLACEHOLDER_MARK) + width
    return ("..." if start else "") + repr(value[start:end]) + ("..." if end < len(value) else "")
