"""The HyperPod Ray endpoint operator (`ray_endpoint_operator.enabled`): its own stack after the HyperPod
cluster, the Spaces add-on before the chart, and the JWT rotator's KMS role when a key is configured.

AWS's guide is the source of every expectation here
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ray-endpoint-operator.html): the Spaces
add-on Active (it needs nodes), then the chart; with `kmsKeyArn`, a Pod Identity association for
`hyperpod-ray/hyperpod-ray-endpoint-operator-jwt-rotator` whose role may `kms:GenerateDataKey` on that key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cfn_lint_errors

from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.plumbing.upstream import RAY_ENDPOINT_OPERATOR_CHART_PATH
from skyrl_hyperpod.validation.hyperpod_chart import installer_module
from stacks.components.helm_from_git import RESOURCE_TYPE

KMS_KEY = "arn:aws:kms:us-west-2:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab"
OPERATOR = {
    "enabled": True,
    "domain": "ray.example.com",
    # A placeholder: no commit readable here holds the operator's chart (see RayEndpointOperatorConfig).
    "commit": "0123456789abcdef0123456789abcdef01234567",
    # Passed to the add-on verbatim; a placeholder mapping, not a claim about its schema.
    "spaces_addon_configuration": {"placeholder": {"enabled": True}},
}
# The operator's commit has no sha256 file list in this project: its tarball is pinned instead (placeholder).
TARBALL_PIN = {"helm_installer": {"archive_sha256": {f"sagemaker-hyperpod-cli-{OPERATOR['commit']}.tar.gz": "1" * 64}}}
WITH_KMS = {"ray_endpoint_operator": {**OPERATOR, "kms_key_arn": KMS_KEY}, **TARBALL_PIN}
WITHOUT_KMS = {"ray_endpoint_operator": OPERATOR, **TARBALL_PIN}
ROTATOR = ("hyperpod-ray", "hyperpod-ray-endpoint-operator-jwt-rotator")


def stack_named(assembly, name: str):
    [stack] = [stack for stack in assembly.stacks if stack.stack_name == name]
    return stack


def resources(template: dict, resource_type: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def rendered_json(value) -> dict | list:
    """A JSON document, which CDK splits into an Fn::Join around the region token (rendered as <region>)."""
    if isinstance(value, dict):
        value = "".join(part if isinstance(part, str) else "<region>" for part in value["Fn::Join"][1])
    return json.loads(value)


@pytest.fixture(scope="module")
def with_kms(assembly_for):
    config = validate_config(WITH_KMS)
    return config, assembly_for(WITH_KMS)


def test_operator_and_spaces_addon_deploy_after_the_hyperpod_cluster(with_kms):
    config, assembly = with_kms
    names = config.names
    endpoint = stack_named(assembly, names.stack("ray-endpoint"))
    assert names.stack("hyperpod") in {dependency.id for dependency in endpoint.dependencies}, endpoint.dependencies
    # Nothing of the operator is left in the EKS stack, which deploys before any node exists.
    eks = stack_named(assembly, names.stack("eks")).template
    assert [r for r in resources(eks, "AWS::EKS::Addon").values()
            if r["Properties"]["AddonName"] == "amazon-sagemaker-spaces"] == []  # fmt: skip
    assert [r for r in resources(eks, RESOURCE_TYPE).values()
            if r["Properties"]["ChartPath"] == RAY_ENDPOINT_OPERATOR_CHART_PATH] == []  # fmt: skip


def test_the_chart_installs_after_the_spaces_addon_and_the_rotators_credentials(with_kms):
    config, assembly = with_kms
    operator = config.ray_endpoint_operator
    template = stack_named(assembly, config.names.stack("ray-endpoint")).template
    [(spaces_id, spaces)] = resources(template, "AWS::EKS::Addon").items()
    assert spaces["Properties"]["AddonName"] == "amazon-sagemaker-spaces"
    assert json.loads(spaces["Properties"]["ConfigurationValues"]) == operator.spaces_addon_configuration
    [(association_id, association)] = resources(template, "AWS::EKS::PodIdentityAssociation").items()
    assert (association["Properties"]["Namespace"], association["Properties"]["ServiceAccount"]) == ROTATOR
    [chart] = resources(template, RESOURCE_TYPE).values()
    props = chart["Properties"]
    assert (props["ChartPath"], props["Commit"], props["Release"], props["Namespace"]) == (
        RAY_ENDPOINT_OPERATOR_CHART_PATH, operator.commit, "hyperpod-ray-endpoint-operator", operator.namespace
    )  # fmt: skip
    assert {spaces_id, association_id} <= set(chart["DependsOn"])
    assert props["ChartFileDigests"] == "{}"  # no file list for its commit: the tarball pin verifies it
    assert rendered_json(props["Values"]) == {
        "region": "<region>",
        "domain": operator.domain,
        "namespace": operator.namespace,
        "kmsKeyArn": KMS_KEY,
        "manager": {"enableEndpointsByDefault": False},
    }
    # The eks stack's installer does the work: no second installer function here.
    assert resources(template, "AWS::Lambda::Function") == {}


def test_the_eks_stacks_installer_may_install_the_chart_as_this_stack_sends_it(with_kms):
    config, assembly = with_kms
    handler = installer_module()
    eks = stack_named(assembly, config.names.stack("eks")).template
    [chart] = resources(stack_named(assembly, config.names.stack("ray-endpoint")).template, RESOURCE_TYPE).values()
    # The installer lives in the eks stack, deployed first: its configuration already lists this chart.
    environments = [
        f["Properties"].get("Environment", {}).get("Variables", {})
        for f in resources(eks, "AWS::Lambda::Function").values()
    ]
    [environment] = [e for e in environments if handler.ALLOWED_RELEASES_ENV in e]
    allowed = rendered_json(environment[handler.ALLOWED_RELEASES_ENV])
    sent = {**chart["Properties"], "Values": json.dumps(rendered_json(chart["Properties"]["Values"]))}
    assert handler.event_spec(sent) in allowed
    assert sorted(entry["Release"] for entry in allowed) == [
        "hyperpod-dependencies", "hyperpod-ray-endpoint-operator", "kuberay-operator"
    ]  # fmt: skip


def test_the_jwt_rotator_may_only_generate_data_keys_with_the_configured_key(with_kms):
    config, assembly = with_kms
    template = stack_named(assembly, config.names.stack("ray-endpoint")).template
    [(role_id, role)] = resources(template, "AWS::IAM::Role").items()
    [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    conditions = trust["Condition"]["StringEquals"]
    assert (conditions["aws:RequestTag/kubernetes-namespace"],
            conditions["aws:RequestTag/kubernetes-service-account"]) == ROTATOR  # fmt: skip
    statements = [s for p in resources(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]  # fmt: skip
    assert statements == [{"Action": "kms:GenerateDataKey", "Effect": "Allow", "Resource": KMS_KEY}]
    association = next(iter(resources(template, "AWS::EKS::PodIdentityAssociation").values()))
    assert association["Properties"]["RoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_without_a_kms_key_the_rotator_gets_no_role(assembly_for):
    config = validate_config(WITHOUT_KMS)
    template = stack_named(assembly_for(WITHOUT_KMS), config.names.stack("ray-endpoint")).template
    assert resources(template, "AWS::IAM::Role") == {}
    assert resources(template, "AWS::EKS::PodIdentityAssociation") == {}
    [chart] = resources(template, RESOURCE_TYPE).values()
    assert "kmsKeyArn" not in json.dumps(chart["Properties"]["Values"])


def test_no_operator_stack_by_default(templates, default_config):
    assert default_config.ray_endpoint_operator.enabled is False
    assert default_config.names.stack("ray-endpoint") not in templates


def test_cdk_nag_passes_and_cfn_lint_reports_no_errors(with_kms):
    config, assembly = with_kms
    report = json.loads((Path(assembly.directory) / "validation-report.json").read_text())
    [nag] = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success" and nag["violations"] == []
    assert cfn_lint_errors(stack_named(assembly, config.names.stack("ray-endpoint")).template) == []
