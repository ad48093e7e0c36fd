"""Failures that a green deploy hides: HyperPod's own error events, delivered to an SNS topic.

With continuous node provisioning (the only mode for EKS-orchestrated clusters), a lifecycle script
that fails or a capacity shortage leaves the stack CREATE_COMPLETE while HyperPod retries the nodes
in the background. HyperPod publishes each failure as an EventBridge event (source `aws.sagemaker`,
detail-type `SageMaker HyperPod Cluster Event`, `detail.EventDetails.EventLevel` `Error`:
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-cluster-events-reference.html);
this rule forwards this cluster's error events to a KMS-encrypted topic the operators subscribe to.

EventBridge publishes to the topic, and uses its key, through resource policies granted to the
events.amazonaws.com service principal. Both grants carry `aws:SourceArn` = this rule, so no other
rule (of any account) can publish through them: the confused-deputy guard AWS recommends for service
principals (https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html) and shows in the
key policy for AWS event sources of encrypted topics
(https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html). The rule has a fixed name so its
ARN can be written into the key policy: a reference would make the key depend on the rule, which
depends on the topic, which depends on the key.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
import jsii
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

HYPERPOD_EVENT_SOURCE = "aws.sagemaker"
HYPERPOD_EVENT_DETAIL_TYPE = "SageMaker HyperPod Cluster Event"
FAILURE_EVENT_LEVELS = ["Error"]
EVENTS_SERVICE_PRINCIPAL = "events.amazonaws.com"


def failure_rule_name(cluster_name: str) -> str:
    return f"{cluster_name}-failure-alerts"


@jsii.implements(events.IRuleTarget)
class _TopicOfOneRule:
    """The SNS target of one rule: like aws_events_targets.SnsTopic, with grants limited to that rule."""

    def __init__(self, topic: sns.ITopic, rule_arn: str) -> None:
        self._topic = topic
        self._rule_arn = rule_arn

    def bind(self, rule: events.IRuleRef, id: str | None = None) -> events.RuleTargetConfig:
        # Adds the topic-policy statement and, the topic being encrypted, the key-policy statement.
        self._topic.grant_publish(
            iam.ServicePrincipal(EVENTS_SERVICE_PRINCIPAL, conditions={"ArnEquals": {"aws:SourceArn": self._rule_arn}})
        )
        return events.RuleTargetConfig(arn=self._topic.topic_arn, target_resource=self._topic)


class HyperPodFailureAlerts(Construct):
    """EventBridge rule (this cluster's error events) -> SNS topic encrypted with its own KMS key."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster_name: str, email_addresses: Sequence[str]
    ) -> None:
        super().__init__(scope, construct_id)
        # EventBridge cannot use the AWS-managed SNS key: with a customer-managed key, the target
        # below adds the key-policy statement that lets this rule's events encrypt.
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
        rule_name = failure_rule_name(cluster_name)
        rule_arn = cdk.Stack.of(self).format_arn(service="events", resource="rule", resource_name=rule_name)
        self.rule = events.Rule(
            self,
            "FailureEvents",
            rule_name=rule_name,
            description=f"HyperPod error events of cluster {cluster_name} (node creation, health, lifecycle scripts)",
            event_pattern=events.EventPattern(
                source=[HYPERPOD_EVENT_SOURCE],
                detail_type=[HYPERPOD_EVENT_DETAIL_TYPE],
                detail={"EventDetails": {"ClusterName": [cluster_name], "EventLevel": FAILURE_EVENT_LEVELS}},
            ),
            targets=[_TopicOfOneRule(self.topic, rule_arn)],
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
