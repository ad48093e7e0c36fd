#!/usr/bin/env bash
# Wait until a path is a mount point; fail after a number of seconds.
#
# Usage: wait_for_data_volume.sh PATH SECONDS
#
# Used twice, so the rule lives in one place: by prepare_node_storage.sh while it provisions the
# node, and at every boot by skyrl-hp-data-volume.service (installed by prepare_node_storage.sh),
# which the bind mounts of containerd's and kubelet's state require. If HyperPod mounts the data
# volume late, the bind mounts (and so containerd and kubelet) wait; if it never comes, they fail
# instead of running on the root volume's empty directories.
#
# Environment (optional): PROVISION_ROOT (path prefix, for tests).
set -euo pipefail

if (($# != 2)); then
  echo "usage: $0 PATH SECONDS" >&2
  exit 2
fi
path="${PROVISION_ROOT:-}$1"
seconds="$2"

waited=0
until mountpoint -q "$path"; do
  if ((waited >= seconds)); then
    echo "[wait_for_data_volume] $1 is not mounted after ${seconds}s" >&2
    exit 1
  fi
  if ((waited % 10 == 0)); then
    echo "[wait_for_data_volume] waiting for $1 to be mounted (${waited}s)"
  fi
  sleep 1
  waited=$((waited + 1))
done
