"""HyperPod observability: Amazon Managed Prometheus with alert rules and an alert manager, the HyperPod
observability EKS add-on with its Pod Identity role, and an optional Amazon Managed Grafana workspace."""

from __future__ import annotations

import re
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_aps as aps
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from constructs import Construct

from skyrl_hyperpod.config.observability import ObservabilityConfig
from skyrl_hyperpod.plumbing.upstream import HYPERPOD_OBSERVABILITY_NAMESPACE

from .iam_wildcards import acknowledge_iam_wildcards, arn_pattern
from .workload_identity import pod_identity_role

ADDON_NAME = "amazon-sagemaker-hyperpod-observability"
# The add-on installs its collector in this namespace under this service account. The Pod Identity
# association names only the service account (the add-on fixes the namespace); the collector role's
# trust policy pins both.
ADDON_NAMESPACE = HYPERPOD_OBSERVABILITY_NAMESPACE
COLLECTOR_SERVICE_ACCOUNT = "hyperpod-observability-operator-otel-collector"


def hyperpod_log_groups(hyperpod_cluster_name: str) -> str:
    """Log groups of this HyperPod cluster only: HyperPod writes its logs under
    /aws/sagemaker/Clusters/<cluster name>/<cluster id>, and the id exists only after deployment."""
    return f"/aws/sagemaker/Clusters/{hyperpod_cluster_name}/*"


# CloudWatch Logs actions of the collector role in AWS's own template for this add-on
# (aws-samples/awsome-distributed-training, 1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/
# hyperpod-eks-tf/modules/observability/iam_roles.tf): the write path plus the reads the add-on's
# troubleshooting page lists.
# Split by what the Service Authorization Reference lists for each
# (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html):
# these act on a log group or log stream, so they are limited to this cluster's ...
COLLECTOR_LOG_ACTIONS = (
    "logs:CreateLogGroup",
    "logs:CreateLogStream",
    "logs:DescribeLogStreams",
    "logs:PutLogEvents",
    "logs:GetLogEvents",
    "logs:FilterLogEvents",
    "logs:GetLogRecord",
    "logs:StartQuery",
    "logs:GetQueryResults",
)
# ... and these have no resource-level permissions: they are granted on "*" or not at all.
COLLECTOR_LOG_ACTIONS_WITHOUT_RESOURCES = ("logs:DescribeLogGroups", "logs:StopQuery")

# metricsProvider keys: exactly those of AWS's own template for this add-on (same module,
# modules/observability/eks_addon.tf); no primary source names any other (its cluster-level
# variable feeds `customMetrics`). The add-on collects the metrics Ray exports, for its Ray Core /
# Train / Serve dashboards, without a key of its own (https://docs.aws.amazon.com/sagemaker/latest/dg/
# sagemaker-hyperpod-ray-observability-metrics-reference.html).
# Metric groups that offer BASIC and ADVANCED: they follow `metrics_level`.
LEVELLED_METRICS = ("trainingMetrics", "customMetrics", "nodeMetrics", "acceleratedComputeMetrics")
# Metric groups the template leaves DISABLED by default: collected only when `metrics_level` is Advanced.
ADVANCED_ONLY_METRICS = ("taskGovernanceMetrics", "scalingMetrics", "networkMetrics")
# Inference endpoints are not this platform's focus: the template's fixed BASIC level.
BASIC_METRICS = ("inferenceMetrics",)


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
    provider.update({name: metrics("BASIC") for name in BASIC_METRICS})

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
        hyperpod_cluster_name: str,
        observability: ObservabilityConfig,
        eks_cluster: eks.ICluster,
        addon_version: str | None,
        alert_rules: str,
        alert_manager_definition: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)

        self.prometheus = aps.CfnWorkspace(
            self, "Prometheus", alias=f"{name_prefix}-hyperpod", alert_manager_definition=alert_manager_definition
        )
        # Metrics history is data: keep it when the stack goes away (docs/teardown.md).
        self.prometheus.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        # Built like the add-on's own templates do: no trailing slash, unlike attr_prometheus_endpoint.
        prometheus_endpoint = (
            f"https://aps-workspaces.{stack.region}.{stack.url_suffix}/workspaces/{self.prometheus.attr_workspace_id}"
        )
        # PromQL instant queries (QueryMetrics, SigV4-signed:
        # https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-APIReference-QueryMetrics.html).
        self.prometheus_query_endpoint = f"{prometheus_endpoint}/api/v1/query"

        # The alert rules (skyrl_hyperpod/values/alerting.py), evaluated by the workspace's ruler.
        self.alert_rules = aps.CfnRuleGroupsNamespace(
            self, "AlertRules", name=f"{name_prefix}-alerts", workspace=self.prometheus.attr_arn, data=alert_rules
        )

        self.collector_role = self._collector_role(eks_cluster, hyperpod_cluster_name)

        grafana_workspace = None
        self.grafana: grafana.CfnWorkspace | None = None
        self.grafana_url: str | None = None
        if observability.grafana:
            self.grafana = self._grafana_workspace(name_prefix)
            # The workspace's Endpoint attribute is a host name, without the scheme.
            self.grafana_url = f"https://{self.grafana.attr_endpoint}"
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

    def _collector_role(self, eks_cluster: eks.ICluster, hyperpod_cluster_name: str) -> iam.Role:
        """Role of the OpenTelemetry collector, through EKS Pod Identity, for its service account only;
        its logs access reaches this HyperPod cluster's log groups and no other cluster's."""
        stack = cdk.Stack.of(self)
        log_groups = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=hyperpod_log_groups(hyperpod_cluster_name),
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
                            actions=list(COLLECTOR_LOG_ACTIONS),
                            resources=[log_groups, f"{log_groups}:log-stream:*"],
                        ),
                        iam.PolicyStatement(
                            sid="LogActionsWithoutResourceLevelPermissions",
                            actions=list(COLLECTOR_LOG_ACTIONS_WITHOUT_RESOURCES),
                            resources=["*"],
                        ),
                    ]
                )
            },
        )
        acknowledge_iam_wildcards(
            role,
            {
                arn_pattern(
                    "logs", rf"log-group:/aws/sagemaker/Clusters/{re.escape(hyperpod_cluster_name)}/\*(:log-stream:\*)?"
                ): (
                    f"Only this cluster's log groups: HyperPod names them /aws/sagemaker/Clusters/{hyperpod_cluster_name}/"
                    "<cluster id> and the id exists only after deployment; streams are created per node at run time"
                ),
                r"Resource::\*": (
                    "logs:DescribeLogGroups and logs:StopQuery have no resource-level permissions (Service "
                    "Authorization Reference); every other log action is limited to this cluster's log groups"
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
