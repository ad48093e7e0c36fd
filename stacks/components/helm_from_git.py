"""Install a Helm chart that only exists in a git repository, pinned to a commit.

Some charts (the HyperPod dependencies chart, the HyperPod Ray endpoint operator) are not published
in any Helm repository. `HelmChartFromGit` is a custom resource whose handler downloads the GitHub
tarball of one commit at deploy time, verifies every file of the chart against this project's sha256
list for that commit (skyrl_hyperpod/validation/chart_sums/, sent as `ChartFileDigests`),
assembles the chart as Helm loads it (remote sub-charts downloaded and checked against their pins), and
runs `helm upgrade --install` (no --wait); on delete, `helm uninstall` of a release it alone owns, or a
`helm rollback` that hands it back to the resource that owned it before (a rolled-back takeover). Deadlines,
SIGTERM before SIGKILL, recovery of releases left pending and bounded retries keep a failure from
wedging the stack (git_helm_installer_handler/index.py, and chart_assembly.py beside it, which assembles the chart
and runs every command under a deadline). The handler Lambda (`GitHelmInstaller`) is created once
per cluster and shared by every chart; it reuses the cluster's kubectl and AWS CLI layers, so no
extra layer asset is staged.

The function runs as cluster admin, so what it may install is fixed here, not by the events it receives: each
chart registers the release spec its custom resource sends (`GitHelmInstaller.allow`), and the function's
environment carries them and its cluster's name; the handler refuses any other (docs/security.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from skyrl_hyperpod.config import ConfigError
from skyrl_hyperpod.validation.hyperpod_chart import INSTALLER_DIR, chart_file_digests, installer_module

from .eks_cluster import CLUSTER_ADMIN_POLICY
from .iam_wildcards import acknowledge_iam_wildcards, nag_rule, vpc_lambda_managed_policies
from .log_encryption import LogsKey

# The Lambda's asset: the handler (index.py) and the chart assembly it imports (chart_assembly.py).
RESOURCE_TYPE = "Custom::HelmChartFromGit"
HTTPS = 443
# The handler's recovery of pending releases counts on this limit.
_HANDLER = installer_module()
FUNCTION_TIMEOUT = cdk.Duration.seconds(_HANDLER.FUNCTION_TIMEOUT_S)
# The handler always answers before FUNCTION_TIMEOUT; if it dies anyway (out of memory, crash),
# CloudFormation gives up after this instead of its default hour. Lambda's own retries of the
# event are off (retry_attempts=0), so no second run can answer later.
SERVICE_TIMEOUT = FUNCTION_TIMEOUT.plus(cdk.Duration.minutes(5))
# What CDK gives the log groups it manages for Lambdas (@aws-cdk/aws-lambda:useCdkManagedLogGroup).
LOG_RETENTION = logs.RetentionDays.TWO_YEARS
# EKS cluster names are at most 100 characters (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html).
CLUSTER_NAME_MAX = 100


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
        # Its own group, HTTPS out only: the EKS API, AWS APIs (EKS, S3, STS), GitHub and the chart
        # repositories all speak HTTPS. DNS to the VPC resolver is not filtered by security groups
        # (https://docs.aws.amazon.com/vpc/latest/userguide/vpc-security-groups.html, "Security group basics").
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=cluster.vpc,
            description="Git Helm installer Lambda: HTTPS egress only",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(HTTPS), "EKS API, AWS APIs, GitHub and chart repositories (HTTPS)"
        )
        # The private API endpoint's ENIs carry the EKS-created cluster security group: admit the
        # function there on 443 only.
        self.api_access = ec2.CfnSecurityGroupIngress(
            self,
            "ClusterApiAccess",
            group_id=cluster.cluster_security_group_id,
            source_security_group_id=self.security_group.security_group_id,
            ip_protocol="tcp",
            from_port=HTTPS,
            to_port=HTTPS,
            description="Git Helm installer to the Kubernetes API",
        )
        # Created by CloudFormation before the function's first run (a group Lambda creates on its
        # own is unmanaged and collides with a later declaration: https://github.com/aws/aws-cdk/issues/667).
        # The installs' record outlives the stack; its events stay readable only while the key exists.
        retained = cdk.RemovalPolicy.RETAIN
        self.logs_key = LogsKey(self, "LogsKey", purpose="the git Helm installer", removal_policy=retained).key
        self.log_group = logs.LogGroup(
            self, "Logs", retention=LOG_RETENTION, removal_policy=retained, encryption_key=self.logs_key
        )
        self.function = lambda_.Function(
            self,
            "Handler",
            description=f"helm upgrade --install of git-pinned charts on EKS cluster {cluster.cluster_name}",
            runtime=lambda_.Runtime.determine_latest_python_runtime(self),
            handler="index.handler",
            code=lambda_.Code.from_asset(str(INSTALLER_DIR), exclude=["__pycache__", "*.pyc"]),
            layers=[kubectl_layer, awscli_layer],
            timeout=FUNCTION_TIMEOUT,
            memory_size=1024,
            # A repository tarball plus the chart's downloaded dependencies.
            ephemeral_storage_size=cdk.Size.gibibytes(2),
            # The API endpoint may be private: run next to it; NAT gives the route to GitHub and the
            # chart repositories (or a mirror replaces them: docs/helm-installer.md).
            vpc=cluster.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            security_groups=[self.security_group],
            log_group=self.log_group,
            # A retried event would race the answer CloudFormation already has (or the ServiceTimeout).
            retry_attempts=0,
        )
        self.function.node.add_dependency(self.log_group)
        # What it may act on, from the charts that use it (allow); nothing until one does.
        self.function.add_environment(_HANDLER.CLUSTER_ENV, cluster.cluster_name)
        self.allowed_releases: list[dict[str, Any]] = []
        self.function.add_environment(_HANDLER.ALLOWED_RELEASES_ENV, "[]")
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

    def allow(self, spec: dict[str, Any]) -> None:
        """Let the function install one more release spec (the handler's release_spec of a chart's properties).
        The environment holds them all, so it is rewritten with each; tokens in them (the region) resolve as in
        the chart's own properties."""
        self.allowed_releases.append(spec)
        # Lambda counts every key and value; a token is no shorter here than what it resolves to (the region).
        size = len(_HANDLER.ALLOWED_RELEASES_ENV) + len(json.dumps(self.allowed_releases))
        size += len(_HANDLER.CLUSTER_ENV) + CLUSTER_NAME_MAX
        if size > _HANDLER.ENVIRONMENT_LIMIT_BYTES:
            releases = ", ".join(f"{entry['Namespace']}/{entry['Release']}" for entry in self.allowed_releases)
            raise ConfigError(
                [
                    f"config error: the git Helm installer's allowed releases ({releases}) take {size} bytes of its "
                    f"Lambda environment, over Lambda's {_HANDLER.ENVIRONMENT_LIMIT_BYTES}: shorten their values "
                    "(ray_endpoint_operator, the instance groups' types)"
                ]
            )
        self.function.add_environment(
            _HANDLER.ALLOWED_RELEASES_ENV, cdk.Stack.of(self).to_json_string(self.allowed_releases)
        )

    def allow_reading_mirror(self, mirror: str) -> None:
        """Let the function read the archives of an `s3://bucket/prefix` mirror (https mirrors need nothing)."""
        if not mirror.startswith("s3://"):
            return
        bucket, _, prefix = mirror[len("s3://") :].rstrip("/").partition("/")
        objects = f"{prefix}/*" if prefix else "*"
        self.function.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[
                    cdk.Stack.of(self).format_arn(
                        service="s3", region="", account="", resource=bucket, resource_name=objects
                    )
                ],
            )
        )
        acknowledge_iam_wildcards(
            self.function.role,
            {
                rf"Resource::arn:(?:<AWS::Partition>|aws[a-z-]*):s3:::{re.escape(bucket)}/.*\*": (
                    "Read-only access to the user's Helm archive mirror prefix; "
                    "archive names are resolved at deploy time."
                )
            },
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
        archive_sha256: Mapping[str, str] | None = None,
        require_pinned_digests: bool = True,
        archive_mirror: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # Fail the synth, not the deployment, on a branch name or a non-GitHub URL.
        self.archive_url = _HANDLER.archive_url(repository, commit)
        pins = _HANDLER.validate_digests(dict(archive_sha256 or {}))
        mirror = _HANDLER.validate_mirror(archive_mirror) if archive_mirror else ""
        # The first install is verified too: every file of the chart against this project's list for the
        # commit, or (a commit without a list) GitHub's tarball against a pin the user gives.
        file_digests = chart_file_digests(commit, chart_path) or {}
        source_archive = _HANDLER.source_archive_name(repository, commit)
        if not file_digests and source_archive not in pins:
            raise ConfigError(
                [
                    f"config error: helm_installer.archive_sha256 has no pin for {source_archive}, and this project "
                    f"ships no sha256 list of {chart_path} at commit {commit} (skyrl_hyperpod/validation/"
                    "chart_sums/): add the tarball's sha256 (docs/helm-installer.md)"
                ]
            )
        self.commit = commit
        self.release = release
        self.namespace = namespace
        installer = GitHelmInstaller.of(cluster, kubectl_layer=kubectl_layer, awscli_layer=awscli_layer)
        if mirror:
            installer.allow_reading_mirror(mirror)
        stack = cdk.Stack.of(self)
        # What the resource sends, as objects: the same spec becomes its properties and the installer's permission.
        release_properties: dict[str, Any] = {
            "Repository": repository,
            "Commit": commit,
            "ChartPath": chart_path,
            "Release": release,
            "Namespace": namespace,
            "Values": dict(values or {}),
            "ArchiveDigests": dict(sorted(pins.items())),
            "RequirePinnedDigests": "true" if require_pinned_digests else "false",
            "ArchiveMirror": mirror,
            "ChartFileDigests": file_digests,
        }
        installer.allow(_HANDLER.release_spec(release_properties))
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=installer.function.function_arn,
            resource_type=RESOURCE_TYPE,
            service_timeout=SERVICE_TIMEOUT,
            properties={
                "ClusterName": cluster.cluster_name,
                **release_properties,
                "Values": stack.to_json_string(release_properties["Values"]),
                "ArchiveDigests": stack.to_json_string(release_properties["ArchiveDigests"]),
                # Compact: the list is part of the template (a chart change shows in `cdk diff`).
                "ChartFileDigests": json.dumps(file_digests, separators=(",", ":")),
            },
        )
        # Authorized, reachable and logged before the first install; on delete, uninstalled while
        # still authorized and reachable.
        for prerequisite in (installer.access_entry, installer.api_access, installer.log_group):
            self.resource.node.add_dependency(prerequisite)
