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
from skyrl_hyperpod.config.platform import HYPERPOD_CHART_PATH
from skyrl_hyperpod.helm_values import (
    HYPERPOD_DEPENDENCIES_NAMESPACE,
    HYPERPOD_DEPENDENCIES_RELEASE,
    archive_pins,
    hyperpod_dependencies_values,
)
from skyrl_hyperpod.stack_outputs import OutputKey
from skyrl_hyperpod.upstream import KUBERAY_OPERATOR_CHART

from .components.eks_addons import EksAddons
from .components.eks_cluster import EksCluster
from .components.helm_from_git import HelmChartFromGit
from .components.workload_identity import WorkloadIdentities

# Helm's --timeout for the KubeRay release, inside the kubectl handler's 15-minute Lambda limit (CDK's
# HelmChart accepts at most 15 minutes): Helm stops by itself and records the release as failed, instead of
# being killed with it left pending-install/pending-upgrade.
KUBERAY_HELM_TIMEOUT = cdk.Duration.minutes(10)


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
            chart=KUBERAY_OPERATOR_CHART,
            version=versions.kuberay_operator_chart,
            release=KUBERAY_OPERATOR_RELEASE,
            namespace=KUBERAY_NAMESPACE,
            create_namespace=True,
            # The operator pod cannot schedule before HyperPod nodes join. So no atomic install either: Helm 4's
            # --atomic (= --rollback-on-failure) waits for the operator to be ready (helm/helm v4.1.4
            # pkg/action/install.go), which it cannot be until then; it would roll back every first deploy.
            wait=False,
            timeout=KUBERAY_HELM_TIMEOUT,
            # The operator watches (and caches Secrets, Pods, Services of) the workload namespace only, not every
            # namespace: kuberay-operator chart v1.7.0 values.yaml `watchNamespace` -> --watch-namespace
            # (ray-operator/main.go restricts the manager's cache to it). `singleNamespaceInstall` would also turn
            # its ClusterRole into a Role, but that Role lives in the workload namespace, which the cdk8s charts
            # create after this stack.
            values={"watchNamespace": [config.workloads.namespace]},
        )

        git_chart_options = dict(
            cluster=self.cluster,
            kubectl_layer=self.eks.kubectl_layer,
            awscli_layer=self.eks.awscli_layer,
            repository=versions.hyperpod_cli_repository,
            archive_sha256=archive_pins(config),
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
