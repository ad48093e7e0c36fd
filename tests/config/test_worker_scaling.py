"""hyperpod.worker_group.scaling: on_demand starts the group at 0 nodes, and the combinations HyperPod's managed
Karpenter rules out are refused in one line."""

from __future__ import annotations

import pytest
from conftest import VARIANT_ON_DEMAND

from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.config.hyperpod import InstanceGroupConfig, check_nodeclass_groups
from skyrl_hyperpod.plumbing.upstream import NODECLASS_MAX_INSTANCE_GROUPS


def only_problem(data: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_config(data)
    problems = caught.value.problems
    assert len(problems) == 1, problems
    assert "\n" not in problems[0]
    return problems[0]


def worker(**fields) -> dict:
    return {"hyperpod": {"worker_group": fields}}


def test_fixed_is_the_default_and_keeps_every_node(default_config):
    group = default_config.hyperpod.worker_group
    assert group.scaling == "fixed"
    assert group.initial_instance_count == group.instance_count == 3
    assert default_config.hyperpod.autoscaled_groups == []


def test_on_demand_starts_at_zero_up_to_instance_count():
    config = validate_config(VARIANT_ON_DEMAND)
    group = config.hyperpod.worker_group
    assert (group.initial_instance_count, group.instance_count) == (0, 3)
    assert config.hyperpod.autoscaled_groups == [group]
    assert config.hyperpod.head_group.initial_instance_count == 1


def test_on_demand_with_deep_health_checks_is_refused():
    # The default group's deep health checks carry over unless the configuration drops them.
    problem = only_problem(worker(scaling="on_demand"))
    assert "deep_health_checks ['InstanceStress', 'InstanceConnectivity'] with scaling on_demand" in problem
    assert "set deep_health_checks: [] or scaling: fixed" in problem


def test_on_demand_with_a_training_plan_is_refused():
    plan = "arn:aws:sagemaker:us-west-2:111111111111:training-plan/reserved-g7e"
    problem = only_problem(worker(scaling="on_demand", deep_health_checks=[], training_plan_arn=plan))
    assert f"training_plan_arn {plan} with scaling on_demand" in problem
    assert "on-demand capacity only" in problem


def test_on_demand_without_automatic_node_recovery_is_refused():
    data = {"hyperpod": {"node_recovery": "None", "worker_group": {"scaling": "on_demand", "deep_health_checks": []}}}
    problem = only_problem(data)
    assert "node_recovery = 'None' with worker_group.scaling on_demand" in problem
    assert "needs node_recovery: Automatic" in problem
    assert validate_config({"hyperpod": {"node_recovery": "None"}}).hyperpod.node_recovery == "None"


def test_the_head_group_is_never_autoscaled():
    problem = only_problem({"hyperpod": {"head_group": {"scaling": "on_demand"}}})
    assert "head_group.scaling on_demand" in problem


def test_an_unknown_mode_names_the_allowed_ones():
    problem = only_problem(worker(scaling="spot"))
    assert "scaling" in problem and "'fixed'" in problem and "'on_demand'" in problem


def test_more_groups_than_a_nodeclass_takes_are_refused():
    groups = [
        InstanceGroupConfig(name=f"g{i}", instance_type="ml.g7e.12xlarge", instance_count=1, scaling="on_demand")
        for i in range(NODECLASS_MAX_INSTANCE_GROUPS + 1)
    ]
    check_nodeclass_groups(groups[:NODECLASS_MAX_INSTANCE_GROUPS])  # ten fit
    with pytest.raises(ValueError, match=r"^11 instance groups with scaling on_demand \(g0, .*takes at most 10"):
        check_nodeclass_groups(groups)


def test_the_serving_autoscaler_leaves_room_on_the_head_node(default_config):
    from skyrl_hyperpod.config.serving import serving_head_requests, training_head_size

    config = validate_config(VARIANT_ON_DEMAND)
    serving, head = config.serving, config.hyperpod.head_group
    assert serving_head_requests(serving, config.hyperpod) == (
        serving.head_cpus + serving.autoscaler_cpus,
        serving.head_memory_gib + serving.autoscaler_memory_gib,
    )
    assert serving_head_requests(serving, default_config.hyperpod) == (serving.head_cpus, serving.head_memory_gib)
    # Both heads and the autoscaler container fill the head node exactly: the training head gives up the autoscaler's.
    cpus, memory = training_head_size(config.training, serving, config.hyperpod)
    fixed_cpus, fixed_memory = training_head_size(default_config.training, serving, default_config.hyperpod)
    assert (fixed_cpus - cpus, fixed_memory - memory) == (serving.autoscaler_cpus, serving.autoscaler_memory_gib)
    assert cpus + serving.head_cpus + serving.autoscaler_cpus == head.allocatable_vcpus
