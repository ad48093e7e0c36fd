"""The contract between the CDK app and the cdk8s charts: which stack outputs exist and their keys.

The CDK stacks emit each value with `CfnOutput(id=OutputKey.X.value)`; `cdk deploy --outputs-file`
writes `{stack name: {output key: value}}`; `load_stack_outputs` reads that file back into a
typed `StackOutputs`. Without a file, `StackOutputs.placeholder` gives clearly fake values so the
charts still synthesize for reviews and tests, and validation reports them as not deployable.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from ..config.project import ProjectConfig
from ..plumbing.errors import InputError


class OutputKey(str, Enum):
    """CloudFormation output ids (letters and digits only, as CloudFormation requires)."""

    REGION = "Region"
    FSX_FILE_SYSTEM_ID = "FsxFileSystemId"
    FSX_DNS_NAME = "FsxDnsName"
    FSX_MOUNT_NAME = "FsxMountName"
    ECR_REPOSITORY_URI = "EcrRepositoryUri"
    ARTIFACTS_BUCKET_NAME = "ArtifactsBucketName"
    EKS_CLUSTER_NAME = "EksClusterName"
    HYPERPOD_CLUSTER_NAME = "HyperPodClusterName"
    HYPERPOD_CLUSTER_ARN = "HyperPodClusterArn"
    HYPERPOD_EXECUTION_ROLE_ARN = "HyperPodExecutionRoleArn"
    TRAINING_ROLE_ARN = "TrainingRoleArn"
    SERVING_ROLE_ARN = "ServingRoleArn"
    IMAGE_BUILD_PROJECT_NAME = "ImageBuildProjectName"
    IMAGE_BUILD_LOG_GROUP_NAME = "ImageBuildLogGroupName"
    TRAINING_IMAGE_URI = "TrainingImageUri"
    # tracking.backend: mlflow without a tracking_uri: the managed App's ARN, the training jobs' MLFLOW_TRACKING_URI.
    MLFLOW_APP_ARN = "MlflowAppArn"


# Outputs the charts read that a stack emits only with a feature on (tracking.backend: mlflow without a tracking_uri).
CONDITIONAL_OUTPUT_KEYS = frozenset({OutputKey.MLFLOW_APP_ARN})


class OperatorOutputKey(str, Enum):
    """Outputs for operators and `skyrl-hp` commands; the charts never read them (optional stacks emit some)."""

    ALERTS_TOPIC_ARN = "AlertsTopicArn"
    STUDIO_DOMAIN_ID = "StudioDomainId"
    STUDIO_HOME_EFS_ID = "StudioHomeEfsFileSystemId"
    PROMETHEUS_WORKSPACE_ID = "PrometheusWorkspaceId"
    PROMETHEUS_QUERY_ENDPOINT = "PrometheusQueryEndpoint"
    GRAFANA_WORKSPACE_URL = "GrafanaWorkspaceUrl"
    # The fingerprint of the configuration the platform was deployed from (app.py adds it to the network stack):
    # in outputs.json from `cdk deploy --outputs-file` and from `skyrl-hp outputs` alike, so the manifests
    # synthesized from it say which deploy they were made for.
    CONFIG_FINGERPRINT = "ConfigFingerprint"
    # On every stack (stacks/compose.py): which deployment it belongs to, the marker skyrl-hp teardown and preflight
    # check before they act on a stack (values/stack_ownership.py).
    STACK_OWNERSHIP = "SkyrlHpOwnership"


PLACEHOLDER_ACCOUNT = "111111111111"
PLACEHOLDER_REGION = "us-west-2"


class StackOutputs(BaseModel):
    """Deployed values the Kubernetes manifests need, and the optional stacks' values for operators (None when
    that stack or feature is off)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    region: str
    fsx_file_system_id: str
    fsx_dns_name: str
    fsx_mount_name: str
    ecr_repository_uri: str
    artifacts_bucket_name: str
    eks_cluster_name: str
    hyperpod_cluster_name: str
    serving_role_arn: str
    training_role_arn: str
    prometheus_workspace_id: str | None = None
    prometheus_query_endpoint: str | None = None
    grafana_workspace_url: str | None = None
    config_fingerprint: str | None = None  # None: deployed before the stacks carried it
    mlflow_app_arn: str | None = None  # None: no managed MLflow App (tracking.backend console, or a tracking_uri)
    is_placeholder: bool = False

    @classmethod
    def placeholder(cls, config: ProjectConfig) -> StackOutputs:
        region = config.env.region or PLACEHOLDER_REGION
        account = config.env.account or PLACEHOLDER_ACCOUNT
        return cls(
            region=region,
            fsx_file_system_id="fs-00000000placeholder",
            fsx_dns_name=f"fs-00000000placeholder.fsx.{region}.amazonaws.com",
            fsx_mount_name="placeholder",
            ecr_repository_uri=f"{account}.dkr.ecr.{region}.amazonaws.com/{config.names.ecr_repository}",
            artifacts_bucket_name=f"{config.name_prefix}-artifacts-placeholder",
            eks_cluster_name=config.names.eks_cluster,
            hyperpod_cluster_name=config.names.hyperpod_cluster,
            serving_role_arn=f"arn:aws:iam::{account}:role/placeholder-serving",
            training_role_arn=f"arn:aws:iam::{account}:role/placeholder-training",
            mlflow_app_arn=(
                f"arn:aws:sagemaker:{region}:{account}:mlflow-app/app-placeholder"
                if config.tracking.managed_app
                else None
            ),
            is_placeholder=True,
        )


FIELD_BY_OUTPUT_KEY = {
    OutputKey.REGION.value: "region",
    OutputKey.FSX_FILE_SYSTEM_ID.value: "fsx_file_system_id",
    OutputKey.FSX_DNS_NAME.value: "fsx_dns_name",
    OutputKey.FSX_MOUNT_NAME.value: "fsx_mount_name",
    OutputKey.ECR_REPOSITORY_URI.value: "ecr_repository_uri",
    OutputKey.ARTIFACTS_BUCKET_NAME.value: "artifacts_bucket_name",
    OutputKey.EKS_CLUSTER_NAME.value: "eks_cluster_name",
    OutputKey.HYPERPOD_CLUSTER_NAME.value: "hyperpod_cluster_name",
    OutputKey.SERVING_ROLE_ARN.value: "serving_role_arn",
    OutputKey.TRAINING_ROLE_ARN.value: "training_role_arn",
}
# Read when present: the observability stack is optional, and Grafana within it.
OPTIONAL_FIELD_BY_OUTPUT_KEY = {
    OperatorOutputKey.PROMETHEUS_WORKSPACE_ID.value: "prometheus_workspace_id",
    OperatorOutputKey.PROMETHEUS_QUERY_ENDPOINT.value: "prometheus_query_endpoint",
    OperatorOutputKey.GRAFANA_WORKSPACE_URL.value: "grafana_workspace_url",
    OperatorOutputKey.CONFIG_FINGERPRINT.value: "config_fingerprint",
    OutputKey.MLFLOW_APP_ARN.value: "mlflow_app_arn",
}


def load_stack_outputs(path: str | Path, config: ProjectConfig) -> StackOutputs:
    """Read `cdk deploy --outputs-file` output, keeping only this project's stacks."""
    file = Path(path)
    if not file.is_file():
        raise InputError([f"outputs error: file {str(file)!r} does not exist (run cdk deploy --outputs-file {file})"])
    try:
        stacks = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError([f"outputs error: {file} is not valid JSON (line {exc.lineno})"]) from None
    if not isinstance(stacks, dict):
        raise InputError([f"outputs error: {file} must map stack names to their outputs"])
    values: dict[str, str] = {}
    for stack_name, outputs in stacks.items():
        if not stack_name.startswith(f"{config.name_prefix}-") or not isinstance(outputs, dict):
            continue
        for key, value in outputs.items():
            field = FIELD_BY_OUTPUT_KEY.get(key) or OPTIONAL_FIELD_BY_OUTPUT_KEY.get(key)
            if field:
                values[field] = value
    try:
        return StackOutputs.model_validate(values)
    except ValidationError as exc:
        missing = sorted(
            next(k for k, f in FIELD_BY_OUTPUT_KEY.items() if f == err["loc"][0])
            for err in exc.errors()
            if err["type"] == "missing"
        )
        raise InputError(
            [f"outputs error: {file} lacks output {key} of a {config.name_prefix}-* stack" for key in missing]
            or [f"outputs error: {file}: {exc.errors()[0]['msg']}"]
        ) from None
