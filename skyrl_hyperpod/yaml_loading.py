"""YAML read with libyaml's parser when PyYAML has it (PyPI's wheels do): the same documents as
`yaml.safe_load`/`yaml.safe_load_all`, parsed in C. The large files this project reads (Helm's render of the
HyperPod chart, the KubeRay CRDs, synthesized manifests) spend most of their time in the pure-Python parser."""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str | bytes) -> Any:
    return yaml.load(text, Loader=SAFE_LOADER)


def safe_load_all(text: str | bytes) -> list[Any]:
    return list(yaml.load_all(text, Loader=SAFE_LOADER))
