"""Failures that a green deploy hides: HyperPod's own error events, delivered to an SNS topic.

With continuous node provisioning (the only mode for EKS-orchestrated clusters), a lifecycle script
that fails or a capacity shortage leaves the stack CREATE_COMPLETE while HyperPod retries the nodes
in the background. HyperPod publishes each failure as an EventBridge event (source `aws.sagemaker`,
detail-type `SageMaker HyperPod Cluster Event`, `detail.EventDetails.EventLevel` `Error`:
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-cluster-events-reference.html);
this rule forwards this cluster's error events to a KMS-encrypted topic the operators subscribe to.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

HYPERPOD_EVENT_SOURCE = "aws.sagemaker"
HYPERPOD_EVENT_DETAIL_TYPE = "SageMaker HyperPod Cluster Event"
FAILURE_EVENT_LEVELS = ["Error"]


class HyperPodFailureAlerts(Construct):
    """EventBridge rule (this cluster's error events) -> SNS topic encrypted with its own KMS key."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster_name: str, email_addresses: Sequence[str]
    ) -> None:
        super().__init__(scope, construct_id)
        # EventBridge cannot use the AWS-managed SNS key: with a customer-managed key, the SnsTopic
        # target below adds the key-policy statement that lets events.amazonaws.com encrypt.
        self.key = kms.Key(
            self,
            "TopicKey",
            description=f"Encrypts the HyperPod failure alerts topic of {cluster_name}",
            enable_key_rotation=True,
            # Holds no data once the topic is gone; deletion is scheduled (30-day window).
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name=f"{cluster_name} failures",
            master_key=self.key,
            enforce_ssl=True,
        )
        for address in email_addresses:
            self.topic.add_subscription(subscriptions.EmailSubscription(address))
        self.rule = events.Rule(
            self,
            "FailureEvents",
            description=f"HyperPod error events of cluster {cluster_name} (node creation, health, lifecycle scripts)",
            event_pattern=events.EventPattern(
                source=[HYPERPOD_EVENT_SOURCE],
                detail_type=[HYPERPOD_EVENT_DETAIL_TYPE],
                detail={"EventDetails": {"ClusterName": [cluster_name], "EventLevel": FAILURE_EVENT_LEVELS}},
            ),
            targets=[targets.SnsTopic(self.topic)],
        )

    def allow_prometheus_alert_manager(self) -> None:
        """Let Amazon Managed Service for Prometheus alert managers of this account and region publish to the
        topic (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-receiver-AMPpermission.html),
        through its KMS key. The workspace lives in a later stack, so its own ARN cannot be named here."""
        stack = cdk.Stack.of(self)
        source = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": stack.format_arn(service="aps", resource="workspace", resource_name="*")},
        }
        principal = iam.ServicePrincipal("aps.amazonaws.com")
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PrometheusAlertManagerPublish",
                principals=[principal],
                actions=["sns:Publish", "sns:GetTopicAttributes"],
                resources=[self.topic.topic_arn],
                conditions=source,
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PrometheusAlertManagerEncrypt",
                principals=[principal],
                actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                resources=["*"],
                conditions=source,
            )
        )
