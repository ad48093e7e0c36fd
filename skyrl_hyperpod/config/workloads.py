"""Kubernetes-side identities and locations the CDK app and the cdk8s charts must agree on.

The charts' training and serving configuration lives in training.py and serving.py.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from ..plumbing.upstream import (
    DNS1123_LABEL_PATTERN,
    HYPERPOD_DEPENDENCIES_CHART_NAMESPACES,
    HYPERPOD_OBSERVABILITY_NAMESPACE,
    KUBERNETES_INITIAL_NAMESPACES,
)
from .base import StrictModel
from .names import KUBERAY_NAMESPACE

K8S_NAME_PATTERN = DNS1123_LABEL_PATTERN

OUTPUTS_FILE_ENV_VAR = "SKYRL_HP_OUTPUTS"

# Namespaces the workloads may not take, with whose they are: the workload namespace gets default-deny ingress
# NetworkPolicies (CoreDNS in kube-system would be cut off) and `skyrl-hp teardown` deletes it. The HyperPod Ray
# endpoint operator's namespace is a setting (`ray_endpoint_operator.namespace`), checked in project.py.
RESERVED_NAMESPACES: dict[str, str] = {
    **{name: "one of the namespaces every Kubernetes cluster starts with" for name in KUBERNETES_INITIAL_NAMESPACES},
    KUBERAY_NAMESPACE: "the KubeRay operator's namespace",
    HYPERPOD_OBSERVABILITY_NAMESPACE: "the HyperPod observability add-on's namespace",
    **{name: "a namespace of the HyperPod dependencies chart" for name in HYPERPOD_DEPENDENCIES_CHART_NAMESPACES},
}


def reserved_namespace_problem(namespace: str, whose: str) -> str:
    return (
        f"{namespace!r} is {whose}: the workloads' default-deny NetworkPolicies would apply to its pods and "
        "skyrl-hp teardown deletes the workload namespace; choose one of their own, such as skyrl"
    )


def relative_path(value: str) -> str:
    """A path below the shared mount: relative, no '..', no trailing slash."""
    parts = value.strip("/").split("/") if value else []
    if not value or value.startswith("/") or ".." in parts or "" in parts:
        raise ValueError(
            "must be a relative path below the shared mount, such as models/visgym-sft (no '/' prefix, no '..')"
        )
    return value.rstrip("/")


class WorkloadsConfig(StrictModel):
    """Namespace, service accounts, shared storage and stack outputs of the Kubernetes workloads."""

    namespace: str = Field(
        default="skyrl",
        max_length=63,
        pattern=K8S_NAME_PATTERN,
        description="The workloads' own namespace (teardown deletes it): never a system or add-on one (default, "
        "kube-system, kuberay-system, ...: RESERVED_NAMESPACES).",
    )
    training_service_account: str = Field(
        default="ray-training",
        max_length=63,
        pattern=K8S_NAME_PATTERN,
        description="Read/write on the adapters prefix.",
    )
    serving_service_account: str = Field(
        default="ray-serving", max_length=63, pattern=K8S_NAME_PATTERN, description="Read-only on the adapters prefix."
    )
    adapters_prefix: str = Field(
        default="adapters",
        pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_./-]*[a-zA-Z0-9]$",
        description="Adapters live under s3://<artifacts bucket>/<adapters_prefix>/<adapter name>/.",
    )
    shared_mount_path: str = Field(
        default="/shared", pattern=r"^/[a-zA-Z0-9_./-]*[a-zA-Z0-9]$", description="Where pods mount the FSx PVC."
    )
    shared_pvc_name: str = Field(default="fsx-shared", max_length=63, pattern=K8S_NAME_PATTERN)
    outputs_file: str = Field(
        default="outputs.json",
        description=f"`cdk deploy --outputs-file` result the charts read (${OUTPUTS_FILE_ENV_VAR} overrides). "
        "Missing: placeholder values, reported as not deployable.",
    )
    hf_cache_dir: str = Field(default="cache/huggingface", description="HF_HOME, relative to the shared mount.")
    vllm_cache_dir: str = Field(default="cache/vllm", description="VLLM_CACHE_ROOT, relative to the shared mount.")

    @field_validator("namespace")
    @classmethod
    def _own_namespace(cls, value: str) -> str:
        if value in RESERVED_NAMESPACES:
            raise ValueError(reserved_namespace_problem(value, RESERVED_NAMESPACES[value]))
        return value

    @field_validator("hf_cache_dir", "vllm_cache_dir")
    @classmethod
    def _relative(cls, value: str) -> str:
        return relative_path(value)
