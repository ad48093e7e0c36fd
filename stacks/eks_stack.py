"""EKS cluster, add-ons, workload identities and the operators HyperPod and the Ray workloads need.

Everything here deploys before the HyperPod cluster (compose.py makes the HyperPod stack depend on
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
from skyrl_hyperpod.config.names import KUBERAY_NAMESPACE, KUBERAY_OPERATOR_RELEASE
from skyrl_hyperpod.plumbing.upstream import (
    HYPERPOD_CHART_PATH,
    KUBERAY_COMMIT,
    KUBERAY_HELM_REPOSITORY,
    KUBERAY_OPERATOR_CHART,
    KUBERAY_OPERATOR_CHART_PATH,
)
from skyrl_hyperpod.values.helm_values import (
    HYPERPOD_DEPENDENCIES_NAMESPACE,
    HYPERPOD_DEPENDENCIES_RELEASE,
    archive_pins,
    hyperpod_dependencies_values,
)
from skyrl_hyperpod.values.stack_outputs import OutputKey

from .components.eks_addons import EksAddons
from .components.eks_cluster import EksCluster
from .components.helm_from_git import HelmChartFromGit
from .components.workload_identity import WorkloadIdentities

# The Helm --timeout the legacy KubeRay resource was declared with (unchanged, so that keeping it sends no update).
LEGACY_KUBERAY_HELM_TIMEOUT = cdk.Duration.minutes(10)


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
        mlflow_app_arn: str | None = None,
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
            mlflow_app_arn=mlflow_app_arn,
        )

        git_chart_options = dict(
            cluster=self.cluster,
            kubectl_layer=self.eks.kubectl_layer,
            awscli_layer=self.eks.awscli_layer,
            archive_sha256=archive_pins(config),
            require_pinned_digests=config.helm_installer.require_pinned_digests,
            archive_mirror=config.helm_installer.archive_mirror,
        )
        self.kuberay_operator = self._kuberay_operator(config, git_chart_options)
        self.hyperpod_dependencies = HelmChartFromGit(
            self,
            "HyperPodDependencies",
            **git_chart_options,
            repository=versions.hyperpod_cli_repository,
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

    def _kuberay_operator(self, config: ProjectConfig, git_chart_options: dict[str, Any]) -> Construct:
        """The KubeRay operator's release, from the chart at the release tag's commit, every file checked.

        The operator watches (and caches Secrets, Pods, Services of) the workload namespace only, not every
        namespace: kuberay-operator chart v1.7.0 values.yaml `watchNamespace` -> --watch-namespace
        (ray-operator/main.go restricts the manager's cache to it). `singleNamespaceInstall` would also turn its
        ClusterRole into a Role, but that Role lives in the workload namespace, which the cdk8s charts create after
        this stack.
        """
        values = {"watchNamespace": [config.workloads.namespace]}
        if config.helm_installer.retain_legacy_kuberay_release:
            return self._legacy_kuberay_operator(config, values)
        return HelmChartFromGit(
            self,
            "KubeRayOperatorFromGit",
            **git_chart_options,
            repository=config.versions.kuberay_repository,
            commit=KUBERAY_COMMIT,
            chart_path=KUBERAY_OPERATOR_CHART_PATH,
            release=KUBERAY_OPERATOR_RELEASE,
            namespace=KUBERAY_NAMESPACE,
            values=values,
        )

    def _legacy_kuberay_operator(self, config: ProjectConfig, values: dict[str, Any]) -> eks.HelmChart:
        """CDK's HelmChart exactly as this project declared it before the git installer (same id, same
        properties: CloudFormation sees no change to send its handler), retained: when the next deploy removes
        it, CloudFormation drops it without its Delete, which would `helm uninstall` the release the git
        installer has just taken over (docs/helm-installer.md, "Moving the KubeRay release")."""
        chart = eks.HelmChart(
            self,
            "KubeRayOperator",
            cluster=self.cluster,
            repository=KUBERAY_HELM_REPOSITORY,
            chart=KUBERAY_OPERATOR_CHART,
            version=config.versions.kuberay_operator_chart,
            release=KUBERAY_OPERATOR_RELEASE,
            namespace=KUBERAY_NAMESPACE,
            create_namespace=True,
            wait=False,
            timeout=LEGACY_KUBERAY_HELM_TIMEOUT,
            values=values,
        )
        chart.node.find_child("Resource").apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        return chart
