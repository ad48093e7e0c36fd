"""How a Ray pod's memory-backed /dev/shm is shared between Ray's object store and everything else.

Ray puts its object store (plasma) in /dev/shm only when the store fits there; otherwise it falls
back to /tmp on the container's disk ("This will harm performance"), see
`determine_plasma_store_config` in ray/_private/services.py. Unset, the store is 30 % of the pod's
memory capped at max(10 GB, 95 % of /dev/shm) (`resolve_object_store_memory` in
ray/_private/utils.py): on an 8 GiB head that is 10 GB, more than /dev/shm holds, so the head used
/tmp; on a 64 GiB worker it is 95 % of /dev/shm, leaving ~3 GiB for NCCL's shared-memory transport,
vLLM's shared-memory message queues and PyTorch's inter-process tensors.

So every Ray pod gets `object-store-memory` from this one rule: /dev/shm minus a headroom of a
quarter of it (at least 1 GiB). Every Ray pod's /dev/shm is an emptyDir with medium Memory and a
sizeLimit of exactly `shm_gib`, which the kubelet mounts as a tmpfs of that size.
"""

from __future__ import annotations

GIB = 1024**3
SHM_HEADROOM_FRACTION = 0.25
SHM_HEADROOM_MIN_GIB = 1
# Ray refuses a smaller store (ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES).
RAY_OBJECT_STORE_MINIMUM_BYTES = 75 * 1024**2
# The smallest /dev/shm that leaves both the headroom and a store Ray accepts.
MIN_SHM_GIB = 2


def worker_shm_gib(explicit: int | None, preferred: int, allocatable_memory_gib: int) -> int:
    """A worker pod's /dev/shm: the configured size, else `preferred` up to half of what the node lets a pod use
    (the rule the configuration checks an explicit size against), so a smaller GPU node needs no setting."""
    if explicit is not None:
        return explicit
    return max(MIN_SHM_GIB, min(preferred, allocatable_memory_gib // 2))


def shm_headroom_bytes(shm_gib: int) -> int:
    """What stays free in /dev/shm for NCCL, vLLM and PyTorch beside Ray's object store."""
    return max(SHM_HEADROOM_MIN_GIB * GIB, int(shm_gib * GIB * SHM_HEADROOM_FRACTION))


def object_store_memory_bytes(shm_gib: int) -> int:
    """Ray's `object-store-memory` for a pod whose /dev/shm is `shm_gib` GiB."""
    if shm_gib < MIN_SHM_GIB:
        raise ValueError(f"/dev/shm of {shm_gib} GiB: Ray's object store needs at least {MIN_SHM_GIB} GiB")
    return shm_gib * GIB - shm_headroom_bytes(shm_gib)
