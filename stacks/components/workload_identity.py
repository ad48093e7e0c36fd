"""AWS identities for Kubernetes service accounts through EKS Pod Identity.

Each role trusts the Pod Identity service only for one cluster, namespace and service account: the
trust policy matches the session tags Pod Identity sets, so no other association in the account can
use the role. The workload roles are scoped to the artifacts bucket's adapters prefix.

The Kubernetes side (namespace, service accounts) belongs to the cdk8s charts: a Pod Identity
association does not need either to exist when it is created.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from skyrl_hyperpod.config.workloads import WorkloadsConfig

from .iam_wildcards import acknowledge_iam_wildcards
from .mlflow_app import allow_mlflow_app_calls

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"


def pod_identity_role(
    scope: Construct,
    construct_id: str,
    *,
    cluster: eks.ICluster,
    namespace: str,
    service_account: str,
    description: str,
    inline_policies: Mapping[str, iam.PolicyDocument] | None = None,
) -> iam.Role:
    """An IAM role only EKS Pod Identity can assume, and only for `namespace/service_account` of `cluster`."""
    principal = iam.ServicePrincipal(POD_IDENTITY_SERVICE).with_conditions(
        {
            "StringEquals": {
                "aws:SourceAccount": cdk.Stack.of(scope).account,
                "aws:RequestTag/eks-cluster-name": cluster.cluster_name,
                "aws:RequestTag/kubernetes-namespace": namespace,
                "aws:RequestTag/kubernetes-service-account": service_account,
            }
        }
    )
    # Pod Identity assumes the role with session tags: sts:TagSession is required next to sts:AssumeRole.
    return iam.Role(
        scope,
        construct_id,
        assumed_by=iam.SessionTagsPrincipal(principal),
        description=description,
        inline_policies=dict(inline_policies) if inline_policies else None,
    )


def adapters_list_prefixes(prefix: str) -> list[str]:
    """`s3:prefix` values that admit the adapters folder and everything below it, nothing beside it."""
    return [f"{prefix}/", f"{prefix}/*"]


def adapters_object_arn(bucket: s3.IBucket, prefix: str) -> str:
    return bucket.arn_for_objects(f"{prefix}/*")


class WorkloadIdentities(Construct):
    """Serving (read-only) and training (read/write) roles on the adapters prefix, with their associations."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        workloads: WorkloadsConfig,
        artifacts_bucket: s3.IBucket,
        mlflow_app_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        prefix = workloads.adapters_prefix
        objects = adapters_object_arn(artifacts_bucket, prefix)
        # ListBucket is limited to keys under the prefix; Ray Serve LLM lists it to find adapters, always
        # with a trailing slash (ray-project/ray: python/ray/llm/_internal/common/utils/cloud_filesystem,
        # `list_subfolders`). Both values end at the delimiter: a bare `adapters` would also list `adapters-old/...`.
        list_prefix = iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[artifacts_bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": adapters_list_prefixes(prefix)}},
        )

        self.serving_role = pod_identity_role(
            self,
            "ServingRole",
            cluster=cluster,
            namespace=workloads.namespace,
            service_account=workloads.serving_service_account,
            description=f"Ray Serve LLM: read LoRA adapters under s3://<artifacts>/{prefix}/",
        )
        self.serving_role.add_to_policy(list_prefix)
        self.serving_role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[objects]))

        self.training_role = pod_identity_role(
            self,
            "TrainingRole",
            cluster=cluster,
            namespace=workloads.namespace,
            service_account=workloads.training_service_account,
            description=f"SkyRL training: publish LoRA adapters under s3://<artifacts>/{prefix}/",
        )
        self.training_role.add_to_policy(list_prefix)
        # Publishing an adapter writes (multipart for the safetensors file) and may re-read it;
        # no delete: replacing an adapter overwrites it, removing one is an operator's decision.
        self.training_role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                resources=[objects],
            )
        )
        if mlflow_app_arn is not None:  # SkyRL's MLflow logger in the training jobs
            allow_mlflow_app_calls(self.training_role, mlflow_app_arn)
        if artifacts_bucket.encryption_key is not None:
            artifacts_bucket.encryption_key.grant_decrypt(self.serving_role)
            artifacts_bucket.encryption_key.grant_encrypt_decrypt(self.training_role)

        for role, service_account, name in (
            (self.serving_role, workloads.serving_service_account, "Serving"),
            (self.training_role, workloads.training_service_account, "Training"),
        ):
            eks_l1.CfnPodIdentityAssociation(
                self,
                f"{name}Association",
                cluster_name=cluster.cluster_name,
                namespace=workloads.namespace,
                service_account=service_account,
                role_arn=role.role_arn,
            )
            # The finding names the bucket ARN as CDK renders the cross-stack reference; the
            # pattern pins the part this construct controls: the prefix.
            acknowledge_iam_wildcards(
                role,
                {
                    rf"Resource::.+/{re.escape(prefix)}/\*": (
                        f"Object access is limited to the adapters prefix '{prefix}/' of the project's artifacts "
                        "bucket; adapter folder names are chosen at publish time, so keys below it cannot be listed."
                    )
                },
            )
