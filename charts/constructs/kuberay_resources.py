"""KubeRay custom resources (ray.io/v1) as small typed constructs over `cdk8s.ApiObject`.

No `cdk8s import` of the CRDs: the generated module is 12-22 MB and slow to load, and the
manifests are validated against the CRD schemas anyway (skyrl_hyperpod.validation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import cdk8s
from constructs import Construct

from skyrl_hyperpod.config.shared_memory import object_store_memory_bytes
from skyrl_hyperpod.plumbing.upstream import KUBERAY_API_VERSION

from .ray_pods import RayPodProps, ray_pod_template

API_VERSION = KUBERAY_API_VERSION
CLUSTER_LABEL = "ray.io/cluster"

SubmissionMode = Literal["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"]


@dataclass(frozen=True)
class InTreeAutoscaling:
    """KubeRay's in-tree Ray autoscaler: the worker group scales between min_replicas and the spec's
    worker_replicas as Ray asks for resources (Ray Serve's replicas), and a worker idle for idle_timeout_seconds goes.
    https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/configuring-autoscaling.html"""

    min_replicas: int
    idle_timeout_seconds: int
    cpus: int
    memory_gib: int


@dataclass(frozen=True)
class RayClusterSpecProps:
    """A head group and one worker group: fixed-size, or scaled by KubeRay's in-tree autoscaler (`autoscaling`)."""

    ray_version: str
    head: RayPodProps
    worker_group_name: str
    worker: RayPodProps
    worker_replicas: int
    head_service_type: str = "ClusterIP"
    # NodePort/LoadBalancer only: the client CIDRs the load balancer admits.
    head_service_source_ranges: tuple[str, ...] = ()
    autoscaling: InTreeAutoscaling | None = None


# Ray token authentication on every cluster. Without secretName, KubeRay v1.7.0 creates a Secret
# named after the RayCluster (key `auth_token`, 32 random bytes, owned by the cluster) and injects
# RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (secretKeyRef) into every Ray container, the wait-gcs-ready
# init container and the RayJob submitter, and reads it for its own dashboard calls
# (ray-operator/controllers/ray/raycluster_controller.go reconcileAuthSecret, common/pod.go
# SetContainerTokenAuthEnvVars, rayjob_controller.go configureSubmitterContainer). No token ever
# appears in a manifest; each cluster (a RayJob's, each RayService generation) gets its own.
AUTH_OPTIONS = {"mode": "token"}

# Without the AWS Load Balancer Controller (this project installs none), EKS's in-tree service
# controller reconciles LoadBalancer Services: internet-facing unless `aws-load-balancer-internal`,
# a Classic ELB unless `aws-load-balancer-type: nlb`. An NLB with externalTrafficPolicy Local keeps
# the client's address, so the head's NetworkPolicy can check it. The controller, if a user adds
# it, reads `aws-load-balancer-scheme` (internal is also its default).
# https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/nlb/
# https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/
INTERNAL_LOAD_BALANCER_ANNOTATIONS = {
    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
    "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
}


def head_service(props: RayClusterSpecProps) -> dict | None:
    """The head Service KubeRay merges its ports into, for a head exposed outside the cluster."""
    if props.head_service_type == "ClusterIP":
        return None
    # Local: no second hop through another node, so the pod sees the client's own address.
    spec: dict = {"externalTrafficPolicy": "Local"}
    metadata: dict = {}
    if props.head_service_type == "LoadBalancer":
        metadata["annotations"] = dict(INTERNAL_LOAD_BALANCER_ANNOTATIONS)
        spec["loadBalancerSourceRanges"] = list(props.head_service_source_ranges)
    service: dict = {"spec": spec}
    if metadata:
        service["metadata"] = metadata
    return service


def ray_start_params(pod: RayPodProps, **params: str) -> dict[str, str]:
    """`ray start` flags of a group: Ray's object store sized to fit the pod's /dev/shm."""
    return {**params, "object-store-memory": str(object_store_memory_bytes(pod.shm_gib))}


def ray_cluster_spec(props: RayClusterSpecProps) -> dict:
    """RayClusterSpec shared by the RayCluster, a self-contained RayJob and the RayService."""
    head_group: dict = {
        "serviceType": props.head_service_type,
        # The head schedules no GPU work; the dashboard listens on all interfaces of the pod,
        # behind token authentication and the namespace's NetworkPolicies.
        "rayStartParams": ray_start_params(props.head, **{"num-gpus": "0", "dashboard-host": "0.0.0.0"}),
        "template": ray_pod_template(props.head),
    }
    service = head_service(props)
    if service:
        head_group["headService"] = service
    autoscaling = props.autoscaling
    min_replicas = props.worker_replicas if autoscaling is None else autoscaling.min_replicas
    spec: dict = {
        "rayVersion": props.ray_version,
        "enableInTreeAutoscaling": autoscaling is not None,
        "authOptions": dict(AUTH_OPTIONS),
        "headGroupSpec": head_group,
        "workerGroupSpecs": [
            {
                "groupName": props.worker_group_name,
                "replicas": min_replicas,
                "minReplicas": min_replicas,
                "maxReplicas": props.worker_replicas,
                "rayStartParams": ray_start_params(props.worker),
                "template": ray_pod_template(props.worker),
            }
        ],
    }
    if autoscaling is not None:
        quantities = {"cpu": str(autoscaling.cpus), "memory": f"{autoscaling.memory_gib}Gi"}
        spec["autoscalerOptions"] = {
            # Ray's autoscaler v2 (https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/configuring-autoscaling.html),
            # which KubeRay v1.7.0 requires for per-group idle timeouts (validateWorkerGroupIdleTimeout).
            "version": "v2",
            "upscalingMode": "Default",
            "idleTimeoutSeconds": autoscaling.idle_timeout_seconds,
            "imagePullPolicy": "IfNotPresent",
            "resources": {"requests": dict(quantities), "limits": dict(quantities)},
            "securityContext": {"allowPrivilegeEscalation": False},
        }
    return spec


class _RayObject(Construct):
    kind: str

    def __init__(self, scope: Construct, construct_id: str, *, name: str, namespace: str, spec: dict) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        self.api_object = cdk8s.ApiObject(
            self, "Resource", api_version=API_VERSION, kind=self.kind, metadata={"name": name, "namespace": namespace}
        )
        # One patch per object keeps the jsii round trips (the cost per extra experiment) constant.
        self.api_object.add_json_patch(cdk8s.JsonPatch.add("/spec", spec))


class RayCluster(_RayObject):
    kind = "RayCluster"

    def __init__(
        self, scope: Construct, construct_id: str, *, name: str, namespace: str, spec: RayClusterSpecProps
    ) -> None:
        super().__init__(scope, construct_id, name=name, namespace=namespace, spec=ray_cluster_spec(spec))


@dataclass(frozen=True)
class RayJobProps:
    entrypoint: str
    submission_mode: SubmissionMode
    active_deadline_seconds: int
    # Exactly one of: an existing cluster's name, or the spec of a cluster the job creates.
    cluster_name: str | None = None
    cluster_spec: RayClusterSpecProps | None = None
    # A job that owns its cluster: KubeRay deletionRules (a list of {condition, policy}); without them,
    # shutdownAfterJobFinishes deletes it ttl_seconds_after_finished after the job ends, whatever the outcome.
    deletion_rules: tuple[dict, ...] = ()
    ttl_seconds_after_finished: int = 0
    # Retries delete and recreate the job's cluster: only for a job that owns one.
    backoff_limit: int | None = None
    runtime_env_yaml: str | None = None

    def __post_init__(self) -> None:
        if (self.cluster_name is None) == (self.cluster_spec is None):
            raise ValueError("RayJobProps needs exactly one of cluster_name and cluster_spec")
        if self.cluster_name is not None and self.backoff_limit:
            raise ValueError("RayJobProps: KubeRay rejects backoff_limit with an existing cluster (clusterSelector)")
        if self.cluster_name is not None and self.deletion_rules:
            raise ValueError("RayJobProps: deletion rules delete the job's own cluster; a shared one is never deleted")


class RayJob(_RayObject):
    kind = "RayJob"

    def __init__(self, scope: Construct, construct_id: str, *, name: str, namespace: str, props: RayJobProps) -> None:
        spec: dict = {
            "entrypoint": props.entrypoint,
            "submissionMode": props.submission_mode,
            "activeDeadlineSeconds": props.active_deadline_seconds,
        }
        if props.backoff_limit is not None:
            spec["backoffLimit"] = props.backoff_limit
        if props.runtime_env_yaml:
            spec["runtimeEnvYAML"] = props.runtime_env_yaml
        if props.cluster_name is not None:
            # The long-lived cluster outlives its jobs: never shut it down from a RayJob.
            spec["clusterSelector"] = {CLUSTER_LABEL: props.cluster_name}
            spec["shutdownAfterJobFinishes"] = False
        elif props.cluster_spec is not None:
            spec["rayClusterSpec"] = ray_cluster_spec(props.cluster_spec)
            if props.deletion_rules:
                # KubeRay v1.7.0 refuses deletionRules beside shutdownAfterJobFinishes: true
                # (utils/validation.go validateDeletionConfiguration); the rules replace it.
                spec["deletionStrategy"] = {"deletionRules": [dict(rule) for rule in props.deletion_rules]}
                spec["shutdownAfterJobFinishes"] = False
            else:
                # The job owns its cluster: delete it (after a grace period to read logs) when done.
                spec["shutdownAfterJobFinishes"] = True
                spec["ttlSecondsAfterFinished"] = props.ttl_seconds_after_finished
        super().__init__(scope, construct_id, name=name, namespace=namespace, spec=spec)


class RayService(_RayObject):
    kind = "RayService"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        namespace: str,
        serve_config_v2: str,
        cluster: RayClusterSpecProps,
        upgrade_strategy: str,
    ) -> None:
        spec = {
            "serveConfigV2": serve_config_v2,
            "upgradeStrategy": {"type": upgrade_strategy},
            "rayClusterConfig": ray_cluster_spec(cluster),
        }
        super().__init__(scope, construct_id, name=name, namespace=namespace, spec=spec)
