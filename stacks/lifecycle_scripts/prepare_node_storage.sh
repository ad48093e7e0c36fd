#!/usr/bin/env bash
# Put containerd's image store and kubelet's state on the secondary EBS volume that HyperPod
# mounts at /opt/sagemaker. The root volume is small: a multi-gigabyte training image plus pod
# ephemeral storage would otherwise fill it and evict pods (DiskPressure).
#
# Approach: bind mounts declared as systemd mount units. Containerd and kubelet keep their
# default paths, so this works the same on Amazon Linux 2 and 2023 and needs no change to
# their configuration; the units re-create the mounts at every boot, before either service.
# Idempotent: a directory that is already bind-mounted is left alone.
#
# Environment (optional): PROVISION_ROOT (path prefix, for tests), DATA_DISK_WAIT_SECONDS
# (how long to wait for the volume to appear, default 120).
set -euo pipefail

ROOT="${PROVISION_ROOT:-}"
DATA_VOLUME="/opt/sagemaker"
WAIT_SECONDS="${DATA_DISK_WAIT_SECONDS:-120}"
UNIT_DIR="${ROOT}/etc/systemd/system"
# Directories moved to the data volume, and where each one lands there.
STATE_DIRS=(/var/lib/containerd /var/lib/kubelet)
# Stopped in this order while their state moves, started again in reverse.
SERVICES=(kubelet containerd)

log() { printf '[prepare_node_storage] %s\n' "$*"; }

wait_for_data_volume() {
  local waited=0
  until mountpoint -q "${ROOT}${DATA_VOLUME}"; do
    if ((waited >= WAIT_SECONDS)); then
      return 1
    fi
    log "waiting for ${DATA_VOLUME} to be mounted (${waited}s)"
    sleep 5
    waited=$((waited + 5))
  done
}

# systemd requires a mount unit's name to be its escaped mount path (/var/lib/kubelet ->
# var-lib-kubelet.mount); these paths contain only letters and slashes.
mount_unit_name() {
  local path="${1#/}"
  printf '%s.mount\n' "${path//\//-}"
}

write_mount_unit() {
  local state_dir="$1" target="$2" unit_file
  unit_file="${UNIT_DIR}/$(mount_unit_name "$state_dir")"
  local content
  content="[Unit]
Description=Keep ${state_dir} on the HyperPod data volume ${DATA_VOLUME}
DefaultDependencies=no
RequiresMountsFor=${DATA_VOLUME}
# Without the volume, fall back to the root disk rather than hiding data behind an empty mount.
ConditionPathIsMountPoint=${DATA_VOLUME}
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
  if [[ -f "$unit_file" ]] && [[ "$(cat "$unit_file")" == "$content" ]]; then
    log "$(basename "$unit_file") is up to date"
  else
    mkdir -p "$UNIT_DIR"
    printf '%s' "$content" >"$unit_file"
    log "wrote $(basename "$unit_file")"
  fi
}

move_state() {
  local state_dir="$1" target="$2"
  mkdir -p "${ROOT}${target}" "${ROOT}${state_dir}"
  # A non-empty target means an earlier run already copied (and possibly cleared the source).
  if [[ -z "$(ls -A "${ROOT}${target}")" ]] && [[ -n "$(ls -A "${ROOT}${state_dir}")" ]]; then
    log "copying ${state_dir} to ${target}"
    cp -a "${ROOT}${state_dir}/." "${ROOT}${target}/"
  fi
  # The source is hidden by the bind mount from now on: free the root volume.
  find "${ROOT}${state_dir}" -mindepth 1 -delete
}

main() {
  log "data volume ${DATA_VOLUME}; moving ${STATE_DIRS[*]}"
  if ! wait_for_data_volume; then
    log "WARNING: ${DATA_VOLUME} is not mounted after ${WAIT_SECONDS}s; containerd and kubelet stay on the root volume"
    return 0
  fi

  local pending=()
  local state_dir
  for state_dir in "${STATE_DIRS[@]}"; do
    if mountpoint -q "${ROOT}${state_dir}"; then
      log "${state_dir} is already on the data volume"
    else
      pending+=("$state_dir")
    fi
  done
  if ((${#pending[@]} == 0)); then
    log "nothing to do"
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

  local target unit
  for state_dir in "${pending[@]}"; do
    target="${DATA_VOLUME}/$(basename "$state_dir")"
    move_state "$state_dir" "$target"
    write_mount_unit "$state_dir" "$target"
  done
  systemctl daemon-reload
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
