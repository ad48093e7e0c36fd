"""The `name==version` pins of a requirements or constraints file of the repository, by normalized distribution name
(https://packaging.python.org/en/latest/specifications/name-normalization/)."""

from __future__ import annotations

import re

from conftest import REPO_ROOT


def pins(name: str) -> dict[str, str]:
    found = {}
    for line in (REPO_ROOT / name).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            requirement, _, version = line.partition("==")
            found[re.sub(r"[-_.]+", "-", requirement.split("[")[0]).lower()] = version
    return found
