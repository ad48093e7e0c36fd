"""Ray closed by default: token authentication on every generated Ray cluster, and NetworkPolicies
that admit Ray's ports only from the pods that need them, checked over every manifest of every chart.

The policies are evaluated the way Kubernetes does: a pod selected by at least one policy accepts
the union of those policies' rules and nothing else.
"""

from __future__ import annotations

import json

import cdk8s
import pytest
from test_charts import STUB_SCRIPT, objects, synth

from charts import ChartInputs, build_charts, manifests
from charts.constructs.kuberay import INTERNAL_LOAD_BALANCER_ANNOTATIONS
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.constants import KUBERAY_NAMESPACE
from skyrl_hyperpod.outputs import StackOutputs
from skyrl_hyperpod.validation import validate_manifests

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


def policies_for(charts, namespace: str, labels: dict[str, str]) -> list[dict]:
    return [
        policy
        for policy in objects(charts, "NetworkPolicy")
        if policy["metadata"]["namespace"] == namespace and selects(policy["spec"]["podSelector"], labels)
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
        deny = [p for p in objects(charts, "NetworkPolicy")
                if p["metadata"]["namespace"] == namespace and p["spec"]["podSelector"] == {}]  # fmt: skip
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
    kuberay = namespace_peer(KUBERAY_NAMESPACE)
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
    inputs = ChartInputs(config=config, outputs=StackOutputs.placeholder(config), job_script=STUB_SCRIPT)
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
