"""What KubeRay v1.7.0 does to a cluster it manages, done by hand on the drill's cluster.

- A RayJob in K8sJobMode: a submitter pod runs `/bin/bash -ce -- "<command>"`, the command
  `BuildJobSubmitCommand` builds (ray-operator/controllers/ray/common/job.go): wait for the dashboard's GCS
  health, then `ray job submit --no-wait` with the RayJob's runtimeEnvYAML as `--runtime-env-json`, its metadata
  as `--metadata-json`, its submission id and `-- <entrypoint>`, unless `ray job status` finds that id, then
  `ray job logs --follow`. The submitter container gets RAY_DASHBOARD_ADDRESS, RAY_JOB_SUBMISSION_ID,
  PYTHONUNBUFFERED=1 and the cluster's token (`configureSubmitterContainer`, rayjob_controller.go).
- A RayService: the operator PUTs serveConfigV2, as JSON, to the dashboard's /api/serve/applications/ with the
  token in the `x-ray-authorization` header (ray-operator/controllers/ray/utils/dashboardclient).
"""

from __future__ import annotations

import base64
import json
import random
import secrets
import urllib.error
import urllib.request
from typing import Any

import yaml

# k8s.io/apimachinery/pkg/util/rand.String's alphabet (no vowels, no look-alikes).
_RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GCS_HEALTH_PATH = "api/gcs_healthz"
GCS_HEALTH_TIMEOUT_SECONDS = 10
SERVE_DEPLOY_PATH = "/api/serve/applications/"


def submission_id(rayjob_name: str, rng: random.Random | None = None) -> str:
    """`GenerateRayJobId`: the RayJob's name and five random characters."""
    chooser = rng or random.SystemRandom()
    return f"{rayjob_name}-{''.join(chooser.choice(_RAND_ALPHABET) for _ in range(5))}"


def go_quote(text: str) -> str:
    """Go's strconv.Quote for the printable ASCII the manifests carry (KubeRay quotes JSON arguments with it)."""
    if any(not (ch.isascii() and ch.isprintable()) for ch in text):
        raise ValueError("the drill quotes printable ASCII only, as KubeRay's manifests here are")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def runtime_env_json(spec: dict[str, Any]) -> str:
    """runtimeEnvYAML as sigs.k8s.io/yaml.YAMLToJSON writes it: compact JSON, keys sorted."""
    text = spec.get("runtimeEnvYAML") or ""
    if not text:
        return ""
    return json.dumps(yaml.safe_load(text), separators=(",", ":"), sort_keys=True)


def submit_command(spec: dict[str, Any], *, address: str, job_id: str, entrypoint: str) -> str:
    """The K8sJobMode submitter's shell command, word for word as KubeRay v1.7.0 joins it."""
    if not address.startswith("http://"):
        address = "http://" + address
    health = (
        f"python -c \"import urllib.request; r=urllib.request.urlopen('{address}/{GCS_HEALTH_PATH}', "
        f"timeout={GCS_HEALTH_TIMEOUT_SECONDS}); exit(0 if b'success' in r.read() else 1)\""
    )
    words = ["until", health, ">/dev/null", "2>&1", ";", "do", "echo",
             go_quote(f"Waiting for Ray Dashboard GCS to become healthy at {address} ..."), ";", "sleep", "2", ";",
             "done", ";"]  # fmt: skip
    words += ["if", "!", "ray", "job", "status", "--address", address, job_id, ">/dev/null", "2>&1", ";", "then"]
    words += ["ray", "job", "submit", "--address", address, "--no-wait"]
    if runtime_env := runtime_env_json(spec):
        words += ["--runtime-env-json", go_quote(runtime_env)]
    if metadata := spec.get("metadata"):
        words += ["--metadata-json", go_quote(json.dumps(metadata, separators=(",", ":"), sort_keys=True))]
    words += ["--submission-id", job_id]
    if cpus := spec.get("entrypointNumCpus"):
        words += ["--entrypoint-num-cpus", f"{float(cpus):f}"]
    if gpus := spec.get("entrypointNumGpus"):
        words += ["--entrypoint-num-gpus", f"{float(gpus):f}"]
    if resources := spec.get("entrypointResources"):
        words += ["--entrypoint-resources", go_quote(resources)]
    words += ["--", entrypoint.strip(), ";", "fi", ";", "ray", "job", "logs", "--address", address, "--follow", job_id]
    return " ".join(words)


def submitter_argv(command: str) -> list[str]:
    """`utils.GetContainerCommand([]string{"e"})` and the command as the container's one argument."""
    return ["/bin/bash", "-ce", "--", command]


def submitter_env(cluster_env: dict[str, str], *, address: str, job_id: str) -> dict[str, str]:
    env = dict(cluster_env)
    env.update({"PYTHONUNBUFFERED": "1", "RAY_DASHBOARD_ADDRESS": address, "RAY_JOB_SUBMISSION_ID": job_id})
    return env


def random_token() -> str:
    """A token as KubeRay generates one for a cluster's auth Secret (`generateRandomToken(32)` in
    raycluster_controller.go: 32 random bytes, standard base64)."""
    return base64.b64encode(secrets.token_bytes(32)).decode()


def request(
    method: str, url: str, *, token: str | None = None, body: Any = None, header: str = "Authorization"
) -> tuple[int, str]:
    """(HTTP status, body) of one request to the dashboard; `token` goes in `header` as a Bearer token."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header(header, f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def serve_config_json(rayservice: dict[str, Any]) -> Any:
    return yaml.safe_load(rayservice["spec"]["serveConfigV2"])
