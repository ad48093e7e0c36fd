"""`skyrl-hp train stop` on the cluster: delete the experiments' RayJobs (`cluster_workloads.live_rayjobs` finds
them), and a wait_for check that is done once the RayJobs, the Ray clusters they created and those clusters'
pods are gone.

Deleting a RayJob makes KubeRay stop a Ray job that has not finished; the RayClusters the RayJob created go with
it (KubeRay made the RayJob their owner), a shared RayCluster it was submitted to stays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .cluster_workloads import RAY_CLUSTER_LABEL, LiveRayJob, raycluster_path
from .kube import Cluster


def delete_rayjobs(cluster: Cluster, jobs: list[LiveRayJob]) -> Iterator[tuple[LiveRayJob, bool]]:
    """Delete each RayJob in turn, yielding it and whether this deleted it (False: it was already gone)."""
    for job in jobs:
        yield job, cluster.delete_path(job.path)


def rayjobs_gone(cluster: Cluster, namespace: str, jobs: list[LiveRayJob]) -> Callable[[], tuple[bool, str]]:
    """A wait_for check: done once the RayJobs, the clusters they created and those clusters' pods (which hold the
    GPU nodes until they have terminated) are gone."""

    def check() -> tuple[bool, str]:
        left = [job.name for job in jobs if cluster.get(job.path) is not None]
        for name in (name for job in jobs for name in job.own_clusters):
            if cluster.get(raycluster_path(namespace, name)) is not None:
                left.append(name)
            pods = cluster.pods(namespace, f"{RAY_CLUSTER_LABEL}={name}")
            if pods:
                left.append(f"{len(pods)} pod(s) of {name}")
        return not left, f"still there: {', '.join(left)}" if left else "the RayJobs and their clusters are gone"

    return check
