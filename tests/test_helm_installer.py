"""The git Helm installer's Lambda handler, driven end to end with stand-in helm, kubectl and aws.

The stand-ins are one small Python program (STAND_IN) installed under the three names; it keeps the
release, the recorded-digests ConfigMap and a log of every call in a state directory, and behaves as
the scenario file there says: an upgrade that hangs (and stops on SIGTERM, as Helm >= 3.7 does), one
that ignores SIGTERM and must be killed (leaving the release pending, as a killed Helm does), network
steps that fail transiently a number of times, a release already pending. Each test asserts the
response sent to CloudFormation. No AWS, no network.
"""

from __future__ import annotations

import email.message
import hashlib
import importlib.util
import io
import json
import sys
import tarfile
import time
import urllib.error
from pathlib import Path

import pytest
from conftest import REPO_ROOT

HANDLER_PATH = REPO_ROOT / "stacks/components/git_helm_installer_handler/index.py"
REPOSITORY = "https://github.com/aws/sagemaker-hyperpod-cli"
COMMIT = "b01cf90676553a711ab1a8ac51422adbb09aef6b"
CHART_PATH = "helm_chart/HyperPodHelmChart"
SOURCE_NAME = f"sagemaker-hyperpod-cli-{COMMIT}.tar.gz"
DEPENDENCIES = [
    ("cert-manager", "v1.18.2", "oci://quay.io/jetstack/charts"),
    ("nvidia-device-plugin", "0.16.1", "https://nvidia.github.io/k8s-device-plugin"),
    ("mlflow", "0.1.0", "file://charts/mlflow"),
]
REMOTE_ARCHIVES = ["cert-manager-v1.18.2.tgz", "nvidia-device-plugin-0.16.1.tgz"]
# Lambda time of an invocation whose Helm never finishes: the steps before the upgrade, at least
# HELM_TIMEOUT_MIN_S (1 s in the harness) of Helm, the 1 s SIGTERM grace and the 1 s response reserve fit in
# it with room for a slow machine; the tests wait this long.
HUNG_INVOCATION_S = 5
TRANSIENT = 'Error: Get "https://10.0.1.5:443/version": dial tcp 10.0.1.5:443: i/o timeout'

STAND_IN = r"""#!PYTHON
import json, os, signal, sys, time
state = os.environ["FAKE_STATE"]
tool = os.path.basename(sys.argv[0])
args = sys.argv[1:]
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
release = load("release.json", None)
def set_release(status, bump=True):
    rel = load("release.json", None) or {"version": 0, "history": []}
    if bump:
        rel["version"] += 1
        rel["history"].append({"revision": rel["version"], "status": status})
    rel["history"][-1]["status"] = status
    rel["status"] = status
    save("release.json", rel)
if tool == "aws":
    flaky("kubeconfig")
    open(args[args.index("--kubeconfig") + 1], "w").write("apiVersion: v1")
elif tool == "kubectl":
    if args[0] == "get":
        cm = load("configmap.json", None)
        print(json.dumps(cm) if cm else "")
    elif args[0] == "apply":
        save("configmap.json", json.loads(sys.stdin.read()))
elif args[0] == "dependency" and args[1] == "list":
    print("NAME\tVERSION\tREPOSITORY\tSTATUS")
    for name, version, repo in scenario["dependencies"]:
        print(f"{name}\t{version}\t{repo}\tmissing")
elif args[0] == "pull":
    flaky("pull")
    name = args[1].rsplit("/", 1)[-1]
    version = args[args.index("--version") + 1]
    archive = f"{name}-{version}.tgz"
    content = scenario.get("tampered", {}).get(archive, "chart " + archive)
    open(os.path.join(args[args.index("--destination") + 1], archive), "w").write(content)
elif args[0] == "status":
    if release is None:
        print("Error: release: not found", file=sys.stderr); sys.exit(1)
    print(json.dumps({"info": {"status": release["status"]}, "version": release["version"]}))
elif args[0] == "history":
    print(json.dumps(release["history"]))
elif args[0] == "rollback":
    set_release("deployed")
elif args[0] == "uninstall":
    if release is None:
        print("Error: uninstall: Release not loaded: x: release: not found", file=sys.stderr); sys.exit(1)
    os.remove(os.path.join(state, "release.json"))
elif args[0] == "upgrade":
    if release and release["status"].startswith("pending"):
        print("Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress", file=sys.stderr)
        sys.exit(1)
    flaky("upgrade")
    behaviour = scenario.get("upgrade", "ok")
    if behaviour == "error":
        print("Error: no matches for kind \"Foo\"", file=sys.stderr); sys.exit(1)
    if behaviour == "hang":
        set_release("pending-upgrade" if release else "pending-install")
        def cancelled(*_):
            # Helm >= 3.7 on SIGTERM: the release is marked failed, not left pending.
            set_release("failed", bump=False)
            print("Release has been cancelled."); sys.exit(1)
        signal.signal(signal.SIGTERM, cancelled)
        time.sleep(3600)
    if behaviour == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        set_release("pending-upgrade" if release else "pending-install")
        time.sleep(3600)
    set_release("deployed")
"""


def load_handler():
    spec = importlib.util.spec_from_file_location("helm_from_git_handler_under_test", HANDLER_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def github_tarball() -> bytes:
    top = f"sagemaker-hyperpod-cli-{COMMIT}"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in (
            (f"{top}/README.md", "readme"),
            (f"{top}/{CHART_PATH}/Chart.yaml", "name: hyperpod"),
            (f"{top}/{CHART_PATH}/charts/mlflow/Chart.yaml", "name: mlflow"),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


TARBALL = github_tarball()


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


class Context:
    """Lambda's context: the invocation ends `seconds` after creation."""

    log_stream_name = "stream"

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self.end - time.monotonic()) * 1000)


class Harness:
    def __init__(self, tmp_path: Path, monkeypatch) -> None:
        self.handler = load_handler()
        self.state = tmp_path / "state"
        self.state.mkdir()
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        program = STAND_IN.replace("#!PYTHON", f"#!{sys.executable}", 1)
        for tool in ("helm", "kubectl", "aws"):
            (bin_dir / tool).write_text(program)
            (bin_dir / tool).chmod(0o755)
        h = self.handler
        monkeypatch.setattr(h, "HELM", str(bin_dir / "helm"))
        monkeypatch.setattr(h, "KUBECTL", str(bin_dir / "kubectl"))
        monkeypatch.setattr(h, "AWS_CLI", str(bin_dir / "aws"))
        # Seconds instead of minutes, so a hung Helm costs the test a few seconds.
        monkeypatch.setattr(h, "RESPONSE_RESERVE_S", 1)
        monkeypatch.setattr(h, "TERM_GRACE_S", 1)
        monkeypatch.setattr(h, "HELM_TIMEOUT_MARGIN_S", 0)
        monkeypatch.setattr(h, "HELM_TIMEOUT_MIN_S", 1)
        self.pauses: list[float] = []
        monkeypatch.setattr(h, "_sleep", self.pauses.append)
        monkeypatch.setenv("FAKE_STATE", str(self.state))
        monkeypatch.setenv("AWS_REGION", "us-west-2")
        self.download_failures = 0
        self.urls: list[str] = []
        self.files = {f"https://github.com/aws/sagemaker-hyperpod-cli/archive/{COMMIT}.tar.gz": TARBALL}
        monkeypatch.setattr(h, "_open", self.open)
        self.responses: list[dict] = []
        monkeypatch.setattr(h, "_send", lambda event, body: self.responses.append(body))
        self.scenario({})

    def open(self, url: str, timeout: float):
        self.urls.append(url)
        if len(self.urls) <= self.download_failures:
            raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
        if url not in self.files:
            raise urllib.error.HTTPError(url, 404, "Not Found", email.message.Message(), None)
        return io.BytesIO(self.files[url])

    def scenario(self, scenario: dict) -> None:
        (self.state / "scenario.json").write_text(json.dumps({"dependencies": DEPENDENCIES, **scenario}))

    def set_release(self, status: str, history: list[str]) -> None:
        entries = [{"revision": i + 1, "status": s} for i, s in enumerate(history)]
        (self.state / "release.json").write_text(
            json.dumps({"status": status, "version": len(entries), "history": entries})
        )

    @property
    def release(self) -> dict | None:
        path = self.state / "release.json"
        return json.loads(path.read_text()) if path.exists() else None

    @property
    def recorded(self) -> dict:
        path = self.state / "configmap.json"
        return json.loads(path.read_text())["data"] if path.exists() else {}

    def calls(self, tool: str = "helm") -> list[list[str]]:
        lines = (self.state / "calls.log").read_text().splitlines() if (self.state / "calls.log").exists() else []
        return [entry["args"] for entry in map(json.loads, lines) if entry["tool"] == tool]

    def helm_verbs(self) -> list[str]:
        return [args[0] if args[0] != "dependency" else "dependency " + args[1] for args in self.calls()]

    def invoke(self, request_type: str = "Create", seconds: float = 60, **properties) -> dict:
        event = {
            "RequestType": request_type, "ResponseURL": "https://example.invalid", "StackId": "stack",
            "RequestId": f"request-{len(self.responses)}", "LogicalResourceId": "HyperPodDependencies",
            "ResourceProperties": {
                "ServiceToken": "arn", "ClusterName": "skyrl-hp-eks", "Repository": REPOSITORY, "Commit": COMMIT,
                "ChartPath": CHART_PATH, "Release": "dependencies", "Namespace": "kube-system", "Values": "{}",
                **properties,
            },
        }  # fmt: skip
        if request_type != "Create":
            event["PhysicalResourceId"] = "kube-system/dependencies"
        self.handler.handler(event, Context(seconds))
        return self.responses[-1]


@pytest.fixture
def harness(tmp_path, monkeypatch) -> Harness:
    return Harness(tmp_path, monkeypatch)


# --- the normal path --------------------------------------------------------------------------------


def test_create_fetches_verifies_and_installs_without_waiting(harness):
    response = harness.invoke()
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert response["PhysicalResourceId"] == "kube-system/dependencies"
    assert response["RequestId"] == "request-0" and response["StackId"] == "stack"
    assert harness.helm_verbs() == ["dependency list", "pull", "pull", "package", "status", "upgrade"]
    # A local sub-chart already under charts/ is packaged over any archive of it the repository ships
    # (as `helm dependency update` does): Helm would otherwise load a stale archive before the folder.
    [package] = [args for args in harness.calls() if args[0] == "package"]
    assert package[1].endswith(f"{CHART_PATH}/charts/mlflow") and package[-1].endswith(f"{CHART_PATH}/charts")
    upgrade = harness.calls()[-1]
    assert upgrade[:3] == ["upgrade", "--install", "dependencies"]
    assert not {"--wait", "--atomic", "--wait-for-jobs"} & set(upgrade)
    pulls = harness.calls()[1:3]
    assert pulls[0][:4] == ["pull", "oci://quay.io/jetstack/charts/cert-manager", "--version", "v1.18.2"]
    assert pulls[1][:5] == ["pull", "nvidia-device-plugin", "--repo", DEPENDENCIES[1][2], "--version"]
    # Trust on first use: every archive's digest is recorded after the install.
    assert harness.recorded == {
        SOURCE_NAME: sha256(TARBALL),
        **{name: sha256("chart " + name) for name in REMOTE_ARCHIVES},
    }
    assert harness.release["status"] == "deployed"


def test_helm_timeout_ends_before_the_function_does(harness):
    seconds = 40
    started = time.monotonic()
    assert harness.invoke(seconds=seconds)["Status"] == "SUCCESS"
    log = [json.loads(line) for line in (harness.state / "calls.log").read_text().splitlines()]
    [upgrade] = [entry for entry in log if entry["args"][0] == "upgrade"]
    helm_timeout = int(upgrade["args"][upgrade["args"].index("--timeout") + 1].rstrip("s"))
    left_at_start = started + seconds - upgrade["at"]
    # Helm's own timeout, then the SIGTERM grace, both inside the invocation's remaining time.
    assert 0 < helm_timeout + harness.handler.TERM_GRACE_S < left_at_start


def test_second_install_verifies_against_the_recorded_digests(harness):
    assert harness.invoke()["Status"] == "SUCCESS"
    response = harness.invoke("Update")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert harness.helm_verbs().count("upgrade") == 2


# --- hung, killed, pending --------------------------------------------------------------------------


def test_hung_helm_gets_sigterm_and_the_failure_reaches_cloudformation(harness):
    harness.scenario({"upgrade": "hang"})
    started = time.monotonic()
    response = harness.invoke(seconds=HUNG_INVOCATION_S)
    elapsed = time.monotonic() - started
    assert response["Status"] == "FAILED"
    assert "did not finish" in response["Reason"] and "stopped on SIGTERM" in response["Reason"]
    assert "log stream stream" in response["Reason"]
    # Helm handled SIGTERM: the release is failed, not pending (a later upgrade can proceed).
    assert harness.release["status"] == "failed"
    assert elapsed < HUNG_INVOCATION_S, "the response must be sent before the invocation's time runs out"


def test_helm_that_ignores_sigterm_is_killed_and_the_next_run_rolls_the_pending_release_back(harness):
    harness.set_release("deployed", ["deployed"])
    harness.scenario({"upgrade": "ignore_term"})
    response = harness.invoke("Update", seconds=HUNG_INVOCATION_S)
    assert response["Status"] == "FAILED"
    assert "killed (SIGKILL)" in response["Reason"]
    assert harness.release["status"] == "pending-upgrade"

    # CloudFormation's rollback (or the next update) must not fail with "another operation is in progress".
    harness.scenario({})
    response = harness.invoke("Update")
    assert response["Status"] == "SUCCESS", response["Reason"]
    verbs = harness.helm_verbs()
    assert verbs[-4:] == ["status", "history", "rollback", "upgrade"]
    rollback = harness.calls()[-2]
    assert rollback[:3] == ["rollback", "dependencies", "1"]
    assert harness.release["status"] == "deployed"


def test_release_left_pending_install_is_uninstalled_before_installing(harness):
    harness.set_release("pending-install", ["pending-install"])
    response = harness.invoke("Update")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert harness.helm_verbs()[-4:] == ["status", "history", "uninstall", "upgrade"]
    assert harness.release["history"] == [{"revision": 1, "status": "deployed"}]


def test_pending_upgrade_rolls_back_to_the_last_deployed_revision(harness):
    harness.set_release("pending-upgrade", ["superseded", "deployed", "failed", "pending-upgrade"])
    assert harness.invoke("Update")["Status"] == "SUCCESS"
    [rollback] = [args for args in harness.calls() if args[0] == "rollback"]
    assert rollback[1:3] == ["dependencies", "2"]


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
    response = harness.invoke(Commit="0" * 40)
    assert response["Status"] == "FAILED" and "404" in response["Reason"]
    assert len(harness.urls) == 1 and "upgrade" not in harness.helm_verbs()


def test_all_downloads_share_one_deadline(harness, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(harness.handler, "_clock", lambda: clock[0])

    class SlowStream(io.BytesIO):
        def read(self, size=-1):
            clock[0] += harness.handler.DOWNLOAD_BUDGET_S / 2
            return super().read(1)

    monkeypatch.setattr(harness.handler, "_open", lambda url, timeout: SlowStream(TARBALL))
    response = harness.invoke()
    assert response["Status"] == "FAILED" and "download deadline" in response["Reason"]
    assert "upgrade" not in harness.helm_verbs()


# --- integrity ----------------------------------------------------------------------------------------


def test_a_changed_archive_fails_against_the_recorded_digest(harness):
    assert harness.invoke()["Status"] == "SUCCESS"
    harness.scenario({"tampered": {"cert-manager-v1.18.2.tgz": "something else"}})
    response = harness.invoke("Update")
    assert response["Status"] == "FAILED"
    assert f"cert-manager-v1.18.2.tgz has sha256 {sha256('something else')}" in response["Reason"]
    assert "recorded at first install" in response["Reason"]
    assert harness.helm_verbs().count("upgrade") == 1


def test_a_pinned_digest_is_enforced_on_the_first_install(harness):
    pins = {SOURCE_NAME: "a" * 64}
    response = harness.invoke(ArchiveDigests=json.dumps(pins))
    assert response["Status"] == "FAILED"
    assert f"{SOURCE_NAME} has sha256 {sha256(TARBALL)}, expected {'a' * 64} (pinned" in response["Reason"]
    assert harness.calls() == [] and harness.recorded == {}


def test_required_pins_refuse_an_unpinned_archive_and_accept_a_pinned_set(harness):
    pins = {SOURCE_NAME: sha256(TARBALL), REMOTE_ARCHIVES[0]: sha256("chart " + REMOTE_ARCHIVES[0])}
    response = harness.invoke(ArchiveDigests=json.dumps(pins), RequirePinnedDigests="true")
    assert response["Status"] == "FAILED"
    assert f"archive {REMOTE_ARCHIVES[1]} (sha256" in response["Reason"] and "pins are required" in response["Reason"]
    pins[REMOTE_ARCHIVES[1]] = sha256("chart " + REMOTE_ARCHIVES[1])
    response = harness.invoke(ArchiveDigests=json.dumps(pins), RequirePinnedDigests="true")
    assert response["Status"] == "SUCCESS", response["Reason"]


def test_a_mirror_supplies_every_archive_without_helm_pull(harness):
    mirror = "https://artifacts.example.com/helm"
    harness.files = {f"{mirror}/{n}": f"mirrored {n}".encode() for n in REMOTE_ARCHIVES}
    harness.files[f"{mirror}/{SOURCE_NAME}"] = TARBALL
    response = harness.invoke(ArchiveMirror=mirror + "/")
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert harness.urls == [f"{mirror}/{SOURCE_NAME}", *(f"{mirror}/{n}" for n in REMOTE_ARCHIVES)]
    assert "pull" not in harness.helm_verbs()
    assert harness.recorded[REMOTE_ARCHIVES[0]] == sha256(f"mirrored {REMOTE_ARCHIVES[0]}")


def test_a_mirror_needs_exact_versions(harness):
    harness.files = {f"https://m.example.com/{SOURCE_NAME}": TARBALL}
    harness.scenario({"dependencies": [("cert-manager", "~1.18", "oci://quay.io/jetstack/charts")]})
    response = harness.invoke(ArchiveMirror="https://m.example.com")
    assert response["Status"] == "FAILED" and "needs exact versions" in response["Reason"]


@pytest.mark.parametrize(
    ("properties", "problem"),
    [({"ArchiveDigests": json.dumps({"x.tgz": "ABC"})}, "64 lowercase hex"),
     ({"ArchiveDigests": json.dumps({"../x.tgz": "a" * 64})}, "archive file name"),
     ({"ArchiveMirror": "http://insecure.example.com"}, "archive mirror")],
)  # fmt: skip
def test_bad_integrity_properties_fail_before_any_download(harness, properties, problem):
    response = harness.invoke(**properties)
    assert response["Status"] == "FAILED" and problem in response["Reason"]
    assert harness.urls == []


# --- delete -------------------------------------------------------------------------------------------


def test_delete_uninstalls(harness):
    harness.set_release("deployed", ["deployed"])
    response = harness.invoke("Delete")
    assert response["Status"] == "SUCCESS" and response["PhysicalResourceId"] == "kube-system/dependencies"
    assert harness.helm_verbs() == ["uninstall"] and harness.release is None


def test_delete_tolerates_a_missing_release_and_an_unreachable_cluster(harness):
    assert harness.invoke("Delete")["Status"] == "SUCCESS"
    harness.scenario({"kubeconfig_failures": 99, "transient": TRANSIENT})
    response = harness.invoke("Delete")
    assert response["Status"] == "SUCCESS" and response["Reason"].startswith("uninstall skipped")


# --- pure helpers -------------------------------------------------------------------------------------

handler = load_handler()


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
    top = f"sagemaker-hyperpod-cli-{COMMIT}"
    names = [top, f"{top}/README.md", f"{top}/helm_chart", f"{top}/{CHART_PATH}",
             f"{top}/{CHART_PATH}/Chart.yaml", f"{top}/helm_chart/HyperPodHelmChartOther/x",
             f"{top}/{CHART_PATH}/charts/a/Chart.yaml"]  # fmt: skip
    found_top, members = handler.chart_members(names, CHART_PATH)
    assert found_top == top
    assert members == [f"{top}/{CHART_PATH}", f"{top}/{CHART_PATH}/Chart.yaml",
                       f"{top}/{CHART_PATH}/charts/a/Chart.yaml"]  # fmt: skip
    for bad in ("../etc", "/helm_chart", "helm_chart/missing"):
        with pytest.raises(ValueError):
            handler.chart_members(names, bad)


def test_extracts_only_the_chart(harness):
    assert harness.invoke()["Status"] == "SUCCESS"
    # The working directory is removed after each request; the extraction itself is checked here.
    installer = harness.handler.Installer(
        {"RequestType": "Create", "ResourceProperties": {"Release": "r", "Namespace": "n", "Repository": REPOSITORY,
                                                         "Commit": COMMIT, "ChartPath": CHART_PATH}},
        Context(60), {}, str(harness.state),
    )  # fmt: skip
    chart_dir = installer.fetch_source(harness.handler.Deadline(60), {})
    assert Path(chart_dir, "Chart.yaml").read_text() == "name: hyperpod"
    assert not (harness.state / f"sagemaker-hyperpod-cli-{COMMIT}" / "README.md").exists()


def test_dependency_list_parsing_skips_header_and_warnings():
    output = ("NAME        \tVERSION\tREPOSITORY                       \tSTATUS\n"
              "cert-manager\tv1.18.2\toci://quay.io/jetstack/charts\tmissing\n"
              "WARNING: \"charts/extra\" is not in Chart.yaml.\n")  # fmt: skip
    assert handler.parse_dependency_list(output) == [("cert-manager", "v1.18.2", "oci://quay.io/jetstack/charts")]


def test_archive_names_become_valid_configmap_keys():
    assert handler.configmap_key("chart-1.2.3+build.4.tgz") == "chart-1.2.3_build.4.tgz"
    assert handler.configmap_key(SOURCE_NAME) == SOURCE_NAME


def test_rollback_target_is_the_newest_deployed_revision_before_the_pending_one():
    history = [{"revision": 1, "status": "superseded"}, {"revision": 2, "status": "deployed"},
               {"revision": 3, "status": "failed"}, {"revision": 4, "status": "pending-upgrade"}]  # fmt: skip
    assert handler.rollback_target(history, 4) == 2
    assert handler.rollback_target([{"revision": 1, "status": "pending-install"}], 1) is None


def test_readme_states_the_installers_actual_limits():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## The git Helm installer") : readme.index("## Node storage")]
    h = handler
    for claim in (
        f"minus {h.RESPONSE_RESERVE_S} s", f"minus {h.TERM_GRACE_S} s (SIGTERM grace), minus {h.HELM_TIMEOUT_MARGIN_S} s",
        f"at most {h.HELM_TIMEOUT_MAX_S // 60} min", f"less than {h.HELM_TIMEOUT_MIN_S} s left",
        f"SIGKILL only {h.TERM_GRACE_S} s later", f"{h.ATTEMPTS} attempts",
        f"({h.BACKOFF_BASE_S:.0f} s doubling, at most {h.BACKOFF_MAX_S:.0f} s)", f"one {h.DOWNLOAD_BUDGET_S} s deadline",
        f"`{h.DIGESTS_NAMESPACE}/{h.DIGESTS_CONFIGMAP}`",
    ):  # fmt: skip
        assert claim in section, claim
