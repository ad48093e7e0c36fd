"""Kubernetes-side identities the CDK app and the cdk8s charts must agree on.

The charts' own configuration (training, experiments, serving) extends this module.
"""

from __future__ import annotations

from pydantic import Field

from .platform import StrictModel

_K8S_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class WorkloadsConfig(StrictModel):
    namespace: str = Field(default="skyrl", max_length=63, pattern=_K8S_NAME)
    training_service_account: str = Field(default="ray-training", max_length=63, pattern=_K8S_NAME)
    serving_service_account: str = Field(default="ray-serving", max_length=63, pattern=_K8S_NAME)
    # Adapters live under s3://<artifacts bucket>/<adapters_prefix>/<adapter name>/.
    adapters_prefix: str = Field(default="adapters", pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_./-]*[a-zA-Z0-9]$")
