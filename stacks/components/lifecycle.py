"""The HyperPod lifecycle scripts of this project, uploaded to the lifecycle bucket."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

from .iam_wildcards import (
    LAMBDA_BASIC_EXECUTION_POLICY,
    acknowledge_iam_wildcards,
    managed_policy_finding,
    nag_rule,
)
from .log_encryption import LogsKey

LIFECYCLE_SCRIPTS_DIR = Path(__file__).resolve().parent.parent / "lifecycle_scripts"
# The script HyperPod runs on every new node; it calls the others in the same directory.
ON_CREATE_SCRIPT = "on_create.sh"


class LifecycleScripts(Construct):
    """Uploads stacks/lifecycle_scripts/ under `key_prefix` of the lifecycle bucket.

    `source_s3_uri` and `on_create` feed the instance groups' LifeCycleConfig; anything that
    reads the scripts must depend on `deployment` so the objects exist first.
    """

    def __init__(self, scope: Construct, construct_id: str, *, bucket: s3.IBucket, key_prefix: str) -> None:
        super().__init__(scope, construct_id)
        key_prefix = key_prefix.strip("/")
        self.deployment = s3_deployment.BucketDeployment(
            self,
            "Upload",
            destination_bucket=bucket,
            destination_key_prefix=f"{key_prefix}/",
            sources=[s3_deployment.Source.asset(str(LIFECYCLE_SCRIPTS_DIR))],
            # Scripts removed from the repository must not linger for new nodes to run.
            prune=True,
            # Nodes replaced after a stack deletion still fetch them; the bucket is retained anyway.
            retain_on_delete=True,
        )
        self.source_s3_uri = f"s3://{bucket.bucket_name}/{key_prefix}"
        self.on_create = ON_CREATE_SCRIPT
        handler = self._upload_handler()
        self._encrypt_upload_logs(handler)
        self._acknowledge_upload_handler(handler)

    def _upload_handler(self) -> Construct:
        """The stack-wide singleton Lambda that BucketDeployment provides."""
        stack = cdk.Stack.of(self)
        return next(child for child in stack.node.children if child.node.id.startswith("Custom::CDKBucketDeployment"))

    def _encrypt_upload_logs(self, handler: Construct) -> None:
        """The log group aws-cdk-lib creates for the handler is retained with the stack: so is its key. The
        key is set on that log group in place (KmsKeyId is updatable), rather than replacing the group."""
        log_group = handler.node.find_child("LogGroup")
        cfn_log_group = log_group.node.default_child
        assert isinstance(cfn_log_group, logs.CfnLogGroup)
        key = LogsKey(
            self, "UploadLogsKey", purpose="the lifecycle-script upload", removal_policy=cdk.RemovalPolicy.RETAIN
        ).key
        cfn_log_group.kms_key_id = key.key_arn
        cfn_log_group.node.add_dependency(key)

    def _acknowledge_upload_handler(self, handler: Construct) -> None:
        """cdk-nag findings on the singleton upload handler."""
        cdk.Validations.of(handler).acknowledge(
            cdk.Acknowledgment(
                id=managed_policy_finding(LAMBDA_BASIC_EXECUTION_POLICY),
                reason="CDK's BucketDeployment handler uses AWSLambdaBasicExecutionRole only to write its own logs",
            )
        )
        cdk.Validations.of(handler).acknowledge(
            cdk.Acknowledgment(
                id=nag_rule("L1"),
                reason="the runtime of CDK's BucketDeployment handler is chosen by aws-cdk-lib, not by this project",
            )
        )
        acknowledge_iam_wildcards(
            handler,
            {
                r"Action::s3:(GetObject|GetBucket|List|Abort|DeleteObject)\*": (
                    "CDK's BucketDeployment handler reads its source asset and syncs (prune=True) the "
                    "lifecycle-script prefix; these are the S3 read/write action groups CDK grants it"
                ),
                r"Resource::.+/\*": (
                    "the handler copies objects whose keys are known only at deploy time: the CDK asset "
                    "zip in the bootstrap bucket and the extracted scripts under the lifecycle bucket"
                ),
            },
        )
