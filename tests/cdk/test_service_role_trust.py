"""Roles that AWS services assume: each trusts its service only on behalf of this account's own resource
(aws:SourceAccount / aws:SourceArn, the confused-deputy guard) where the service documents setting those keys for
that trust, and carries no such condition where it does not (a condition on a key the service leaves unset denies
the service itself). docs/security.md, "Roles that AWS services assume", lists the same."""

from __future__ import annotations

import pytest

from stacks.components.hyperpod_cluster import INSTANCE_ROLE_MANAGED_POLICY


def rendered(value) -> str:
    """A template value as text: `Ref`s become ${...}, `Fn::Join` joins; anything else fails the test."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return "${" + value["Ref"] + "}"
    if isinstance(value, dict) and set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return separator.join(rendered(part) for part in parts)
    raise AssertionError(f"not a plain value: {value!r}")


def trust_of(template: dict, role_id: str) -> dict:
    [statement] = template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    return statement


def conditions(statement: dict) -> dict[str, dict[str, str]]:
    return {
        operator: {key: rendered(value) for key, value in keys.items()}
        for operator, keys in statement.get("Condition", {}).items()
    }


def resources_of(template: dict, resource_type: str) -> dict[str, dict]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == resource_type}


@pytest.fixture(scope="module")
def stack_templates(templates, default_config):
    return lambda component: templates[default_config.names.stack(component)]


def test_the_flow_log_role_serves_only_flow_logs_of_this_account(stack_templates):
    # https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html
    network = stack_templates("network")
    [flow_log] = resources_of(network, "AWS::EC2::FlowLog").values()
    [role_id, _] = flow_log["Properties"]["DeliverLogsPermissionArn"]["Fn::GetAtt"]
    statement = trust_of(network, role_id)
    assert statement["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    assert conditions(statement) == {
        "StringEquals": {"aws:SourceAccount": "${AWS::AccountId}"},
        # The flow log's id exists only once it is created: any flow log of this account and Region.
        "ArnLike": {"aws:SourceArn": "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:vpc-flow-log/*"},
    }


def test_the_image_build_role_serves_only_the_image_build_project(stack_templates, default_config):
    # https://docs.aws.amazon.com/codebuild/latest/userguide/cross-service-confused-deputy-prevention.html
    image_build = stack_templates("image-build")
    [project] = resources_of(image_build, "AWS::CodeBuild::Project").values()
    name = project["Properties"]["Name"]
    assert name == f"{default_config.names.stack('image-build')}-training-image"
    [role_id, _] = project["Properties"]["ServiceRole"]["Fn::GetAtt"]
    statement = trust_of(image_build, role_id)
    assert statement["Principal"] == {"Service": "codebuild.amazonaws.com"}
    assert conditions(statement) == {
        "StringEquals": {"aws:SourceAccount": "${AWS::AccountId}"},
        "ArnEquals": {
            "aws:SourceArn": f"arn:${{AWS::Partition}}:codebuild:${{AWS::Region}}:${{AWS::AccountId}}:project/{name}"
        },
    }


def test_the_hyperpod_execution_role_carries_no_condition_sagemaker_does_not_document(stack_templates):
    # SageMaker lists the features that set aws:SourceAccount/aws:SourceArn, HyperPod clusters not among them
    # (https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html): a condition
    # there would keep every node from assuming its role.
    hyperpod = stack_templates("hyperpod")
    [role_id] = [
        role_id
        for role_id, role in resources_of(hyperpod, "AWS::IAM::Role").items()
        if INSTANCE_ROLE_MANAGED_POLICY in str(role["Properties"].get("ManagedPolicyArns"))
    ]
    statement = trust_of(hyperpod, role_id)
    assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert "Condition" not in statement
