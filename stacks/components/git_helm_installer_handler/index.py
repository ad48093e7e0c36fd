"""CloudFormation custom resource: install a Helm chart from a pinned commit of a GitHub repository.

Authority: the function runs as cluster admin, so whoever may invoke it must not choose what it installs. It acts
only on its own cluster and installs only the releases fixed at synth in its own configuration (ALLOWED_RELEASES_ENV:
repository, commit, chart path, release, namespace, values, mirror, whether pins are required, and the sha256 of
the two digest lists); an Update may also re-apply exactly what this same resource applied to that release before
(the spec label on its revisions: CloudFormation's rollback of an update sends the previous properties while the
function already has the new configuration). Anything else is refused with a FAILED response. It answers only to
CloudFormation's response bucket of its own region (response_url_problem); any other ResponseURL is refused without
a request there. A Delete installs nothing: it acts only on a release whose owner label is the resource it names.

Create/Update: download https://github.com/<owner>/<repo>/archive/<commit>.tar.gz (or the same file
from the user's mirror), extract the chart directory and verify every file of it against the per-file
sha256 list shipped with the resource (`ChartFileDigests`; without one, the tarball's own pin), assemble
the chart the way Helm loads it (`assemble_chart`, chart_assembly.py), roll back a release left in
`pending-*` by a run that is certainly over, then `helm upgrade --install` (never --wait: the releases are
installed before any HyperPod node exists), the release labelled with this resource's owner id. Delete:
`helm uninstall` of a release this resource alone owns; a release another resource owned before it is handed
back to that resource (`helm rollback` to its last revision), one owned by another resource is left alone.

Nothing here may wedge a stack:
- every subprocess gets a deadline inside the function's remaining time; on expiry it receives
  SIGTERM (Helm >= 3.7 then marks the release failed instead of leaving it pending-*, helm/helm
  pull request 9180) and SIGKILL only after a grace period;
- Helm's own `--timeout` ends before that deadline, and an operation that cannot fit in the time
  left is not started;
- a release found in `pending-install|upgrade|rollback` is rolled back (or uninstalled, if it never
  deployed) before the upgrade, but only when no operation can still be running on it: it was left by
  this invocation, or its last deployment is older than the function timeout plus a grace period;
- downloads and Helm's network steps are retried with exponential backoff on transient errors, a
  bounded number of times, and all downloads of one request share one deadline;
- every failure, including a timeout, is reported to CloudFormation before Lambda stops the
  function (the custom resource's ServiceTimeout covers a function that dies anyway).

Identity: the physical id is unique per request that created it (stack id, logical id, request id), so an
identity change (release, namespace or cluster) is a replacement CloudFormation cleans up. The owner is the
resource, not its physical id: the owner label (a hash of the stack id and the logical id, owner_label) is
recorded on every revision with Helm's `--labels`, so the new physical id a rolled-back rename gets still owns
what the resource installed; the newest deployed revision's label names the owner. Delete acts only when that is
this resource: it hands the release back to the newest earlier owner that still exists (CloudFormation's rollback
of a takeover deletes the new resource while the old one stays in the stack) or to an unlabelled earlier revision
(installed by something else before this resource took it over), else uninstalls it; a Delete that owes a
hand-back and cannot do it fails. Every Delete records its label for that release in the ConfigMap
OWNERS_CONFIGMAP of kube-system, so that nothing is handed back to a deleted resource (an install by the same
resource, a logical id used again, removes the record). A release taken over by another resource, or installed
by hand, is left alone.

Integrity: every remote sub-chart archive is compared with its pin in `ArchiveDigests` (required unless
`RequirePinnedDigests` is false; then a digest recorded on the first install, in the ConfigMap
DIGESTS_CONFIGMAP of kube-system, is enforced from then on). A mismatch fails the install before
anything is applied.

Runs in Lambda with the kubectl layer (/opt/helm/helm, /opt/kubectl/kubectl) and the AWS CLI layer
(/opt/awscli/aws, used for `aws eks update-kubeconfig`). The chart assembly and the command runner under a
deadline (`run_command`) are in chart_assembly.py, next to this file, which `skyrl-hp chart-check --render`
runs offline as well.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import tarfile
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

# The chart assembly and the command runner. TERM_GRACE_S is read through the module (chart_assembly.TERM_GRACE_S),
# so that one value is both run_command's SIGTERM grace and the time this handler keeps for it.
if TYPE_CHECKING:
    # mypy reads this directory as part of the repository's `stacks` package.
    from stacks.components.git_helm_installer_handler import chart_assembly
    from stacks.components.git_helm_installer_handler.chart_assembly import (
        DOWNLOAD_CHUNK,
        EXACT_VERSION,
        Assembly,
        Deadline,
        Dependency,
        InstallError,
        TransientError,
        archive_names,
        assemble_chart,
        chart_members,
        helm_environment,
        run_command,
        sha256_file,
        tree_problems,
        write_values,
    )
else:
    # A top-level module: in Lambda the asset directory is the task root, on sys.path; chart-check registers it
    # under this name before it loads this file (skyrl_hyperpod/validation/hyperpod_chart.py, installer_module).
    import chart_assembly
    from chart_assembly import (
        DOWNLOAD_CHUNK,
        EXACT_VERSION,
        Assembly,
        Deadline,
        Dependency,
        InstallError,
        TransientError,
        archive_names,
        assemble_chart,
        chart_members,
        helm_environment,
        run_command,
        sha256_file,
        tree_problems,
        write_values,
    )

HELM = "/opt/helm/helm"
KUBECTL = "/opt/kubectl/kubectl"
AWS_CLI = "/opt/awscli/aws"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
GITHUB_REPOSITORY = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
MIRROR = re.compile(r"^(?:s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:/[^\s]*)?|https://[^\s]+)$")

# The Lambda's timeout (helm_from_git.py sets the function's timeout from it).
FUNCTION_TIMEOUT_S = 900
# A pending release older than FUNCTION_TIMEOUT_S plus this was left by a run that is over (no Helm this
# installer starts outlives its function); a younger one may belong to a live operation and is not touched.
PENDING_GRACE_S = 300
# Seconds kept in reserve to report to CloudFormation before Lambda stops the function.
RESPONSE_RESERVE_S = 45
# Helm's --timeout ends this long before the process deadline, so Helm stops by itself first.
HELM_TIMEOUT_MARGIN_S = 15
HELM_TIMEOUT_MAX_S = 600
# An operation with less time than this is not started (it would be killed mid-way).
HELM_TIMEOUT_MIN_S = 60
# All downloads of one request (repository tarball and sub-charts, retries included).
DOWNLOAD_BUDGET_S = 300
ATTEMPTS = 4
BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 30.0
# CloudFormation's limit on a custom resource's response body
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref.html).
MAX_RESPONSE_BYTES = 4096
PENDING_STATUSES = ("pending-install", "pending-upgrade", "pending-rollback")
DIGESTS_CONFIGMAP = "skyrl-hp-helm-archive-digests"
DIGESTS_NAMESPACE = "kube-system"
# Release label naming the resource that owns the release (Helm reserves name, owner, status, version,
# createdAt, modifiedAt: helm/helm pkg/storage/driver/util.go).
OWNER_LABEL = "skyrl-hp-owner"
# Release label of the release spec a revision applied (spec_label): what an Update may re-apply (a rollback).
SPEC_LABEL = "skyrl-hp-spec"
# Owner labels of resources CloudFormation has deleted, per release (one key `<label>.<namespace>.<release>` each,
# in kube-system; a key without dots is a label versions before per-release records wrote for every release): a
# release handed over by one of them has no earlier owner left to hand it back to.
OWNERS_CONFIGMAP = "skyrl-hp-helm-retired-owners"
# The function's own configuration, written at synth (helm_from_git.py): the cluster it acts on and the releases it
# may install (a JSON list of release_spec). Lambda allows 4 KB of environment in all
# (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html), hence digests of the digest lists.
CLUSTER_ENV = "SKYRL_HP_CLUSTER_NAME"
ALLOWED_RELEASES_ENV = "SKYRL_HP_ALLOWED_RELEASES"
ENVIRONMENT_LIMIT_BYTES = 4096
# The resource's properties as a release spec: compared as they are; Values parsed; the two digest lists by the
# sha256 of their canonical JSON. Together they are everything the handler installs from.
SPEC_LITERALS = ("Repository", "Commit", "ChartPath", "Release", "Namespace", "RequirePinnedDigests", "ArchiveMirror")
SPEC_VALUES = "Values"
SPEC_DIGEST_LISTS = ("ArchiveDigests", "ChartFileDigests")
# CloudFormation's response bucket: `cloudformation-custom-resource-response-<region without dashes>`
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/vpc-interface-endpoints.html), reached
# virtual-hosted or path-style, on S3's global, regional or legacy dash-regional endpoint
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/VirtualHosting.html). This project's regions are
# HyperPod's, all in the `aws` partition (skyrl_hyperpod/config/regions.py), so only amazonaws.com.
RESPONSE_BUCKET_PREFIX = "cloudformation-custom-resource-response-"
S3_DOMAIN = "amazonaws.com"
REQUEST_TYPES = ("Create", "Update", "Delete")
# What installed a revision without an owner label: it cannot be asked whether it still exists, so a release taken
# over from it is handed back to it, never uninstalled.
UNLABELLED_OWNER = "its unlabelled installer (CDK's HelmChart, a person, or a version without owner labels)"
# Statuses, as `helm history` shows them, of revisions that were applied to the cluster (a rollback target).
APPLIED_STATUSES = ("deployed", "superseded")

T = TypeVar("T")


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


def validate_file_digests(digests: dict) -> dict[str, str]:
    """Chart file path (relative, inside the chart) -> lowercase sha256 hex."""
    for name, digest in digests.items():
        path = PurePosixPath(str(name))
        if not path.parts or path.is_absolute() or ".." in path.parts:
            raise ValueError(f"chart file digest key {name!r} is not a relative path inside the chart")
        if not SHA256.fullmatch(str(digest)):
            raise ValueError(f"chart file digest for {name!r} is {digest!r}; expected a sha256 in 64 lowercase hex")
    return dict(digests)


def validate_mirror(mirror: str) -> str:
    """`s3://bucket/prefix` or `https://host/path`, without a trailing slash."""
    if not MIRROR.fullmatch(mirror):
        raise ValueError(f"archive mirror {mirror!r} is not s3://<bucket>/<prefix> or https://<host>/<path>")
    return mirror.rstrip("/")


def helm_timeout(available_s: float) -> int:
    """Helm's --timeout for an operation that must end within `available_s` seconds, or an error."""
    seconds = int(min(available_s - chart_assembly.TERM_GRACE_S - HELM_TIMEOUT_MARGIN_S, HELM_TIMEOUT_MAX_S))
    if seconds < HELM_TIMEOUT_MIN_S:
        raise InstallError(
            f"only {available_s:.0f}s left, too little for a Helm operation (needs {HELM_TIMEOUT_MIN_S}s plus "
            f"{chart_assembly.TERM_GRACE_S + HELM_TIMEOUT_MARGIN_S}s to stop cleanly); not started"
        )
    return seconds


def kubeconfig_args(cluster_name: str, region: str, kubeconfig: str) -> list[str]:
    return [AWS_CLI, "eks", "update-kubeconfig", "--name", cluster_name, "--region", region, "--kubeconfig", kubeconfig]


def pull_args(name: str, version: str, repository: str, destination: str) -> list[str]:
    if repository.startswith("oci://"):
        return [HELM, "pull", f"{repository.rstrip('/')}/{name}", "--version", version, "--destination", destination]
    if repository.startswith("https://"):
        return [HELM, "pull", name, "--repo", repository, "--version", version, "--destination", destination]
    raise InstallError(f"sub-chart {name} has repository {repository!r}; supported: https://, oci://, file://")


def status_args(release: str, namespace: str) -> list[str]:
    return [HELM, "status", release, "--namespace", namespace, "--output", "json"]


def history_args(release: str, namespace: str) -> list[str]:
    return [HELM, "history", release, "--namespace", namespace, "--output", "json", "--max", "50"]


def metadata_args(release: str, namespace: str, revision: int) -> list[str]:
    return [HELM, "get", "metadata", release, "--namespace", namespace, "--revision", str(revision), "--output", "json"]


def rollback_args(release: str, revision: int, namespace: str, timeout_s: int) -> list[str]:
    return [HELM, "rollback", release, str(revision), "--namespace", namespace, "--timeout", f"{timeout_s}s"]


def upgrade_args(
    release: str, chart_dir: str, namespace: str, values_file: str, owner: str, spec: str, timeout_s: int = 600
) -> list[str]:
    # No --wait/--atomic: pods cannot schedule before HyperPod nodes join. The owner and spec labels are written on
    # this revision (Helm merges upgrade labels into the release's; `--labels` takes comma-separated pairs).
    return [
        HELM, "upgrade", "--install", release, chart_dir,
        "--namespace", namespace, "--create-namespace",
        "--values", values_file,
        "--labels", f"{OWNER_LABEL}={owner},{SPEC_LABEL}={spec}",
        "--timeout", f"{timeout_s}s",
    ]  # fmt: skip


def uninstall_args(release: str, namespace: str, timeout_s: int = 600) -> list[str]:
    return [HELM, "uninstall", release, "--namespace", namespace, "--timeout", f"{timeout_s}s"]


def rollback_target(history: list[dict], current: int) -> int | None:
    """The newest revision before `current` that was deployed, or None (never deployed)."""
    good = [int(h["revision"]) for h in history if h.get("status") in ("deployed", "superseded")]
    earlier = [revision for revision in good if revision < current]
    return max(earlier) if earlier else None


def owner_revision(history: list[dict]) -> int | None:
    """The revision whose owner label decides who owns the release: the newest deployed one (a failed
    takeover leaves the previous owner's revision deployed), else the newest."""
    revisions = sorted(history, key=lambda h: int(h["revision"]))
    deployed = [h for h in revisions if h.get("status") == "deployed"]
    chosen = (deployed or revisions)[-1:]
    return int(chosen[0]["revision"]) if chosen else None


def handback_revision(
    history: list[dict], owners: set[str], label_of: Callable[[int], str | None], retired: set[str]
) -> tuple[int, str | None] | None:
    """(revision, owner label) to hand the release back to when the resource labelled with one of `owners` (its
    label, and the one an earlier version gave its physical id) is deleted: the newest applied revision, before the
    one that decides ownership (owner_revision), of another resource that CloudFormation has not deleted (its label
    is not in `retired`), or an unlabelled one (label None: installed by something that records no owner, such as
    CDK's HelmChart or a person, which this resource took over). None: the resource is the sole owner."""
    deciding = owner_revision(history)
    if deciding is None:
        return None
    earlier = sorted(
        (int(h["revision"]) for h in history if h.get("status") in APPLIED_STATUSES and int(h["revision"]) < deciding),
        reverse=True,
    )
    for revision in earlier:
        label = label_of(revision)
        if label is None or (label not in owners and label not in retired):
            return revision, label
    return None


IDENTITY_PROPERTIES = ("ClusterName", "Namespace", "Release")


def resource_id(event: dict) -> str:
    """The physical id to answer with: kept on Update unless the release's identity changed; new on Create
    and on an identity change (CloudFormation then deletes the old id, which uninstalls the old release)."""
    request = event["RequestType"]
    if request == "Delete":
        return str(event.get("PhysicalResourceId") or "not-created")
    if request == "Update":
        old, new = event.get("OldResourceProperties") or {}, event["ResourceProperties"]
        if all(old.get(key) == new.get(key) for key in IDENTITY_PROPERTIES):
            return str(event["PhysicalResourceId"])
    return f"{event['StackId']}/{event['LogicalResourceId']}/{event['RequestId']}"


def _label_value(text: str) -> str:
    """A Kubernetes label value (at most 63 characters) standing for `text`."""
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def owner_label(stack_id: str, logical_id: str) -> str:
    """The owner label of the resource `logical_id` of stack `stack_id`, whatever physical id it has (an identity
    change, and CloudFormation's rollback of one, each give it a new one). A stack id is unique to one stack."""
    return _label_value(f"{stack_id}/{logical_id}")


def legacy_owner_label(physical_id: str) -> str:
    """The owner label versions before owner_label wrote: one per physical id."""
    return _label_value(physical_id)


def retired_key(owner: str, namespace: str, release: str) -> str:
    """The OWNERS_CONFIGMAP key recording that the resource labelled `owner` is deleted, for one release (a
    namespace has no dots; a ConfigMap key is [-._a-zA-Z0-9]+)."""
    return f"{owner}.{namespace}.{release}"


def retired_for(keys: set[str], namespace: str, release: str) -> set[str]:
    """The owner labels OWNERS_CONFIGMAP's `keys` retire for this release (keys without dots: for every release)."""
    labels = set()
    for key in keys:
        label, dot, rest = key.partition(".")
        if not dot or rest == f"{namespace}.{release}":
            labels.add(label)
    return labels


# --- what the function may do -------------------------------------------------------------------------


class Refused(InstallError):
    """The event asks for something the function's configuration does not allow."""


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def release_spec(properties: Mapping[str, Any]) -> dict[str, Any]:
    """What the installer compares of a resource's properties, `Values` and the digest lists as objects: the
    literals, the values, and the sha256 of each digest list's canonical JSON. The synth writes one per chart
    into the function's configuration (helm_from_git.py); the handler builds one from each event (event_spec)."""
    spec: dict[str, Any] = {key: str(properties.get(key, "")) for key in SPEC_LITERALS}
    spec[SPEC_VALUES] = dict(properties.get(SPEC_VALUES) or {})
    for key in SPEC_DIGEST_LISTS:
        spec[f"{key}Sha256"] = hashlib.sha256(canonical_json(dict(properties.get(key) or {})).encode()).hexdigest()
    return spec


def event_spec(properties: Mapping[str, Any]) -> dict[str, Any]:
    """release_spec of an event's properties, whose Values and digest lists are JSON text."""
    parsed: dict[str, Any] = dict(properties)
    for key in (SPEC_VALUES, *SPEC_DIGEST_LISTS):
        try:
            parsed[key] = json.loads(properties.get(key) or "{}")
        except (TypeError, ValueError) as error:
            raise Refused(f"{key} is not a JSON object ({error}): refused") from error
        if not isinstance(parsed[key], dict):
            raise Refused(f"{key} is {type(parsed[key]).__name__}, not a JSON object: refused")
    return release_spec(parsed)


def spec_label(spec: Mapping[str, Any]) -> str:
    """The SPEC_LABEL value of a release spec."""
    return _label_value(canonical_json(spec))


def _shown(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def spec_refusal(spec: Mapping[str, Any], allowed: list[dict[str, Any]]) -> str | None:
    """None when `spec` is one of the releases the function may install, else the one-line reason."""
    if any(spec == entry for entry in allowed):
        return None
    name = f"{spec['Namespace']}/{spec['Release']}"
    same = [
        entry for entry in allowed if (entry["Namespace"], entry["Release"]) == (spec["Namespace"], spec["Release"])
    ]
    if not same:
        names = ", ".join(sorted(f"{e['Namespace']}/{e['Release']}" for e in allowed)) or "none"
        return (
            f"release {name} is not one this installer was deployed to install (allowed: {names}; the eks stack "
            "fixes them, deploy it first): refused"
        )
    deployed = same[0]
    differing = [key for key in spec if spec[key] != deployed.get(key)]
    shown = "; ".join(f"{key} {_shown(spec[key])}, deployed {_shown(deployed.get(key))}" for key in differing)
    return f"release {name}: {shown}: not what this installer was deployed to install, refused"


def allowed_releases(environment: Mapping[str, str]) -> list[dict[str, Any]]:
    """The releases the function's configuration allows (none when it has none: nothing is installed)."""
    text = environment.get(ALLOWED_RELEASES_ENV) or "[]"
    entries = json.loads(text)
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise Refused(f"{ALLOWED_RELEASES_ENV} in the function's configuration is not a list of release specs")
    return entries


def response_url_problem(url: Any, region: str) -> str | None:
    """None when `url` is CloudFormation's response bucket of `region`, else the one-line reason (nothing is sent
    there). Pre-signed S3 URLs only: https on 443, no user info, the bucket by host or by the path's first step."""
    try:
        parts = urllib.parse.urlsplit(str(url))
        port = parts.port
    except ValueError as error:
        return f"ResponseURL is not a URL ({error}): refused, no response sent"
    host = (parts.hostname or "").lower()
    bucket = RESPONSE_BUCKET_PREFIX + region.replace("-", "")
    endpoints = {f"s3.{S3_DOMAIN}", f"s3.{region}.{S3_DOMAIN}", f"s3-{region}.{S3_DOMAIN}"}
    if parts.scheme == "https" and port in (None, 443) and "@" not in parts.netloc:
        if host in {f"{bucket}.{endpoint}" for endpoint in endpoints}:
            return None
        if host in endpoints and parts.path.startswith(f"/{bucket}/"):
            return None
    return (
        f"ResponseURL host {host or '(none)'!r} is not CloudFormation's response bucket {bucket} in {region} "
        f"(https://{bucket}.s3.{region}.{S3_DOMAIN}/...): refused, no response sent"
    )


HELM_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_helm_time(text: str) -> datetime:
    """A timestamp as Helm writes it (Go's RFC 3339 with up to nanoseconds)."""
    match = HELM_TIME.fullmatch(text.strip())
    if not match:
        raise InstallError(f"unreadable Helm timestamp {text!r}")
    base, fraction, zone = match.groups()
    micro = (fraction or "0")[:6].ljust(6, "0")
    return datetime.fromisoformat(f"{base}.{micro}{'+00:00' if zone == 'Z' else zone}")


def response_body(event: dict, status: str, reason: str, physical_id: str) -> bytes:
    """The encoded response, at most MAX_RESPONSE_BYTES: the Reason loses its beginning first (Helm's
    error is at its end)."""

    def encode(text: str) -> bytes:
        body = {
            "Status": status,
            "Reason": text,
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": {},
        }
        return json.dumps(body).encode()

    data = encode(reason)
    keep = len(reason)
    while len(data) > MAX_RESPONSE_BYTES and keep > 0:
        # Every character left out shortens the body by at least one byte (escapes are longer).
        keep = max(0, keep - (len(data) - MAX_RESPONSE_BYTES) - len("[cut] "))
        data = encode("[cut] " + reason[len(reason) - keep :] if keep else "")
    return data


def backoff_s(attempt: int) -> float:
    """Full-jitter exponential backoff before attempt `attempt + 1`."""
    return random.uniform(0, min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempt - 1)))


def configmap_key(archive: str) -> str:
    """`archive` as a ConfigMap key ([-._a-zA-Z0-9]+; chart versions may carry `+build` metadata)."""
    return archive.replace("+", "_")


# --- side effects ---------------------------------------------------------------------------------

# Between retries (the tests record the pauses instead).
sleep = time.sleep


def _now() -> datetime:
    return datetime.now(UTC)


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
            sleep(pause)
    raise AssertionError("unreachable")


def open_url(url: str, timeout: float):
    """A readable stream of `url` (https:// or s3://)."""
    if url.startswith("s3://"):
        import boto3
        from botocore.config import Config

        bucket, _, key = url[len("s3://") :].partition("/")
        config = Config(connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 1})
        client = boto3.client("s3", config=config)
        return client.get_object(Bucket=bucket, Key=key)["Body"]
    return urllib.request.urlopen(url, timeout=timeout)


def _is_not_found(error: Exception) -> bool:
    if isinstance(error, urllib.error.HTTPError):
        return error.code == 404
    return type(error).__name__ == "NoSuchKey"


def _is_transient_download_error(error: Exception) -> bool:
    if isinstance(error, urllib.error.HTTPError):
        return error.code == 429 or error.code >= 500
    if isinstance(error, (urllib.error.URLError, TimeoutError, ConnectionError, OSError)):
        return True
    # botocore's network and throttling errors, without importing botocore here.
    return type(error).__name__ in {"EndpointConnectionError", "ReadTimeoutError", "ConnectTimeoutError",
                                    "ResponseStreamingError", "IncompleteReadError"}  # fmt: skip


class NotFound(InstallError):
    """The URL does not exist (not retried)."""


def _download(url: str, destination: str, deadline: Deadline) -> None:
    """`url` to `destination`, within `deadline` (checked between chunks), retried on transient errors."""

    def attempt() -> None:
        if deadline.left() <= 0:
            raise InstallError(f"download deadline ({DOWNLOAD_BUDGET_S}s) passed before {url}")
        try:
            with (
                open_url(url, timeout=max(1.0, min(60.0, deadline.left()))) as response,
                open(destination, "wb") as out,
            ):
                while chunk := response.read(DOWNLOAD_CHUNK):
                    out.write(chunk)
                    if deadline.left() <= 0:
                        raise InstallError(f"download deadline ({DOWNLOAD_BUDGET_S}s) passed during {url}")
        except InstallError:
            raise
        except Exception as error:
            if _is_not_found(error):
                raise NotFound(f"download {url}: {error}") from error
            if _is_transient_download_error(error):
                raise TransientError(f"download {url}: {error}") from error
            raise InstallError(f"download {url}: {error}") from error

    _retry(f"download {url}", attempt, deadline.left)


class Installer:
    """One request's work, with the clock of the Lambda invocation."""

    def __init__(self, event: dict, context, env: dict, workdir: str, physical_id: str) -> None:
        self.event = event
        self.properties = event["ResourceProperties"]
        self.context = context
        self.env = env
        self.workdir = workdir
        self.release = self.properties["Release"]
        self.namespace = self.properties["Namespace"]
        # Owned by the resource (stack and logical id), whatever physical id it answers with.
        self.owner = owner_label(str(event.get("StackId", "")), str(event.get("LogicalResourceId", "")))
        # Revisions an earlier version installed carry the label of the physical id they were installed under.
        self.owners = {self.owner, legacy_owner_label(physical_id)}
        if event.get("PhysicalResourceId"):
            self.owners.add(legacy_owner_label(str(event["PhysicalResourceId"])))
        # Set while a Delete may owe the release to an earlier owner (what it owes, for the failure's reason): it
        # may not answer SUCCESS without having handed the release back.
        self.hand_back_owed: str | None = None
        self.connected = False
        self.started = _now()
        self.pins = validate_digests(json.loads(self.properties.get("ArchiveDigests") or "{}"))
        self.file_digests = validate_file_digests(json.loads(self.properties.get("ChartFileDigests") or "{}"))
        mirror = self.properties.get("ArchiveMirror") or ""
        self.mirror = validate_mirror(mirror) if mirror else ""
        self.require_pins = str(self.properties.get("RequirePinnedDigests", "true")).lower() != "false"
        self.observed: dict[str, str] = {}
        self.outcome = "ok"

    def remaining(self) -> float:
        return self.context.get_remaining_time_in_millis() / 1000 - RESPONSE_RESERVE_S

    def run(self, args: list[str], stdin: str | None = None, quiet: bool = False) -> str:
        # Room after the deadline for SIGTERM's grace period, then the response.
        return run_command(args, self.env, self.remaining() - chart_assembly.TERM_GRACE_S, stdin=stdin, quiet=quiet)

    def run_retried(self, what: str, args_fn: Callable[[], list[str]], stdin: str | None = None) -> str:
        return _retry(what, lambda: self.run(args_fn(), stdin=stdin), self.remaining)

    def run_helm_operation(self, args_for_timeout: Callable[[int], list[str]]) -> str:
        """A Helm operation given `--timeout`: Helm stops by itself then; one still running HELM_TIMEOUT_MARGIN_S
        later hangs and is stopped at that point, not at the end of the invocation (helm_timeout keeps that
        point before `remaining() - TERM_GRACE_S`)."""
        timeout_s = helm_timeout(self.remaining())
        return run_command(args_for_timeout(timeout_s), self.env, timeout_s + HELM_TIMEOUT_MARGIN_S)

    # -- steps --

    def connect(self) -> None:
        if self.connected:
            return
        args = kubeconfig_args(self.properties["ClusterName"], os.environ["AWS_REGION"], self.env["KUBECONFIG"])
        self.run_retried("aws eks update-kubeconfig", lambda: args)
        self.connected = True

    def cluster_refusal(self) -> str | None:
        """None when the event names the cluster of the function's configuration."""
        cluster, named = os.environ.get(CLUSTER_ENV, ""), self.properties.get("ClusterName")
        if named == cluster:
            return None
        return f"ClusterName {named!r} is not this installer's cluster {cluster!r}: refused"

    def applied_before(self, label: str) -> bool:
        """Whether this resource applied the release spec labelled `label` to this release before: an applied
        revision carries both its owner label and that spec label (CloudFormation's rollback re-applies it)."""
        for entry in sorted(self.history() or [], key=lambda h: -int(h["revision"])):
            if entry.get("status") in APPLIED_STATUSES:
                labels = self.labels_of(int(entry["revision"]))
                if labels.get(OWNER_LABEL) in self.owners and labels.get(SPEC_LABEL) == label:
                    return True
        return False

    def authorize(self) -> str:
        """The spec label of what a Create or Update asks for, once it is allowed; Refused otherwise. Before the
        cluster is reached, except for an Update of a spec the configuration no longer lists (a rollback)."""
        refusal = self.cluster_refusal()
        if refusal:
            raise Refused(refusal)
        spec = event_spec(self.properties)
        label = spec_label(spec)
        refusal = spec_refusal(spec, allowed_releases(os.environ))
        if refusal is None:
            return label
        if self.event["RequestType"] != "Update":
            raise Refused(refusal)
        self.connect()
        if not self.applied_before(label):
            raise Refused(f"{refusal} (nor applied to it before by this resource)")
        print(
            f"release {self.namespace}/{self.release}: spec {label} is no longer in this installer's configuration, "
            "but this resource applied it before: re-applied (a rollback)",
            flush=True,
        )
        return label

    def release_status(self) -> dict | None:
        try:
            return json.loads(self.run_retried("helm status", lambda: status_args(self.release, self.namespace)))
        except InstallError as error:
            if "not found" in str(error):
                return None
            raise

    def uninstall(self) -> None:
        _retry(
            "helm uninstall",
            lambda: self.run_helm_operation(lambda s: uninstall_args(self.release, self.namespace, s)),
            self.remaining,
        )

    def history(self) -> list[dict] | None:
        """`helm history` of the release, None when it does not exist."""
        try:
            return json.loads(self.run_retried("helm history", lambda: history_args(self.release, self.namespace)))
        except InstallError as error:
            if "not found" in str(error):
                return None
            raise

    def labels_of(self, revision: int) -> dict[str, str]:
        """The labels of one revision (`helm get metadata` shows a revision's labels)."""
        metadata = json.loads(
            self.run_retried("helm get metadata", lambda: metadata_args(self.release, self.namespace, revision))
        )
        return dict(metadata.get("labels") or {})

    def label_of(self, revision: int) -> str | None:
        """The owner label of one revision."""
        return self.labels_of(revision).get(OWNER_LABEL)

    def release_owner(self) -> tuple[bool, str | None]:
        """(whether the release exists, the owner label of its owning revision)."""
        history = self.history()
        revision = owner_revision(history or [])
        if revision is None:
            return False, None
        return True, self.label_of(revision)

    def retired_keys(self) -> set[str]:
        args = [KUBECTL, "get", "configmap", OWNERS_CONFIGMAP, "--namespace", DIGESTS_NAMESPACE, "--output", "json",
                "--ignore-not-found"]  # fmt: skip
        text = self.run_retried("kubectl get configmap", lambda: args)
        return set(json.loads(text).get("data") or {}) if text.strip() else set()

    def retired_owners(self) -> set[str]:
        """The owner labels of resources CloudFormation deleted, for this release."""
        return retired_for(self.retired_keys(), self.namespace, self.release)

    def reinstate(self) -> None:
        """After an install: this resource exists, so no record may say it was deleted (a logical id used again
        gets the owner label of the resource deleted before)."""
        key = retired_key(self.owner, self.namespace, self.release)
        if key not in self.retired_keys():
            return
        patch = json.dumps({"data": {key: None}})
        args = [KUBECTL, "patch", "configmap", OWNERS_CONFIGMAP, "--namespace", DIGESTS_NAMESPACE, "--type", "merge",
                "--patch", patch]  # fmt: skip
        self.run_retried("kubectl patch configmap", lambda: args)
        print(f"{self.owner} exists again: removed from {DIGESTS_NAMESPACE}/{OWNERS_CONFIGMAP}", flush=True)

    def retire(self) -> None:
        """Record that CloudFormation deleted this resource, so that no later Delete hands this release back to it.
        One key per owner and release, added with a merge patch (concurrent Deletes of other resources add theirs,
        none is lost)."""
        note = f"{self.namespace}/{self.release}: resource deleted at {_now().isoformat()}"
        keys = {retired_key(owner, self.namespace, self.release): note for owner in sorted(self.owners)}
        patch = json.dumps({"data": keys})
        base = ["configmap", OWNERS_CONFIGMAP, "--namespace", DIGESTS_NAMESPACE]
        patch_args = [KUBECTL, "patch", *base, "--type", "merge", "--patch", patch]
        create_args = [KUBECTL, "create", *base, *(f"--from-literal={key}={value}" for key, value in keys.items())]
        for _ in range(2):
            try:
                self.run_retried("kubectl patch configmap", lambda: patch_args)
                return
            except InstallError as error:
                if "not found" not in str(error).lower():
                    raise
            try:
                self.run_retried("kubectl create configmap", lambda: create_args)
                return
            except InstallError as error:
                if "already exists" not in str(error).lower():
                    raise  # else created by a concurrent Delete meanwhile: patch it
        raise InstallError(f"could not record {self.owner} in ConfigMap {DIGESTS_NAMESPACE}/{OWNERS_CONFIGMAP}")

    def hand_back(self, revision: int, previous: str | None) -> None:
        """`helm rollback` to the previous owner's last revision. The new revision takes that revision's labels
        (helm/helm pkg/action/rollback.go, prepareRollback: `Labels: previousRelease.Labels`), so the previous
        owner's label is restored; checked, since the previous owner's Delete relies on it."""
        _retry(
            "helm rollback",
            lambda: self.run_helm_operation(lambda s: rollback_args(self.release, revision, self.namespace, s)),
            self.remaining,
        )
        exists, owner = self.release_owner()
        if not exists or owner != previous:
            raise InstallError(
                f"release {self.namespace}/{self.release} was rolled back to revision {revision}, but its owner label "
                f"reads {OWNER_LABEL}={owner or '(none)'}, not {previous or '(none)'}: check `helm history {self.release} -n "
                f"{self.namespace}`"
            )

    def delete(self) -> None:
        """Uninstall the release only when this resource is its sole owner; hand it back to an earlier owner that
        still exists (a takeover CloudFormation rolls back); leave it to another owner."""
        name = f"{self.namespace}/{self.release}"
        history = self.history()
        deciding = owner_revision(history or [])
        owner = self.label_of(deciding) if deciding is not None else None
        if deciding is None:
            self.outcome = f"release {name} not found: nothing to uninstall"
        elif owner not in self.owners:
            # A replacement took it over, or someone else installed it: uninstalling would remove a live release.
            self.outcome = (
                f"release {name} is owned by {OWNER_LABEL}={owner or '(none)'}, not by this resource "
                f"({self.owner}): left installed"
            )
        else:
            # Owned by this resource, and revisions were applied before: until it is known that no earlier owner is
            # owed the release, this Delete may not end without handing it back.
            if any(h.get("status") in APPLIED_STATUSES and int(h["revision"]) < deciding for h in history or []):
                self.hand_back_owed = f"its revisions before {deciding} may belong to an earlier owner"
            retired = self.retired_owners()
            previous = handback_revision(history or [], self.owners, self.label_of, retired)
            if previous is None:
                self.hand_back_owed = None
                self.uninstall()
                self.outcome = f"release {name} uninstalled"
            else:
                revision, previous_owner = previous
                owed_to = f"{OWNER_LABEL}={previous_owner}" if previous_owner else UNLABELLED_OWNER
                self.hand_back_owed = f"it belongs back to {owed_to} (revision {revision})"
                self.hand_back(revision, previous_owner)
                self.hand_back_owed = None
                self.outcome = (
                    f"release {name} handed back to {owed_to}, which owned it before this resource: rolled back to "
                    f"its revision {revision}, not uninstalled"
                )
        # Whatever happened, this resource is gone: no later Delete may hand a release back to it. Not recorded, a
        # later Delete would hand a release back to it instead of uninstalling: the release stays, nothing is lost.
        try:
            self.retire()
        except InstallError as error:
            self.outcome += f" (not recorded in {DIGESTS_NAMESPACE}/{OWNERS_CONFIGMAP}: {error})"
        print(self.outcome, flush=True)

    def recover_pending(self) -> None:
        """Roll a release left in pending-* back to its last deployed revision (or uninstall it), when no
        operation can still be running on it."""
        status = self.release_status()
        info = (status or {}).get("info") or {}
        state = info.get("status", "")
        if status is None or state not in PENDING_STATUSES:
            return
        name = f"{self.namespace}/{self.release}"
        since = parse_helm_time(str(info.get("last_deployed") or ""))
        age_s = (_now() - since).total_seconds()
        ours = since >= self.started  # written by a Helm this invocation started, which has ended
        if not ours and age_s < FUNCTION_TIMEOUT_S + PENDING_GRACE_S:
            raise InstallError(
                f"release {name} is {state} since {since.isoformat()} ({age_s:.0f}s ago): another operation may "
                f"still be running, so it is not rolled back; the installer recovers it once it is "
                f"{FUNCTION_TIMEOUT_S + PENDING_GRACE_S}s old (retry the deployment then), or check "
                f"`helm history {self.release} -n {self.namespace}`"
            )
        current = int(status.get("version", 0))
        print(f"release {name} is {state} at revision {current} since {since.isoformat()}: recovering", flush=True)
        history = json.loads(self.run_retried("helm history", lambda: history_args(self.release, self.namespace)))
        target = rollback_target(history, current)
        if target is None:
            self.uninstall()
        else:
            _retry(
                "helm rollback",
                lambda: self.run_helm_operation(lambda s: rollback_args(self.release, target, self.namespace, s)),
                self.remaining,
            )

    def recorded_digests(self) -> dict[str, str]:
        if self.require_pins:
            return {}
        args = [KUBECTL, "get", "configmap", DIGESTS_CONFIGMAP, "--namespace", DIGESTS_NAMESPACE, "--output", "json",
                "--ignore-not-found"]  # fmt: skip
        text = self.run_retried("kubectl get configmap", lambda: args)
        return dict(json.loads(text).get("data") or {}) if text.strip() else {}

    def record_digests(self, recorded: dict[str, str]) -> None:
        new = {name: digest for name, digest in self.observed.items() if recorded.get(name) != digest}
        if self.require_pins or not new:
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

    def verify(self, name: str, path: str, recorded: dict[str, str], *, pinned_only: bool = False) -> None:
        actual = sha256_file(path)
        key = configmap_key(name)
        self.observed[key] = actual
        if name in self.pins:
            expected, origin = self.pins[name], "pinned in ArchiveDigests"
        elif self.require_pins or pinned_only:
            raise InstallError(
                f"archive {name} (sha256 {actual}) has no pin in ArchiveDigests and pins are required: add "
                "helm_installer.archive_sha256 for it once you have checked the file (docs/helm-installer.md)"
            )
        elif key in recorded:
            expected = recorded[key]
            origin = f"recorded at first install in ConfigMap {DIGESTS_NAMESPACE}/{DIGESTS_CONFIGMAP}"
        else:
            print(f"archive {name}: sha256 {actual} (first use: recorded after the install)", flush=True)
            return
        if actual != expected:
            raise InstallError(f"archive {name} has sha256 {actual}, expected {expected} ({origin}); not installed")
        print(f"archive {name}: sha256 {actual} matches ({origin})", flush=True)

    def fetch_source(self, deadline: Deadline) -> tuple[str, str]:
        """(extracted repository top directory, chart directory), the chart verified file by file (or, for a
        commit without a file list, the tarball against its pin)."""
        repository, commit = self.properties["Repository"], self.properties["Commit"]
        name = source_archive_name(repository, commit)
        url = f"{self.mirror}/{name}" if self.mirror else archive_url(repository, commit)
        archive = os.path.join(self.workdir, name)
        _download(url, archive, deadline)
        if not self.file_digests:
            self.verify(name, archive, {}, pinned_only=True)
        chart_path = self.properties["ChartPath"]
        with tarfile.open(archive, "r:gz") as tar:
            top, members = chart_members(tar.getnames(), chart_path)
            tar.extractall(self.workdir, members=[tar.getmember(m) for m in members], filter="data")
        chart_dir = os.path.join(self.workdir, top, chart_path.rstrip("/"))
        if self.file_digests:
            problems = tree_problems(chart_dir, self.file_digests)
            if problems:
                shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
                raise InstallError(f"{chart_path} at {commit} differs from its sha256 list: {shown}; not installed")
            print(f"{chart_path}: {len(self.file_digests)} files match their sha256 list", flush=True)
        return os.path.join(self.workdir, top), chart_dir

    def obtain_archive(self, dependency: Dependency, charts_dir: str, deadline: Deadline, recorded: dict) -> str:
        landing = tempfile.mkdtemp(dir=self.workdir, prefix="pull-")
        if self.mirror:
            if not EXACT_VERSION.fullmatch(dependency.version):
                raise InstallError(
                    f"sub-chart {dependency.name} asks for version {dependency.version!r}; a mirror needs exact versions"
                )
            candidates = archive_names(dependency.name, dependency.version)
            for candidate in candidates:
                try:
                    _download(f"{self.mirror}/{candidate}", os.path.join(landing, candidate), deadline)
                    break
                except NotFound:
                    continue
            else:
                raise InstallError(f"none of {', '.join(candidates)} is in the mirror {self.mirror}")
        else:
            self.run_pull(dependency, landing, deadline)
        [archive] = os.listdir(landing)
        self.verify(archive, os.path.join(landing, archive), recorded)
        shutil.move(os.path.join(landing, archive), os.path.join(charts_dir, archive))
        return archive

    def run_pull(self, dependency: Dependency, landing: str, deadline: Deadline) -> None:
        def attempt() -> None:
            for leftover in os.listdir(landing):
                os.remove(os.path.join(landing, leftover))
            time_left = min(deadline.left(), self.remaining() - chart_assembly.TERM_GRACE_S)
            run_command(
                pull_args(dependency.name, dependency.version, dependency.repository, landing), self.env, time_left
            )

        _retry(f"helm pull {dependency.name}", attempt, lambda: min(deadline.left(), self.remaining()))

    def assemble(self, root: str, chart_dir: str, deadline: Deadline, recorded: dict) -> Assembly:
        assembly = assemble_chart(
            chart_dir,
            json.loads(self.properties.get("Values") or "{}"),
            helm=HELM,
            run=lambda args: self.run(args, quiet=True),
            workdir=self.workdir,
            root=root,
            obtain_archive=lambda dependency, charts: self.obtain_archive(dependency, charts, deadline, recorded),
        )
        print(assembly.describe(), flush=True)
        return assembly

    def upgrade(self, chart_dir: str, spec: str) -> None:
        values_file = write_values(self.workdir, self.properties.get("Values") or "{}")

        def attempt() -> str:
            # A failed attempt may itself have left the release pending.
            self.recover_pending()
            return self.run_helm_operation(
                lambda s: upgrade_args(self.release, chart_dir, self.namespace, values_file, self.owner, spec, s)
            )

        try:
            _retry("helm upgrade", attempt, self.remaining)
        except InstallError as error:
            if "cannot be imported into the current release" not in str(error):
                raise
            # Typically a renamed release whose objects the old release still owns.
            raise InstallError(
                f"{error} -- objects of another release: hand them to {self.release} first "
                "(docs/helm-installer.md, renaming a release)"
            ) from error

    def apply(self) -> None:
        request = self.event["RequestType"]
        if request not in REQUEST_TYPES:
            raise Refused(f"RequestType {request!r} is not one of {', '.join(REQUEST_TYPES)}: refused")
        if request == "Delete":
            refusal = self.cluster_refusal()
            if refusal:
                # Its cluster is not this function's: nothing here is its to remove.
                self.outcome = f"{refusal.removesuffix(': refused')}: nothing uninstalled"
                return
            self.connect()
            self.delete()
            return
        spec = self.authorize()
        self.connect()
        recorded = self.recorded_digests()
        deadline = Deadline(min(DOWNLOAD_BUDGET_S, self.remaining()))
        root, chart_dir = self.fetch_source(deadline)
        self.assemble(root, chart_dir, deadline, recorded)
        self.upgrade(chart_dir, spec)
        self.reinstate()
        self.record_digests(recorded)


def send_response(event: dict, data: bytes) -> None:
    problem = response_url_problem(event["ResponseURL"], os.environ.get("AWS_REGION", ""))
    if problem:
        raise Refused(problem)
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


def handler(event: dict, context) -> dict:
    print(json.dumps({k: v for k, v in event.items() if k != "ResponseURL"}), flush=True)
    problem = response_url_problem(event.get("ResponseURL"), os.environ.get("AWS_REGION", ""))
    if problem:
        # Not CloudFormation's: nothing is done, and nothing is sent there.
        print(problem, flush=True)
        return {"Status": "FAILED", "Reason": problem}
    workdir = tempfile.mkdtemp(prefix="helm-git-")
    env = helm_environment(
        workdir, {**os.environ, "PATH": f"/opt/helm:/opt/kubectl:/opt/awscli:{os.environ.get('PATH', '')}"}
    )
    status, reason = "SUCCESS", "ok"
    physical_id = resource_id(event)
    installer: Installer | None = None
    try:
        installer = Installer(event, context, env, workdir, physical_id)
        installer.apply()
        reason = installer.outcome
    except Exception as error:
        traceback.print_exc()
        if event["RequestType"] == "Delete" and installer is not None and installer.hand_back_owed:
            # Answering SUCCESS would leave the release with a resource that no longer exists, owed to one that does.
            status = "FAILED"
            name, owed = f"{installer.namespace}/{installer.release}", installer.hand_back_owed
            reason = (
                f"release {name}: {owed}, and the hand-back failed: {error}; "
                f"delete again once it can succeed (log stream {getattr(context, 'log_stream_name', '?')})"
            )
        elif event["RequestType"] == "Delete":
            # A release that cannot be removed (cluster already gone, API unreachable) must not
            # block stack deletion; the log keeps the reason.
            reason = f"uninstall skipped: {error}"
        else:
            status, reason = "FAILED", f"{error} (log stream {getattr(context, 'log_stream_name', '?')})"
            if event["RequestType"] == "Update":
                # A failed update keeps the resource it had; a new id would look like a replacement.
                physical_id = str(event["PhysicalResourceId"])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    body = response_body(event, status, reason, physical_id)
    send_response(event, body)
    return json.loads(body)
