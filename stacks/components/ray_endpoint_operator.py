"""The HyperPod Ray endpoint operator: the SageMaker Spaces add-on it depends on, the Pod Identity role its
JWT rotator signs with when a KMS key is configured, and the operator's Helm release.

Installed by the AWS guide's recipe
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ray-endpoint-operator.html): the Spaces
add-on Active with web browser access, then `helm upgrade --install hyperpod-ray-endpoint-operator` into the
operator's namespace with `region`, `domain`, `manager.enableEndpointsByDefault` and optionally `kmsKeyArn`;
with a KMS key, the rotator's service account gets a role allowed `kms:GenerateDataKey` on that key only.
This construct belongs in a stack that deploys after the HyperPod cluster (compose.py): the add-on turns
Active only once nodes run its pods.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.plumbing.upstream import RAY_ENDPOINT_OPERATOR_CHART_PATH
from skyrl_hyperpod.values.helm_values import archive_pins, ray_endpoint_operator_values

from .eks_addons import managed_addon
from .helm_from_git import HelmChartFromGit
from .workload_identity import pod_identity_role

# The release name of AWS's install command. The chart names its resources `<release>-<suffix>` when the
# release contains the chart's name (its `fullname` helper), so this also fixes the rotator's service account.
RAY_ENDPOINT_OPERATOR_RELEASE = "hyperpod-ray-endpoint-operator"
SPACES_ADDON = "amazon-sagemaker-spaces"


def jwt_rotator_service_account(release: str = RAY_ENDPOINT_OPERATOR_RELEASE) -> str:
    """The service account of the chart's JWT rotator (CronJob and post-install Job), which AWS's guide
    associates with the KMS role: `hyperpod-ray-endpoint-operator-jwt-rotator` for AWS's release name."""
    return f"{release}-jwt-rotator"


class RayEndpointOperator(Construct):
    """Spaces add-on -> (KMS role) -> operator chart, in that order."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ProjectConfig,
        cluster: eks.Cluster,
        kubectl_layer: lambda_.ILayerVersion,
        awscli_layer: lambda_.ILayerVersion,
    ) -> None:
        super().__init__(scope, construct_id)
        operator = config.ray_endpoint_operator
        if not (operator.enabled and operator.commit):  # enabled requires a commit (RayEndpointOperatorConfig)
            raise ValueError("RayEndpointOperator needs ray_endpoint_operator.enabled and its commit")
        stack = cdk.Stack.of(self)
        # Web browser access is turned on by the configuration values the user gives
        # (docs/ray-endpoint-operator.md). No version knob: EKS picks the default for the cluster version.
        self.spaces_addon = managed_addon(
            self,
            "SageMakerSpaces",
            cluster=cluster,
            name=SPACES_ADDON,
            version=None,
            configuration_values=stack.to_json_string(dict(operator.spaces_addon_configuration)),
        )

        self.jwt_rotator_role: iam.Role | None = None
        self.jwt_rotator_association: eks_l1.CfnPodIdentityAssociation | None = None
        if operator.kms_key_arn:
            service_account = jwt_rotator_service_account()
            self.jwt_rotator_role = pod_identity_role(
                self,
                "JwtRotatorRole",
                cluster=cluster,
                namespace=operator.namespace,
                service_account=service_account,
                description="HyperPod Ray endpoint operator JWT rotator: signing key material from one KMS key",
            )
            self.jwt_rotator_role.add_to_policy(
                iam.PolicyStatement(actions=["kms:GenerateDataKey"], resources=[operator.kms_key_arn])
            )
            self.jwt_rotator_association = eks_l1.CfnPodIdentityAssociation(
                self,
                "JwtRotatorAssociation",
                cluster_name=cluster.cluster_name,
                namespace=operator.namespace,
                service_account=service_account,
                role_arn=self.jwt_rotator_role.role_arn,
            )

        installer = config.helm_installer
        self.chart = HelmChartFromGit(
            self,
            "Chart",
            cluster=cluster,
            kubectl_layer=kubectl_layer,
            awscli_layer=awscli_layer,
            repository=config.versions.hyperpod_cli_repository,
            commit=operator.commit,
            chart_path=RAY_ENDPOINT_OPERATOR_CHART_PATH,
            release=RAY_ENDPOINT_OPERATOR_RELEASE,
            namespace=operator.namespace,
            values=ray_endpoint_operator_values(config, config.env.region or cdk.Aws.REGION),
            archive_sha256=archive_pins(config),
            require_pinned_digests=installer.require_pinned_digests,
            archive_mirror=installer.archive_mirror,
        )
        self.chart.node.add_dependency(self.spaces_addon)
        # The chart's post-install hook runs the rotator at once: its credentials must be there first.
        if self.jwt_rotator_association is not None:
            self.chart.node.add_dependency(self.jwt_rotator_association)
