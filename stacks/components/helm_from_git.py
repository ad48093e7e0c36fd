"""Install a Helm chart that only exists in a git repository, pinned to a commit.

Some charts (the HyperPod dependencies chart, the HyperPod Ray endpoint operator) are not published
in any Helm repository. `HelmChartFromGit` is a custom resource whose handler downloads the GitHub
tarball of one commit at deploy time, runs `helm dependency update` and `helm upgrade --install`
(no --wait), and `helm uninstall` on delete. The handler Lambda (`GitHelmInstaller`) is created once
per cluster and shared by every chart; it reuses the cluster's kubectl and AWS CLI layers, so no
extra layer asset is staged.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .eks_cluster import CLUSTER_ADMIN_POLICY
from .iam_wildcards import nag_rule, vpc_lambda_managed_policies

HANDLER_DIR = Path(__file__).with_name("helm_from_git")
RESOURCE_TYPE = "Custom::HelmChartFromGit"


def load_handler() -> ModuleType:
    """The Lambda handler module, for its pure helpers (validation at synth time, unit tests)."""
    spec = importlib.util.spec_from_file_location("helm_from_git_handler", HANDLER_DIR / "index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_HANDLER = load_handler()


class GitHelmInstaller(Construct):
    """The Lambda behind every HelmChartFromGit of one cluster, with its own EKS access entry."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        kubectl_layer: lambda_.ILayerVersion,
        awscli_layer: lambda_.ILayerVersion,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = lambda_.Function(
            self,
            "Handler",
            description=f"helm upgrade --install of git-pinned charts on EKS cluster {cluster.cluster_name}",
            runtime=lambda_.Runtime.determine_latest_python_runtime(self),
            handler="index.handler",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            layers=[kubectl_layer, awscli_layer],
            timeout=cdk.Duration.minutes(15),
            memory_size=1024,
            # A repository tarball plus the chart's downloaded dependencies.
            ephemeral_storage_size=cdk.Size.gibibytes(2),
            # The API endpoint may be private: run next to it, in the cluster's security group
            # (which admits its own members); NAT gives the route to GitHub and the chart repositories.
            vpc=cluster.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            security_groups=[cluster.cluster_security_group],
        )
        role = self.function.role
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=[cluster.cluster_arn])
        )
        # The charts create CRDs, ClusterRoles/Bindings, namespaces and kube-system DaemonSets.
        # Kubernetes forbids granting RBAC permissions one does not hold, so anything below
        # cluster-admin cannot install them; the entry is limited to this function's own role.
        self.access_entry = eks.AccessEntry(
            self,
            "ClusterAccess",
            cluster=cluster,
            principal=role.role_arn,
            access_policies=[
                eks.AccessPolicy.from_access_policy_name(
                    CLUSTER_ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER
                )
            ],
        )
        cdk.Validations.of(role).acknowledge(*vpc_lambda_managed_policies("Git Helm installer"))
        cdk.Validations.of(self.function).acknowledge(
            cdk.Acknowledgment(
                id=nag_rule("L1"),
                reason=(
                    "Same runtime aws_eks_v2 gives its kubectl handler (determineLatestPythonRuntime: python3.13), "
                    "the version the shared AWS CLI layer is built and tested against."
                ),
            )
        )

    @classmethod
    def of(
        cls, cluster: eks.Cluster, *, kubectl_layer: lambda_.ILayerVersion, awscli_layer: lambda_.ILayerVersion
    ) -> GitHelmInstaller:
        """The installer of `cluster`, created on first use in the cluster's stack."""
        stack = cdk.Stack.of(cluster)
        construct_id = f"GitHelmInstaller{cluster.node.id}"
        existing = stack.node.try_find_child(construct_id)
        if isinstance(existing, GitHelmInstaller):
            return existing
        return cls(stack, construct_id, cluster=cluster, kubectl_layer=kubectl_layer, awscli_layer=awscli_layer)


class HelmChartFromGit(Construct):
    """A Helm release of `chart_path` at `commit` of a GitHub `repository`, in `namespace`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        kubectl_layer: lambda_.ILayerVersion,
        awscli_layer: lambda_.ILayerVersion,
        repository: str,
        commit: str,
        chart_path: str,
        release: str,
        namespace: str,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # Fail the synth, not the deployment, on a branch name or a non-GitHub URL.
        self.archive_url = _HANDLER.archive_url(repository, commit)
        self.commit = commit
        self.release = release
        self.namespace = namespace
        installer = GitHelmInstaller.of(cluster, kubectl_layer=kubectl_layer, awscli_layer=awscli_layer)
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=installer.function.function_arn,
            resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": cluster.cluster_name,
                "Repository": repository,
                "Commit": commit,
                "ChartPath": chart_path,
                "Release": release,
                "Namespace": namespace,
                "Values": cdk.Stack.of(self).to_json_string(dict(values or {})),
            },
        )
        # Authorized before the first install; on delete, uninstalled while still authorized.
        self.resource.node.add_dependency(installer.access_entry)
