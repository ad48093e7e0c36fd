"""A SageMaker managed MLflow App (`AWS::SageMaker::MlflowApp`) for experiment tracking (tracking.backend: mlflow
without a tracking_uri of the user's own).

Its artifact store is a prefix of the project's artifacts bucket, so its objects share the bucket's encryption,
TLS-only policy, versioning and access logs. SageMaker writes and reads that prefix with the App's role
(https://docs.aws.amazon.com/sagemaker/latest/dg/mlflow-create-tracking-server-iam.html): the role may do so on
that prefix only. Callers of the App (the training pods, `skyrl-hp train metrics`) need sagemaker:CallMlflowAppApi on
its ARN (the Service Authorization Reference's one action for an mlflow-app resource), granted where their roles are.
"""

from __future__ import annotations

import re

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .iam_wildcards import acknowledge_iam_wildcards

SAGEMAKER_SERVICE = "sagemaker.amazonaws.com"


class ManagedMlflowApp(Construct):
    """The App and its artifact-store role. Exposes `app_arn`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        artifacts_bucket: s3.IBucket,
        prefix: str,
    ) -> None:
        super().__init__(scope, construct_id)
        account = cdk.Stack.of(self).account
        role = iam.Role(
            self,
            "ArtifactStoreRole",
            assumed_by=iam.ServicePrincipal(SAGEMAKER_SERVICE).with_conditions(
                {"StringEquals": {"aws:SourceAccount": account}}
            ),
            description=f"SageMaker MLflow App {name}: its artifact store under s3://<artifacts>/{prefix}/",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[artifacts_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}/", f"{prefix}/*"]}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                resources=[artifacts_bucket.arn_for_objects(f"{prefix}/*")],
            )
        )
        if artifacts_bucket.encryption_key is not None:
            artifacts_bucket.encryption_key.grant_encrypt_decrypt(role)
        acknowledge_iam_wildcards(
            role,
            {
                rf"Resource::.+/{re.escape(prefix)}/\*": (
                    f"The MLflow App's artifact store is the prefix '{prefix}/' of the project's artifacts bucket; "
                    "MLflow names the objects below it per experiment and run."
                )
            },
        )
        app = sagemaker.CfnMlflowApp(
            self,
            "App",
            name=name,
            artifact_store_uri=f"s3://{artifacts_bucket.bucket_name}/{prefix}",
            role_arn=role.role_arn,
        )
        app.node.add_dependency(role)
        self.app_arn: str = app.attr_arn


def allow_mlflow_app_calls(role: iam.IRole, app_arn: str) -> None:
    """Let `role` call the App's MLflow API and nothing else of it (no create, update, delete or presigned UI URL)."""
    role.add_to_principal_policy(iam.PolicyStatement(actions=["sagemaker:CallMlflowAppApi"], resources=[app_arn]))
