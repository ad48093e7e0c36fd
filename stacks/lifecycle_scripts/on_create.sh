#!/usr/bin/env bash
# Entry point HyperPod runs (as root) once on every new node, before the node joins the EKS
# cluster: replacement nodes run it again. It only owns logging and failure reporting; the work
# lives in the step scripts next to it, each safe to run more than once.
#
# Environment (all optional; tests use them to run without root):
#   PROVISION_ROOT             prefix for every path the steps touch (default: the real root)
#   FAILURE_LOG_FLUSH_SECONDS  pause before exiting on failure (default 60)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PROVISION_ROOT="${PROVISION_ROOT:-}"
LOG_FILE="${PROVISION_ROOT}/var/log/provision/provisioning.log"
FAILURE_LOG_FLUSH_SECONDS="${FAILURE_LOG_FLUSH_SECONDS:-60}"

# Order matters: later steps may rely on earlier ones.
STEPS=(
  prepare_node_storage.sh
)

mkdir -p "$(dirname "$LOG_FILE")"

log() {
  # stdout reaches the node's CloudWatch log stream; the file stays on the node for debugging.
  printf '%s [on_create] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" | tee -a "$LOG_FILE"
}

log "start (scripts in ${SCRIPT_DIR})"
for step in "${STEPS[@]}"; do
  log "step ${step}: start"
  if ! bash "${SCRIPT_DIR}/${step}" 2>&1 | tee -a "$LOG_FILE"; then
    log "step ${step}: FAILED; see ${LOG_FILE}"
    # HyperPod ships the output to CloudWatch asynchronously: give it time before the node
    # is marked failed and torn down.
    sync || true
    sleep "$FAILURE_LOG_FLUSH_SECONDS"
    exit 1
  fi
  log "step ${step}: done"
done
log "finished"
