"""CloudFormation custom resource: install a Helm chart from a pinned commit of a GitHub repository.

Create/Update: download https://github.com/<owner>/<repo>/archive/<commit>.tar.gz, extract the chart
directory, `helm dependency update`, then `helm upgrade --install` (never --wait: the releases are
installed before any HyperPod node exists). Delete: `helm uninstall`.

Runs in Lambda with the kubectl layer (/opt/helm/helm) and the AWS CLI layer (/opt/awscli/aws, used
for `aws eks update-kubeconfig`). The pure functions (URL, argument lists, archive paths) are unit
tested without AWS; `handler` only wires them to subprocess calls and the CloudFormation response.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import traceback
import urllib.request
from pathlib import PurePosixPath

HELM = "/opt/helm/helm"
AWS_CLI = "/opt/awscli/aws"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
GITHUB_REPOSITORY = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")
HELM_TIMEOUT = "10m"
# Seconds kept in reserve to report a failure to CloudFormation before Lambda stops the function.
RESPONSE_RESERVE_S = 45


def archive_url(repository: str, commit: str) -> str:
    """GitHub's tarball URL for exactly one commit (a branch or tag name is refused)."""
    match = GITHUB_REPOSITORY.fullmatch(repository)
    if not match:
        raise ValueError(f"repository {repository!r} is not https://github.com/<owner>/<repo>")
    if not COMMIT.fullmatch(commit):
        raise ValueError(f"commit {commit!r} is not a full 40-character commit id")
    owner, repo = match.groups()
    return f"https://github.com/{owner}/{repo}/archive/{commit}.tar.gz"


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


def kubeconfig_args(cluster_name: str, region: str, kubeconfig: str) -> list[str]:
    return [AWS_CLI, "eks", "update-kubeconfig", "--name", cluster_name, "--region", region, "--kubeconfig", kubeconfig]


def dependency_update_args(chart_dir: str) -> list[str]:
    return [HELM, "dependency", "update", chart_dir]


def upgrade_args(release: str, chart_dir: str, namespace: str, values_file: str) -> list[str]:
    # No --wait/--atomic: pods cannot schedule before HyperPod nodes join.
    return [
        HELM, "upgrade", "--install", release, chart_dir,
        "--namespace", namespace, "--create-namespace",
        "--values", values_file,
        "--timeout", HELM_TIMEOUT,
    ]  # fmt: skip


def uninstall_args(release: str, namespace: str) -> list[str]:
    return [HELM, "uninstall", release, "--namespace", namespace, "--timeout", HELM_TIMEOUT]


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


def _run(args: list[str], env: dict, deadline_s: float) -> str:
    print("$", " ".join(args), flush=True)
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=max(deadline_s, 1), check=False)
    output = (done.stdout + done.stderr).strip()
    print(output, flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed ({done.returncode}): {output[-1500:]}")
    return output


def _download_chart(url: str, chart_path: str, workdir: str) -> str:
    archive = os.path.join(workdir, "source.tar.gz")
    with urllib.request.urlopen(url, timeout=120) as response, open(archive, "wb") as out:  # noqa: S310 - https only
        shutil.copyfileobj(response, out)
    with tarfile.open(archive, "r:gz") as tar:
        top, members = chart_members(tar.getnames(), chart_path)
        tar.extractall(workdir, members=[tar.getmember(name) for name in members], filter="data")
    return os.path.join(workdir, top, chart_path.rstrip("/"))


def _apply(event: dict, context, env: dict, workdir: str) -> None:
    properties = event["ResourceProperties"]

    def remaining() -> float:
        return context.get_remaining_time_in_millis() / 1000 - RESPONSE_RESERVE_S

    kubeconfig = env["KUBECONFIG"]
    _run(kubeconfig_args(properties["ClusterName"], os.environ["AWS_REGION"], kubeconfig), env, remaining())
    if event["RequestType"] == "Delete":
        try:
            _run(uninstall_args(properties["Release"], properties["Namespace"]), env, remaining())
        except RuntimeError as error:
            if "not found" not in str(error):
                raise
        return
    chart_dir = _download_chart(
        archive_url(properties["Repository"], properties["Commit"]), properties["ChartPath"], workdir
    )
    values_file = os.path.join(workdir, "values.json")
    with open(values_file, "w", encoding="utf-8") as out:
        out.write(properties.get("Values") or "{}")
    _run(dependency_update_args(chart_dir), env, remaining())
    _run(upgrade_args(properties["Release"], chart_dir, properties["Namespace"], values_file), env, remaining())


def _send(event: dict, body: dict) -> None:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        event["ResponseURL"], data=data, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(data))}
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - CloudFormation's presigned URL
        print("response status", response.status, flush=True)


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
        _apply(event, context, env, workdir)
    except Exception as error:  # noqa: BLE001 - every failure must reach CloudFormation
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
