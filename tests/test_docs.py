"""Documentation that is generated or exemplified from code stays in sync with it."""

from __future__ import annotations

from pathlib import Path

from skyrl_hyperpod.config import load_config
from skyrl_hyperpod.config.reference import render

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_configuration_reference_is_up_to_date():
    committed = (REPO_ROOT / "docs" / "configuration.md").read_text()
    assert committed == render(), "regenerate: skyrl-hp config reference > docs/configuration.md"


def test_configuration_reference_lists_every_section():
    text = render()
    for section in ("env", "network", "eks", "hyperpod.worker_group", "fsx", "versions", "workloads"):
        assert f"**`{section}`**" in text


def test_example_configuration_is_valid():
    config = load_config(REPO_ROOT / "config" / "example.yaml")
    assert config.eks.endpoint_public  # the example shows how to open the API to one CIDR
