"""EKS cluster, add-ons, workload identities and the operators HyperPod and the Ray workloads need.

Everything here deploys before the HyperPod cluster (platform.py makes the HyperPod stack depend on
this one): the HyperPod dependencies chart must exist before HyperPod creates nodes, and no Helm
release here waits for pods, because no node exists yet.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.platform import HYPERPOD_CHART_PATH
from skyrl_hyperpod.constants import KUBERAY_NAMESPACE, KUBERAY_OPERATOR_CHART, KUBERAY_OPERATOR_RELEASE
from skyrl_hyperpod.helm_values import hyperpod_dependencies_values
from skyrl_hyperpod.outputs import OutputKey

from .components.eks_addons import EksAddons
from .components.eks_cluster import EksCluster
from .components.helm_from_git import HelmChartFromGit
from .components.workload_identity import WorkloadIdentities

# Release name and namespace AWS's HyperPod documentation and console templates use, so a later
# manual `helm upgrade dependencies ...` targets this release instead of creating a second one.
HYPERPOD_DEPENDENCIES_RELEASE = "dependencies"
HYPERPOD_DEPENDENCIES_NAMESPACE = "kube-system"
KUBERAY_CHART = KUBERAY_OPERATOR_CHART
KUBERAY_RELEASE = KUBERAY_OPERATOR_RELEASE


class EksStack(cdk.Stack):
    """Exposes `.cluster` (aws_eks_v2.Cluster) and `.hyperpod_dependencies` for the stacks after it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ProjectConfig,
        vpc: ec2.IVpc,
        hyperpod_security_group: ec2.ISecurityGroup,
        artifacts_bucket: s3.IBucket,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        missing = [name for name, ref in (("vpc", vpc), ("artifacts_bucket", artifacts_bucket)) if ref is None]
        if missing:
            raise ValueError(f"EksStack needs {', '.join(missing)} from the network/storage stacks (got None)")
        region = config.env.region or cdk.Aws.REGION
        versions = config.versions

        self.eks = EksCluster(self, "Eks", config=config, vpc=vpc, control_plane_security_group=hyperpod_security_group)
        self.cluster: eks.Cluster = self.eks.cluster

        self.addons = EksAddons(self, "Addons", cluster=self.cluster, versions=versions)

        self.workload_identities = WorkloadIdentities(
            self,
            "WorkloadIdentities",
            cluster=self.cluster,
            workloads=config.workloads,
            artifacts_bucket=artifacts_bucket,
        )

        self.kuberay_operator = eks.HelmChart(
            self,
            "KubeRayOperator",
            cluster=self.cluster,
            repository=versions.kuberay_helm_repository,
            chart=KUBERAY_CHART,
            version=versions.kuberay_operator_chart,
            release=KUBERAY_RELEASE,
            namespace=KUBERAY_NAMESPACE,
            create_namespace=True,
            # The operator pod cannot schedule before HyperPod nodes join.
            wait=False,
        )

        # One installer set-up for both git charts; each chart has its own commit pin.
        git_chart_options = dict(
            cluster=self.cluster,
            kubectl_layer=self.eks.kubectl_layer,
            awscli_layer=self.eks.awscli_layer,
            repository=versions.hyperpod_cli_repository,
            archive_sha256=config.helm_installer.archive_sha256,
            require_pinned_digests=config.helm_installer.require_pinned_digests,
            archive_mirror=config.helm_installer.archive_mirror,
        )
        self.hyperpod_dependencies = HelmChartFromGit(
            self,
            "HyperPodDependencies",
            **git_chart_options,
            commit=versions.hyperpod_cli_commit,
            chart_path=HYPERPOD_CHART_PATH,
            release=HYPERPOD_DEPENDENCIES_RELEASE,
            namespace=HYPERPOD_DEPENDENCIES_NAMESPACE,
            values=hyperpod_dependencies_values(config, region),
        )

        # The Ray endpoint operator and its Spaces add-on need nodes: stacks/ray_endpoint_stack.py, after HyperPod.

        identities = self.workload_identities
        for key, value, description in (
            (OutputKey.EKS_CLUSTER_NAME, self.cluster.cluster_name, "EKS cluster HyperPod orchestrates"),
            (OutputKey.SERVING_ROLE_ARN, identities.serving_role.role_arn, "Pod Identity role of the serving pods"),
            (OutputKey.TRAINING_ROLE_ARN, identities.training_role.role_arn, "Pod Identity role of the training pods"),
        ):
            cdk.CfnOutput(self, key.value, value=value, description=description)
