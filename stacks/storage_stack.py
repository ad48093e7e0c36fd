"""Storage stack (termination-protected): FSx for Lustre (deleted after a final backup) and the retained S3 buckets.

components/storage.py explains why.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.values.stack_outputs import OutputKey

from .components.mlflow_app import ManagedMlflowApp
from .components.storage import FsxLustre, PlatformBuckets


class StorageStack(cdk.Stack):
    """Exposes `file_system` (CfnFileSystem), `lifecycle_bucket`, `artifacts_bucket` and `mlflow_app_arn` (None
    without a managed MLflow App)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ProjectConfig,
        hyperpod_subnet: ec2.ISubnet,
        hyperpod_security_group: ec2.ISecurityGroup,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"{config.name_prefix}: FSx for Lustre and S3 buckets",
            # Deleting this stack alone pulls FSx from under running pods; `skyrl-hp teardown --plan` turns
            # the protection off as its last step before `cdk destroy --all`.
            termination_protection=True,
            **kwargs,
        )
        lustre = FsxLustre(
            self,
            "SharedFileSystem",
            fsx_config=config.fsx,
            subnet=hyperpod_subnet,
            security_group=hyperpod_security_group,
        )
        buckets = PlatformBuckets(
            self,
            "Buckets",
            # Stack account/region: concrete when config.env sets them, AWS::AccountId/Region otherwise.
            lifecycle_bucket_name=config.names.lifecycle_bucket(
                config.hyperpod.lifecycle_bucket_name, account=self.account, region=self.region
            ),
        )
        self.file_system = lustre.file_system
        self.lifecycle_bucket: s3.IBucket = buckets.lifecycle_bucket
        self.artifacts_bucket: s3.IBucket = buckets.artifacts_bucket

        # The cdk8s charts read these (static PV of the FSx CSI driver, adapter location).
        outputs = {
            OutputKey.FSX_FILE_SYSTEM_ID: (lustre.file_system_id, "FSx for Lustre file system id (PV volumeHandle)"),
            OutputKey.FSX_DNS_NAME: (lustre.dns_name, "FSx for Lustre DNS name (PV volumeAttributes.dnsname)"),
            OutputKey.FSX_MOUNT_NAME: (lustre.mount_name, "FSx for Lustre mount name (volumeAttributes.mountname)"),
            OutputKey.ARTIFACTS_BUCKET_NAME: (self.artifacts_bucket.bucket_name, "LoRA adapters and exports"),
            OutputKey.REGION: (self.region, "Region the platform is deployed in"),
        }
        self.mlflow_app_arn: str | None = None
        if config.tracking.managed_app:
            app = ManagedMlflowApp(
                self,
                "MlflowApp",
                name=config.names.mlflow_app,
                artifacts_bucket=self.artifacts_bucket,
                prefix=config.tracking.artifacts_prefix,
            )
            self.mlflow_app_arn = app.app_arn
            outputs[OutputKey.MLFLOW_APP_ARN] = (app.app_arn, "Managed MLflow App (the training jobs' tracking URI)")
        for key, (value, description) in outputs.items():
            cdk.CfnOutput(self, key.value, value=value, description=description)
