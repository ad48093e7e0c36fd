"""Paths of the checkout this package runs from (the one place that counts directories up from a module), and
where the offline copies of upstream files (KubeRay CRDs, the HyperPod chart) live by default.

In a checkout of this repository: `../shared/<name>` beside it (the copies the tests read). In an
installed package (no checkout around it): the user's cache directory, where `skyrl-hp fetch ...` writes
them. Each caller also honours its own environment variable override.
"""

from __future__ import annotations

import os
from pathlib import Path

# plumbing/ -> skyrl_hyperpod/ -> the checkout
CHECKOUT_ROOT = Path(__file__).resolve().parents[2]
# Beside the package in a checkout (the training image's build context, the CDK app's stacks).
DOCKER_DIR = CHECKOUT_ROOT / "docker"
STACKS_DIR = CHECKOUT_ROOT / "stacks"


def in_checkout() -> bool:
    """True when the package runs from a source checkout (editable install or the repository itself)."""
    return (CHECKOUT_ROOT / "pyproject.toml").is_file() and (CHECKOUT_ROOT / "cdk.json").is_file()


def default_upstream_dir(name: str) -> Path:
    """`../shared/<name>` beside a checkout, else `$XDG_CACHE_HOME/skyrl-hyperpod/<name>` (~/.cache/...)."""
    if in_checkout():
        return CHECKOUT_ROOT.parent / "shared" / name
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "skyrl-hyperpod" / name
