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
    for section in ("env", "network", "eks", "fsx", "versions", "workloads"):
        assert f"\n## {section}\n" in text  # the anchor configuration errors point to
    assert "**`hyperpod.worker_group`**" in text


def test_example_configuration_is_valid():
    config = load_config(REPO_ROOT / "config" / "example.yaml")
    assert config.eks.endpoint_public  # the example shows how to open the API to one CIDR
    # With env.account set, `cdk synth` looks the account's AZs up (credentials needed): the example stays
    # synthesizable offline, as its header promises, and says so next to the commented-out key.
    assert config.env.account is None
    assert "needs credentials" in (REPO_ROOT / "config" / "example.yaml").read_text()
