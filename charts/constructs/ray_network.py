"""NetworkPolicies that close Ray's ports to everything but the pods that need them.

Ray's dashboard/job API runs arbitrary code for whoever reaches it, and pod IPs are routable in the
VPC; token authentication (authOptions on every cluster, see kuberay_resources.py) is the first lock, these
policies the second. Built as plain dicts, like the KubeRay objects, and checked against
Kubernetes' own NetworkPolicy schema by the validation step.

Every Ray pod carries a component label (`ray_workload_labels`), so a policy selects a workload's
pods whatever name KubeRay gives the cluster (a RayJob's or a RayService's cluster is named with a
random suffix). kubectl port-forward and the kubelet's probes are not subject to these policies:
port-forward enters the pod's own network namespace, and the VPC CNI's policy agent always admits
the node's own IP (aws/aws-network-policy-agent#65).
"""

from __future__ import annotations

from dataclasses import dataclass

import cdk8s
from constructs import Construct

from skyrl_hyperpod.config.names import KUBERAY_NAMESPACE, KUBERAY_OPERATOR_RELEASE
from skyrl_hyperpod.plumbing.upstream import KUBERAY_OPERATOR_CHART

API_VERSION = "networking.k8s.io/v1"
COMPONENT_LABEL = "app.kubernetes.io/component"
# KubeRay's labels (ray-operator/controllers/ray/utils/constant.go, v1.7.0).
NODE_TYPE_LABEL = "ray.io/node-type"
ORIGINATED_FROM_CRD_LABEL = "ray.io/originated-from-crd"
CREATED_BY_LABEL = "app.kubernetes.io/created-by"
KUBERAY_OPERATOR = "kuberay-operator"
# Set by the API server on every namespace (Kubernetes 1.22+): selects a namespace by its name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# KubeRay's default metrics export port on every Ray container (DefaultMetricsPort, v1.7.0).
METRICS_PORT = 8080


def ray_workload_labels(component: str) -> dict[str, str]:
    """Labels of every pod of one Ray workload (training or serving)."""
    return {COMPONENT_LABEL: component}


def namespace_peer(name: str) -> dict:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}


def pod_peer(labels: dict[str, str]) -> dict:
    """Pods with these labels in the policy's own namespace."""
    return {"podSelector": {"matchLabels": dict(labels)}}


def namespaced_pod_peer(namespace: str, labels: dict[str, str]) -> dict:
    """Pods with these labels in that namespace only (both selectors in one peer: their intersection)."""
    return {**namespace_peer(namespace), **pod_peer(labels)}


def cidr_peer(cidr: str, *, except_: tuple[str, ...] = ()) -> dict:
    block: dict = {"cidr": cidr}
    if except_:
        block["except"] = list(except_)
    return {"ipBlock": block}


# The KubeRay operator's own pods, by the selector labels its chart puts on them (upstream.py), not every
# pod of its namespace: whatever else runs in kuberay-system does not reach a head's job API.
KUBERAY_OPERATOR_PEER = namespaced_pod_peer(
    KUBERAY_NAMESPACE,
    {"app.kubernetes.io/name": KUBERAY_OPERATOR_CHART, "app.kubernetes.io/instance": KUBERAY_OPERATOR_RELEASE},
)


# The RayJob submitter (K8sJobMode) is a Job pod KubeRay creates with these labels; it calls the
# head's job API (ray-operator/controllers/ray/rayjob_controller.go, getSubmitterTemplate).
RAYJOB_SUBMITTER_PEER = pod_peer({ORIGINATED_FROM_CRD_LABEL: "RayJob", CREATED_BY_LABEL: KUBERAY_OPERATOR})


@dataclass(frozen=True)
class IngressRule:
    """Who may reach which TCP ports. No ports: every port."""

    peers: tuple[dict, ...]
    ports: tuple[int, ...] = ()

    def to_json(self) -> dict:
        rule: dict = {"from": list(self.peers)}
        if self.ports:
            rule["ports"] = [{"protocol": "TCP", "port": port} for port in self.ports]
        return rule


def network_policy_spec(pod_labels: dict[str, str], rules: list[IngressRule]) -> dict:
    """Ingress-only policy: the selected pods accept what the rules list and nothing else."""
    selector = {"matchLabels": dict(pod_labels)} if pod_labels else {}
    spec: dict = {"podSelector": selector, "policyTypes": ["Ingress"]}
    if rules:
        spec["ingress"] = [rule.to_json() for rule in rules]
    return spec


def egress_policy_spec(pod_labels: dict[str, str], peers: tuple[dict, ...]) -> dict:
    """Egress-only policy: the selected pods may open connections (any port, any protocol) to the peers
    and nowhere else."""
    selector = {"matchLabels": dict(pod_labels)} if pod_labels else {}
    return {"podSelector": selector, "policyTypes": ["Egress"], "egress": [{"to": [dict(peer) for peer in peers]}]}


class NetworkPolicy(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, name: str, namespace: str, spec: dict) -> None:
        super().__init__(scope, construct_id)
        self.api_object = cdk8s.ApiObject(
            self,
            "Resource",
            api_version=API_VERSION,
            kind="NetworkPolicy",
            metadata={"name": name, "namespace": namespace},
        )
        self.api_object.add_json_patch(cdk8s.JsonPatch.add("/spec", spec))


@dataclass(frozen=True)
class RayWorkloadAccess:
    """One Ray workload's ingress: its pods talk to each other on every port (GCS, raylets, object
    managers, workers and agents use ranges and random ports); everything else is listed."""

    name: str
    component: str
    # Rules for the head pod only (dashboard/job API, client, GCS).
    head_rules: tuple[IngressRule, ...]
    # Rules for every pod of the workload (Serve's proxies, metrics).
    pod_rules: tuple[IngressRule, ...] = ()

    def policies(self) -> list[tuple[str, dict]]:
        labels = ray_workload_labels(self.component)
        internal = IngressRule(peers=(pod_peer(labels),))
        return [
            (f"{self.name}-ray-pods", network_policy_spec(labels, [internal, *self.pod_rules])),
            (f"{self.name}-ray-head", network_policy_spec({**labels, NODE_TYPE_LABEL: "head"}, list(self.head_rules))),
        ]
