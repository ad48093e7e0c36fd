"""CloudFormation custom resource: install a Helm chart from a pinned commit of a GitHub repository.

Create/Update: download https://github.com/<owner>/<repo>/archive/<commit>.tar.gz (or the same file
from the user's mirror), extract the chart directory, fetch each remote sub-chart archive with
`helm pull` (or from the mirror), verify every archive's sha256, roll back a release left in
`pending-*`, then `helm upgrade --install` (never --wait: the releases are installed before any
HyperPod node exists). Delete: `helm uninstall`.

Nothing here may wedge a stack:
- every subprocess gets a deadline inside the function's remaining time; on expiry it receives
  SIGTERM (Helm >= 3.7 then marks the release failed instead of leaving it pending-*, helm/helm
  pull request 9180) and SIGKILL only after a grace period;
- Helm's own `--timeout` ends before that deadline, and an operation that cannot fit in the time
  left is not started;
- a release found in `pending-install|upgrade|rollback` (an earlier run killed mid-operation) is
  rolled back (or uninstalled, if it never deployed) before the upgrade, so neither this update
  nor CloudFormation's rollback fails with "another operation is in progress";
- downloads and Helm's network steps are retried with exponential backoff on transient errors, a
  bounded number of times, and all downloads of one request share one deadline;
- every failure, including a timeout, is reported to CloudFormation before Lambda stops the
  function (the custom resource's ServiceTimeout covers a function that dies anyway).

Integrity: the sha256 of every archive installed (the repository tarball and each remote
sub-chart) is compared with the pin in the resource's `ArchiveDigests`, else with the digest
recorded on the first install (trust on first use) in the ConfigMap DIGESTS_CONFIGMAP of
kube-system; a mismatch fails the install before anything is applied. New digests are recorded
after a successful install. With `RequirePinnedDigests`, an archive without a pin is refused.

Runs in Lambda with the kubectl layer (/opt/helm/helm, /opt/kubectl/kubectl) and the AWS CLI layer
(/opt/awscli/aws, used for `aws eks update-kubeconfig`). Pure functions (URLs, argument lists,
parsing) are unit tested without AWS; tests drive `handler` with stand-in executables.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TypeVar

HELM = "/opt/helm/helm"
KUBECTL = "/opt/kubectl/kubectl"
AWS_CLI = "/opt/awscli/aws"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
GITHUB_REPOSITORY = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A mirror holds files under their upstream names; only exact chart versions map to one file.
EXACT_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.+-]+)?$")
MIRROR = re.compile(r"^(?:s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:/[^\s]*)?|https://[^\s]+)$")

# Seconds kept in reserve to report to CloudFormation before Lambda stops the function.
RESPONSE_RESERVE_S = 45
# Between SIGTERM and SIGKILL: Helm records the failed release in this time.
TERM_GRACE_S = 20
# Helm's --timeout ends this long before the process deadline, so Helm stops by itself first.
HELM_TIMEOUT_MARGIN_S = 15
HELM_TIMEOUT_MAX_S = 600
# An operation with less time than this is not started (it would be killed mid-way).
HELM_TIMEOUT_MIN_S = 60
# All downloads of one request (repository tarball and sub-charts, retries included).
DOWNLOAD_BUDGET_S = 300
DOWNLOAD_CHUNK = 1 << 20
ATTEMPTS = 4
BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 30.0
# Output of a Helm/kubectl/AWS CLI run that failed for a reason worth retrying.
TRANSIENT_OUTPUT = re.compile(
    r"i/o timeout|connection refused|connection reset|TLS handshake timeout|no such host|"
    r"temporary failure in name resolution|unexpected EOF|Client\.Timeout exceeded|"
    r"server is currently unable to handle the request|etcdserver: request timed out|"
    r"too many requests|status code:? (?:429|5[0-9][0-9])|\b(?:502|503|504) ",
    re.IGNORECASE,
)
PENDING_STATUSES = ("pending-install", "pending-upgrade", "pending-rollback")
DIGESTS_CONFIGMAP = "skyrl-hp-helm-archive-digests"
DIGESTS_NAMESPACE = "kube-system"

T = TypeVar("T")


class InstallError(RuntimeError):
    """A failure reported to CloudFormation as is."""


class TransientError(InstallError):
    """A failure that may pass on a later attempt (network, throttling)."""


class CommandTimeout(InstallError):
    """A process outlived its deadline and was terminated."""


# --- pure helpers ---------------------------------------------------------------------------------


def archive_url(repository: str, commit: str) -> str:
    """GitHub's tarball URL for exactly one commit (a branch or tag name is refused)."""
    match = GITHUB_REPOSITORY.fullmatch(repository)
    if not match:
        raise ValueError(f"repository {repository!r} is not https://github.com/<owner>/<repo>")
    if not COMMIT.fullmatch(commit):
        raise ValueError(f"commit {commit!r} is not a full 40-character commit id")
    owner, repo = match.groups()
    return f"https://github.com/{owner}/{repo}/archive/{commit}.tar.gz"


def source_archive_name(repository: str, commit: str) -> str:
    """The file name GitHub gives the tarball of `commit` (and the name it has in a mirror)."""
    archive_url(repository, commit)  # raises for a repository that is not on GitHub
    match = GITHUB_REPOSITORY.fullmatch(repository)
    assert match is not None  # archive_url accepted it
    return f"{match.group(2)}-{commit}.tar.gz"


def validate_digests(digests: dict) -> dict[str, str]:
    """Archive file name -> lowercase sha256 hex; anything else is refused with the offending entry."""
    for name, digest in digests.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", str(name)):
            raise ValueError(f"archive digest key {name!r} is not an archive file name (e.g. cert-manager-v1.18.2.tgz)")
        if not SHA256.fullmatch(str(digest)):
            raise ValueError(f"archive digest for {name!r} is {digest!r}; expected a sha256 in 64 lowercase hex")
    return dict(digests)


def validate_mirror(mirror: str) -> str:
    """`s3://bucket/prefix` or `https://host/path`, without a trailing slash."""
    if not MIRROR.fullmatch(mirror):
        raise ValueError(f"archive mirror {mirror!r} is not s3://<bucket>/<prefix> or https://<host>/<path>")
    return mirror.rstrip("/")


def chart_members(names: list[str], chart_path: str) -> tuple[str, list[str]]:
    """(archive top directory, member names under <top>/<chart_path>/) of a GitHub tarball."""
    chart = PurePosixPath(chart_path.rstrip("/"))
    if chart.is_absolute() or ".." in chart.parts or not chart.parts:
        raise ValueError(f"chart path {chart_path!r} must be a relative path inside the repository")
    tops = {PurePosixPath(name).parts[0] for name in names if name}
    if len(tops) != 1:
        raise ValueError(f"expected one top-level directory in the archive, found {sorted(tops)}")
    top = tops.pop()
    root = f"{top}/{chart}"
    members = [name for name in names if name == root or name.startswith(root + "/")]
    if not members:
        raise ValueError(f"chart path {chart_path!r} is not in the archive")
    return top, members


def parse_dependency_list(output: str) -> list[tuple[str, str, str]]:
    """(name, version, repository) rows of `helm dependency list` (header and warnings skipped)."""
    rows = []
    for line in output.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[0] != "NAME" and not line.startswith("WARNING"):
            rows.append((fields[0], fields[1], fields[2]))
    return rows


def is_local(repository: str) -> bool:
    return repository.startswith("file://")


def helm_timeout(available_s: float) -> int:
    """Helm's --timeout for an operation that must end within `available_s` seconds, or an error."""
    seconds = int(min(available_s - TERM_GRACE_S - HELM_TIMEOUT_MARGIN_S, HELM_TIMEOUT_MAX_S))
    if seconds < HELM_TIMEOUT_MIN_S:
        raise InstallError(
            f"only {available_s:.0f}s left, too little for a Helm operation (needs {HELM_TIMEOUT_MIN_S}s plus "
            f"{TERM_GRACE_S + HELM_TIMEOUT_MARGIN_S}s to stop cleanly); not started"
        )
    return seconds


def kubeconfig_args(cluster_name: str, region: str, kubeconfig: str) -> list[str]:
    return [AWS_CLI, "eks", "update-kubeconfig", "--name", cluster_name, "--region", region, "--kubeconfig", kubeconfig]


def dependency_list_args(chart_dir: str) -> list[str]:
    return [HELM, "dependency", "list", chart_dir]


def pull_args(name: str, version: str, repository: str, destination: str) -> list[str]:
    if repository.startswith("oci://"):
        return [HELM, "pull", f"{repository.rstrip('/')}/{name}", "--version", version, "--destination", destination]
    if repository.startswith("https://"):
        return [HELM, "pull", name, "--repo", repository, "--version", version, "--destination", destination]
    raise InstallError(f"sub-chart {name} has repository {repository!r}; supported: https://, oci://, file://")


def package_args(chart_dir: str, destination: str) -> list[str]:
    return [HELM, "package", chart_dir, "--destination", destination]


def status_args(release: str, namespace: str) -> list[str]:
    return [HELM, "status", release, "--namespace", namespace, "--output", "json"]


def history_args(release: str, namespace: str) -> list[str]:
    return [HELM, "history", release, "--namespace", namespace, "--output", "json", "--max", "50"]


def rollback_args(release: str, revision: int, namespace: str, timeout_s: int) -> list[str]:
    return [HELM, "rollback", release, str(revision), "--namespace", namespace, "--timeout", f"{timeout_s}s"]


def upgrade_args(release: str, chart_dir: str, namespace: str, values_file: str, timeout_s: int = 600) -> list[str]:
    # No --wait/--atomic: pods cannot schedule before HyperPod nodes join.
    return [
        HELM, "upgrade", "--install", release, chart_dir,
        "--namespace", namespace, "--create-namespace",
        "--values", values_file,
        "--timeout", f"{timeout_s}s",
    ]  # fmt: skip


def uninstall_args(release: str, namespace: str, timeout_s: int = 600) -> list[str]:
    return [HELM, "uninstall", release, "--namespace", namespace, "--timeout", f"{timeout_s}s"]


def rollback_target(history: list[dict], current: int) -> int | None:
    """The newest revision before `current` that was deployed, or None (never deployed)."""
    good = [int(h["revision"]) for h in history if h.get("status") in ("deployed", "superseded")]
    earlier = [revision for revision in good if revision < current]
    return max(earlier) if earlier else None


def physical_id(properties: dict) -> str:
    """Release identity: a new namespace or release name makes CloudFormation replace (and uninstall) the old one."""
    return f"{properties['Namespace']}/{properties['Release']}"


def response_body(event: dict, status: str, reason: str, resource_id: str) -> dict:
    return {
        "Status": status,
        "Reason": reason[-3000:],
        "PhysicalResourceId": resource_id,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": {},
    }


def backoff_s(attempt: int) -> float:
    """Full-jitter exponential backoff before attempt `attempt + 1`."""
    return random.uniform(0, min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempt - 1)))


def configmap_key(archive: str) -> str:
    """`archive` as a ConfigMap key ([-._a-zA-Z0-9]+; chart versions may carry `+build` metadata)."""
    return archive.replace("+", "_")


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(DOWNLOAD_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- side effects ---------------------------------------------------------------------------------

_sleep = time.sleep
_clock = time.monotonic


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = _clock() + seconds

    def left(self) -> float:
        return self.end - _clock()


def _terminate(process: subprocess.Popen) -> str:
    """SIGTERM the process group, SIGKILL it after TERM_GRACE_S; how it ended."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return "had exited"
    try:
        process.wait(timeout=TERM_GRACE_S)
        return "stopped on SIGTERM"
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return f"ignored SIGTERM for {TERM_GRACE_S}s and was killed (SIGKILL)"


def _run(args: list[str], env: dict, deadline_s: float, stdin: str | None = None) -> str:
    """Run `args` within `deadline_s` seconds; its output, or InstallError/TransientError/CommandTimeout."""
    if deadline_s <= 0:
        raise InstallError(f"no time left to run {' '.join(args[:3])}")
    print("$", " ".join(args), flush=True)
    with tempfile.TemporaryFile("w+") as output:
        # Own process group: the signals reach Helm's children (plugins, credential helpers) too.
        process = subprocess.Popen(
            args,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            if stdin is not None and process.stdin is not None:
                process.stdin.write(stdin)
                process.stdin.close()
            process.wait(timeout=deadline_s)
            ended = None
        except subprocess.TimeoutExpired:
            ended = _terminate(process)
        output.seek(0)
        text = output.read().strip()
    print(text, flush=True)
    command = " ".join(args[:3])
    if ended is not None:
        raise CommandTimeout(f"{command} did not finish within {deadline_s:.0f}s: {ended}. Output: {text[-1000:]}")
    if process.returncode != 0:
        error = TransientError if TRANSIENT_OUTPUT.search(text) else InstallError
        raise error(f"{command} failed ({process.returncode}): {text[-1500:]}")
    return text


def _retry(what: str, attempt_fn: Callable[[], T], time_left: Callable[[], float]) -> T:
    """`attempt_fn()`, retried on TransientError up to ATTEMPTS times while time remains."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return attempt_fn()
        except TransientError as error:
            pause = backoff_s(attempt)
            if attempt == ATTEMPTS or pause >= time_left():
                raise TransientError(f"{what}: gave up after {attempt} attempt(s): {error}") from error
            print(f"{what}: attempt {attempt} failed ({error}); retrying in {pause:.1f}s", flush=True)
            _sleep(pause)
    raise AssertionError("unreachable")


def _open(url: str, timeout: float):
    """A readable stream of `url` (https:// or s3://)."""
    if url.startswith("s3://"):
        import boto3
        from botocore.config import Config

        bucket, _, key = url[len("s3://") :].partition("/")
        config = Config(connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 1})
        client = boto3.client("s3", config=config)
        return client.get_object(Bucket=bucket, Key=key)["Body"]
    return urllib.request.urlopen(url, timeout=timeout)


def _is_transient_download_error(error: Exception) -> bool:
    if isinstance(error, urllib.error.HTTPError):
        return error.code == 429 or error.code >= 500
    if isinstance(error, (urllib.error.URLError, TimeoutError, ConnectionError, OSError)):
        return True
    # botocore's network and throttling errors, without importing botocore here.
    return type(error).__name__ in {"EndpointConnectionError", "ReadTimeoutError", "ConnectTimeoutError",
                                    "ResponseStreamingError", "IncompleteReadError"}  # fmt: skip


def _download(url: str, destination: str, deadline: Deadline) -> None:
    """`url` to `destination`, within `deadline` (checked between chunks), retried on transient errors."""

    def attempt() -> None:
        if deadline.left() <= 0:
            raise InstallError(f"download deadline ({DOWNLOAD_BUDGET_S}s) passed before {url}")
        try:
            with _open(url, timeout=max(1.0, min(60.0, deadline.left()))) as response, open(destination, "wb") as out:
                while chunk := response.read(DOWNLOAD_CHUNK):
                    out.write(chunk)
                    if deadline.left() <= 0:
                        raise InstallError(f"download deadline ({DOWNLOAD_BUDGET_S}s) passed during {url}")
        except InstallError:
            raise
        except Exception as error:
            if _is_transient_download_error(error):
                raise TransientError(f"download {url}: {error}") from error
            raise InstallError(f"download {url}: {error}") from error

    _retry(f"download {url}", attempt, deadline.left)


class Installer:
    """One request's work, with the clock of the Lambda invocation."""

    def __init__(self, event: dict, context, env: dict, workdir: str) -> None:
        self.event = event
        self.properties = event["ResourceProperties"]
        self.context = context
        self.env = env
        self.workdir = workdir
        self.release = self.properties["Release"]
        self.namespace = self.properties["Namespace"]
        self.pins = validate_digests(json.loads(self.properties.get("ArchiveDigests") or "{}"))
        mirror = self.properties.get("ArchiveMirror") or ""
        self.mirror = validate_mirror(mirror) if mirror else ""
        self.require_pins = str(self.properties.get("RequirePinnedDigests", "false")).lower() == "true"
        self.observed: dict[str, str] = {}

    def remaining(self) -> float:
        return self.context.get_remaining_time_in_millis() / 1000 - RESPONSE_RESERVE_S

    def run(self, args: list[str], stdin: str | None = None) -> str:
        # Room after the deadline for SIGTERM's grace period, then the response.
        return _run(args, self.env, self.remaining() - TERM_GRACE_S, stdin=stdin)

    def run_retried(self, what: str, args_fn: Callable[[], list[str]], stdin: str | None = None) -> str:
        return _retry(what, lambda: self.run(args_fn(), stdin=stdin), self.remaining)

    # -- steps --

    def connect(self) -> None:
        args = kubeconfig_args(self.properties["ClusterName"], os.environ["AWS_REGION"], self.env["KUBECONFIG"])
        self.run_retried("aws eks update-kubeconfig", lambda: args)

    def release_status(self) -> dict | None:
        try:
            return json.loads(self.run_retried("helm status", lambda: status_args(self.release, self.namespace)))
        except InstallError as error:
            if "not found" in str(error):
                return None
            raise

    def uninstall(self) -> None:
        self.run_retried(
            "helm uninstall", lambda: uninstall_args(self.release, self.namespace, helm_timeout(self.remaining()))
        )

    def recover_pending(self) -> None:
        """Roll a release left in pending-* back to its last deployed revision (or uninstall it)."""
        status = self.release_status()
        state = ((status or {}).get("info") or {}).get("status", "")
        if status is None or state not in PENDING_STATUSES:
            return
        current = int(status.get("version", 0))
        print(f"release {self.namespace}/{self.release} is {state} at revision {current}: recovering", flush=True)
        history = json.loads(self.run_retried("helm history", lambda: history_args(self.release, self.namespace)))
        target = rollback_target(history, current)
        if target is None:
            self.uninstall()
        else:
            self.run_retried(
                "helm rollback",
                lambda: rollback_args(self.release, target, self.namespace, helm_timeout(self.remaining())),
            )

    def recorded_digests(self) -> dict[str, str]:
        args = [KUBECTL, "get", "configmap", DIGESTS_CONFIGMAP, "--namespace", DIGESTS_NAMESPACE, "--output", "json",
                "--ignore-not-found"]  # fmt: skip
        text = self.run_retried("kubectl get configmap", lambda: args)
        return dict(json.loads(text).get("data") or {}) if text.strip() else {}

    def record_digests(self, recorded: dict[str, str]) -> None:
        new = {name: digest for name, digest in self.observed.items() if recorded.get(name) != digest}
        if not new:
            return
        manifest = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": DIGESTS_CONFIGMAP,
                "namespace": DIGESTS_NAMESPACE,
                "annotations": {"skyrl-hp/purpose": "sha256 of Helm archives installed by the git Helm installer"},
            },
            "data": {**recorded, **new},
        }
        self.run_retried("kubectl apply", lambda: [KUBECTL, "apply", "--filename", "-"], stdin=json.dumps(manifest))
        print("recorded archive digests:", json.dumps(new, sort_keys=True), flush=True)

    def verify(self, name: str, path: str, recorded: dict[str, str]) -> None:
        actual = sha256_file(path)
        key = configmap_key(name)
        self.observed[key] = actual
        if name in self.pins:
            expected, origin = self.pins[name], "pinned in ArchiveDigests"
        elif self.require_pins:
            raise InstallError(f"archive {name} (sha256 {actual}) has no pin and pins are required")
        elif key in recorded:
            expected = recorded[key]
            origin = f"recorded at first install in ConfigMap {DIGESTS_NAMESPACE}/{DIGESTS_CONFIGMAP}"
        else:
            print(f"archive {name}: sha256 {actual} (first use: recorded after the install)", flush=True)
            return
        if actual != expected:
            raise InstallError(f"archive {name} has sha256 {actual}, expected {expected} ({origin}); not installed")
        print(f"archive {name}: sha256 {actual} matches ({origin})", flush=True)

    def fetch_source(self, deadline: Deadline, recorded: dict[str, str]) -> str:
        repository, commit = self.properties["Repository"], self.properties["Commit"]
        name = source_archive_name(repository, commit)
        url = f"{self.mirror}/{name}" if self.mirror else archive_url(repository, commit)
        archive = os.path.join(self.workdir, name)
        _download(url, archive, deadline)
        self.verify(name, archive, recorded)
        chart_path = self.properties["ChartPath"]
        with tarfile.open(archive, "r:gz") as tar:
            top, members = chart_members(tar.getnames(), chart_path)
            tar.extractall(self.workdir, members=[tar.getmember(m) for m in members], filter="data")
        return os.path.join(self.workdir, top, chart_path.rstrip("/"))

    def fetch_dependencies(self, chart_dir: str, deadline: Deadline, recorded: dict[str, str]) -> None:
        """Put every sub-chart Chart.yaml declares into charts/, each remote archive verified."""
        charts = os.path.join(chart_dir, "charts")
        os.makedirs(charts, exist_ok=True)
        for name, version, repository in parse_dependency_list(self.run(dependency_list_args(chart_dir))):
            if is_local(repository):
                source = os.path.normpath(os.path.join(chart_dir, repository[len("file://") :]))
                if not source.startswith(self.workdir + os.sep):
                    raise InstallError(f"sub-chart {name} points outside the downloaded repository: {repository}")
                # Packaged into charts/ as `helm dependency update` does, even when the folder already sits
                # there: a repository may also ship a stale charts/<name>-<version>.tgz of it, which Helm
                # would load first (v3.9.0 of aws/sagemaker-hyperpod-cli ships a health-monitoring-agent
                # archive that predates the folder's g7e node affinity). The package overwrites it.
                self.run(package_args(source, charts))
                continue
            landing = tempfile.mkdtemp(dir=self.workdir, prefix="pull-")
            if self.mirror:
                if not EXACT_VERSION.fullmatch(version):
                    raise InstallError(f"sub-chart {name} asks for version {version!r}; a mirror needs exact versions")
                archive = f"{name}-{version}.tgz"
                _download(f"{self.mirror}/{archive}", os.path.join(landing, archive), deadline)
            else:
                self.run_pull(name, version, repository, landing, deadline)
            [archive] = os.listdir(landing)
            self.verify(archive, os.path.join(landing, archive), recorded)
            shutil.move(os.path.join(landing, archive), os.path.join(charts, archive))

    def run_pull(self, name: str, version: str, repository: str, landing: str, deadline: Deadline) -> None:
        def attempt() -> None:
            for leftover in os.listdir(landing):
                os.remove(os.path.join(landing, leftover))
            time_left = min(deadline.left(), self.remaining() - TERM_GRACE_S)
            _run(pull_args(name, version, repository, landing), self.env, time_left)

        _retry(f"helm pull {name}", attempt, lambda: min(deadline.left(), self.remaining()))

    def upgrade(self, chart_dir: str) -> None:
        values_file = os.path.join(self.workdir, "values.json")
        with open(values_file, "w", encoding="utf-8") as out:
            out.write(self.properties.get("Values") or "{}")

        def attempt() -> str:
            # A failed attempt may itself have left the release pending.
            self.recover_pending()
            timeout_s = helm_timeout(self.remaining())
            return self.run(upgrade_args(self.release, chart_dir, self.namespace, values_file, timeout_s))

        _retry("helm upgrade", attempt, self.remaining)

    def apply(self) -> None:
        self.connect()
        if self.event["RequestType"] == "Delete":
            try:
                self.uninstall()
            except InstallError as error:
                if "not found" not in str(error):
                    raise
            return
        recorded = self.recorded_digests()
        deadline = Deadline(min(DOWNLOAD_BUDGET_S, self.remaining()))
        chart_dir = self.fetch_source(deadline, recorded)
        self.fetch_dependencies(chart_dir, deadline, recorded)
        self.upgrade(chart_dir)
        self.record_digests(recorded)


def _send(event: dict, body: dict) -> None:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        event["ResponseURL"], data=data, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(data))}
    )

    def attempt() -> None:
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                print("response status", response.status, flush=True)
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            raise TransientError(str(error)) from error

    _retry("response to CloudFormation", attempt, lambda: RESPONSE_RESERVE_S)


def handler(event: dict, context) -> None:
    print(json.dumps({k: v for k, v in event.items() if k != "ResponseURL"}), flush=True)
    workdir = tempfile.mkdtemp(prefix="helm-git-")
    env = {
        **os.environ,
        # Lambda's file system is read-only outside /tmp: every tool's home and cache goes there.
        "HOME": workdir,
        "KUBECONFIG": os.path.join(workdir, "kubeconfig"),
        "HELM_CACHE_HOME": os.path.join(workdir, "helm-cache"),
        "HELM_CONFIG_HOME": os.path.join(workdir, "helm-config"),
        "HELM_DATA_HOME": os.path.join(workdir, "helm-data"),
        "PATH": f"/opt/helm:/opt/kubectl:/opt/awscli:{os.environ.get('PATH', '')}",
    }
    status, reason = "SUCCESS", "ok"
    resource_id = event.get("PhysicalResourceId", "not-created")
    try:
        if event["RequestType"] != "Delete":
            resource_id = physical_id(event["ResourceProperties"])
        Installer(event, context, env, workdir).apply()
    except Exception as error:
        traceback.print_exc()
        if event["RequestType"] == "Delete":
            # A release that cannot be removed (cluster already gone, API unreachable) must not
            # block stack deletion; the log keeps the reason.
            reason = f"uninstall skipped: {error}"
        else:
            status, reason = "FAILED", f"{error} (log stream {getattr(context, 'log_stream_name', '?')})"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _send(event, response_body(event, status, reason, resource_id))
