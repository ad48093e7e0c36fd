"""How problems are worded: one line each, "<kind>/<name>: <json path>: <message>"."""

from __future__ import annotations

import difflib
import json
import re
import warnings
from collections.abc import Iterable
from typing import Any

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


class CheckSkipped(UserWarning):
    """A check could not run on this machine. It is reported, never counted as passed."""


def skipped(check: str, reason: str) -> str:
    line = f"SKIPPED {check}: {reason}"
    warnings.warn(CheckSkipped(line), stacklevel=3)
    return line


def json_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.match(str(part)):
            text += f".{part}" if text else str(part)
        else:
            text += f"[{json.dumps(str(part))}]"
    return text or "."


def show(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def object_label(doc: Any, index: int) -> str:
    if not isinstance(doc, dict):
        return f"document[{index}]"
    metadata = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    return f"{doc.get('kind') or '?'}/{metadata.get('name') or f'document[{index}]'}"
