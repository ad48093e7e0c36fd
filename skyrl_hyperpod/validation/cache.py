"""A small on-disk cache for the validators' slow, pure verdicts, stored under a sha256 of their inputs.

It remembers which RayService serveConfigV2 texts passed Ray's own schema classes (`serve_config`), so
a synth of an unchanged RayService skips importing Ray Serve, and it is where the HyperPod chart check
extracts its helm binary. Set SKYRL_HP_VALIDATION_CACHE to a directory to move the cache, or to "off"
to disable it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

CACHE_ENV_VAR = "SKYRL_HP_VALIDATION_CACHE"


def cache_dir() -> Path | None:
    configured = os.environ.get(CACHE_ENV_VAR)
    if configured is not None:
        return None if configured.strip().lower() in ("", "off", "0", "false", "no") else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "skyrl-hyperpod" / "validation"


def digest(*parts: str | bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "big"))
        hasher.update(data)
    return hasher.hexdigest()


def load(namespace: str, key: str) -> Any | None:
    directory = cache_dir()
    if directory is None:
        return None
    try:
        return json.loads((directory / namespace / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def store(namespace: str, key: str, value: Any) -> None:
    """Best effort: an unwritable cache only costs speed, never correctness."""
    directory = cache_dir()
    if directory is None:
        return
    target = directory / namespace / f"{key}.json"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename, so a concurrent reader never sees half a file.
        with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, encoding="utf-8") as handle:
            json.dump(value, handle, separators=(",", ":"))
        os.replace(handle.name, target)
    except OSError:
        pass
