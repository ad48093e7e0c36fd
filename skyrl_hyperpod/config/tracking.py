"""Experiment tracking: where SkyRL's logger sends each run's metrics (`tracking.backend`).

`console` (the reference run) prints them to the job's log, which `skyrl-hp train metrics` parses. `mlflow` sets
SkyRL's `trainer.logger=mlflow` in every RayJob (skyrl/train/utils/tracking.py, _MlflowLoggingAdapter: the experiment
is `trainer.project_name`, the run `trainer.run_name`) against `tracking_uri`: a self-hosted MLflow server's URL, or
a SageMaker MLflow App's ARN, whose requests the `sagemaker-mlflow` plugin signs with the pods' AWS identity
(https://docs.aws.amazon.com/sagemaker/latest/dg/mlflow-track-experiments.html). Without a URI the stacks create a
managed MLflow App and the manifests take its ARN from the stack outputs.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .base import StrictModel
from .credentials import credential_in_value

TrackingBackend = Literal["console", "mlflow"]
# SkyRL's logger values this project configures (skyrl/train/utils/tracking.py, Tracking.supported_backends).
MLFLOW_BACKEND = "mlflow"
# A SageMaker MLflow App or (older) tracking server ARN: what sagemaker-mlflow's `arn` tracking URI scheme accepts
# (https://github.com/aws/sagemaker-mlflow, README).
MLFLOW_ARN = re.compile(
    r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:(mlflow-app|mlflow-tracking-server)/[A-Za-z0-9][A-Za-z0-9-]*"
)
# MLflow's client reads its tracking URI from this variable (mlflow/environment_variables.py); SkyRL's driver passes
# it on to its actors (config/version_lock.py), so the charts set it on the RayJob's entrypoint.
MLFLOW_TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
MLFLOW_URL = re.compile(r"https?://[A-Za-z0-9.-]+(:\d+)?(/[A-Za-z0-9._~/-]*)?")


class TrackingConfig(StrictModel):
    """Where SkyRL logs each run's metrics: the job log (console) or MLflow."""

    backend: TrackingBackend = Field(
        default="console",
        description="console: SkyRL prints the metrics to the job log (the reference run). mlflow: SkyRL's MLflow "
        "logger in every RayJob, one MLflow experiment per project (trainer.project_name), one run per experiment's "
        "attempt chain (a retry resumes the same run).",
    )
    tracking_uri: str | None = Field(
        default=None,
        description="mlflow only: a self-hosted MLflow server (http(s)://host[:port][/path]) or an existing SageMaker "
        "MLflow App's ARN; nothing is created. Default: the stacks create a managed MLflow App (artifacts in the "
        "project's artifacts bucket under artifacts_prefix) and the manifests use its ARN (stack output). A self-hosted server's credentials "
        "(MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_USERNAME/PASSWORD) go in training.jobs.secret_env.",
    )

    artifacts_prefix: str = Field(
        default="mlflow",
        pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_./-]*[a-zA-Z0-9]$",
        description="Managed App only: its artifact store, s3://<artifacts bucket>/<artifacts_prefix>/ (the bucket's "
        "encryption, versioning and access logs). Not workloads.adapters_prefix.",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_credential_in_uri(cls, data: Any) -> Any:
        # Section-level, so the error names the field without echoing the value (the loader quotes a field's input).
        uri = data.get("tracking_uri") if isinstance(data, dict) else None
        if isinstance(uri, str) and (credential_in_value(uri) or re.match(r"https?://[^/]*@", uri)):
            raise ValueError(
                "tracking_uri holds a credential (the value is not shown), which would be in plain text in the "
                "RayJob: store it with `skyrl-hp secrets set SECRET KEY` and name it in training.jobs.secret_env "
                "(MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD)"
            )
        return data

    @field_validator("tracking_uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        if value is not None and not (MLFLOW_URL.fullmatch(value) or MLFLOW_ARN.fullmatch(value)):
            raise ValueError(
                "allowed are http(s)://host[:port][/path] (no query string) or a SageMaker MLflow App ARN "
                "(arn:aws:sagemaker:REGION:ACCOUNT:mlflow-app/ID)"
            )
        return value

    @model_validator(mode="after")
    def _uri_needs_mlflow(self) -> TrackingConfig:
        if self.tracking_uri is not None and self.backend != MLFLOW_BACKEND:
            raise ValueError(
                f"tracking_uri = {self.tracking_uri!r} with backend = {self.backend!r}: the URI is for backend: mlflow"
            )
        return self

    @property
    def mlflow(self) -> bool:
        return self.backend == MLFLOW_BACKEND

    @property
    def managed_app(self) -> bool:
        """Whether the stacks create a SageMaker MLflow App (mlflow without a URI of the user's own)."""
        return self.mlflow and self.tracking_uri is None
