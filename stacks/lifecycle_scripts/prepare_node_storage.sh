#!/usr/bin/env bash
# Put containerd's image store and kubelet's state on the secondary EBS volume that HyperPod
# mounts at /opt/sagemaker. The root volume is small: a multi-gigabyte training image plus pod
# ephemeral storage would otherwise fill it and evict pods (DiskPressure).
#
# Approach: bind mounts declared as systemd mount units. Containerd and kubelet keep their
# default paths, so this works the same on Amazon Linux 2 and 2023 and needs no change to
# their configuration; the units re-create the mounts at every boot.
#
# Day 2:
# - Patching (UpdateClusterSoftware) re-runs this script on a new root volume while
#   /opt/sagemaker keeps the old AMI's state. The copy on the data volume is therefore stamped
#   with the AMI id and an id of the root volume it came from (plus the boot it was made in, for
#   the log); on any mismatch, or a copy without a stamp (interrupted), the old copy is wiped and
#   the new root's state copied again. AWS's own lifecycle script also deletes the old data
#   (aws-samples/awsome-distributed-training,
#   1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/on_create_main.sh).
# - Reboots: containerd and kubelet get a drop-in requiring their bind mounts, and the bind
#   mounts require skyrl-hp-data-volume.service, which waits for /opt/sagemaker
#   (wait_for_data_volume.sh). A late data volume delays them; a missing one makes them fail
#   (fail closed) instead of running on the root volume's empty directories.
# - A data volume that never appears fails this script, so the node fails provisioning now
#   rather than hitting DiskPressure later.
# - Other file systems: kubelet mounts pod volumes (FSx for Lustre, EFS, ...) under
#   /var/lib/kubelet. Nothing here copies or deletes across a mount: the script refuses to touch a
#   directory that has anything mounted at or below it (findmnt), and cp, find and rm stay on one
#   file system besides, so a re-run on a node with pods can never copy or delete a shared volume.
#
# Environment (optional): PROVISION_ROOT (path prefix, for tests), DATA_DISK_WAIT_SECONDS (how
# long this script waits for the volume, default 120), DATA_DISK_BOOT_WAIT_SECONDS (how long each
# boot waits for it before containerd and kubelet fail, default 300).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${PROVISION_ROOT:-}"
DATA_VOLUME="/opt/sagemaker"
WAIT_SECONDS="${DATA_DISK_WAIT_SECONDS:-120}"
BOOT_WAIT_SECONDS="${DATA_DISK_BOOT_WAIT_SECONDS:-300}"
UNIT_DIR="${ROOT}/etc/systemd/system"
# Directories moved to the data volume; each lands at ${DATA_VOLUME}/<basename>.
STATE_DIRS=(/var/lib/containerd /var/lib/kubelet)
# Stopped in this order while their state moves, started again in reverse.
SERVICES=(kubelet containerd)
WAIT_COMMAND="/usr/local/sbin/skyrl-hp-wait-data-volume"
WAIT_UNIT="skyrl-hp-data-volume.service"
DROP_IN="50-skyrl-hp-data-volume.conf"
# Which AMI and which root volume the copy on the data volume came from.
STAMP="${DATA_VOLUME}/.skyrl-hp-node-state"
ROOT_VOLUME_ID_FILE="/etc/skyrl-hp/root-volume-id"
IMDS="http://169.254.169.254/latest"

log() { printf '[prepare_node_storage] %s\n' "$*"; }

units_changed=0

# Write $2 to $1 unless it already holds exactly that.
write_file() {
  local file="$1" content="$2"
  if [[ -f "$file" ]] && cmp -s "$file" <(printf '%s' "$content"); then
    return 0
  fi
  mkdir -p "$(dirname "$file")"
  printf '%s' "$content" >"${file}.new"
  mv "${file}.new" "$file"
  log "wrote ${file#"$ROOT"}"
  units_changed=1
}

ami_id() {
  local token
  token="$(curl -fsS --max-time 5 --retry 3 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "${IMDS}/api/token")"
  curl -fsS --max-time 5 --retry 3 -H "X-aws-ec2-metadata-token: ${token}" "${IMDS}/meta-data/ami-id"
}

# A random id kept on the root volume: a new root volume (patching, replacement) has none yet.
root_volume_id() {
  local file="${ROOT}${ROOT_VOLUME_ID_FILE}"
  if [[ ! -s "$file" ]]; then
    mkdir -p "$(dirname "$file")"
    cat /proc/sys/kernel/random/uuid >"$file"
  fi
  cat "$file"
}

stamp_field() {
  sed -n "s/^$1=//p" "${ROOT}${STAMP}" 2>/dev/null || true
}

# systemd requires a mount unit's name to be its escaped mount path (/var/lib/kubelet ->
# var-lib-kubelet.mount); these paths contain only letters and slashes.
mount_unit_name() {
  local path="${1#/}"
  printf '%s.mount\n' "${path//\//-}"
}

install_boot_units() {
  mkdir -p "${ROOT}$(dirname "$WAIT_COMMAND")"
  if ! cmp -s "${SCRIPT_DIR}/wait_for_data_volume.sh" "${ROOT}${WAIT_COMMAND}"; then
    install -m 0755 "${SCRIPT_DIR}/wait_for_data_volume.sh" "${ROOT}${WAIT_COMMAND}"
    log "installed ${WAIT_COMMAND}"
  fi
  write_file "${UNIT_DIR}/${WAIT_UNIT}" "[Unit]
Description=Wait for the HyperPod data volume ${DATA_VOLUME} (containerd and kubelet state live there)

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=${WAIT_COMMAND} ${DATA_VOLUME} ${BOOT_WAIT_SECONDS}
TimeoutStartSec=$((BOOT_WAIT_SECONDS + 30))
"
  local state_dir target
  for state_dir in "${STATE_DIRS[@]}"; do
    target="${DATA_VOLUME}/$(basename "$state_dir")"
    write_file "${UNIT_DIR}/$(mount_unit_name "$state_dir")" "[Unit]
Description=Keep ${state_dir} on the HyperPod data volume ${DATA_VOLUME}
DefaultDependencies=no
Requires=${WAIT_UNIT}
After=${WAIT_UNIT}
RequiresMountsFor=${DATA_VOLUME}
# Fail (and with it containerd and kubelet) rather than mount the root volume's empty directory.
AssertPathIsMountPoint=${DATA_VOLUME}
Before=containerd.service kubelet.service umount.target
Conflicts=umount.target

[Mount]
What=${target}
Where=${state_dir}
Type=none
Options=bind

[Install]
WantedBy=containerd.service kubelet.service
"
  done
  local service
  for service in "${SERVICES[@]}"; do
    write_file "${UNIT_DIR}/${service}.service.d/${DROP_IN}" "[Unit]
# Never start on the root volume: require (and order after) the bind mounts of both state directories.
RequiresMountsFor=${STATE_DIRS[*]}
"
  done
}

# Mount points at or below $1: findmnt -R lists every mount below the file system that holds $1.
mounts_below() {
  local dir="$1"
  [[ -e "$dir" ]] || return 0
  findmnt -R -rn -o TARGET --target "$dir" | awk -v dir="$dir" '$0 == dir || index($0, dir "/") == 1'
}

# Fail unless nothing is mounted at or below any of the directories this run copies from or deletes in.
refuse_mounts_below() {
  local dir mounts lines found=()
  for dir in "$@"; do
    if ! mounts="$(mounts_below "$dir")"; then
      log "ERROR: cannot list what is mounted under ${dir} (findmnt)"
      return 1
    fi
    if [[ -n "$mounts" ]]; then
      mapfile -t lines <<<"$mounts"
      found+=("${lines[@]}")
    fi
  done
  if ((${#found[@]} > 0)); then
    log "ERROR: refusing to copy or delete state: file systems are mounted under it (${found[*]}); these are pod volumes or leftovers of an earlier run. Drain and reboot the node (or replace it), then run this again"
    return 1
  fi
}

copy_state() {
  local state_dir="$1" target="$2"
  if [[ -d "${ROOT}${target}" ]]; then
    log "${target} holds the stamped copy of ${state_dir}"
    return 0
  fi
  log "copying ${state_dir} to ${target}"
  rm -rf --one-file-system "${ROOT}${target}.partial"
  mkdir -p "${ROOT}${target}.partial" "${ROOT}${state_dir}"
  cp -a --one-file-system "${ROOT}${state_dir}/." "${ROOT}${target}.partial/"
  mv "${ROOT}${target}.partial" "${ROOT}${target}"
}

main() {
  log "data volume ${DATA_VOLUME}; state ${STATE_DIRS[*]}"
  if ! bash "${SCRIPT_DIR}/wait_for_data_volume.sh" "$DATA_VOLUME" "$WAIT_SECONDS"; then
    log "ERROR: ${DATA_VOLUME} is not mounted after ${WAIT_SECONDS}s: the node has no data volume for containerd and kubelet"
    return 1
  fi

  local ami root_id boot_id
  if ! ami="$(ami_id)" || [[ -z "$ami" ]]; then
    log "ERROR: cannot read the AMI id from the instance metadata service"
    return 1
  fi
  root_id="$(root_volume_id)"
  boot_id="$(cat /proc/sys/kernel/random/boot_id)"
  local stamped_ami stamped_root current=0
  stamped_ami="$(stamp_field ami)"
  stamped_root="$(stamp_field root_volume)"
  if [[ "$stamped_ami" == "$ami" && "$stamped_root" == "$root_id" ]]; then
    current=1
  fi

  local state_dir target mounted=() pending=()
  for state_dir in "${STATE_DIRS[@]}"; do
    if mountpoint -q "${ROOT}${state_dir}"; then
      mounted+=("$state_dir")
    else
      pending+=("$state_dir")
    fi
  done
  if ((${#mounted[@]} > 0 && !current)); then
    # The root volume's own copy is hidden under the mount: it cannot be copied again from here.
    log "ERROR: ${mounted[*]} already mounted, but ${STAMP} (ami=${stamped_ami:-none} root_volume=${stamped_root:-none}) is not this node's (ami=${ami} root_volume=${root_id})"
    return 1
  fi

  # What this run will copy from or delete in: the pending state directories and their copies, and every
  # copy when a stale one is wiped (nothing is mounted then: a mounted state with a stale stamp failed above).
  # Checked before anything is written, the boot units included: a refused run leaves the node as it was.
  local guarded=() wiped=("${pending[@]}")
  if ((!current)); then
    wiped=("${STATE_DIRS[@]}")
  fi
  for state_dir in "${pending[@]}"; do
    guarded+=("${ROOT}${state_dir}")
  done
  for state_dir in "${wiped[@]}"; do
    target="${DATA_VOLUME}/$(basename "$state_dir")"
    guarded+=("${ROOT}${target}" "${ROOT}${target}.partial")
  done
  if ((${#pending[@]} > 0)); then
    refuse_mounts_below "${guarded[@]}"
  fi

  install_boot_units

  if ((${#pending[@]} == 0)); then
    if ((units_changed)); then
      systemctl daemon-reload
    fi
    log "state is already on the data volume (ami=${ami}, copied in boot $(stamp_field boot))"
    return 0
  fi

  local stopped=() service
  for service in "${SERVICES[@]}"; do
    if systemctl is-active --quiet "$service"; then
      log "stopping ${service} while its state moves"
      systemctl stop "$service"
      stopped+=("$service")
    fi
  done

  if ((!current)); then
    if [[ -e "${ROOT}${STAMP}" ]]; then
      log "data volume holds state of ami=${stamped_ami} root_volume=${stamped_root}; this node is ami=${ami} root_volume=${root_id} (patched or replaced root volume): wiping it"
    else
      log "no stamp on the data volume (first run, or an interrupted copy): wiping any earlier copy"
    fi
    rm -f "${ROOT}${STAMP}"
    for state_dir in "${STATE_DIRS[@]}"; do
      target="${DATA_VOLUME}/$(basename "$state_dir")"
      rm -rf --one-file-system "${ROOT}${target}" "${ROOT}${target}.partial"
    done
  fi
  for state_dir in "${pending[@]}"; do
    copy_state "$state_dir" "${DATA_VOLUME}/$(basename "$state_dir")"
  done
  if ((!current)); then
    printf 'ami=%s\nroot_volume=%s\nboot=%s\n' "$ami" "$root_id" "$boot_id" >"${ROOT}${STAMP}.new"
    mv "${ROOT}${STAMP}.new" "${ROOT}${STAMP}"
    log "stamped ${STAMP}: ami=${ami} root_volume=${root_id} boot=${boot_id}"
  fi
  # Only now, with a complete stamped copy, free the root volume (the bind mounts hide it anyway).
  for state_dir in "${pending[@]}"; do
    find "${ROOT}${state_dir}" -xdev -mindepth 1 -delete
  done

  systemctl daemon-reload
  local unit
  for state_dir in "${pending[@]}"; do
    unit="$(mount_unit_name "$state_dir")"
    systemctl enable "$unit"
    systemctl start "$unit"
    if ! mountpoint -q "${ROOT}${state_dir}"; then
      log "ERROR: ${unit} started but ${state_dir} is not a mount point"
      return 1
    fi
    log "${state_dir} now lives on ${DATA_VOLUME}"
  done

  local index
  for ((index = ${#stopped[@]} - 1; index >= 0; index--)); do
    log "starting ${stopped[index]}"
    systemctl start "${stopped[index]}"
  done
}

main "$@"
