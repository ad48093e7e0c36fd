"""Who may reach the Ray clusters: the NetworkPolicies of the namespace, from the configuration.

Closed by default: the namespace denies all ingress; each Ray workload's pods reach each other;
a head's dashboard/job API (8265) admits only the KubeRay operator's pods (it polls job and Serve
status there; it also probes the serving head's Serve proxy), the RayJob submitter pods (training)
and, when installed, the HyperPod Ray endpoint operator. Serve (8000) admits only
`serving.client_namespaces`; the HyperPod observability collector may scrape Ray's metrics port.
A NodePort/LoadBalancer head admits its source ranges on the dashboard and client ports.
Operators reach the rest through kubectl port-forward.

Egress: no pod of the namespace reaches the EC2 instance metadata service, so none can take the
node's IAM role (its credentials are served there); everything else stays open (see
`NO_INSTANCE_METADATA_PEERS`).
"""

from __future__ import annotations

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.plumbing.upstream import HYPERPOD_OBSERVABILITY_NAMESPACE

from .constructs.ray_network import (
    KUBERAY_OPERATOR_PEER,
    METRICS_PORT,
    RAYJOB_SUBMITTER_PEER,
    IngressRule,
    RayWorkloadAccess,
    cidr_peer,
    egress_policy_spec,
    namespace_peer,
    network_policy_spec,
)
from .constructs.ray_pods import HEAD_PORTS, SERVE_PORT
from .inputs import ChartInputs

TRAINING_COMPONENT = "ray-training"
SERVING_COMPONENT = "ray-serving"
DEFAULT_DENY_POLICY = "default-deny-ingress"
EGRESS_POLICY = "egress-no-instance-metadata"

# The EC2 instance metadata service's IPv4 address (the cluster is IPv4-only, so its IPv6 twin is unreachable
# from pods anyway): https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html
INSTANCE_METADATA_CIDR = "169.254.169.254/32"
# What the run needs has no fixed addresses: S3 and the Hugging Face hub are public endpoints behind changing
# IPs (the S3 gateway endpoint routes by prefix list, which a NetworkPolicy cannot name), FSx, the EKS API
# endpoint's ENIs and the pods are in the VPC, CoreDNS and the API server are also reached through Service
# ClusterIPs, and the EKS Pod Identity agent, which hands the pods their own roles' credentials, listens on
# the node at 169.254.170.23 (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html).
# So the pods may open any connection except to the metadata service: every IPv4 address but that one, plus
# every pod by selector (whether an ipBlock also covers pod IPs is up to the network plugin, per the
# NetworkPolicy API). EFA's RDMA traffic bypasses the kernel's IP stack, so no NetworkPolicy sees it; NCCL's
# TCP bootstrap between the pods is pod-to-pod. One rule with no ports: the VPC CNI's policy agent honours
# `except` since v1.0.4 (aws/aws-network-policy-agent#92; HyperPod's minimum vpc-cni, v1.18.3, ships a later
# agent) and mis-merges overlapping ipBlock rules with different ports (aws/aws-network-policy-agent#180).
# Ray's usage-stats cloud probe asks the metadata address with a one-second timeout and carries on.
NO_INSTANCE_METADATA_PEERS: tuple[dict, ...] = (
    cidr_peer("0.0.0.0/0", except_=(INSTANCE_METADATA_CIDR,)),
    {"namespaceSelector": {}},
)

_HEAD_PORT = dict(HEAD_PORTS)
DASHBOARD_PORT = _HEAD_PORT["dashboard"]
CLIENT_PORT = _HEAD_PORT["client"]


# With `manager.enableEndpointsByDefault: false` the HyperPod Ray endpoint operator creates an endpoint only
# for a Ray resource that carries this annotation set to "true" (AWS, "Installing the HyperPod Ray Endpoint
# Operator": https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ray-endpoint-operator.html).
ENDPOINT_OPT_IN_ANNOTATION = "access.sagemaker.amazonaws.com/enabled"


def endpoint_opt_in_annotations(config: ProjectConfig) -> dict[str, str]:
    """Annotations that give the training RayCluster (what `sagemaker_ray://<cluster>/<namespace>` addresses)
    an endpoint when the operator does not create one for every resource; none otherwise."""
    operator = config.ray_endpoint_operator
    if operator.enabled and not operator.enable_endpoints_by_default:
        return {ENDPOINT_OPT_IN_ANNOTATION: "true"}
    return {}


def _endpoint_operator_peers(inputs: ChartInputs) -> tuple[dict, ...]:
    if inputs.config.ray_endpoint_operator.enabled:
        return (namespace_peer(inputs.config.ray_endpoint_operator.namespace),)
    return ()


def _metrics_rules(inputs: ChartInputs) -> tuple[IngressRule, ...]:
    if not inputs.config.observability.enabled:
        return ()
    return (IngressRule(peers=(namespace_peer(HYPERPOD_OBSERVABILITY_NAMESPACE),), ports=(METRICS_PORT,)),)


def training_access(inputs: ChartInputs) -> RayWorkloadAccess:
    training = inputs.config.training
    head_rules = [
        IngressRule(
            peers=(KUBERAY_OPERATOR_PEER, *_endpoint_operator_peers(inputs), RAYJOB_SUBMITTER_PEER),
            ports=(DASHBOARD_PORT,),
        )
    ]
    if training.cluster.head_service_type != "ClusterIP":
        head_rules.append(
            IngressRule(
                peers=tuple(cidr_peer(cidr) for cidr in inputs.head_service_source_ranges),
                ports=(DASHBOARD_PORT, CLIENT_PORT),
            )
        )
    return RayWorkloadAccess(
        name=training.cluster.raycluster_name,
        component=TRAINING_COMPONENT,
        head_rules=tuple(head_rules),
        pod_rules=_metrics_rules(inputs),
    )


def serving_access(inputs: ChartInputs) -> RayWorkloadAccess:
    serving = inputs.config.serving
    pod_rules = list(_metrics_rules(inputs))
    if serving.client_namespaces:
        pod_rules.append(
            IngressRule(peers=tuple(namespace_peer(name) for name in serving.client_namespaces), ports=(SERVE_PORT[1],))
        )
    # The operator also calls the head's Serve proxy (/-/healthz on the serve port, by pod IP) to
    # decide whether the head takes Serve traffic (rayservice_controller.go updateHeadPodServeLabel).
    head_rules = [IngressRule(peers=(KUBERAY_OPERATOR_PEER,), ports=(DASHBOARD_PORT, SERVE_PORT[1]))]
    if endpoint_operator := _endpoint_operator_peers(inputs):
        head_rules.append(IngressRule(peers=endpoint_operator, ports=(DASHBOARD_PORT,)))
    return RayWorkloadAccess(
        name=serving.rayservice_name,
        component=SERVING_COMPONENT,
        head_rules=tuple(head_rules),
        pod_rules=tuple(pod_rules),
    )


def namespace_network_policies(inputs: ChartInputs) -> list[tuple[str, dict]]:
    """(name, spec) of every NetworkPolicy in the workloads' namespace."""
    policies = [
        (DEFAULT_DENY_POLICY, network_policy_spec({}, [])),
        (EGRESS_POLICY, egress_policy_spec({}, NO_INSTANCE_METADATA_PEERS)),
    ]
    for access in (training_access(inputs), serving_access(inputs)):
        policies.extend(access.policies())
    return policies
