"""Observability: Amazon Managed Prometheus, its alert rules and alert manager (to the HyperPod failure
topic), and the HyperPod observability add-on (Grafana optional).

Deployed after the HyperPod stack (see compose.py): the add-on schedules its collectors on
HyperPod nodes, and the alerts go to that stack's topic.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.values import alerting
from skyrl_hyperpod.values.stack_outputs import OperatorOutputKey

from .components.alerts import HyperPodFailureAlerts
from .components.observability import HyperPodObservability


class ObservabilityStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ProjectConfig,
        eks_cluster: eks.ICluster,
        failure_alerts: HyperPodFailureAlerts,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        failure_alerts.allow_prometheus_alert_manager()
        self.observability = HyperPodObservability(
            self,
            "HyperPodObservability",
            name_prefix=config.name_prefix,
            hyperpod_cluster_name=config.names.hyperpod_cluster,
            observability=config.observability,
            eks_cluster=eks_cluster,
            addon_version=config.versions.hyperpod_observability_addon,
            alert_rules=alerting.rules_yaml(config),
            alert_manager_definition=alerting.alertmanager_definition(failure_alerts.topic.topic_arn, self.region),
        )
        # Read back by `skyrl-hp outputs` (optional fields of the outputs file); docs/runbook.md, "Watch training".
        prometheus = self.observability.prometheus
        cdk.CfnOutput(
            self,
            OperatorOutputKey.PROMETHEUS_WORKSPACE_ID.value,
            value=prometheus.attr_workspace_id,
            description="Amazon Managed Prometheus workspace the HyperPod observability add-on writes to",
        )
        cdk.CfnOutput(
            self,
            OperatorOutputKey.PROMETHEUS_QUERY_ENDPOINT.value,
            value=self.observability.prometheus_query_endpoint,
            description="PromQL query endpoint of that workspace (SigV4, aps:QueryMetrics)",
        )
        if self.observability.grafana_url is not None:
            cdk.CfnOutput(
                self,
                OperatorOutputKey.GRAFANA_WORKSPACE_URL.value,
                value=self.observability.grafana_url,
                description="Amazon Managed Grafana workspace (sign in with IAM Identity Center)",
            )
