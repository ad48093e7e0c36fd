"""Customer-managed KMS encryption of the platform's CloudWatch log groups.

CloudWatch Logs uses a KMS key only when the key policy lets the regional Logs service principal use it,
limited here to log groups of this account and region through the `aws:logs:arn` encryption context
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html). A key outlives
every log group it encrypts: a retained log group needs a retained key, or its events become unreadable
once the key is deleted.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

# The actions the CloudWatch Logs guide lists for the service principal.
LOGS_KEY_ACTIONS = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]


def allow_log_groups(key: kms.IKey) -> None:
    """Let CloudWatch Logs encrypt and decrypt this account's log groups (in this region) with `key`."""
    stack = cdk.Stack.of(key)
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsOfThisAccountAndRegion",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.{stack.url_suffix}")],
            actions=LOGS_KEY_ACTIONS,
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name="*",
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
                }
            },
        )
    )


class LogsKey(Construct):
    """A rotating KMS key for the log groups of one stack. `removal_policy` must match the log groups':
    RETAIN when any of them is retained."""

    def __init__(self, scope: Construct, construct_id: str, *, purpose: str, removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description=f"Encrypts the CloudWatch log groups of {purpose}",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        allow_log_groups(self.key)
