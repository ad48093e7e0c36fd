"""HyperPod observability: Amazon Managed Prometheus, the HyperPod observability EKS add-on with
its Pod Identity role, and an optional Amazon Managed Grafana workspace."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_aps as aps
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from constructs import Construct

from skyrl_hyperpod.config.platform import ObservabilityConfig
from skyrl_hyperpod.constants import HYPERPOD_OBSERVABILITY_NAMESPACE

from .iam_wildcards import acknowledge_iam_wildcards, arn_pattern
from .workload_identity import pod_identity_role

ADDON_NAME = "amazon-sagemaker-hyperpod-observability"
# The add-on installs its collector in this namespace under this service account. The Pod Identity
# association names only the service account (the add-on fixes the namespace); the collector role's
# trust policy pins both.
ADDON_NAMESPACE = HYPERPOD_OBSERVABILITY_NAMESPACE
COLLECTOR_SERVICE_ACCOUNT = "hyperpod-observability-operator-otel-collector"
# HyperPod writes cluster and node logs under /aws/sagemaker/Clusters/<cluster name>/<cluster id>.
HYPERPOD_LOG_GROUP_PATTERN = "/aws/sagemaker/Clusters/*"

# Metric groups that offer BASIC and ADVANCED: they follow `metrics_level`.
LEVELLED_METRICS = ("trainingMetrics", "clusterMetrics", "nodeMetrics", "acceleratedComputeMetrics")
# Metric groups that are either off or ADVANCED: collected only when `metrics_level` is Advanced.
ADVANCED_ONLY_METRICS = ("taskGovernanceMetrics", "scalingMetrics", "networkMetrics")


def addon_configuration(
    observability: ObservabilityConfig,
    *,
    prometheus_endpoint: str,
    prometheus_arn: str,
    grafana_workspace: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The add-on's configuration values (before JSON encoding), derived from the config."""
    level = observability.metrics_level.upper()
    interval = observability.scrape_interval_seconds

    def metrics(metric_level: str) -> dict[str, Any]:
        return {"level": metric_level, "scrapeInterval": interval}

    provider = {name: metrics(level) for name in LEVELLED_METRICS}
    provider.update(
        {name: metrics("ADVANCED" if level == "ADVANCED" else "DISABLED") for name in ADVANCED_ONLY_METRICS}
    )
    # Inference endpoints are not this platform's focus: basic request metrics suffice.
    provider["inferenceMetrics"] = metrics("BASIC")
    # Ray's own metrics (tasks, actors, object store) come only at the ADVANCED level, and every
    # workload here is a Ray job or service.
    provider["rayMetrics"] = metrics("ADVANCED")

    configuration: dict[str, Any] = {
        "ampWorkspace": {"prometheusEndpoint": prometheus_endpoint, "arn": prometheus_arn},
        "metricsProvider": provider,
        "logging": {"enabled": observability.logging_enabled},
    }
    if grafana_workspace is not None:
        name, arn = grafana_workspace
        configuration["amgWorkspace"] = {"workspaceName": name, "arn": arn}
    return configuration


class HyperPodObservability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name_prefix: str,
        observability: ObservabilityConfig,
        eks_cluster: eks.ICluster,
        addon_version: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)

        self.prometheus = aps.CfnWorkspace(self, "Prometheus", alias=f"{name_prefix}-hyperpod")
        # Metrics history is data: keep it when the stack goes away (README: teardown).
        self.prometheus.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        # Built like the add-on's own templates do: no trailing slash, unlike attr_prometheus_endpoint.
        prometheus_endpoint = (
            f"https://aps-workspaces.{stack.region}.{stack.url_suffix}/workspaces/{self.prometheus.attr_workspace_id}"
        )

        self.collector_role = self._collector_role(eks_cluster)

        grafana_workspace = None
        self.grafana: grafana.CfnWorkspace | None = None
        if observability.grafana:
            self.grafana = self._grafana_workspace(name_prefix)
            grafana_workspace = (
                f"{name_prefix}-hyperpod",
                stack.format_arn(service="grafana", resource="/workspaces", resource_name=self.grafana.attr_id),
            )

        self.addon = eks_l1.CfnAddon(
            self,
            "Addon",
            addon_name=ADDON_NAME,
            addon_version=addon_version,
            cluster_name=eks_cluster.cluster_name,
            configuration_values=stack.to_json_string(
                addon_configuration(
                    observability,
                    prometheus_endpoint=prometheus_endpoint,
                    prometheus_arn=self.prometheus.attr_arn,
                    grafana_workspace=grafana_workspace,
                )
            ),
            pod_identity_associations=[
                eks_l1.CfnAddon.PodIdentityAssociationProperty(
                    role_arn=self.collector_role.role_arn, service_account=COLLECTOR_SERVICE_ACCOUNT
                )
            ],
            # The add-on owns its Kubernetes objects: take them over if a previous install left some.
            resolve_conflicts="OVERWRITE",
        )

    def _collector_role(self, eks_cluster: eks.ICluster) -> iam.Role:
        """Role of the OpenTelemetry collector, through EKS Pod Identity, for its service account only."""
        stack = cdk.Stack.of(self)
        log_groups = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=HYPERPOD_LOG_GROUP_PATTERN,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        role = pod_identity_role(
            self,
            "CollectorRole",
            cluster=eks_cluster,
            namespace=ADDON_NAMESPACE,
            service_account=COLLECTOR_SERVICE_ACCOUNT,
            description=f"{ADDON_NAME}: {ADDON_NAMESPACE}/{COLLECTOR_SERVICE_ACCOUNT} via EKS Pod Identity",
            inline_policies={
                "MetricsAndLogs": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="RemoteWriteToThisWorkspace",
                            actions=["aps:RemoteWrite"],
                            resources=[self.prometheus.attr_arn],
                        ),
                        iam.PolicyStatement(
                            sid="HyperPodClusterLogs",
                            actions=[
                                "logs:CreateLogGroup",
                                "logs:CreateLogStream",
                                "logs:DescribeLogGroups",
                                "logs:DescribeLogStreams",
                                "logs:PutLogEvents",
                            ],
                            resources=[log_groups, f"{log_groups}:log-stream:*"],
                        ),
                    ]
                )
            },
        )
        acknowledge_iam_wildcards(
            role,
            {
                arn_pattern("logs", r"log-group:/aws/sagemaker/Clusters/\*(:log-stream:\*)?"): (
                    "HyperPod names its log groups /aws/sagemaker/Clusters/<cluster name>/<cluster id> and the "
                    "cluster id exists only after deployment; streams are created per node at run time"
                ),
            },
        )
        return role

    def _grafana_workspace(self, name_prefix: str) -> grafana.CfnWorkspace:
        """Grafana with IAM Identity Center sign-in, reading this Prometheus workspace only."""
        stack = cdk.Stack.of(self)
        role = iam.Role(
            self,
            "GrafanaRole",
            description="Amazon Managed Grafana: query the HyperPod Prometheus workspace",
            assumed_by=iam.ServicePrincipal(
                "grafana.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
            inline_policies={
                "QueryPrometheus": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="QueryThisWorkspace",
                            actions=[
                                "aps:DescribeWorkspace",
                                "aps:GetLabels",
                                "aps:GetMetricMetadata",
                                "aps:GetSeries",
                                "aps:QueryMetrics",
                            ],
                            resources=[self.prometheus.attr_arn],
                        ),
                        iam.PolicyStatement(sid="DiscoverWorkspaces", actions=["aps:ListWorkspaces"], resources=["*"]),
                    ]
                )
            },
        )
        acknowledge_iam_wildcards(
            role,
            {
                r"Resource::\*": (
                    "aps:ListWorkspaces has no resource-level permissions; Grafana's Prometheus data "
                    "source lists workspaces to offer this one"
                ),
            },
        )
        return grafana.CfnWorkspace(
            self,
            "Grafana",
            name=f"{name_prefix}-hyperpod",
            description="Dashboards for the HyperPod cluster (metrics from Amazon Managed Prometheus)",
            account_access_type="CURRENT_ACCOUNT",
            # Amazon Managed Grafana supports only IAM Identity Center or SAML sign-in.
            authentication_providers=["AWS_SSO"],
            permission_type="CUSTOMER_MANAGED",
            role_arn=role.role_arn,
            data_sources=["PROMETHEUS"],
        )
