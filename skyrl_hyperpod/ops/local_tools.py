"""The command-line tools the run book has you run yourself, checked by `skyrl-hp preflight` with their versions.

- The AWS CLI, version 2: the image-build command the CDK app prints follows the build with `aws logs tail`,
  which version 1 does not have (https://docs.aws.amazon.com/cli/latest/reference/logs/tail.html is in the v2
  reference only), and the teardown plan's commands are written for it.
- kubectl: the teardown plan deletes the workloads with `kubectl delete -f dist/`; kubectl is supported within one
  minor version of the cluster's (https://kubernetes.io/releases/version-skew-policy/#kubectl).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable

from .preflight import CheckResult

AWS_CLI_INSTALL = "https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html"
KUBECTL_INSTALL = "https://kubernetes.io/docs/tasks/tools/#kubectl"
TOOL_TIMEOUT_SECONDS = 20
_AWS_VERSION = re.compile(r"aws-cli/(\d+)\.(\d+)\.(\d+)")
_MINOR = re.compile(r"^v?(\d+)\.(\d+)")

Runner = Callable[[list[str]], str]


def _run(command: list[str]) -> str:
    """The command's standard output (and error: aws v1 prints its version there)."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_SECONDS, check=False)
    return done.stdout + done.stderr


def check_aws_cli(run: Runner = _run) -> CheckResult:
    if shutil.which("aws") is None:
        return CheckResult("FAIL", "AWS CLI", "aws is not on PATH", f"install AWS CLI v2: {AWS_CLI_INSTALL}")
    try:
        output = run(["aws", "--version"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return CheckResult(
            "FAIL", "AWS CLI", f"aws --version did not answer ({exc})", f"reinstall it: {AWS_CLI_INSTALL}"
        )
    found = _AWS_VERSION.search(output)
    if found is None:
        return CheckResult("FAIL", "AWS CLI", f"aws --version printed no version: {output.strip()[:80]!r}",
                           f"install AWS CLI v2: {AWS_CLI_INSTALL}")  # fmt: skip
    version = ".".join(found.groups())
    if int(found.group(1)) < 2:
        return CheckResult(
            "FAIL",
            "AWS CLI",
            f"version {version}: the printed image-build command ends in `aws logs tail`, which only version 2 has",
            f"install AWS CLI v2: {AWS_CLI_INSTALL}",
        )
    return CheckResult("PASS", "AWS CLI", f"version {version}")


def check_kubectl(kubernetes_version: str, run: Runner = _run) -> CheckResult:
    if shutil.which("kubectl") is None:
        return CheckResult(
            "FAIL",
            "kubectl",
            "kubectl is not on PATH (the teardown plan deletes the workloads with it)",
            f"install kubectl {kubernetes_version}: {KUBECTL_INSTALL}",
        )
    try:
        output = run(["kubectl", "version", "--client", "-o", "json"])
        client = json.loads(output[output.index("{") :])["clientVersion"]["gitVersion"]
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        return CheckResult("FAIL", "kubectl", "kubectl version --client printed no version",
                           f"install kubectl {kubernetes_version}: {KUBECTL_INSTALL}")  # fmt: skip
    ours, cluster = _MINOR.match(str(client)), _MINOR.match(kubernetes_version)
    if ours is None or cluster is None:
        return CheckResult("WARN", "kubectl", f"version {client}: not a Kubernetes version to compare")
    skew = abs(int(ours.group(2)) - int(cluster.group(2))) if ours.group(1) == cluster.group(1) else 99
    if skew > 1:
        return CheckResult(
            "WARN",
            "kubectl",
            f"version {client}, the cluster runs {kubernetes_version} (eks.kubernetes_version): kubectl is supported "
            "within one minor version of the cluster",
            f"install kubectl {kubernetes_version}: {KUBECTL_INSTALL}",
        )
    return CheckResult("PASS", "kubectl", f"version {client} (cluster {kubernetes_version})")


def check_local_tools(kubernetes_version: str, run: Runner = _run) -> list[CheckResult]:
    return [check_aws_cli(run), check_kubectl(kubernetes_version, run)]
