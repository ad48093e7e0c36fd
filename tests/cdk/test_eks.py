"""EKS stack: cluster, add-ons, workload identities, KubeRay and the git-pinned HyperPod charts.

The default config's stack is the one in the whole platform (the session's synth); the variant is
synthesized in a small App next to a fixture VPC, security group and bucket, with cdk-nag attached as in
build_platform.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from types import SimpleNamespace

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from conftest import cdk_json_context, cfn_lint_errors

from skyrl_hyperpod.config import ConfigError, ProjectConfig, validate_config
from skyrl_hyperpod.config.eks import SUPPORTED_KUBERNETES_VERSIONS
from skyrl_hyperpod.config.names import KUBERAY_OPERATOR_RELEASE
from skyrl_hyperpod.plumbing.upstream import HYPERPOD_CHART_PATH, RAY_ENDPOINT_OPERATOR_CHART_PATH
from skyrl_hyperpod.validation.crds import KUBERAY_KINDS
from skyrl_hyperpod.validation.hyperpod_chart import installer_module, sums_for
from skyrl_hyperpod.values.helm_values import (
    HYPERPOD_DEPENDENCIES_NAMESPACE,
    HYPERPOD_DEPENDENCIES_RELEASE,
    UPSTREAM_ARCHIVE_SHA256,
)
from skyrl_hyperpod.values.stack_outputs import OutputKey
from stacks.components import eks_addons, eks_cluster
from stacks.components.helm_from_git import RESOURCE_TYPE, SERVICE_TIMEOUT, GitHelmInstaller, HelmChartFromGit
from stacks.components.workload_identity import WorkloadIdentities
from stacks.eks_stack import (
    KUBERAY_COMMIT,
    KUBERAY_HELM_REPOSITORY,
    KUBERAY_NAMESPACE,
    KUBERAY_OPERATOR_CHART,
    KUBERAY_OPERATOR_CHART_PATH,
    LEGACY_KUBERAY_HELM_TIMEOUT,
    EksStack,
)

ADMIN_ARN = "arn:aws:iam::111111111111:role/PlatformAdmin"
VARIANT = {
    "eks": {
        "kubernetes_version": "1.35",
        "public_access_cidrs": ["203.0.113.0/24", "198.51.100.7/32"],
        "admin_principal_arns": [ADMIN_ARN],
        "control_plane_log_types": ["api", "audit", "authenticator", "controllerManager", "scheduler"],
    },
    "versions": {"vpc_cni_addon": "v1.20.4-eksbuild.1", "coredns_addon": "v1.12.4-eksbuild.1"},
    "workloads": {"adapters_prefix": "lora/adapters"},
    "ray_endpoint_operator": {
        "enabled": True,
        "domain": "ray.example.com",
        "enable_endpoints_by_default": True,
        # A placeholder: no commit here holds the operator's chart (see RayEndpointOperatorConfig).
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "kms_key_arn": "arn:aws:kms:us-west-2:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "admin_group": "ray-admins",
        # Passed to the add-on verbatim; a placeholder mapping, not a claim about its schema.
        "spaces_addon_configuration": {"placeholder": {"enabled": True}},
    },
    "helm_installer": {
        "archive_mirror": "s3://example-helm-mirror/hyperpod",
        # The operator's commit has no sha256 list in this project: its tarball is pinned instead.
        "archive_sha256": {
            "cert-manager-v1.18.2.tgz": "0" * 64,
            "sagemaker-hyperpod-cli-0123456789abcdef0123456789abcdef01234567.tar.gz": "1" * 64,
        },
        "require_pinned_digests": False,
    },
}
COMMIT_ID = re.compile(r"^[0-9a-f]{40}$")
REGION_PLACEHOLDER = "<region>"


def synth_eks(config: ProjectConfig, outdir: Path) -> tuple[dict, Path]:
    app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), "aws:cdk:disable-asset-staging": True})
    env = cdk.Environment(account="111111111111", region="us-west-2")
    fixture = cdk.Stack(app, "fixture-network", env=env)
    vpc = ec2.Vpc(fixture, "Vpc", max_azs=2, nat_gateways=1)
    security_group = ec2.SecurityGroup(fixture, "HyperPodSg", vpc=vpc)
    bucket = s3.Bucket(fixture, "Artifacts", enforce_ssl=True)
    for rule in ("VPC7", "S1", "EC23"):  # the fixture stands in for the network/storage stacks
        cdk.Validations.of(fixture).acknowledge(
            cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{rule}", reason="test fixture")
        )
    EksStack(
        app,
        config.names.stack("eks"),
        env=env,
        config=config,
        vpc=vpc,
        hyperpod_security_group=security_group,
        artifacts_bucket=bucket,
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    assembly = app.synth()  # raises ValidationFailed on any unacknowledged cdk-nag finding
    return assembly.get_stack_by_name(config.names.stack("eks")).template, Path(assembly.directory)


@pytest.fixture(scope="module")
def default(default_config, platform_assembly):
    """The EKS stack of the whole platform (default config)."""
    stack = platform_assembly.get_stack_by_name(default_config.names.stack("eks"))
    return SimpleNamespace(config=default_config, template=stack.template, outdir=Path(platform_assembly.directory))


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    config = validate_config(VARIANT)
    template, outdir = synth_eks(config, tmp_path_factory.mktemp("eks-variant"))
    return SimpleNamespace(config=config, template=template, outdir=outdir)


def resources(template: dict, resource_type: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def one(template: dict, resource_type: str) -> tuple[str, dict]:
    found = resources(template, resource_type)
    assert len(found) == 1, f"{resource_type}: {sorted(found)}"
    return next(iter(found.items()))


def cluster_props(template: dict) -> dict:
    return one(template, "AWS::EKS::Cluster")[1]["Properties"]


def addons(template: dict) -> dict[str, dict]:
    return {r["Properties"]["AddonName"]: r for r in resources(template, "AWS::EKS::Addon").values()}


def git_charts(template: dict) -> dict[str, dict]:
    return {r["Properties"]["ChartPath"]: r for r in resources(template, RESOURCE_TYPE).values()}


def rendered_json(value) -> dict:
    """A JSON document CDK split into Fn::Join parts around the region token."""
    if isinstance(value, dict) and "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        value = delimiter.join(part if isinstance(part, str) else REGION_PLACEHOLDER for part in parts)
    return json.loads(value)


def role_statements(template: dict, role_id: str) -> list[dict]:
    statements = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def actions_of(statements: list[dict]) -> set[str]:
    found: set[str] = set()
    for statement in statements:
        found.update([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    return found


def pod_identity_role(template: dict, namespace: str, service_account: str) -> str:
    """The role whose trust policy admits exactly that Kubernetes service account."""
    matches = []
    for role_id, role in resources(template, "AWS::IAM::Role").items():
        for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            conditions = statement.get("Condition", {}).get("StringEquals", {})
            if (
                statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
                and conditions.get("aws:RequestTag/kubernetes-namespace") == namespace
                and conditions.get("aws:RequestTag/kubernetes-service-account") == service_account
            ):
                assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
                assert conditions["aws:RequestTag/eks-cluster-name"] == {"Ref": one(template, "AWS::EKS::Cluster")[0]}
                matches.append(role_id)
    assert len(matches) == 1, f"{namespace}/{service_account}: {matches}"
    return matches[0]


# --- version and kubectl layer -----------------------------------------------------------------


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_every_supported_version_maps_to_its_kubectl_layer(version):
    minor = version.split(".")[1]
    layer = eks_cluster.kubectl_layer_class(version)
    assert layer.__name__ == f"KubectlV{minor}Layer"
    assert layer.__module__.endswith(f"lambda_layer_kubectl_v{minor}")


def test_unsupported_version_has_no_layer():
    with pytest.raises(ValueError, match="1.29"):
        eks_cluster.kubectl_layer_class("1.29")


@pytest.mark.parametrize("fixture", ["default", "variant"])
def test_cluster_version_and_its_layer_follow_the_config(fixture, request):
    synth = request.getfixturevalue(fixture)
    version = synth.config.eks.kubernetes_version
    assert cluster_props(synth.template)["Version"] == version
    kubectl_layers = [
        layer for layer in resources(synth.template, "AWS::Lambda::LayerVersion").values()
        if "/opt/kubectl/kubectl" in layer["Properties"]["Description"]
    ]  # fmt: skip
    assert len(kubectl_layers) == 1
    assert f"/opt/kubectl/kubectl {version}." in kubectl_layers[0]["Properties"]["Description"]


def test_one_kubectl_layer_and_one_installer_serve_every_release(variant):
    # The dependencies chart and the KubeRay chart, both from git (the Ray endpoint operator's git chart lives in
    # its own stack and reuses this installer: tests/cdk/test_ray_endpoint.py), yet: one kubectl layer, one AWS
    # CLI layer, one function (the git installer; no kubectl provider, test_no_kubectl_provider_...).
    assert set(git_charts(variant.template)) == {HYPERPOD_CHART_PATH, KUBERAY_OPERATOR_CHART_PATH}
    assert len(resources(variant.template, "AWS::Lambda::LayerVersion")) == 2
    assert len(resources(variant.template, "AWS::Lambda::Function")) == 1
    tokens = {chart["Properties"]["ServiceToken"]["Fn::GetAtt"][0] for chart in git_charts(variant.template).values()}
    assert len(tokens) == 1


def installer_of(template: dict) -> tuple[str, dict]:
    """(logical id, properties) of the function every git chart of `template` names as its ServiceToken."""
    [function_id] = {chart["Properties"]["ServiceToken"]["Fn::GetAtt"][0] for chart in git_charts(template).values()}
    return function_id, template["Resources"][function_id]["Properties"]


def chart_spec(chart: dict) -> dict:
    """The release spec the handler builds from this chart's event (its properties, the region as a placeholder)."""
    properties = {**chart["Properties"], "Values": json.dumps(rendered_json(chart["Properties"]["Values"]))}
    return installer_module().event_spec(properties)


@pytest.mark.parametrize("fixture", ["default", "variant"])
def test_the_installer_may_install_exactly_the_releases_of_its_charts(fixture, request):
    synth = request.getfixturevalue(fixture)
    handler = installer_module()
    _, function = installer_of(synth.template)
    environment = function["Environment"]["Variables"]
    # Its own cluster, by reference ...
    assert environment[handler.CLUSTER_ENV] == {"Ref": one(synth.template, "AWS::EKS::Cluster")[0]}
    # ... and what each chart's resource sends, as the handler compares an event: those, nothing else.
    allowed = rendered_json(environment[handler.ALLOWED_RELEASES_ENV])
    charts = git_charts(synth.template).values()
    assert sorted(map(handler.canonical_json, allowed)) == sorted(handler.canonical_json(chart_spec(c)) for c in charts)
    assert len(allowed) == 2
    # Within Lambda's 4 KB of environment, with room for a region name in place of the placeholder.
    assert len(json.dumps(environment)) < handler.ENVIRONMENT_LIMIT_BYTES / 2


def test_releases_over_lambdas_environment_limit_are_refused_at_synth():
    installer = SimpleNamespace(allowed_releases=[])
    spec = installer_module().release_spec({"Release": "r", "Namespace": "n", "Values": {"large": "x" * 4000}})
    with pytest.raises(ConfigError, match=r"\(n/r\) take \d+ bytes of its Lambda environment, over Lambda's 4096"):
        GitHelmInstaller.allow(installer, spec)


@pytest.mark.parametrize("fixture", ["default", "variant"])
def test_no_kubectl_provider_and_only_the_installer_and_the_listed_admins_are_cluster_admin(fixture, request):
    # aws_eks_v2's kubectl handler applies whatever an event names under its own cluster-admin entry: none here.
    synth = request.getfixturevalue(fixture)
    function_id, function = installer_of(synth.template)
    assert set(resources(synth.template, "AWS::Lambda::Function")) == {function_id}
    principals = [
        entry["Properties"]["PrincipalArn"] for entry in resources(synth.template, "AWS::EKS::AccessEntry").values()
    ]
    expected = [{"Fn::GetAtt": [function["Role"]["Fn::GetAtt"][0], "Arn"]}, *synth.config.eks.admin_principal_arns]
    assert sorted(map(json.dumps, principals)) == sorted(map(json.dumps, expected))


# --- control plane -----------------------------------------------------------------------------


def test_cluster_has_no_managed_capacity_and_uses_access_entries(default):
    props = cluster_props(default.template)
    assert props["Name"] == default.config.names.eks_cluster
    assert props["ComputeConfig"]["Enabled"] is False  # no Auto Mode
    assert props["AccessConfig"]["AuthenticationMode"] in ("API", "API_AND_CONFIG_MAP")
    assert props["AccessConfig"]["BootstrapClusterCreatorAdminPermissions"] is False
    for forbidden in ("AWS::EKS::Nodegroup", "AWS::AutoScaling::AutoScalingGroup", "AWS::EKS::FargateProfile"):
        assert resources(default.template, forbidden) == {}


def test_cluster_runs_in_private_subnets_with_the_hyperpod_security_group(default):
    # Strong references (exports): the cluster's SubnetIds and SecurityGroupIds are create-only, so CloudFormation
    # must refuse a network change that would replace them under the cluster.
    vpc_config = cluster_props(default.template)["ResourcesVpcConfig"]
    exports = [subnet["Fn::ImportValue"] for subnet in vpc_config["SubnetIds"]]
    assert len(exports) == 2 and all("privatesubnet" in name.lower() for name in exports)
    [security_group] = vpc_config["SecurityGroupIds"]
    assert "HyperPodSecurityGroup" in security_group["Fn::ImportValue"]


def test_endpoint_is_private_by_default(default):
    assert default.config.eks.public_access_cidrs == []
    vpc_config = cluster_props(default.template)["ResourcesVpcConfig"]
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["EndpointPublicAccess"] is False
    assert "PublicAccessCidrs" not in vpc_config


def test_endpoint_is_public_only_for_the_listed_cidrs(variant):
    vpc_config = cluster_props(variant.template)["ResourcesVpcConfig"]
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["EndpointPublicAccess"] is True
    assert sorted(vpc_config["PublicAccessCidrs"]) == sorted(variant.config.eks.public_access_cidrs)


@pytest.mark.parametrize("fixture", ["default", "variant"])
def test_control_plane_logging_follows_the_config(fixture, request):
    synth = request.getfixturevalue(fixture)
    enabled = [entry["Type"] for entry in cluster_props(synth.template)["Logging"]["ClusterLogging"]["EnabledTypes"]]
    assert enabled == synth.config.eks.control_plane_log_types


def test_secrets_are_encrypted_with_a_rotating_kms_key(default):
    [encryption] = cluster_props(default.template)["EncryptionConfig"]
    assert encryption["Resources"] == ["secrets"]
    key_id = encryption["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    key = default.template["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True


def test_admin_principals_get_cluster_admin_access_entries(default, variant):
    def literal_entries(template: dict) -> list[dict]:
        return [
            entry["Properties"] for entry in resources(template, "AWS::EKS::AccessEntry").values()
            if isinstance(entry["Properties"]["PrincipalArn"], str)
        ]  # fmt: skip

    assert literal_entries(default.template) == []
    [entry] = literal_entries(variant.template)
    assert entry["PrincipalArn"] == ADMIN_ARN
    [policy] = entry["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"}
    assert "cluster-access-policy/AmazonEKSClusterAdminPolicy" in json.dumps(policy["PolicyArn"])


def test_stack_emits_the_cluster_name_and_role_outputs(default):
    outputs = default.template["Outputs"]
    cluster_id = one(default.template, "AWS::EKS::Cluster")[0]
    assert outputs[OutputKey.EKS_CLUSTER_NAME.value]["Value"] == {"Ref": cluster_id}
    workloads = default.config.workloads
    serving = pod_identity_role(default.template, workloads.namespace, workloads.serving_service_account)
    training = pod_identity_role(default.template, workloads.namespace, workloads.training_service_account)
    assert outputs[OutputKey.SERVING_ROLE_ARN.value]["Value"] == {"Fn::GetAtt": [serving, "Arn"]}
    assert outputs[OutputKey.TRAINING_ROLE_ARN.value]["Value"] == {"Fn::GetAtt": [training, "Arn"]}


# --- add-ons -----------------------------------------------------------------------------------

BASE_ADDONS = {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent", "aws-fsx-csi-driver"}


def test_base_addons_overwrite_and_use_default_versions(default):
    found = addons(default.template)
    assert set(found) == BASE_ADDONS
    for addon in found.values():
        assert addon["Properties"]["ResolveConflicts"] == "OVERWRITE"
        assert "AddonVersion" not in addon["Properties"]  # versions.*_addon are None by default


@pytest.mark.parametrize("which", ["default", "variant"])
def test_vpc_cni_enables_network_policy_and_no_other_addon_is_configured_by_it(which, request):
    # The charts' NetworkPolicies close Ray's ports only if the VPC CNI's policy agent enforces them.
    found = addons(request.getfixturevalue(which).template)
    configuration = json.loads(found["vpc-cni"]["Properties"]["ConfigurationValues"])
    assert configuration["enableNetworkPolicy"] == "true"  # a string in the add-on's schema, not a boolean
    for name in BASE_ADDONS - {"vpc-cni"}:
        assert "enableNetworkPolicy" not in found[name]["Properties"].get("ConfigurationValues", "")


def test_pinned_addon_versions_are_passed_through(variant):
    found = addons(variant.template)
    assert found["vpc-cni"]["Properties"]["AddonVersion"] == variant.config.versions.vpc_cni_addon
    assert found["coredns"]["Properties"]["AddonVersion"] == variant.config.versions.coredns_addon
    assert "AddonVersion" not in found["kube-proxy"]["Properties"]


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        ("v1.18.2-eksbuild.1", "v1.18.3 or newer"),
        ("v1.17.9-eksbuild.3", "v1.18.3 or newer"),
        ("1.19", "must look like"),
    ],
)
def test_vpc_cni_older_than_hyperpods_minimum_is_rejected(version, problem):
    with pytest.raises(ConfigError) as error:
        eks_addons.check_vpc_cni_version(version)
    [line] = error.value.problems
    assert "versions.vpc_cni_addon" in line and repr(version) in line and problem in line


@pytest.mark.parametrize("version", [None, "v1.18.3-eksbuild.1", "v1.20.4-eksbuild.1"])
def test_vpc_cni_at_or_above_the_minimum_is_accepted(version):
    eks_addons.check_vpc_cni_version(version)


def test_fsx_csi_controller_gets_a_describe_only_pod_identity_role(default):
    fsx = addons(default.template)["aws-fsx-csi-driver"]
    [association] = fsx["Properties"]["PodIdentityAssociations"]
    assert association["ServiceAccount"] == eks_addons.FSX_CSI_SERVICE_ACCOUNT == "fsx-csi-controller-sa"
    role_id = pod_identity_role(default.template, "kube-system", "fsx-csi-controller-sa")
    assert association["RoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert actions_of(role_statements(default.template, role_id)) == {"fsx:DescribeFileSystems"}
    # Its credentials come from the Pod Identity agent.
    agent_id = next(k for k, v in resources(default.template, "AWS::EKS::Addon").items()
                    if v["Properties"]["AddonName"] == "eks-pod-identity-agent")  # fmt: skip
    assert agent_id in fsx["DependsOn"]


# --- workload identities -----------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["default", "variant"])
def test_workload_roles_are_scoped_to_the_adapters_prefix(fixture, request):
    synth = request.getfixturevalue(fixture)
    workloads = synth.config.workloads
    prefix = workloads.adapters_prefix
    for service_account, allowed in (
        (workloads.serving_service_account, {"s3:ListBucket", "s3:GetObject"}),
        (
            workloads.training_service_account,
            {"s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"},
        ),
    ):
        role_id = pod_identity_role(synth.template, workloads.namespace, service_account)
        statements = role_statements(synth.template, role_id)
        assert actions_of(statements) == allowed
        for statement in statements:
            resource = json.dumps(statement["Resource"])
            assert "Artifacts" in resource  # the artifacts bucket, nothing else
            if statement["Action"] == "s3:ListBucket":
                # Ends at the delimiter: `adapters` alone would also list `adapters-old/...`.
                assert statement["Condition"] == {"StringLike": {"s3:prefix": [f"{prefix}/", f"{prefix}/*"]}}
                assert not any(
                    fnmatch.fnmatchcase(f"{prefix}-old/{tail}", pattern)
                    for pattern in statement["Condition"]["StringLike"]["s3:prefix"]
                    for tail in ("", "adapter/")
                )
            else:
                assert statement["Resource"]["Fn::Join"][1][-1] == f"/{prefix}/*"


def test_serving_role_cannot_write(default):
    workloads = default.config.workloads
    role_id = pod_identity_role(default.template, workloads.namespace, workloads.serving_service_account)
    assert not {a for a in actions_of(role_statements(default.template, role_id)) if "Put" in a or "Delete" in a}


def test_pod_identity_associations_bind_the_chart_service_accounts(default):
    workloads = default.config.workloads
    found = {
        a["Properties"]["ServiceAccount"]: a["Properties"]
        for a in resources(default.template, "AWS::EKS::PodIdentityAssociation").values()
    }
    assert set(found) == {workloads.serving_service_account, workloads.training_service_account}
    for service_account, association in found.items():
        assert association["Namespace"] == workloads.namespace
        role_id = pod_identity_role(default.template, workloads.namespace, service_account)
        assert association["RoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_a_kms_encrypted_bucket_gets_key_grants_matching_each_role(default_config):
    # Built alone (no synth, no cdk-nag): only the grant logic is under test.
    stack = cdk.Stack(cdk.App(), "s", env=cdk.Environment(account="111111111111", region="us-west-2"))
    bucket = s3.Bucket(stack, "Artifacts", encryption=s3.BucketEncryption.KMS)
    cluster = eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="c")
    identities = WorkloadIdentities(
        stack, "Ids", cluster=cluster, workloads=default_config.workloads, artifacts_bucket=bucket
    )
    template = Template.from_stack(stack).to_json()

    def kms_actions(role) -> set[str]:
        role_id = stack.resolve(role.role_name)["Ref"]
        return {a for a in actions_of(role_statements(template, role_id)) if a.startswith("kms:")}

    assert kms_actions(identities.serving_role) == {"kms:Decrypt"}
    assert {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*"} <= kms_actions(identities.training_role)


def test_namespace_is_left_to_the_charts(default):
    # No kubectl manifest: the cdk8s charts own the workload namespace and service accounts.
    assert resources(default.template, "Custom::AWSCDK-EKS-KubernetesResource") == {}


# --- KubeRay -----------------------------------------------------------------------------------


def test_the_kuberay_operator_comes_from_the_release_tags_commit_every_file_checked(default):
    chart = git_charts(default.template)[KUBERAY_OPERATOR_CHART_PATH]
    props = chart["Properties"]
    assert props["Repository"] == default.config.versions.kuberay_repository
    assert props["Commit"] == KUBERAY_COMMIT and COMMIT_ID.fullmatch(KUBERAY_COMMIT)
    assert (props["Release"], props["Namespace"]) == (KUBERAY_OPERATOR_RELEASE, KUBERAY_NAMESPACE)
    assert KUBERAY_NAMESPACE not in ("default", "kube-system")
    # Every file of the chart, against the project's list for the commit; the chart itself says its version.
    listed = json.loads(props["ChartFileDigests"])
    assert listed == {
        name.removeprefix(KUBERAY_OPERATOR_CHART_PATH + "/"): digest
        for name, digest in sums_for(KUBERAY_COMMIT).items()
    }
    assert {"Chart.yaml", "values.yaml", "templates/deployment.yaml"} <= set(listed)
    assert props["RequirePinnedDigests"] == "true"
    # The operator watches the workload namespace only (its Secrets, not every namespace's).
    assert json.loads(props["Values"]) == {"watchNamespace": [default.config.workloads.namespace]}
    # Same installer (deadlines, pending-release recovery, owner labels) as the HyperPod chart.
    hyperpod = git_charts(default.template)[HYPERPOD_CHART_PATH]
    assert props["ServiceToken"] == hyperpod["Properties"]["ServiceToken"]
    assert resources(default.template, "Custom::AWSCDK-EKS-HelmChart") == {}


def test_the_kuberay_crds_it_installs_are_the_ones_the_manifests_are_validated_against():
    # The chart's crds/ at the commit, by digest, against the CRDs `make test` validates every manifest with
    # (skyrl_hyperpod/validation/crds.py pins their sha256).
    listed = sums_for(KUBERAY_COMMIT)
    assert len(KUBERAY_KINDS) == 3
    for spec in KUBERAY_KINDS.values():
        assert listed[f"{KUBERAY_OPERATOR_CHART_PATH}/crds/{spec.file_name}"] == spec.sha256, spec.file_name


# The logical id of the KubeRay release's CDK HelmChart in the EKS stacks this project deployed before the git
# installer took KubeRay over (synthesized at commit 255e680 of this repository). Keeping it for one deploy is what
# lets CloudFormation drop it without its Delete; another id would be a new resource (a second release install).
LEGACY_KUBERAY_LOGICAL_ID = "KubeRayOperatorC85C2BA7"


def test_retaining_the_legacy_kuberay_release_keeps_cdks_resource_as_it_was_deployed(tmp_path):
    config = validate_config({"helm_installer": {"retain_legacy_kuberay_release": True}})
    template, _ = synth_eks(config, tmp_path)
    [(logical_id, chart)] = resources(template, "Custom::AWSCDK-EKS-HelmChart").items()
    assert logical_id == LEGACY_KUBERAY_LOGICAL_ID
    # Unchanged properties (CloudFormation sends no update), now retained.
    props = chart["Properties"]
    assert (props["Chart"], props["Version"]) == (KUBERAY_OPERATOR_CHART, config.versions.kuberay_operator_chart)
    assert props["Repository"] == KUBERAY_HELM_REPOSITORY == "https://ray-project.github.io/kuberay-helm/"
    assert (props["Release"], props["Namespace"], props["CreateNamespace"]) == (
        KUBERAY_OPERATOR_RELEASE, KUBERAY_NAMESPACE, True
    )  # fmt: skip
    assert props["Timeout"] == f"{LEGACY_KUBERAY_HELM_TIMEOUT.to_seconds()}s" and props.get("Wait", False) is False
    assert json.loads(props["Values"]) == {"watchNamespace": [config.workloads.namespace]}
    assert chart["DeletionPolicy"] == chart["UpdateReplacePolicy"] == "Retain"
    # ... and the git installer does not take the release over in the same deploy.
    assert set(git_charts(template)) == {HYPERPOD_CHART_PATH}
    # Its ServiceToken, aws_eks_v2's kubectl provider, exists for this deploy only (the default has none).
    framework_id = props["ServiceToken"]["Fn::GetAtt"][0]
    assert template["Resources"][framework_id]["Type"] == "AWS::Lambda::Function"
    assert framework_id.startswith("EksClusterKubectlProvider")


# --- HyperPod dependencies and the Ray endpoint operator ----------------------------------------


def test_hyperpod_dependencies_come_from_the_pinned_commit(default):
    versions = default.config.versions
    chart = git_charts(default.template)[HYPERPOD_CHART_PATH]
    props = chart["Properties"]
    assert COMMIT_ID.fullmatch(props["Commit"]) and props["Commit"] == versions.hyperpod_cli_commit
    assert props["Repository"] == versions.hyperpod_cli_repository
    assert props["ChartPath"] == HYPERPOD_CHART_PATH
    # AWS's install guide's release name and namespace.
    assert (props["Release"], props["Namespace"]) == (HYPERPOD_DEPENDENCIES_RELEASE, HYPERPOD_DEPENDENCIES_NAMESPACE)
    assert (HYPERPOD_DEPENDENCIES_RELEASE, HYPERPOD_DEPENDENCIES_NAMESPACE) == ("hyperpod-dependencies", "kube-system")


def test_every_chart_file_is_verified_against_the_projects_list(default):
    chart = git_charts(default.template)[HYPERPOD_CHART_PATH]
    props = chart["Properties"]
    listed = sums_for(props["Commit"])
    assert listed is not None and all(name.startswith(HYPERPOD_CHART_PATH + "/") for name in listed)
    expected = {name.removeprefix(HYPERPOD_CHART_PATH + "/"): digest for name, digest in listed.items()}
    assert json.loads(props["ChartFileDigests"]) == expected and len(expected) == 147
    # ... and the remote sub-charts against the shipped pins, required.
    assert json.loads(props["ArchiveDigests"]) == UPSTREAM_ARCHIVE_SHA256
    assert props["RequirePinnedDigests"] == "true"


def test_a_commit_without_a_file_list_or_a_tarball_pin_is_refused_at_synth(default):
    app = cdk.App()
    stack = cdk.Stack(app, "s")
    commit = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(ConfigError, match=f"no pin for sagemaker-hyperpod-cli-{commit}.tar.gz"):
        HelmChartFromGit(
            stack, "Chart", cluster=None, kubectl_layer=None, awscli_layer=None,
            repository=default.config.versions.hyperpod_cli_repository, commit=commit,
            chart_path=RAY_ENDPOINT_OPERATOR_CHART_PATH, release="r", namespace="n",
        )  # fmt: skip


def test_the_synthesized_dependencies_release_passes_the_chart_check(default):
    # What the custom resource would install (commit and values as synthesized), read back from the
    # template and checked against the chart copy at that commit.
    from skyrl_hyperpod.validation import hyperpod_chart

    chart = git_charts(default.template)[HYPERPOD_CHART_PATH]
    props = chart["Properties"]
    assert props["Commit"] == "b01cf90676553a711ab1a8ac51422adbb09aef6b"  # release v3.9.0
    chart_dir = hyperpod_chart.commit_dir(props["Commit"]) / HYPERPOD_CHART_PATH
    values = rendered_json(props["Values"])
    assert hyperpod_chart.values_path_problems(values, chart_dir) == []
    assert hyperpod_chart.external_plugin_problems(values, chart_dir, default.config) == []
    helm = hyperpod_chart.helm_binary(default.config.eks.kubernetes_version)
    report = hyperpod_chart.ChartReport()
    assert hyperpod_chart.health_agent_problems(values, chart_dir, default.config, helm, report) == []
    assert report.skipped == []


def test_hyperpod_dependencies_run_under_their_own_cluster_admin_entry(default):
    chart = git_charts(default.template)[HYPERPOD_CHART_PATH]
    function_id = chart["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    function = default.template["Resources"][function_id]["Properties"]
    role_id = function["Role"]["Fn::GetAtt"][0]
    [entry_id] = [k for k, v in resources(default.template, "AWS::EKS::AccessEntry").items()
                  if v["Properties"]["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}]  # fmt: skip
    assert entry_id in chart["DependsOn"]
    assert [s["Action"] for s in role_statements(default.template, role_id)] == ["eks:DescribeCluster"]


def test_git_helm_installer_has_its_own_https_only_security_group(default):
    chart = git_charts(default.template)[HYPERPOD_CHART_PATH]
    function = default.template["Resources"][chart["Properties"]["ServiceToken"]["Fn::GetAtt"][0]]["Properties"]
    [group_ref] = function["VpcConfig"]["SecurityGroupIds"]
    group_id = group_ref["Fn::GetAtt"][0]
    group = default.template["Resources"][group_id]["Properties"]
    assert [(r["CidrIp"], r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in group["SecurityGroupEgress"]] == [
        ("0.0.0.0/0", "tcp", 443, 443)
    ]
    assert "SecurityGroupIngress" not in group
    # The private API endpoint (cluster security group) admits it on 443 only, before the first install.
    cluster_id = one(default.template, "AWS::EKS::Cluster")[0]
    [(ingress_id, ingress)] = [
        (k, v["Properties"]) for k, v in resources(default.template, "AWS::EC2::SecurityGroupIngress").items()
        if v["Properties"].get("SourceSecurityGroupId") == {"Fn::GetAtt": [group_id, "GroupId"]}
    ]  # fmt: skip
    assert ingress["GroupId"] == {"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]}
    assert (ingress["IpProtocol"], ingress["FromPort"], ingress["ToPort"]) == ("tcp", 443, 443)
    assert ingress_id in chart["DependsOn"]


def test_git_helm_installer_cannot_keep_cloudformation_waiting(default, variant):
    for synth in (default, variant):
        for chart in git_charts(synth.template).values():
            function_id = chart["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
            function = synth.template["Resources"][function_id]["Properties"]
            # CloudFormation stops waiting soon after the function's own limit, not after an hour.
            service_timeout = chart["Properties"]["ServiceTimeout"]
            assert int(service_timeout) == SERVICE_TIMEOUT.to_seconds()
            assert function["Timeout"] < int(service_timeout) < 3600
            # The handler's recovery of pending releases counts on this limit.
            assert function["Timeout"] == installer_module().FUNCTION_TIMEOUT_S
            # The log group exists (and is declared) before the function first runs.
            log_group_id = function["LoggingConfig"]["LogGroup"]["Ref"]
            assert synth.template["Resources"][log_group_id]["Type"] == "AWS::Logs::LogGroup"
            assert log_group_id in synth.template["Resources"][function_id]["DependsOn"]
            assert log_group_id in chart["DependsOn"]
    [invoke_config] = resources(default.template, "AWS::Lambda::EventInvokeConfig").values()
    assert invoke_config["Properties"]["MaximumRetryAttempts"] == 0


def test_git_helm_installer_logs_are_encrypted_with_a_retained_customer_key(default):
    [function_id] = {
        chart["Properties"]["ServiceToken"]["Fn::GetAtt"][0] for chart in git_charts(default.template).values()
    }
    function = default.template["Resources"][function_id]["Properties"]
    log_group = default.template["Resources"][function["LoggingConfig"]["LogGroup"]["Ref"]]
    key_id = log_group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]
    key = default.template["Resources"][key_id]
    assert (key["Type"], key["Properties"]["EnableKeyRotation"]) == ("AWS::KMS::Key", True)
    # A retained log group outlives the stack; its events are readable only while the key exists.
    assert log_group["DeletionPolicy"] == key["DeletionPolicy"] == "Retain"
    [logs_statement] = [
        s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == "CloudWatchLogsOfThisAccountAndRegion"
    ]
    assert logs_statement["Principal"]["Service"] == {
        "Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}]]
    }


def test_archive_pins_and_mirror_reach_the_installer(default, variant):
    for chart in git_charts(default.template).values():
        assert chart["Properties"]["ArchiveMirror"] == ""
    installer = variant.config.helm_installer
    for chart in git_charts(variant.template).values():
        props = chart["Properties"]
        # The configuration's pins join (and would override) the shipped ones.
        assert json.loads(props["ArchiveDigests"]) == {**UPSTREAM_ARCHIVE_SHA256, **installer.archive_sha256}
        assert props["RequirePinnedDigests"] == "false"
        assert props["ArchiveMirror"] == installer.archive_mirror
    [chart, *_] = git_charts(variant.template).values()
    role_id = variant.template["Resources"][chart["Properties"]["ServiceToken"]["Fn::GetAtt"][0]]["Properties"]["Role"]
    statements = role_statements(variant.template, role_id["Fn::GetAtt"][0])
    [statement] = [s for s in statements if s["Action"] == "s3:GetObject"]
    # Only the mirror's prefix, read-only (the variant's environment is concrete: partition aws).
    assert statement["Resource"] == "arn:aws:s3:::example-helm-mirror/hyperpod/*"


def test_device_plugins_are_pinned_to_the_configured_instance_types(default):
    chart = git_charts(default.template)[HYPERPOD_CHART_PATH]
    values = rendered_json(chart["Properties"]["Values"])
    hyperpod = default.config.hyperpod
    groups = (hyperpod.head_group, hyperpod.worker_group)
    gpu_types = sorted({g.instance_type for g in groups if g.spec.gpus})
    efa_types = sorted({g.instance_type for g in groups if g.spec.efa_interfaces})
    affinity = values["nvidia-device-plugin"]["affinity"]["nodeAffinity"]
    [term] = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    instance_type_in = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": gpu_types}
    assert term["matchExpressions"] == [instance_type_in]
    assert values["aws-efa-k8s-device-plugin"]["supportedInstanceLabels"]["values"] == efa_types
    assert values["health-monitoring-agent"]["region"] == REGION_PLACEHOLDER


def test_a_branch_name_is_refused_at_synth(default):
    # The config validator rejects it first; the construct refuses it too, for direct use.
    with pytest.raises(ConfigError):
        validate_config({"versions": {"hyperpod_cli_commit": "main"}})
    app = cdk.App()
    stack = cdk.Stack(app, "s")
    with pytest.raises(ValueError, match="commit"):
        HelmChartFromGit(
            stack, "Chart", cluster=None, kubectl_layer=None, awscli_layer=None,
            repository=default.config.versions.hyperpod_cli_repository, commit="main",
            chart_path=HYPERPOD_CHART_PATH, release="hyperpod-dependencies", namespace="kube-system",
        )  # fmt: skip


@pytest.mark.parametrize("fixture", ["default", "variant"])
def test_the_ray_endpoint_operator_and_its_spaces_addon_are_never_in_this_stack(fixture, request):
    # They need HyperPod nodes, which do not exist when this stack deploys: stacks/ray_endpoint_stack.py.
    synth = request.getfixturevalue(fixture)
    assert set(git_charts(synth.template)) == {HYPERPOD_CHART_PATH, KUBERAY_OPERATOR_CHART_PATH}
    assert "amazon-sagemaker-spaces" not in addons(synth.template)


# --- checks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["default", "variant"])
def test_cdk_nag_passes_and_cfn_lint_reports_no_errors(fixture, request):
    synth = request.getfixturevalue(fixture)
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    [nag] = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success" and nag["violations"] == []
    assert cfn_lint_errors(synth.template) == []
