"""The Kubernetes Secrets that hold the training job's credentials (training.jobs.secret_env).

`skyrl-hp secrets set NAME KEY` writes one key of one Secret in the workload namespace; the training RayCluster's
head and worker containers name it through `secretKeyRef`, and the kubelet of the node that runs the pod reads it
when the container starts (the Node authorizer lets a kubelet read the Secrets its own pods reference:
https://kubernetes.io/docs/reference/access-authn-authz/node/), so the pods' service accounts need no Secret
permission and the value is in no manifest. EKS encrypts Secrets in etcd with the `eks` stack's KMS key
(envelope encryption: https://docs.aws.amazon.com/eks/latest/userguide/enable-kms.html).

The value is never logged, printed or part of an error message; only the Secret's name, its keys and the value's
length are.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.training import SECRET_KEY_PATTERN
from skyrl_hyperpod.config.workloads import K8S_NAME_PATTERN
from skyrl_hyperpod.plumbing.errors import ProjectError

from .kube import MANAGED_BY, MANAGED_BY_LABEL, Cluster, KubeError, managed_labels

# The API server refuses a Secret whose data is larger than 1 MiB
# (https://kubernetes.io/docs/concepts/configuration/secret/#restriction-data-size).
MAX_SECRET_BYTES = 1024 * 1024


class SecretError(ProjectError):
    """A Secret that cannot be written as asked, as one line."""


@dataclass(frozen=True)
class SecretWrite:
    namespace: str
    name: str
    key: str
    created_secret: bool
    created_namespace: bool
    keys: tuple[str, ...]  # every key the Secret holds now
    value_bytes: int


def secret_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets/{name}"


def name_problem(name: str) -> str | None:
    if len(name) > 63 or not re.fullmatch(K8S_NAME_PATTERN, name):
        return (
            f"Secret name {name!r}: must be a Kubernetes name: at most 63 lowercase letters, digits and '-', starting "
            "and ending with a letter or digit"
        )
    return None


def key_problem(key: str) -> str | None:
    if len(key) > 253 or not re.fullmatch(SECRET_KEY_PATTERN, key):
        return f"key {key!r}: must be letters, digits, '.', '_' and '-', starting with a letter or digit (at most 253)"
    return None


def reserved_problem(config: ProjectConfig, name: str) -> str | None:
    """KubeRay names each Ray cluster's token Secret after the cluster (the training RayCluster, `<RayJob>-<suffix>`,
    `<RayService>-<suffix>`) and would take a Secret of that name for its own."""
    for owner in (config.training.cluster.raycluster_name, config.serving.rayservice_name):
        if name == owner or name.startswith(f"{owner}-"):
            return f"Secret name {name!r}: KubeRay names the token Secrets of {owner!r}'s clusters so; choose another"
    return None


def references(config: ProjectConfig, name: str, key: str) -> list[str]:
    """The training.jobs.secret_env names that read key `key` of Secret `name`."""
    return [env for env, secret, ref_key in config.training.jobs.secret_env_refs if (secret, ref_key) == (name, key)]


def set_key(cluster: Cluster, config: ProjectConfig, name: str, key: str, value: bytes) -> SecretWrite:
    """Create Secret `name` in the workload namespace, or update one it made before, so that `key` holds `value`.

    The other keys of the Secret stay. A Secret skyrl-hp did not make (KubeRay's per-cluster token Secret, or one
    an operator made with kubectl) is refused, never overwritten. The write is a server-side apply of the whole
    Secret with the resourceVersion read, so a concurrent change fails (409) instead of being lost."""
    for problem in (name_problem(name), key_problem(key), reserved_problem(config, name)):
        if problem:
            raise SecretError(problem)
    if not value:
        raise SecretError("the value is empty: nothing to store")
    namespace = config.workloads.namespace
    created_namespace = False
    if cluster.get(f"/api/v1/namespaces/{namespace}") is None:
        # Before the first `train start` (which applies 01-platform, the namespace with its NetworkPolicies): a
        # namespace holding only a Secret runs no pod, and the later apply of 01-platform adopts it.
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        created_namespace = True
    live = cluster.get(secret_path(namespace, name))
    data: dict[str, str] = {}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": managed_labels(config.name_prefix)}
    if live is not None:
        live_metadata = live.get("metadata") or {}
        if (live_metadata.get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY:
            raise SecretError(
                f"Secret {namespace}/{name} exists and was not made by skyrl-hp secrets set (no label "
                f"{MANAGED_BY_LABEL}={MANAGED_BY}): refused, choose another name"
            )
        if live.get("type", "Opaque") != "Opaque":
            raise SecretError(f"Secret {namespace}/{name} is of type {live.get('type')!r}, not Opaque: refused")
        data = {str(k): str(v) for k, v in (live.get("data") or {}).items()}
        if live_metadata.get("resourceVersion"):
            metadata["resourceVersion"] = live_metadata["resourceVersion"]
    data[key] = base64.b64encode(value).decode("ascii")
    if sum(len(base64.b64decode(item)) + len(k) for k, item in data.items()) > MAX_SECRET_BYTES:
        raise SecretError(f"Secret {namespace}/{name} would hold more than 1 MiB, the API server's limit: refused")
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque", "data": data}
    try:
        cluster.apply(body)
    except KubeError as error:
        if " 409 " in f" {error} ":
            raise SecretError(
                f"Secret {namespace}/{name} changed while it was written: run the command again"
            ) from None
        raise
    return SecretWrite(
        namespace=namespace,
        name=name,
        key=key,
        created_secret=live is None,
        created_namespace=created_namespace,
        keys=tuple(sorted(data)),
        value_bytes=len(value),
    )


def missing_references(cluster: Cluster, config: ProjectConfig) -> list[tuple[str, str]]:
    """(env var name, what is missing) per training.jobs.secret_env entry the cluster cannot satisfy. A pod whose
    secretKeyRef names a missing Secret or key does not start (CreateContainerConfigError) until it exists."""
    namespace = config.workloads.namespace
    secrets: dict[str, dict[str, Any] | None] = {}
    problems = []
    for env, name, key in config.training.jobs.secret_env_refs:
        if name not in secrets:
            secrets[name] = cluster.get(secret_path(namespace, name))
        live = secrets[name]
        if live is None:
            problems.append((env, f"Secret {namespace}/{name} does not exist"))
        elif key not in (live.get("data") or {}):
            problems.append((env, f"Secret {namespace}/{name} has no key {key}"))
    return problems
