"""`skyrl-hp verify`, `skyrl-hp ray submit`, `skyrl-hp dashboard`: the cluster through the kubernetes client
against a fake API server, Ray's dashboard and job API as a fake HTTP server behind the port-forward relay."""

from __future__ import annotations

import base64

import pytest
import yaml
from click.testing import CliRunner
from deployed_cluster import NAMESPACE, RAYCLUSTER, SHARED_CLUSTER, write_dist
from fake_http import FakeHttp
from fake_kube import FakeKube, pod

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import CliState
from skyrl_hyperpod.config import load_config
from skyrl_hyperpod.config.shared_memory import object_store_memory_bytes

pytestmark = pytest.mark.usefixtures("fake_aws_env", "isolated")
TOKEN = "ray-cluster-token"


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    # `ray submit` and `verify` act on the long-lived RayCluster: every command here reads ./skyrl-hp.yaml.
    (tmp_path / "skyrl-hp.yaml").write_text(yaml.safe_dump(SHARED_CLUSTER))


def run(kube: FakeKube, http: FakeHttp | None, *args: str):
    state = CliState(kube=kube.api_client(), poll_seconds=0)
    state.connector = http.connector if http else None
    return CliRunner().invoke(cli, list(args), obj=state)


def head_and_token(kube: FakeKube) -> None:
    labels = {"ray.io/cluster": RAYCLUSTER}
    kube.put(f"/api/v1/namespaces/{NAMESPACE}/pods/{RAYCLUSTER}-head",
             pod(f"{RAYCLUSTER}-head", NAMESPACE, {**labels, "ray.io/node-type": "head"}))  # fmt: skip
    kube.put(f"/api/v1/namespaces/{NAMESPACE}/secrets/{RAYCLUSTER}-token",
             {"metadata": {"name": f"{RAYCLUSTER}-token", "labels": labels},
              "data": {"auth_token": base64.b64encode(TOKEN.encode()).decode()}})  # fmt: skip


# --- ray submit ------------------------------------------------------------------------------------------------


def test_ray_submit_posts_the_rayjobs_entrypoint_with_the_clusters_token(kube, http, tmp_path):
    head_and_token(kube)
    http.routes[("POST", "/api/jobs/")] = (200, {"job_id": "raysubmit_1", "submission_id": "raysubmit_1"})
    dist = write_dist(tmp_path / "dist", load_config(None))
    result = run(kube, http, "ray", "submit", "--experiment", "maze-grpo", "--dist", str(dist))
    assert result.exit_code == 0, result.output
    assert http.forwarded == [(NAMESPACE, f"{RAYCLUSTER}-head", 8265)]
    [request] = http.requests
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    rayjob = next(yaml.safe_load_all((dist / "03-rayjobs.k8s.yaml").read_text()))
    assert request.body["entrypoint"] == rayjob["spec"]["entrypoint"]
    # The default job's variables all ride on its entrypoint (SkyRL passes them on): no runtime env to send.
    assert "runtimeEnvYAML" not in rayjob["spec"] and "runtime_env" not in request.body
    assert "submitted raysubmit_1 to RayCluster skyrl-visgym" in result.stdout


def test_ray_submit_refused_token_is_one_line(kube, http, tmp_path):
    head_and_token(kube)
    http.routes[("POST", "/api/jobs/")] = (401, {"error": "Unauthorized"})
    dist = write_dist(tmp_path / "dist", load_config(None))
    result = run(kube, http, "ray", "submit", "--experiment", "maze-grpo", "--dist", str(dist))
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("ray submit: POST http://127.0.0.1:") and "HTTP 401: the cluster's token was refused" in line


def test_ray_submit_through_the_endpoint_operator_needs_the_ray_cli(kube, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `ray` on it
    (tmp_path / "skyrl-hp.yaml").write_text(
        yaml.safe_dump(
            {
                "ray_endpoint_operator": {
                    "enabled": True,
                    "domain": "ray.example.com",
                    "commit": "a" * 40,
                    "spaces_addon_configuration": {"webBrowserAccess": True},
                },
                **SHARED_CLUSTER,
            }  # fmt: skip
        )
    )
    dist = write_dist(tmp_path / "dist", load_config(None))
    result = run(kube, None, "ray", "submit", "--experiment", "maze-grpo", "--dist", str(dist))
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "toolkit-for-ray-on-sagemaker-ai" in line and "address sagemaker_ray://skyrl-visgym/skyrl" in line


# --- dashboard -------------------------------------------------------------------------------------------------


def test_dashboard_prints_the_token_it_asks_for(kube):
    head_and_token(kube)
    result = run(kube, None, "dashboard", "--print-token")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == TOKEN


# --- verify ----------------------------------------------------------------------------------------------------


def node(name: str, instance_type: str, *, health: str = "Schedulable", ready: bool = True) -> dict:
    return {
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": instance_type,
                                              "sagemaker.amazonaws.com/node-health-status": health}},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }  # fmt: skip


def healthy_cluster(kube: FakeKube, http: FakeHttp, *, network_policy: bool = True, nccl: str = "efa") -> None:
    """A cluster where every check passes; the node summary has the shape Ray 2.58's dashboard serves
    (tests/test_ray_api_real.py reads a real one)."""
    config = load_config(None)
    head_type, worker_type = config.hyperpod.head_group.instance_type, config.hyperpod.worker_group.instance_type
    kube.put("/api/v1/nodes/head-0", node("head-0", head_type))
    for index in range(3):
        kube.put(f"/api/v1/nodes/gpu-{index}", node(f"gpu-{index}", worker_type))
    args = ["--enable-network-policy=true" if network_policy else "--enable-network-policy=false"]
    kube.put(
        "/apis/apps/v1/namespaces/kube-system/daemonsets/aws-node",
        {"spec": {"template": {"spec": {"containers": [{"name": "aws-node"}, {"name": "aws-eks-nodeagent", "args": args}]}}},
         "status": {"numberReady": 4, "desiredNumberScheduled": 4}},
    )  # fmt: skip
    kube.put("/apis/apps/v1/namespaces/kuberay-system/deployments/kuberay-operator",
             {"metadata": {"name": "kuberay-operator"}, "spec": {"replicas": 1}, "status": {"availableReplicas": 1}})  # fmt: skip
    kube.put(f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/fsx-shared", {"status": {"phase": "Bound"}})
    head_and_token(kube)
    worker = f"{RAYCLUSTER}-gpu-worker-0"
    kube.put(f"/api/v1/namespaces/{NAMESPACE}/pods/{worker}",
             pod(worker, NAMESPACE, {"ray.io/cluster": RAYCLUSTER, "ray.io/node-type": "worker"}))  # fmt: skip
    lines = {
        "efa": "NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 1 nics)\nNCCL INFO Using network Libfabric\n",
        "socket": "NCCL INFO Using network Socket\n",
        "none": "no NCCL here\n",
    }
    kube.logs[f"{NAMESPACE}/{worker}"] = lines[nccl]
    store = object_store_memory_bytes(config.derived.worker_layout.shm_gib)
    summary = [{"raylet": {"nodeManagerAddress": "10.192.128.10", "isHeadNode": True, "state": "ALIVE",
                           "resourcesTotal": {"objectStoreMemory": 6.0 * 1024**3}}}]  # fmt: skip
    summary += [
        {
            "raylet": {
                "nodeManagerAddress": f"10.192.130.{i}",
                "isHeadNode": False,
                "state": "ALIVE",
                "resourcesTotal": {"objectStoreMemory": float(store)},
            }
        }  # fmt: skip
        for i in range(3)
    ]
    http.routes[("GET", "/nodes")] = (200, {"result": True, "data": {"summary": summary}})


def test_verify_on_a_healthy_cluster_passes_every_check(kube, http):
    healthy_cluster(kube, http)
    result = run(kube, http, "verify")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    names = [line.split(None, 1)[1].split(":", 1)[0] for line in lines[:-1]]
    assert names == ["nodes head", "nodes gpu-workers", "network-policy agent", "KubeRay operator", "FSx claim",
                     "NCCL on EFA", "Ray object store"]  # fmt: skip
    assert all(line.startswith("PASS") for line in lines[:-1]), lines
    assert lines[-1] == "all checks passed"
    assert "3 workers at 48.0 GiB each" in lines[-2]
    assert http.requests[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_verify_fails_with_the_fix_when_network_policies_are_not_enforced(kube, http):
    healthy_cluster(kube, http, network_policy=False)
    result = run(kube, http, "verify")
    assert result.exit_code == 1
    line = next(line for line in result.stdout.splitlines() if "network-policy agent" in line)
    assert line.startswith("FAIL") and "enableNetworkPolicy" in line


def test_verify_reports_an_unschedulable_node_and_nccl_on_sockets(kube, http):
    healthy_cluster(kube, http, nccl="socket")
    worker_type = load_config(None).hyperpod.worker_group.instance_type
    kube.put("/api/v1/nodes/gpu-2", node("gpu-2", worker_type, health="UnschedulablePendingReplacement"))
    result = run(kube, http, "verify", "--json")
    assert result.exit_code == 1
    import json

    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["nodes gpu-workers"]["status"] == "FAIL"
    assert (
        "2 of 3" in checks["nodes gpu-workers"]["detail"]
        and "gpu-2 (UnschedulablePendingReplacement)" in checks["nodes gpu-workers"]["detail"]
    )
    assert checks["NCCL on EFA"]["status"] == "FAIL" and "TCP" in checks["NCCL on EFA"]["detail"]


def test_verify_skips_nccl_without_nccl_lines_and_flags_a_small_object_store(kube, http):
    healthy_cluster(kube, http, nccl="none")
    summary = http.routes[("GET", "/nodes")][1]["data"]["summary"]
    summary[1]["raylet"]["resourcesTotal"]["objectStoreMemory"] = 10.0 * 1024**3  # Ray fell back below /dev/shm
    result = run(kube, http, "verify")
    assert result.exit_code == 1
    lines = {line.split(":", 1)[0]: line for line in result.stdout.splitlines()}
    assert lines["SKIP  NCCL on EFA"].endswith("{NCCL_DEBUG: INFO, NCCL_DEBUG_SUBSYS: INIT,NET}")
    assert lines["FAIL  Ray object store"]


def test_verify_finds_the_agent_by_its_image_too(kube, http):
    healthy_cluster(kube, http)
    daemonset = kube.objects["/apis/apps/v1/namespaces/kube-system/daemonsets/aws-node"]
    agent = daemonset["spec"]["template"]["spec"]["containers"][1]
    agent.update(
        {
            "name": "node-agent",
            "image": "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon/aws-network-policy-agent:v1.2.0",
        }
    )
    result = run(kube, http, "verify")
    assert result.exit_code == 0, result.output
    agent["args"] = ["--enable-network-policy=false"]
    assert run(kube, http, "verify").exit_code == 1


def test_verify_expects_no_gpu_node_while_an_autoscaled_group_is_idle():
    from conftest import VARIANT_ON_DEMAND

    from skyrl_hyperpod.config import validate_config
    from skyrl_hyperpod.ops.verify import check_nodes

    config = validate_config(VARIANT_ON_DEMAND)
    head, worker = config.hyperpod.head_group, config.hyperpod.worker_group

    class Nodes:
        def __init__(self, *found: dict):
            self.found = list(found)

        def nodes(self) -> list[dict]:
            return self.found

    idle = {r.name: r for r in check_nodes(Nodes(node("head-0", head.instance_type)), config)}
    assert idle["nodes gpu-workers"].status == "PASS"
    assert idle["nodes gpu-workers"].detail == (
        "0 ml.g7e.12xlarge nodes Ready and Schedulable (scaling on_demand: 0 to 3, started for waiting Ray pods)"
    )
    # A node Karpenter started that is not healthy still fails.
    sick = Nodes(node("head-0", head.instance_type), node("gpu-0", worker.instance_type, health="Unschedulable"))
    assert {r.name: r.status for r in check_nodes(sick, config)}["nodes gpu-workers"] == "FAIL"


def test_ray_submit_on_the_defaults_names_the_setting_to_change(kube, tmp_path):
    (tmp_path / "skyrl-hp.yaml").unlink()  # the defaults: self-contained RayJobs, no long-lived RayCluster
    result = run(kube, None, "ray", "submit", "--experiment", "maze-grpo")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "set training.jobs.self_contained_jobs: false in the configuration" in line
    assert line.endswith("or start the RayJob: skyrl-hp train start")
    assert kube.requests == []
