"""Ray closed by default: token authentication on every generated Ray cluster, and NetworkPolicies
that admit Ray's ports only from the pods that need them and keep every pod of the namespace away from
the instance metadata service, checked over every manifest of every chart.

The policies are evaluated the way Kubernetes does: a pod selected by at least one policy of a direction
accepts (ingress) or opens (egress) the union of those policies' rules and nothing else. The evaluator
here stands in for the VPC CNI's network policy agent, which enforces them on the nodes and cannot run
without a cluster.
"""

from __future__ import annotations

import ipaddress
import json

import cdk8s
import pytest
from chart_helpers import STUB_SCRIPT, objects, synth

from charts import ChartInputs, build_charts, manifests
from charts.constructs.kuberay_resources import INTERNAL_LOAD_BALANCER_ANNOTATIONS
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.config.names import KUBERAY_NAMESPACE
from skyrl_hyperpod.validation import validate_manifests
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME
from skyrl_hyperpod.values.stack_outputs import StackOutputs

GCS, DASHBOARD, CLIENT, SERVE, METRICS = 6379, 8265, 10001, 8000, 8080
ANYONE = "<any source>"
ENDPOINT = {
    "ray_endpoint_operator": {
        "enabled": True,
        "domain": "ray.example.com",
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "spaces_addon_configuration": {"placeholder": {"enabled": True}},
        "namespace": "ray-endpoints",
    }
}

VARIANTS = {
    "defaults": {},
    "self-contained": {"training": {"jobs": {"self_contained_jobs": True}}},
    "load-balancer": {"training": {"cluster": {"head_service_type": "LoadBalancer"}}},
    "node-port-ranges": {
        "training": {"cluster": {"head_service_type": "NodePort", "head_service_source_ranges": ["10.8.0.0/24"]}}
    },
    "endpoint-and-clients": {**ENDPOINT, "serving": {"client_namespaces": ["apps"]}},
    "no-observability": {"observability": {"enabled": False}},
}


@pytest.fixture(scope="module", params=list(VARIANTS), ids=list(VARIANTS))
def variant(request):
    config = validate_config(VARIANTS[request.param])
    return config, synth(config)


def namespace_peer(name: str) -> str:
    return peer_key({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}})


def pod_peer(labels: dict[str, str]) -> str:
    return peer_key({"podSelector": {"matchLabels": labels}})


def peer_key(peer: dict) -> str:
    return json.dumps(peer, sort_keys=True)


SUBMITTER = pod_peer({"ray.io/originated-from-crd": "RayJob", "app.kubernetes.io/created-by": "kuberay-operator"})
# The operator's pods as the kuberay-operator chart v1.7.0 labels them (templates/deployment.yaml: the chart's
# name and the release, `kuberay-operator` as stacks/eks_stack.py installs it), in their namespace only.
KUBERAY_OPERATOR_PODS = peer_key(
    {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": KUBERAY_NAMESPACE}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator",
                                        "app.kubernetes.io/instance": "kuberay-operator"}},
    }
)  # fmt: skip


def ray_clusters(charts: dict[str, list[dict]]) -> list[tuple[str, str, dict]]:
    """(kind/name, namespace, RayClusterSpec) of every Ray cluster the manifests create."""
    found = [
        (f"RayCluster/{d['metadata']['name']}", d["metadata"]["namespace"], d["spec"])
        for d in objects(charts, "RayCluster")
    ]
    found += [
        (f"RayService/{d['metadata']['name']}", d["metadata"]["namespace"], d["spec"]["rayClusterConfig"])
        for d in objects(charts, "RayService")
    ]
    found += [(f"RayJob/{d['metadata']['name']}", d["metadata"]["namespace"], d["spec"]["rayClusterSpec"])
              for d in objects(charts, "RayJob") if "rayClusterSpec" in d["spec"]]  # fmt: skip
    return found


def ray_pods(charts: dict[str, list[dict]]) -> list[tuple[str, str, dict[str, str]]]:
    """(description, namespace, labels) of every Ray pod, with the node-type label KubeRay adds."""
    pods = []
    for name, namespace, spec in ray_clusters(charts):
        groups = [("head", spec["headGroupSpec"])] + [("worker", group) for group in spec["workerGroupSpecs"]]
        for node_type, group in groups:
            labels = {**group["template"].get("metadata", {}).get("labels", {}), "ray.io/node-type": node_type}
            pods.append((f"{name} {node_type}", namespace, labels))
    return pods


def selects(selector: dict, labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"evaluate {selector} in this test before relying on it"
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def policies_for(charts, namespace: str, labels: dict[str, str], direction: str = "Ingress") -> list[dict]:
    return [
        policy
        for policy in objects(charts, "NetworkPolicy")
        if policy["metadata"]["namespace"] == namespace
        and direction in policy["spec"]["policyTypes"]
        and selects(policy["spec"]["podSelector"], labels)
    ]


def admitted(charts, namespace: str, labels: dict[str, str], port: int) -> set[str]:
    """Sources that may open a TCP connection to `port` of a pod with these labels."""
    policies = policies_for(charts, namespace, labels)
    assert policies, f"no NetworkPolicy selects {labels}: every source is admitted"
    sources: set[str] = set()
    for policy in policies:
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        for rule in policy["spec"].get("ingress", []):
            ports = rule.get("ports")
            if ports is not None and not any(p.get("protocol", "TCP") == "TCP" and p["port"] == port for p in ports):
                continue
            peers = rule.get("from")
            sources |= {peer_key(peer) for peer in peers} if peers else {ANYONE}
    return sources


def test_every_ray_cluster_uses_token_auth_from_an_operator_generated_secret(variant):
    config, charts = variant
    clusters = ray_clusters(charts)
    # The RayService's cluster, plus the shared RayCluster or one cluster per self-contained RayJob.
    training_clusters = len(objects(charts, "RayJob")) if config.training.jobs.self_contained_jobs else 1
    assert len(clusters) == 1 + training_clusters
    for name, _, spec in clusters:
        # No secretName: KubeRay generates a random token per cluster; no K8s-token mode (RayCluster only).
        assert spec["authOptions"] == {"mode": "token"}, name


def test_no_manifest_carries_a_token_or_a_secret(variant):
    _, charts = variant
    documents = [doc for docs in charts.values() for doc in docs]
    assert not [doc for doc in documents if doc["kind"] == "Secret"]
    text = json.dumps(documents)
    assert "RAY_AUTH_TOKEN" not in text and "auth_token" not in text  # KubeRay injects both at pod creation


def test_every_namespace_with_ray_pods_denies_ingress_by_default(variant):
    _, charts = variant
    namespaces = {namespace for _, namespace, _ in ray_pods(charts)}
    assert namespaces
    for namespace in namespaces:
        deny = [p for p in objects(charts, "NetworkPolicy") if p["metadata"]["namespace"] == namespace
                and p["spec"]["podSelector"] == {} and "Ingress" in p["spec"]["policyTypes"]]  # fmt: skip
        assert len(deny) == 1 and "ingress" not in deny[0]["spec"]
        # In the first chart: in place before any Ray pod is created.
        assert deny[0] in charts["01-platform"]


def test_every_ray_pod_is_selected_by_its_workload_policy(variant):
    _, charts = variant
    pods = ray_pods(charts)
    assert len(pods) >= 4
    for description, namespace, labels in pods:
        own = [p for p in policies_for(charts, namespace, labels) if p["spec"]["podSelector"] != {}]
        assert own, f"{description}: only the namespace's default deny selects it"


def test_ray_ports_admit_only_the_pods_that_need_them(variant):
    config, charts = variant
    training, serving = config.training, config.serving
    endpoint = (
        {namespace_peer(config.ray_endpoint_operator.namespace)} if config.ray_endpoint_operator.enabled else set()
    )
    kuberay = KUBERAY_OPERATOR_PODS
    external = set()
    if training.cluster.head_service_type != "ClusterIP":
        ranges = training.cluster.head_service_source_ranges or [config.network.vpc_cidr]
        external = {peer_key({"ipBlock": {"cidr": cidr}}) for cidr in ranges}
    clients = {namespace_peer(name) for name in serving.client_namespaces}
    checked = set()
    for description, namespace, labels in ray_pods(charts):
        workload = labels["app.kubernetes.io/component"]
        peers = pod_peer({"app.kubernetes.io/component": workload})
        head = labels["ray.io/node-type"] == "head"
        expected = {GCS: {peers}, DASHBOARD: {peers}, CLIENT: {peers}, SERVE: {peers}}
        if workload == "ray-training" and head:
            expected[DASHBOARD] |= {kuberay, SUBMITTER} | endpoint | external
            expected[CLIENT] |= external
        if workload == "ray-serving":
            expected[SERVE] |= clients
            if head:
                expected[DASHBOARD] |= {kuberay} | endpoint
                expected[SERVE] |= {kuberay}
        for port, sources in expected.items():
            assert admitted(charts, namespace, labels, port) == sources, f"{description} port {port}"
        # Ray's worker, object manager and agent ports: the workload's own pods only.
        assert admitted(charts, namespace, labels, 10002) == {peers}
        metrics = admitted(charts, namespace, labels, METRICS) - {peers}
        assert metrics == ({namespace_peer("hyperpod-observability")} if config.observability.enabled else set())
        checked.add((workload, head))
    assert checked == {("ray-training", True), ("ray-training", False), ("ray-serving", True), ("ray-serving", False)}


def test_training_and_serving_pods_do_not_reach_each_other(default_config):
    charts = synth(default_config)
    training = {"app.kubernetes.io/component": "ray-training", "ray.io/node-type": "worker"}
    serving = pod_peer({"app.kubernetes.io/component": "ray-serving"})
    for port in (GCS, DASHBOARD, 10002, SERVE):
        assert serving not in admitted(charts, default_config.workloads.namespace, training, port)


def test_cluster_ip_head_has_no_service_override(default_config):
    charts = synth(default_config)
    for name, _, spec in ray_clusters(charts):
        assert spec["headGroupSpec"]["serviceType"] == "ClusterIP", name
        assert "headService" not in spec["headGroupSpec"], name


@pytest.mark.parametrize(("ranges", "expected"), [([], ["10.192.0.0/16"]), (["10.8.0.0/24", "192.168.4.0/22"], None)])
def test_load_balancer_head_is_internal_with_source_ranges(ranges, expected):
    config = validate_config(
        {
            "training": {
                "cluster": {"head_service_type": "LoadBalancer", "head_service_source_ranges": ranges},
                "jobs": {"self_contained_jobs": False},  # the long-lived RayCluster
            }
        }
    )
    charts = synth(config)
    (cluster,) = objects(charts, "RayCluster")
    head_group = cluster["spec"]["headGroupSpec"]
    assert head_group["serviceType"] == "LoadBalancer"
    service = head_group["headService"]
    annotations = service["metadata"]["annotations"]
    assert annotations == INTERNAL_LOAD_BALANCER_ANNOTATIONS
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] == "true"  # in-tree provider
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"  # LB controller
    assert service["spec"]["loadBalancerSourceRanges"] == (expected or ranges)
    assert service["spec"]["externalTrafficPolicy"] == "Local"  # the head's NetworkPolicy sees client addresses
    # The serving cluster keeps its ClusterIP head.
    (rayservice,) = objects(charts, "RayService")
    assert "headService" not in rayservice["spec"]["rayClusterConfig"]["headGroupSpec"]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_manifests_pass_the_validation_step(name):
    config = validate_config(VARIANTS[name])
    inputs = ChartInputs(
        config=config, outputs=StackOutputs.placeholder(config), job_files={JOB_SCRIPT_NAME: STUB_SCRIPT}
    )
    assert validate_manifests(manifests(build_charts(cdk8s.App(), inputs)), config=config) == []


def test_rayjob_submitter_is_left_to_kuberay_which_gives_it_the_token(variant):
    # KubeRay adds RAY_AUTH_MODE and RAY_AUTH_TOKEN (secretKeyRef) to the submitter it builds in
    # K8sJobMode (rayjob_controller.go configureSubmitterContainer); a custom submitter template or
    # another mode would need its own wiring.
    _, charts = variant
    jobs = objects(charts, "RayJob")
    assert jobs
    for job in jobs:
        assert job["spec"]["submissionMode"] == "K8sJobMode"
        assert "submitterPodTemplate" not in job["spec"] and "submitterConfig" not in job["spec"]


# --- egress: no pod of the namespace reaches the instance metadata service ----------------------------


def selector_matches(selector: dict, labels: dict[str, str]) -> bool:
    """A label selector; `{}` selects everything."""
    assert set(selector) <= {"matchLabels"}, f"evaluate {selector} in this test before relying on it"
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def peer_matches(peer: dict, policy_namespace: str, endpoint: dict) -> bool:
    """Whether a NetworkPolicy peer covers an endpoint: {"ip": ...} and, for a pod, "namespace" and "labels".
    ipBlock is applied to pod IPs too, as the VPC CNI's agent does (the API leaves that to the plugin)."""
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        address = ipaddress.ip_address(endpoint["ip"])
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(cidr) for cidr in block.get("except", [])
        )
    if "namespace" not in endpoint:  # selectors only ever match pods
        return False
    namespace_labels = {"kubernetes.io/metadata.name": endpoint["namespace"]}
    if "namespaceSelector" in peer:
        in_namespace = selector_matches(peer["namespaceSelector"], namespace_labels)
    else:
        in_namespace = endpoint["namespace"] == policy_namespace
    return in_namespace and selector_matches(peer.get("podSelector", {}), endpoint["labels"])


def port_matches(rule_ports: list[dict] | None, protocol: str, port: int) -> bool:
    if rule_ports is None:
        return True
    return any(
        p.get("protocol", "TCP") == protocol
        and (p.get("port") is None or p["port"] <= port <= p.get("endPort", p["port"]))
        for p in rule_ports
    )


def may_connect(charts, namespace: str, labels: dict[str, str], endpoint: dict, protocol: str, port: int) -> bool:
    """Whether a pod with these labels may open a connection to the endpoint (Kubernetes' egress semantics)."""
    policies = policies_for(charts, namespace, labels, "Egress")
    if not policies:
        return True  # not egress-isolated
    return any(
        port_matches(rule.get("ports"), protocol, port)
        and (not rule.get("to") or any(peer_matches(peer, namespace, endpoint) for peer in rule["to"]))
        for policy in policies
        for rule in policy["spec"].get("egress", [])
    )


def namespace_pods(charts, config) -> list[tuple[str, dict[str, str]]]:
    """(description, labels) of every kind of pod the manifests put in the namespace, plus any other pod."""
    pods = [(description, labels) for description, _, labels in ray_pods(charts)]
    pods.append(("RayJob submitter", json.loads(SUBMITTER)["podSelector"]["matchLabels"]))
    for job in objects(charts, "Job"):
        pods.append((f"Job/{job['metadata']['name']}", job["spec"]["template"].get("metadata", {}).get("labels", {})))
    pods.append(("a pod with no labels", {}))
    return pods


INSTANCE_METADATA = {"ip": "169.254.169.254"}


def needed_destinations(config) -> list[tuple[str, dict, str, int]]:
    """What a training or serving run connects to, with an address of the kind it has on EKS."""
    vpc = ipaddress.ip_network(config.network.vpc_cidr)
    in_vpc = str(vpc.network_address + 1234)
    return [
        ("kube-dns Service (ClusterIP)", {"ip": "172.20.0.10"}, "UDP", 53),
        ("kube-dns Service (ClusterIP, TCP)", {"ip": "10.100.0.10"}, "TCP", 53),
        ("a CoreDNS pod", {"ip": in_vpc, "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}}, "UDP", 53),
        ("the API server's Service", {"ip": "172.20.0.1"}, "TCP", 443),
        ("the EKS API endpoint's ENI in the VPC", {"ip": in_vpc}, "TCP", 443),
        ("S3 (a public address)", {"ip": "203.0.113.10"}, "TCP", 443),
        ("the model hub (a public address)", {"ip": "198.51.100.20"}, "TCP", 443),
        ("FSx for Lustre (LNET)", {"ip": in_vpc}, "TCP", 988),
        ("FSx for Lustre (1018-1023)", {"ip": in_vpc}, "TCP", 1021),
        ("the EKS Pod Identity agent", {"ip": "169.254.170.23"}, "TCP", 80),
        ("another Ray pod (NCCL bootstrap, GCS)", {"ip": in_vpc, "namespace": config.workloads.namespace,
                                                   "labels": {"app.kubernetes.io/component": "ray-training"}},
         "TCP", 6379),
    ]  # fmt: skip


def test_no_pod_of_the_namespace_reaches_instance_metadata(variant):
    config, charts = variant
    namespace = config.workloads.namespace
    pods = namespace_pods(charts, config)
    assert len(pods) >= 7
    for description, labels in pods:
        for port in (80, 443):
            assert not may_connect(charts, namespace, labels, INSTANCE_METADATA, "TCP", port), description


def test_every_pod_still_reaches_what_the_run_needs(variant):
    config, charts = variant
    namespace = config.workloads.namespace
    for description, labels in namespace_pods(charts, config):
        for what, endpoint, protocol, port in needed_destinations(config):
            assert may_connect(charts, namespace, labels, endpoint, protocol, port), f"{description} -> {what}"


def test_the_egress_policy_is_in_place_before_any_pod(default_config):
    charts = synth(default_config)
    egress = [p for p in objects(charts, "NetworkPolicy") if "Egress" in p["spec"]["policyTypes"]]
    assert egress and all(policy in charts["01-platform"] for policy in egress)
    assert all(p["spec"]["podSelector"] == {} for p in egress)  # every pod, whoever creates it


@pytest.mark.parametrize(
    ("mutation", "broken"),
    [
        (lambda rule: rule["to"][0]["ipBlock"].pop("except"), "instance metadata reachable"),
        (lambda rule: rule.update(ports=[{"protocol": "TCP", "port": 443}]), "DNS and FSx unreachable"),
        (lambda rule: rule["to"][0]["ipBlock"].update(cidr="10.0.0.0/8"), "S3 and the hub unreachable"),
    ],
    ids=["no-except", "https-only", "vpc-only"],
)
def test_the_egress_checks_catch_a_broken_policy(default_config, mutation, broken):
    charts = synth(default_config)
    namespace = default_config.workloads.namespace
    [policy] = [p for p in objects(charts, "NetworkPolicy") if "Egress" in p["spec"]["policyTypes"]]
    mutation(policy["spec"]["egress"][0])
    metadata = may_connect(charts, namespace, {}, INSTANCE_METADATA, "TCP", 80)
    needed = all(may_connect(charts, namespace, {}, endpoint, protocol, port)
                 for _, endpoint, protocol, port in needed_destinations(default_config))  # fmt: skip
    assert metadata or not needed, broken


def ingress_sources(charts, namespace: str, labels: dict[str, str], port: int, source: dict) -> bool:
    """Whether a pod `source` ({"namespace", "labels", "ip"}) may open a TCP connection to `port` of the pod."""
    return any(
        port_matches(rule.get("ports"), "TCP", port)
        and (not rule.get("from") or any(peer_matches(peer, namespace, source) for peer in rule["from"]))
        for policy in policies_for(charts, namespace, labels)
        for rule in policy["spec"].get("ingress", [])
    )


def test_only_the_kuberay_operator_pods_of_its_namespace_reach_the_job_api(variant):
    config, charts = variant
    operator = {"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/instance": "kuberay-operator",
                "app.kubernetes.io/component": "kuberay-operator"}  # fmt: skip
    # Outside every source range a NodePort/LoadBalancer head admits (those admit whoever holds the address).
    pod_ip = "100.64.7.7"
    heads = [(d, ns, labels) for d, ns, labels in ray_pods(charts) if labels["ray.io/node-type"] == "head"]
    assert len(heads) >= 2
    for description, namespace, labels in heads:
        sources = {
            "the operator": (KUBERAY_NAMESPACE, operator),
            "another pod of kuberay-system": (KUBERAY_NAMESPACE, {"app": "something-else"}),
            "a pod with only the operator's name label": (
                KUBERAY_NAMESPACE,
                {"app.kubernetes.io/name": "kuberay-operator"},
            ),
            "the operator's labels in another namespace": ("default", operator),
        }
        admitted_sources = {
            name
            for name, (source_namespace, source_labels) in sources.items()
            if ingress_sources(
                charts,
                namespace,
                labels,
                DASHBOARD,
                {"namespace": source_namespace, "labels": source_labels, "ip": pod_ip},
            )
        }
        assert admitted_sources == {"the operator"}, description


@pytest.mark.parametrize(
    ("operator", "annotations"),
    [
        ({}, {}),
        (ENDPOINT["ray_endpoint_operator"], {"access.sagemaker.amazonaws.com/enabled": "true"}),
        ({**ENDPOINT["ray_endpoint_operator"], "enable_endpoints_by_default": True}, {}),
    ],
    ids=["operator-off", "opt-in", "endpoints-by-default"],
)
def test_the_training_cluster_opts_in_to_an_endpoint_only_when_the_operator_needs_it(operator, annotations):
    # AWS: with enableEndpointsByDefault false the operator serves only resources annotated
    # access.sagemaker.amazonaws.com/enabled: "true" (sagemaker-hyperpod-ray-endpoint-operator.html).
    # The long-lived RayCluster (interactive work) is the one an endpoint reaches.
    shared = {"training": {"jobs": {"self_contained_jobs": False}}}
    charts = synth(validate_config({"ray_endpoint_operator": operator, **shared}))
    [cluster] = objects(charts, "RayCluster")
    assert cluster["metadata"].get("annotations", {}) == annotations
    # The serving cluster gets no endpoint of its own unless every resource does.
    [service] = objects(charts, "RayService")
    assert "annotations" not in service["metadata"]
