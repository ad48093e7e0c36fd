"""The HyperPod instance groups are one collection (`hyperpod.instance_groups`): what applies to every group reads
it, so another GPU group is a configuration change, not a hunt through the code."""

from __future__ import annotations

import pytest
from conftest import TEST_REGION

from skyrl_hyperpod.config import ConfigError, ProjectConfig, validate_config
from skyrl_hyperpod.config.hyperpod import HyperPodConfig, InstanceGroupConfig
from skyrl_hyperpod.ops import cost, preflight
from skyrl_hyperpod.values import helm_values

# A second GPU group of another type than the default workers' (in the catalog and the shipped price files).
EXTRA = InstanceGroupConfig(name="gpu-extra", instance_type="ml.g7e.24xlarge", instance_count=2)


def test_the_collection_is_the_head_then_the_workers() -> None:
    hyperpod = HyperPodConfig()
    assert list(hyperpod.instance_groups.items()) == [
        ("head_group", hyperpod.head_group),
        ("worker_group", hyperpod.worker_group),
    ]


def test_two_groups_with_one_name_are_refused_naming_both_keys() -> None:
    with pytest.raises(ConfigError) as raised:
        validate_config({"hyperpod": {"worker_group": {"name": "head"}}})
    assert any("head_group.name and worker_group.name are both 'head'" in line for line in raised.value.problems)


@pytest.fixture
def with_extra_group(monkeypatch: pytest.MonkeyPatch) -> ProjectConfig:
    """A configuration whose collection holds a third group, as a future `hyperpod` key would add it."""
    groups = HyperPodConfig.instance_groups.fget  # type: ignore[attr-defined]

    def extended(self: HyperPodConfig) -> dict[str, InstanceGroupConfig]:
        return {**groups(self), "extra_group": EXTRA}

    monkeypatch.setattr(HyperPodConfig, "instance_groups", property(extended))
    return validate_config({})


def test_every_reader_of_all_groups_sees_a_third_group(with_extra_group: ProjectConfig) -> None:
    config = with_extra_group
    # derived: GPUs per instance type (the review's GPU count)
    assert config.derived.gpus_by_instance_type[EXTRA.instance_type] == EXTRA.instance_count * EXTRA.spec.gpus
    # helm values: the device plugins' node affinity
    assert EXTRA.instance_type in helm_values.gpu_instance_types(config)
    assert EXTRA.instance_type in helm_values.efa_instance_types(config)
    # preflight: capacity per instance type
    assert preflight.instance_counts(config)[EXTRA.instance_type] == EXTRA.instance_count
    # cost: one line per group, and its EBS volumes
    book = cost.load_price_book(cost.price_file_for(TEST_REGION))
    estimate = cost.estimate(config, book, price_file="prices", run_hours=1.0)
    assert any(item.component == f"HyperPod group {EXTRA.name} ({EXTRA.instance_type})" for item in estimate.items)
    ebs = next(item for item in estimate.items if item.component == "HyperPod node EBS volumes")
    assert (
        ebs.quantity
        == f"{sum(g.instance_count * g.ebs_volume_gb for g in config.hyperpod.instance_groups.values())} GB"
    )
