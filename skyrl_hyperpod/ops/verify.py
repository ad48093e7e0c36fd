"""`skyrl-hp verify`: the post-deploy checks, one line each (PASS, FAIL with the fix, or SKIP saying why).

- nodes per HyperPod group Ready and Schedulable (`sagemaker.amazonaws.com/node-health-status`, set by
  HyperPod's health checks: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html);
- the VPC CNI's network-policy agent on (the `aws-eks-nodeagent` container of the `aws-node` DaemonSet runs
  with `--enable-network-policy=true` when the add-on's enableNetworkPolicy is set,
  https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html); without it the
  namespace's NetworkPolicies are not enforced;
- the KubeRay operator's Deployments available;
- the FSx claim Bound;
- NCCL on EFA, from a training worker's log (NCCL's INFO lines, docs/runbook.md, "EFA");
- Ray's object store per worker, as `ray status` reports it, against the size the pods configure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.names import KUBERAY_NAMESPACE
from skyrl_hyperpod.config.shared_memory import GIB, object_store_memory_bytes
from skyrl_hyperpod.plumbing.upstream import INSTANCE_TYPE_LABEL

from .kube import Cluster, KubeError
from .preflight import CheckResult
from .ray_api import NodeStore, RayApiError

HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
SCHEDULABLE = "Schedulable"
CNI_DAEMONSET = "/apis/apps/v1/namespaces/kube-system/daemonsets/aws-node"
# The agent's container is `aws-eks-nodeagent` in the add-on's DaemonSet; its image (and some manifests'
# container name) is aws-network-policy-agent.
NODE_AGENT_CONTAINER = "aws-eks-nodeagent"
NODE_AGENT_IMAGE = "aws-network-policy-agent"
NETWORK_POLICY_FLAG = "--enable-network-policy=true"
NCCL_LOG_LINES = 20000
NCCL_EFA_MARKERS = ("Selected provider is efa", "Using network Libfabric", "Using network AWS Libfabric")
NCCL_SOCKET_MARKER = "Using network Socket"


def _guard(name: str, check: Callable[[], list[CheckResult]]) -> list[CheckResult]:
    try:
        return check()
    except (KubeError, RayApiError) as error:
        return [CheckResult("FAIL", name, str(error))]


def _node_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def check_nodes(cluster: Cluster, config: ProjectConfig) -> list[CheckResult]:
    nodes = cluster.nodes()
    results = []
    for group in config.hyperpod.instance_groups.values():
        mine = [
            n
            for n in nodes
            if ((n.get("metadata") or {}).get("labels") or {}).get(INSTANCE_TYPE_LABEL) == group.instance_type
        ]
        good = [
            n for n in mine if _node_ready(n) and (n["metadata"].get("labels") or {}).get(HEALTH_LABEL) == SCHEDULABLE
        ]
        name = f"nodes {group.name}"
        detail = f"{len(good)} of {group.instance_count} {group.instance_type} nodes Ready and Schedulable"
        if group.autoscaled:
            # Karpenter starts these nodes for waiting Ray pods: none is the state while no job runs.
            detail = (
                f"{len(good)} {group.instance_type} nodes Ready and Schedulable (scaling on_demand: 0 to "
                f"{group.instance_count}, started for waiting Ray pods)"
            )
        if len(good) == len(mine) if group.autoscaled else len(good) >= group.instance_count:
            results.append(CheckResult("PASS", name, detail))
            continue
        others = sorted(
            f"{n['metadata']['name']} ({(n['metadata'].get('labels') or {}).get(HEALTH_LABEL, 'no health label')}"
            f"{'' if _node_ready(n) else ', NotReady'})"
            for n in mine
            if n not in good
        )
        results.append(
            CheckResult(
                "FAIL",
                name,
                detail + (f"; {', '.join(others)}" if others else f"; {len(mine)} registered"),
                "deep health checks take a while after a deploy; `skyrl-hp status` shows HyperPod's view of each node",
            )
        )
    return results


def check_network_policy_agent(cluster: Cluster) -> list[CheckResult]:
    name = "network-policy agent"
    daemonset = cluster.get(CNI_DAEMONSET)
    if daemonset is None:
        return [
            CheckResult("FAIL", name, "kube-system/aws-node (the VPC CNI) is missing", "install the vpc-cni add-on")
        ]
    containers = (((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    agent = next(
        (
            c
            for c in containers
            if c.get("name") in (NODE_AGENT_CONTAINER, NODE_AGENT_IMAGE) or NODE_AGENT_IMAGE in str(c.get("image"))
        ),
        None,
    )
    if agent is None or NETWORK_POLICY_FLAG not in (agent.get("args") or []):
        return [
            CheckResult(
                "FAIL",
                name,
                "the VPC CNI runs without network policy enforcement: the namespace's NetworkPolicies do nothing",
                'set the vpc-cni add-on\'s configuration enableNetworkPolicy: "true" (the eks stack does) and redeploy',
            )
        ]
    status = daemonset.get("status") or {}
    ready, wanted = status.get("numberReady", 0), status.get("desiredNumberScheduled", 0)
    if ready < wanted:
        return [CheckResult("FAIL", name, f"on, but ready on {ready} of {wanted} nodes", "kube-system/aws-node pods")]
    return [CheckResult("PASS", name, f"on ({NETWORK_POLICY_FLAG}), ready on {ready} of {wanted} nodes")]


def check_kuberay_operator(cluster: Cluster) -> list[CheckResult]:
    name = "KubeRay operator"
    deployments = cluster.list_items(f"/apis/apps/v1/namespaces/{KUBERAY_NAMESPACE}/deployments")
    if not deployments:
        return [
            CheckResult("FAIL", name, f"no Deployment in {KUBERAY_NAMESPACE}", "check the eks stack's Helm release")
        ]
    down = [
        d["metadata"]["name"]
        for d in deployments
        if (d.get("status") or {}).get("availableReplicas", 0) < ((d.get("spec") or {}).get("replicas") or 1)
    ]
    if down:
        return [CheckResult("FAIL", name, f"not available: {', '.join(down)}", f"pods in {KUBERAY_NAMESPACE}")]
    return [CheckResult("PASS", name, f"{', '.join(d['metadata']['name'] for d in deployments)} available")]


def check_fsx_claim(cluster: Cluster, config: ProjectConfig) -> list[CheckResult]:
    workloads = config.workloads
    name = "FSx claim"
    claim = cluster.get(f"/api/v1/namespaces/{workloads.namespace}/persistentvolumeclaims/{workloads.shared_pvc_name}")
    if claim is None:
        return [
            CheckResult("FAIL", name, f"{workloads.shared_pvc_name} does not exist", "skyrl-hp train start applies it")
        ]
    phase = (claim.get("status") or {}).get("phase")
    if phase != "Bound":
        return [
            CheckResult("FAIL", name, f"{workloads.shared_pvc_name} is {phase}", "check the FSx CSI driver's events")
        ]
    return [CheckResult("PASS", name, f"{workloads.shared_pvc_name} Bound")]


def check_nccl_efa(cluster: Cluster, config: ProjectConfig) -> list[CheckResult]:
    name = "NCCL on EFA"
    namespace, raycluster = config.workloads.namespace, config.training.cluster.raycluster_name
    workers = cluster.pods(namespace, f"ray.io/cluster={raycluster},ray.io/node-type=worker")
    running = [p for p in workers if (p.get("status") or {}).get("phase") == "Running"]
    if not running:
        return [CheckResult("SKIP", name, f"no running worker of RayCluster {raycluster}")]
    pod = running[0]["metadata"]["name"]
    efa = socket = False
    for line in cluster.logs(namespace, pod, tail=NCCL_LOG_LINES):
        efa = efa or any(marker in line for marker in NCCL_EFA_MARKERS)
        socket = socket or NCCL_SOCKET_MARKER in line
    if efa:
        return [CheckResult("PASS", name, f"{pod}: NCCL selected the EFA provider")]
    if socket:
        return [
            CheckResult(
                "FAIL",
                name,
                f"{pod}: NCCL fell back to TCP sockets",
                "check /dev/infiniband/uverbs0 in the worker pod and `fi_info -p efa` (docs/runbook.md, EFA)",
            )
        ]
    return [
        CheckResult(
            "SKIP",
            name,
            f"{pod}'s log has no NCCL network line: run a job with training.jobs.runtime_env_vars "
            "{NCCL_DEBUG: INFO, NCCL_DEBUG_SUBSYS: INIT,NET}",
        )
    ]


def check_object_stores(stores: list[NodeStore], config: ProjectConfig) -> list[CheckResult]:
    name = "Ray object store"
    expected = object_store_memory_bytes(config.derived.worker_layout.shm_gib)
    workers = [s for s in stores if not s.is_head]
    wanted = config.derived.worker_layout.replicas
    if len(workers) < wanted:
        return [
            CheckResult(
                "FAIL", name, f"{len(workers)} of {wanted} workers joined the Ray cluster", "skyrl-hp train status"
            )
        ]
    small = [s for s in workers if s.object_store_bytes < expected]
    sizes = ", ".join(f"{s.node_ip} {s.object_store_bytes / GIB:.1f} GiB" for s in workers)
    if small:
        return [
            CheckResult(
                "FAIL",
                name,
                f"below the configured {expected / GIB:.1f} GiB: {sizes}",
                "Ray put its store outside /dev/shm; check training.cluster.worker_shm_gib against the pod's memory",
            )
        ]
    return [CheckResult("PASS", name, f"{len(workers)} workers at {expected / GIB:.1f} GiB each: {sizes}")]


def cluster_checks(cluster: Cluster, config: ProjectConfig) -> list[CheckResult]:
    """Every check that reads the Kubernetes API only."""
    results: list[CheckResult] = []
    results += _guard("nodes", lambda: check_nodes(cluster, config))
    results += _guard("network-policy agent", lambda: check_network_policy_agent(cluster))
    results += _guard("KubeRay operator", lambda: check_kuberay_operator(cluster))
    results += _guard("FSx claim", lambda: check_fsx_claim(cluster, config))
    results += _guard("NCCL on EFA", lambda: check_nccl_efa(cluster, config))
    return results
