"""Stateful storage: FSx for Lustre shared by every node, and the S3 buckets of the platform.

Nothing stored here is lost on `cdk destroy`, and nothing kept blocks the destroy:
- The buckets (adapters, lifecycle scripts, access logs) and their policies are RETAINED: they hold
  no network interface, so they outlive the VPC.
- FSx for Lustre is DELETED with the stack, after a final backup, and RETAINED when an update replaces
  it (UpdateReplacePolicy): a replacement's cleanup is not a teardown, and CloudFormation abandons a
  cleanup delete it cannot finish while reporting the update a success. The replaced file system keeps its
  data and network interfaces until the operator deletes it (`skyrl-hp teardown --plan` lists how).
  On stack deletion, a retained file system would keep its network
  interfaces in the network stack's subnet and security group, and deleting those would then fail
  (DependencyViolation), leaving the network stack in DELETE_FAILED. Retaining the subnet and the
  group as well would keep the VPC, its route tables and flow logs alive for a file system nobody
  mounts; a backup keeps the data at backup-storage prices and restores into a new file system
  (`aws fsx create-file-system-from-backup`) in whatever network the next deployment has.
  `FsxFinalBackup` takes that backup before CloudFormation deletes the file system, and fails the
  delete (keeping the file system) if the backup fails or is not AVAILABLE within CloudFormation's hour;
  deleting again joins the backup in progress. FSx backups are incremental, so the first, full copy can
  be taken ahead of the destroy (`skyrl-hp teardown --plan`), leaving the final backup only the changes.
- The stack has termination protection: deleting it alone would pull FSx from under running pods.

Encryption: SSE-S3 for the buckets. The lifecycle bucket is read by HyperPod nodes through the
managed `AmazonSageMakerClusterInstanceRolePolicy`, which grants no `kms:Decrypt`, so a
customer-managed key would break node provisioning; S3 server access logs can only be delivered to
an SSE-S3 bucket; and the artifacts (LoRA adapters, exports) hold no secrets that would justify a
key policy to maintain. FSx encrypts at rest with its AWS-managed key.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct

from skyrl_hyperpod.config.fsx import FsxConfig

from .iam_wildcards import (
    LAMBDA_BASIC_EXECUTION_POLICY,
    acknowledge_iam_wildcards,
    arn_pattern,
    managed_policy_finding,
    nag_rule,
)
from .log_encryption import LogsKey

FINAL_BACKUP_HANDLER_DIR = Path(__file__).with_name("fsx_final_backup")
FINAL_BACKUP_RESOURCE_TYPE = "Custom::FsxFinalBackup"
# CloudFormation waits at most an hour for a custom resource (ServiceTimeout is 1-3600 s:
# https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-cloudformation-customresource.html#cfn-cloudformation-customresource-servicetimeout),
# and the provider framework's waiter is capped at the same hour (ProviderProps.totalTimeout:
# https://docs.aws.amazon.com/cdk/api/v2/python/aws_cdk.custom_resources/ProviderProps.html).
CUSTOM_RESOURCE_TIMEOUT_LIMIT = cdk.Duration.hours(1)
FINAL_BACKUP_POLL_INTERVAL = cdk.Duration.minutes(1)
# The waiter gives up a few polls before CloudFormation stops listening, so its FAILED answer still arrives.
FINAL_BACKUP_TIMEOUT = cdk.Duration.minutes(55)
# is_complete gives up first, with a message that names the backup and the next step (run the delete
# again: it joins the backup in progress), instead of the waiter's bare "Operation timed out".
FINAL_BACKUP_WAIT = cdk.Duration.minutes(50)
HANDLER_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS


def load_final_backup_handler() -> ModuleType:
    """fsx_final_backup/index.py (a Lambda asset, not a package): its constants, for the construct and the tests."""
    spec = importlib.util.spec_from_file_location("fsx_final_backup_handler", FINAL_BACKUP_HANDLER_DIR / "index.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_HANDLER = load_final_backup_handler()

# Access logs are kept for a year of audit history, then expire.
ACCESS_LOG_RETENTION = cdk.Duration.days(365)
# Overwritten adapters/scripts stay recoverable for a while, without growing the bill forever.
NONCURRENT_VERSION_RETENTION = cdk.Duration.days(90)
# Interrupted multi-part uploads of large exports otherwise cost storage invisibly.
INCOMPLETE_UPLOAD_RETENTION = cdk.Duration.days(7)
MINIMUM_TLS_VERSION = 1.2


class FsxLustre(Construct):
    """FSx for Lustre in HyperPod's subnet and security group, mounted by the pods at /shared.

    The L1 resource is used on purpose: the L2 `LustreFileSystem` adds a 988-1023 rule to the given
    security group (which belongs to the network stack, so the rule would appear there as a side
    effect) and has no metadata configuration.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fsx_config: FsxConfig,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        persistent_2 = fsx_config.deployment_type == "PERSISTENT_2"
        self.file_system = fsx.CfnFileSystem(
            self,
            "FileSystem",
            file_system_type="LUSTRE",
            file_system_type_version=fsx_config.lustre_version,
            storage_type="SSD",
            storage_capacity=fsx_config.storage_capacity_gib,
            subnet_ids=[subnet.subnet_id],
            security_group_ids=[security_group.security_group_id],
            lustre_configuration=fsx.CfnFileSystem.LustreConfigurationProperty(
                deployment_type=fsx_config.deployment_type,
                per_unit_storage_throughput=fsx_config.per_unit_storage_throughput,
                data_compression_type=fsx_config.data_compression,
                # PERSISTENT_2 on Lustre 2.15 supports metadata IOPS that FSx scales with the
                # capacity (AUTOMATIC); PERSISTENT_1 rejects the property.
                metadata_configuration=(
                    fsx.CfnFileSystem.MetadataConfigurationProperty(mode="AUTOMATIC") if persistent_2 else None
                ),
                # Daily backups protect against a deleted or corrupted checkpoint while the platform runs
                # (FSx picks the start time). They are deleted with the file system: FsxFinalBackup is not.
                automatic_backup_retention_days=fsx_config.automatic_backup_retention_days,
                copy_tags_to_backups=True,
            ),
        )
        # Deleted with the stack, after FsxFinalBackup has backed it up; kept when an update replaces it
        # (see the module docstring).
        self.file_system.apply_removal_policy(cdk.RemovalPolicy.DESTROY)
        self.file_system.cfn_options.update_replace_policy = cdk.CfnDeletionPolicy.RETAIN
        self.file_system_id: str = self.file_system.ref
        self.dns_name: str = self.file_system.attr_dns_name
        self.mount_name: str = self.file_system.attr_lustre_mount_name
        self.final_backup = FsxFinalBackup(self, "FinalBackup", file_system=self.file_system)


class FsxFinalBackup(Construct):
    """A user-initiated backup of `file_system` when CloudFormation deletes (or replaces) it.

    The handler (fsx_final_backup/index.py) runs under the custom-resource provider framework, which
    polls for the backup to become AVAILABLE; the handler gives up after FINAL_BACKUP_WAIT, inside
    CloudFormation's hour, and a delete run again waits for the same backup. The custom resource
    references the file system, so CloudFormation deletes it, and waits for the backup, first.
    """

    def __init__(self, scope: Construct, construct_id: str, *, file_system: fsx.CfnFileSystem) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        role = iam.Role(
            self,
            "HandlerRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Final FSx backup before stack deletion: create and watch one backup",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(LAMBDA_BASIC_EXECUTION_POLICY)],
        )
        file_system_arn = stack.format_arn(service="fsx", resource="file-system", resource_name=file_system.ref)
        backups_arn = stack.format_arn(service="fsx", resource="backup", resource_name="*")
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="BackUpThisFileSystem",
                actions=["fsx:CreateBackup", "fsx:TagResource"],
                resources=[file_system_arn, backups_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WatchBackups",
                actions=["fsx:DescribeBackups", "fsx:DescribeFileSystems"],
                resources=["*"],
            )
        )
        # The log groups go with the stack, so their key may as well (its deletion waits 30 days).
        logs_key = LogsKey(
            self, "LogsKey", purpose="the FSx final-backup handlers", removal_policy=cdk.RemovalPolicy.DESTROY
        ).key
        handlers = {}
        for name in ("on_event", "is_complete"):
            log_group = logs.LogGroup(
                self,
                f"{name.title().replace('_', '')}Logs",
                retention=HANDLER_LOG_RETENTION,
                removal_policy=cdk.RemovalPolicy.DESTROY,
                encryption_key=logs_key,
            )
            handlers[name] = lambda_.Function(
                self,
                name.title().replace("_", ""),
                description=f"FSx final backup before stack deletion ({name})",
                runtime=lambda_.Runtime.PYTHON_3_14,
                handler=f"index.{name}",
                code=lambda_.Code.from_asset(str(FINAL_BACKUP_HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
                timeout=cdk.Duration.minutes(1),
                role=role,
                log_group=log_group,
            )
        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=handlers["on_event"],
            is_complete_handler=handlers["is_complete"],
            query_interval=FINAL_BACKUP_POLL_INTERVAL,
            total_timeout=FINAL_BACKUP_TIMEOUT,
            log_group=logs.LogGroup(
                self,
                "ProviderLogs",
                retention=HANDLER_LOG_RETENTION,
                removal_policy=cdk.RemovalPolicy.DESTROY,
                encryption_key=logs_key,
            ),
            # The waiter only calls is_complete again; every poll's outcome is in the handlers' logs. Logging
            # its steps would give its role CloudWatch Logs delivery actions that have no resource-level
            # permissions (https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html), account-wide.
            disable_waiter_state_machine_logging=True,
        )
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=provider.service_token,
            resource_type=FINAL_BACKUP_RESOURCE_TYPE,
            # on_event sets the deadline that every is_complete poll then holds the backup to.
            properties={"FileSystemId": file_system.ref, _HANDLER.WAIT_PROPERTY: int(FINAL_BACKUP_WAIT.to_seconds())},
            service_timeout=CUSTOM_RESOURCE_TIMEOUT_LIMIT,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self._acknowledge(role, provider)

    def _acknowledge(self, role: iam.Role, provider: cr.Provider) -> None:
        cdk.Validations.of(role).acknowledge(
            cdk.Acknowledgment(
                id=managed_policy_finding(LAMBDA_BASIC_EXECUTION_POLICY),
                reason="FSx final-backup handler: AWS-managed baseline to write its own CloudWatch logs; nothing else.",
            )
        )
        acknowledge_iam_wildcards(
            role,
            {
                arn_pattern("fsx", r"backup/\*"): (
                    "the backup id is generated by CreateBackup itself; tagging and creation are otherwise "
                    "limited to this stack's file system"
                ),
                r"Resource::\*": "fsx:DescribeBackups and fsx:DescribeFileSystems have no resource-level permissions",
            },
        )
        # The provider framework's own Lambdas, roles and waiter state machine belong to aws-cdk-lib.
        for child in provider.node.find_all():
            if isinstance(child, sfn.CfnStateMachine):
                cdk.Validations.of(child).acknowledge(
                    cdk.Acknowledgment(
                        id=nag_rule("SF1"),
                        reason="The provider framework's waiter only calls is_complete once a minute during a "
                        "stack delete; the is_complete and framework Lambdas log every poll and its outcome, and "
                        "state-machine logging would need account-wide CloudWatch Logs delivery permissions.",
                    )
                )
                cdk.Validations.of(child).acknowledge(
                    cdk.Acknowledgment(
                        id=nag_rule("SF2"),
                        reason="The provider framework's waiter only polls is_complete once a minute during a "
                        "stack delete; the handlers' logs cover tracing needs, and Provider has no X-Ray option.",
                    )
                )
            if isinstance(child, lambda_.Function):
                cdk.Validations.of(child).acknowledge(
                    cdk.Acknowledgment(
                        id=nag_rule("L1"),
                        reason="aws-cdk-lib's custom-resource provider framework pins its own Node.js runtime.",
                    )
                )
            if isinstance(child, iam.Role):
                cdk.Validations.of(child).acknowledge(
                    cdk.Acknowledgment(
                        id=managed_policy_finding(LAMBDA_BASIC_EXECUTION_POLICY),
                        reason="Provider-framework Lambda (aws-cdk-lib): the AWS-managed baseline to write its logs.",
                    )
                )
                reasons = {
                    r"Resource::<.*(OnEvent|IsComplete|framework).*\.Arn>:\*": (
                        "lambda:InvokeFunction on the provider's own handler functions, all versions "
                        "(aws-cdk-lib's provider framework grant)"
                    ),
                }
                acknowledge_iam_wildcards(child, reasons)


def _hardened_bucket_props() -> dict:
    """Settings every bucket of the platform shares."""
    return {
        "encryption": s3.BucketEncryption.S3_MANAGED,
        "enforce_ssl": True,
        "minimum_tls_version": MINIMUM_TLS_VERSION,
        "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
        "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        "removal_policy": cdk.RemovalPolicy.RETAIN,
    }


class PlatformBuckets(Construct):
    """The lifecycle-scripts bucket, the artifacts bucket, and the bucket their access logs go to."""

    def __init__(self, scope: Construct, construct_id: str, *, lifecycle_bucket_name: str) -> None:
        super().__init__(scope, construct_id)
        # Not access-logged itself: S3 advises against logging a destination bucket into itself
        # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ServerLogs.html); cdk-nag S1 accepts it.
        # Versioned, so an overwritten or deleted log object stays recoverable for a while: they are audit records.
        self.access_logs_bucket = s3.Bucket(
            self,
            "AccessLogsBucket",
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=ACCESS_LOG_RETENTION,
                    noncurrent_version_expiration=NONCURRENT_VERSION_RETENTION,
                    abort_incomplete_multipart_upload_after=INCOMPLETE_UPLOAD_RETENTION,
                )
            ],
            **_hardened_bucket_props(),
        )
        versioned_bucket_rules = [
            s3.LifecycleRule(
                id="expire-old-versions-and-aborted-uploads",
                noncurrent_version_expiration=NONCURRENT_VERSION_RETENTION,
                abort_incomplete_multipart_upload_after=INCOMPLETE_UPLOAD_RETENTION,
            )
        ]
        self.lifecycle_bucket = s3.Bucket(
            self,
            "LifecycleBucket",
            bucket_name=lifecycle_bucket_name,
            versioned=True,
            lifecycle_rules=versioned_bucket_rules,
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix="lifecycle/",
            **_hardened_bucket_props(),
        )
        self.artifacts_bucket = s3.Bucket(
            self,
            "ArtifactsBucket",
            versioned=True,
            lifecycle_rules=versioned_bucket_rules,
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix="artifacts/",
            **_hardened_bucket_props(),
        )
        # The TLS-only rule and the access-log delivery grant stay with the buckets they protect.
        for bucket in (self.access_logs_bucket, self.lifecycle_bucket, self.artifacts_bucket):
            bucket.policy.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
