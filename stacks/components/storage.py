"""Stateful storage: FSx for Lustre shared by every node, and the S3 buckets of the platform.

Everything here is RETAINED on `cdk destroy`: checkpoints, adapters and lifecycle scripts outlive
the stacks and are deleted by hand (see the README's teardown section).

Encryption: SSE-S3 for the buckets. The lifecycle bucket is read by HyperPod nodes through the
managed `AmazonSageMakerClusterInstanceRolePolicy`, which grants no `kms:Decrypt`, so a
customer-managed key would break node provisioning; S3 server access logs can only be delivered to
an SSE-S3 bucket; and the artifacts (LoRA adapters, exports) hold no secrets that would justify a
key policy to maintain. FSx encrypts at rest with its AWS-managed key.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_s3 as s3
from constructs import Construct

from skyrl_hyperpod.config.platform import FsxConfig

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
            ),
        )
        # Checkpoints, the model cache and the training data live here: never delete with the stack.
        self.file_system.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        self.file_system_id: str = self.file_system.ref
        self.dns_name: str = self.file_system.attr_dns_name
        self.mount_name: str = self.file_system.attr_lustre_mount_name


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
        # Not access-logged itself (that would loop); cdk-nag S1 accepts a log-destination bucket.
        self.access_logs_bucket = s3.Bucket(
            self,
            "AccessLogsBucket",
            lifecycle_rules=[s3.LifecycleRule(id="expire-access-logs", expiration=ACCESS_LOG_RETENTION)],
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
