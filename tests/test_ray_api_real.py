"""skyrl_hyperpod/ops/ray_api.py against a real Ray (the ray[serve] 2.58 of requirements-dev.txt) on 127.0.0.1:
the node summary `verify` reads and the job submission `ray submit` makes, through the commands' own
port-forward relay (a local socket to the dashboard stands in for the Kubernetes stream). Token auth is off
here: the drill (`make drill`) covers Ray's token on a local cluster."""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.request

import pytest

from skyrl_hyperpod.ops import ray_api
from skyrl_hyperpod.ops.portforward import LocalForward

# A Ray head with its dashboard: about a dozen processes (docs/performance.md).
pytestmark = pytest.mark.long_running(memory_heavy=True)

OBJECT_STORE_BYTES = 100 * 1024**2
# A loaded two-core machine starts the dashboard's modules slowly; Ray's own default wait is 30 s.
os.environ.setdefault("RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT", "180")


@pytest.fixture(scope="module")
def dashboard():
    import ray

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = ray.init(
        # Its own cluster: without an address Ray joins one already running on this machine (ray_current_cluster).
        address="local",
        num_cpus=1,
        object_store_memory=OBJECT_STORE_BYTES,
        include_dashboard=True,
        dashboard_host="127.0.0.1",
        dashboard_port=port,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield f"http://{context.dashboard_url}"
    finally:
        ray.shutdown()


def forwarded(url: str) -> LocalForward:
    host, port = url.removeprefix("http://").split(":")
    return LocalForward(lambda: socket.create_connection((host, int(port))))


def wait_for_summary(base: str) -> list[ray_api.NodeStore]:
    deadline = time.monotonic() + 120
    while True:
        try:
            stores = ray_api.node_object_stores(base, None)
            if stores:
                return stores
        except ray_api.RayApiError:
            if time.monotonic() > deadline:
                raise
        time.sleep(1)


def test_the_node_summary_gives_each_nodes_object_store(dashboard):
    with forwarded(dashboard) as forward:
        [head] = wait_for_summary(forward.url)
    assert head.is_head
    assert head.object_store_bytes == OBJECT_STORE_BYTES


def test_a_job_submitted_through_the_rest_api_runs(dashboard):
    with forwarded(dashboard) as forward:
        wait_for_summary(forward.url)
        submission = ray_api.submit_job(
            forward.url,
            None,
            "python -c \"import os; print(os.environ['SKYRL_TEST'])\"",
            {"env_vars": {"SKYRL_TEST": "42"}},
        )
        deadline = time.monotonic() + 180
        while True:
            with urllib.request.urlopen(f"{forward.url}/api/jobs/{submission}") as response:
                status = json.loads(response.read())["status"]
            if status in ("SUCCEEDED", "FAILED", "STOPPED") or time.monotonic() > deadline:
                break
            time.sleep(1)
        with urllib.request.urlopen(f"{forward.url}/api/jobs/{submission}/logs") as response:
            logs = json.loads(response.read())["logs"]
    assert status == "SUCCEEDED"
    # The runtime env passed through: the driver printed it on a line of its own. Not necessarily the last line:
    # Ray's supervisor writes its "Running entrypoint ..." line through a buffered file that it flushes only after
    # starting the driver (ray/dashboard/modules/job/job_supervisor.py, `_exec_entrypoint`), so on a loaded machine
    # the driver's output can come first.
    assert "42" in logs.splitlines()
