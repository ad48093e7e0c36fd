"""`skyrl-hp kubeconfig`: kubectl's context for the project's cluster, as `hyp set-cluster-context` makes it.

The HyperPod CLI (aws/sagemaker-hyperpod-cli, `hyp set-cluster-context --cluster-name NAME [--namespace NS]`)
reads the EKS cluster ARN from sagemaker:DescribeCluster, runs `aws eks update-kubeconfig --name <eks>`, and
sets the context's namespace. This module writes the same entries itself, from the stack outputs (the
HyperPod cluster name) and eks:DescribeCluster, so no AWS CLI run is needed to write them: a cluster and a
user named by the EKS cluster ARN (the user's exec plugin is `aws eks get-token`, as update-kubeconfig
writes it, because kubectl calls it for every request), a context of the same name with the workloads
namespace, made current. Other entries of the file are kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .kube import ClusterEndpoint

DEFAULT_KUBECONFIG = Path("~/.kube/config")


@dataclass(frozen=True)
class EksTarget:
    hyperpod_cluster: str
    eks_cluster_arn: str
    eks_cluster_name: str


def eks_of_hyperpod(sagemaker: Any, hyperpod_cluster: str) -> EksTarget:
    """The EKS cluster a HyperPod cluster is orchestrated by (as `hyp set-cluster-context` finds it)."""
    described = sagemaker.describe_cluster(ClusterName=hyperpod_cluster)
    arn = described["Orchestrator"]["Eks"]["ClusterArn"]
    return EksTarget(hyperpod_cluster, arn, arn.rsplit("/", 1)[-1])


def kubeconfig_path(explicit: Path | None) -> Path:
    """--kubeconfig, else the first file of $KUBECONFIG, else ~/.kube/config (kubectl's order)."""
    if explicit is not None:
        return explicit
    from_env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(from_env).expanduser() if from_env else DEFAULT_KUBECONFIG.expanduser()


def _upsert(entries: list[dict[str, Any]], name: str, key: str, value: dict[str, Any]) -> list[dict[str, Any]]:
    kept = [entry for entry in entries if isinstance(entry, dict) and entry.get("name") != name]
    return [*kept, {"name": name, key: value}]


def merged_kubeconfig(
    existing: dict[str, Any] | None, endpoint: ClusterEndpoint, region: str, namespace: str, profile: str | None
) -> dict[str, Any]:
    """`existing` with the cluster's cluster, user and context entries replaced and the context made current."""
    data = dict(existing or {})
    data.setdefault("apiVersion", "v1")
    data.setdefault("kind", "Config")
    data.setdefault("preferences", {})
    name = endpoint.arn
    exec_env = [{"name": "AWS_PROFILE", "value": profile}] if profile else None
    user: dict[str, Any] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["--region", region, "eks", "get-token", "--cluster-name", endpoint.name, "--output", "json"],
            "interactiveMode": "Never",
        }
    }
    if exec_env:
        user["exec"]["env"] = exec_env
    data["clusters"] = _upsert(
        list(data.get("clusters") or []),
        name,
        "cluster",
        {"server": endpoint.endpoint, "certificate-authority-data": endpoint.certificate_authority},
    )
    data["users"] = _upsert(list(data.get("users") or []), name, "user", user)
    data["contexts"] = _upsert(
        list(data.get("contexts") or []), name, "context", {"cluster": name, "user": name, "namespace": namespace}
    )
    data["current-context"] = name
    return data


def write_kubeconfig(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # The file grants cluster access through the user's credentials: readable by its owner only.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through os.open
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)


def read_kubeconfig(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    if loaded is not None and not isinstance(loaded, dict):
        raise ValueError(f"{path} is not a kubeconfig (a mapping at the top level)")
    return loaded
