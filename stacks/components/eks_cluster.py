"""The EKS control plane that HyperPod orchestrates: no managed capacity, private API, KMS-encrypted secrets.

HyperPod brings its own nodes, so the cluster gets neither Auto Mode nor a node group. The kubectl and
AWS CLI layers are created once here (the 36 MB kubectl layer is staged once per synth) for the git Helm
installer (helm_from_git.py), which installs every release of the stack.

No kubectl provider: aws_eks_v2's handler applies whatever manifest or chart an event names, under a
cluster-admin access entry of its role, and nothing here can narrow what it accepts, so whoever may invoke it
would be cluster admin. It exists only while `helm_installer.retain_legacy_kuberay_release` keeps the CDK
HelmChart of deployments that predate the git installer (that resource's ServiceToken is the provider's).
"""

from __future__ import annotations

import importlib
import json

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk.lambda_layer_awscli import AwsCliLayer
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.eks import SUPPORTED_KUBERNETES_VERSIONS

from .iam_wildcards import managed_policy_finding, nag_rule, vpc_lambda_managed_policies

# The one place that maps a Kubernetes version to the kubectl/helm Lambda layer matching it
# (PyPI aws-cdk.lambda-layer-kubectl-vNN). Modules are imported lazily: each one loads a 36 MB
# jsii bundle, so only the configured version's layer is ever loaded.
KUBECTL_LAYERS: dict[str, tuple[str, str]] = {
    "1.33": ("aws_cdk.lambda_layer_kubectl_v33", "KubectlV33Layer"),
    "1.34": ("aws_cdk.lambda_layer_kubectl_v34", "KubectlV34Layer"),
    "1.35": ("aws_cdk.lambda_layer_kubectl_v35", "KubectlV35Layer"),
}
if set(KUBECTL_LAYERS) != set(SUPPORTED_KUBERNETES_VERSIONS):  # pragma: no cover - guards a config change
    raise RuntimeError("KUBECTL_LAYERS must cover exactly SUPPORTED_KUBERNETES_VERSIONS")

_LOG_TYPES = {
    "api": eks.ClusterLoggingTypes.API,
    "audit": eks.ClusterLoggingTypes.AUDIT,
    "authenticator": eks.ClusterLoggingTypes.AUTHENTICATOR,
    "controllerManager": eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    "scheduler": eks.ClusterLoggingTypes.SCHEDULER,
}

CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"


def kubectl_layer_class(kubernetes_version: str) -> type:
    """The KubectlVNNLayer class for a Kubernetes version."""
    try:
        module_name, class_name = KUBECTL_LAYERS[kubernetes_version]
    except KeyError:
        raise ValueError(
            f"no kubectl layer for Kubernetes {kubernetes_version}; supported: {', '.join(sorted(KUBECTL_LAYERS))}"
        ) from None
    return getattr(importlib.import_module(module_name), class_name)


def endpoint_access(public_access_cidrs: list[str]) -> eks.EndpointAccess:
    """Private unless the user lists CIDRs; then public for those CIDRs only (private stays on)."""
    if not public_access_cidrs:
        return eks.EndpointAccess.PRIVATE
    return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_access_cidrs)


class EksCluster(Construct):
    """EKS cluster for HyperPod. Exposes `.cluster`, the shared `.kubectl_layer` and `.awscli_layer`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ProjectConfig,
        vpc: ec2.IVpc,
        control_plane_security_group: ec2.ISecurityGroup | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        eks_config = config.eks
        self.cluster_log_types = list(eks_config.control_plane_log_types)
        self.public_endpoint = eks_config.endpoint_public

        self.secrets_key = kms.Key(
            self,
            "SecretsKey",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {config.names.eks_cluster}",
            enable_key_rotation=True,
            # The key only protects etcd of this cluster; once the cluster is gone nothing needs it.
            # Deletion is scheduled (30-day pending window), so an accidental destroy stays recoverable.
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        layer_class = kubectl_layer_class(eks_config.kubernetes_version)
        self.kubectl_layer: lambda_.ILayerVersion = layer_class(self, "KubectlLayer")
        # Created here (not inside a kubectl provider) for the Git Helm installer.
        self.awscli_layer: lambda_.ILayerVersion = AwsCliLayer(self, "AwsCliLayer")
        # Only the legacy KubeRay HelmChart needs aws_eks_v2's kubectl provider (module docstring).
        kubectl_provider_options = (
            eks.KubectlProviderOptions(kubectl_layer=self.kubectl_layer, awscli_layer=self.awscli_layer)
            if config.helm_installer.retain_legacy_kuberay_release
            else None
        )

        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=config.names.eks_cluster,
            version=eks.KubernetesVersion.of(eks_config.kubernetes_version),
            # HyperPod provides every node: no Auto Mode, no managed node group.
            default_capacity=0,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            vpc=vpc,
            # The HyperPod nodes' security group (self-referencing, all traffic) also fronts the
            # control-plane ENIs, as AWS's HyperPod templates do: nodes reach the private API and
            # the API server reaches kubelets and webhooks without extra rules.
            security_group=control_plane_security_group,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            endpoint_access=endpoint_access(eks_config.public_access_cidrs),
            cluster_logging=[_LOG_TYPES[name] for name in eks_config.control_plane_log_types],
            secrets_encryption_key=self.secrets_key,
            # Admin access goes only to the principals the user lists (access entries below), not
            # to whichever CloudFormation role happened to create the cluster.
            bootstrap_cluster_creator_admin_permissions=False,
            output_config_command=False,
            kubectl_provider_options=kubectl_provider_options,
        )
        # Read by the HyperPod cluster's create-only Orchestrator: a strong reference (export) makes CloudFormation
        # refuse a change that replaces this cluster under it (docs/review-gate.md, "Cross-stack references").
        cdk.CrossStackReferences.of(self.cluster).produce(cdk.ReferenceStrength.STRONG)
        # eks_v2 always uses authentication mode API, which HyperPod requires (API or API_AND_CONFIG_MAP).

        for index, principal_arn in enumerate(eks_config.admin_principal_arns):
            eks.AccessEntry(
                self,
                f"AdminAccess{index}",
                cluster=self.cluster,
                principal=principal_arn,
                access_policies=[
                    eks.AccessPolicy.from_access_policy_name(
                        CLUSTER_ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER
                    )
                ],
            )

        self._acknowledge_cdk_managed_findings()

    def _acknowledge_cdk_managed_findings(self) -> None:
        """cdk-nag findings on the IAM roles and Lambdas that aws_eks_v2 itself creates and owns."""
        cdk.Validations.of(self.cluster.role).acknowledge(
            cdk.Acknowledgment(
                id=managed_policy_finding("AmazonEKSClusterPolicy"),
                reason="EKS service role: AmazonEKSClusterPolicy is the policy EKS documents for the control plane.",
            )
        )
        provider = self.cluster.kubectl_provider
        if provider is not None:
            self._acknowledge_kubectl_provider(provider)
        missing_log_types = sorted(set(_LOG_TYPES) - set(self.cluster_log_types))
        if missing_log_types:
            cdk.Validations.of(self.cluster).acknowledge(
                cdk.Acknowledgment(
                    id=nag_rule("EKS2"),
                    reason=(
                        "Control-plane log types are the user's choice (eks.control_plane_log_types); "
                        f"{', '.join(missing_log_types)} are off to limit CloudWatch cost; enable them in the config."
                    ),
                )
            )
        if self.public_endpoint:
            cdk.Validations.of(self.cluster).acknowledge(
                cdk.Acknowledgment(
                    id=nag_rule("EKS1"),
                    reason="The public endpoint is opt-in and restricted to the CIDRs in eks.public_access_cidrs.",
                )
            )

    def _acknowledge_kubectl_provider(self, provider: eks.KubectlProvider) -> None:
        """cdk-nag findings on aws_eks_v2's kubectl provider (only while the legacy KubeRay release is retained)."""
        stack = cdk.Stack.of(self)
        handler = provider.node.find_child("Handler")
        handler_logical_id = stack.resolve(stack.get_logical_id(handler.node.default_child))
        ecr_public_condition = stack.resolve(stack.get_logical_id(handler.node.find_child("HasEcrPublic")))
        ecr_public_policy_name = "AmazonElasticContainerRegistryPublicReadOnly"
        ecr_public_policy = {
            "Fn::If": [
                ecr_public_condition,
                {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":iam::aws:policy/{ecr_public_policy_name}"]]},
                {"Ref": "AWS::NoValue"},
            ]
        }
        ecr_public_finding = nag_rule(f"IAM4[Policy::{json.dumps(ecr_public_policy, separators=(',', ':'))}]")
        # Applies to the kubectl handler and its custom-resource framework Lambda, both built by
        # aws_eks_v2.KubectlProvider with fixed policies this project cannot change.
        cdk.Validations.of(provider).acknowledge(
            *vpc_lambda_managed_policies("CDK kubectl provider Lambdas"),
            cdk.Acknowledgment(
                id=managed_policy_finding("AmazonEC2ContainerRegistryReadOnly"),
                reason="Added by aws_eks_v2 to the kubectl handler so Helm can pull OCI charts from ECR; read-only.",
            ),
            cdk.Acknowledgment(
                id=ecr_public_finding,
                reason="Added by aws_eks_v2 (aws partition only) for Helm OCI charts on ECR Public; read-only.",
            ),
            cdk.Acknowledgment(
                id=nag_rule(f"IAM5[Resource::<{handler_logical_id}.Arn>:*]"),
                reason="The custom-resource framework may invoke any version of the kubectl handler function only.",
            ),
            cdk.Acknowledgment(
                id=nag_rule("L1"),
                reason=(
                    "aws_eks_v2 picks the kubectl handler runtime (determineLatestPythonRuntime: python3.13), "
                    "the version its AWS CLI layer is built and tested against."
                ),
            ),
        )
