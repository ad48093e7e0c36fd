"""Stand-ins for the GPU in torch's CUDA entry points, for SkyRL's trainer-side worker modules (CUDA_MODULES: the
FSDP workers, the trainer) in `train-on-cpu` only: CUDA device calls answer for the CPU, device meshes and autocast
on "cuda" use the CPU, and NCCL process groups use gloo. Each is listed, with what it leaves unproven, in CPU_FORCED
(drill/cpu_training.py), which the drill prints."""

from __future__ import annotations

from typing import Any

CUDA_MODULES = (
    "skyrl.backends.skyrl_train.workers.worker",
    "skyrl.backends.skyrl_train.workers.fsdp.fsdp_worker",
    "skyrl.backends.skyrl_train.distributed.strategy",
    "skyrl.backends.skyrl_train.distributed.fsdp_strategy",
    "skyrl.backends.skyrl_train.distributed.fsdp_utils",
)
_patched = False


def cpu_device() -> Any:
    import torch

    return torch.device("cpu")


def patch_torch_for_cpu() -> None:
    """torch's CUDA entry points SkyRL's FSDP workers call, as CPU equivalents (stand-ins for the GPU). Once per
    process."""
    global _patched
    if _patched:
        return
    _patched = True
    import psutil
    import torch
    import torch.distributed
    import torch.distributed.device_mesh

    # One function object per torch name: torch._dynamo's trace rules refuse one object behind two torch names.
    def set_device(*args: Any, **kwargs: Any) -> None:
        return None

    def synchronize(*args: Any, **kwargs: Any) -> None:
        return None

    def empty_cache(*args: Any, **kwargs: Any) -> None:
        return None

    def mem_get_info(*args: Any, **kwargs: Any) -> tuple[int, int]:
        memory = psutil.virtual_memory()
        return memory.available, memory.total

    torch.cuda.current_device = cpu_device
    torch.cuda.set_device = set_device
    torch.cuda.synchronize = synchronize
    torch.cuda.empty_cache = empty_cache
    torch.cuda.mem_get_info = mem_get_info
    torch.Tensor.cuda = lambda self, *args, **kwargs: self.to("cpu")

    original_mesh = torch.distributed.device_mesh.init_device_mesh

    def init_device_mesh(device_type: str, *args: Any, **kwargs: Any) -> Any:
        return original_mesh("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    torch.distributed.device_mesh.init_device_mesh = init_device_mesh

    original_init = torch.distributed.init_process_group

    def init_process_group(*args: Any, backend: Any = None, **kwargs: Any) -> Any:
        # "cpu:gloo,cuda:nccl" -> gloo: no NCCL without GPUs.
        if backend is not None and "nccl" in str(backend):
            backend = "gloo"
        return original_init(*args, backend=backend, **kwargs)

    torch.distributed.init_process_group = init_process_group

    original_autocast = torch.autocast

    class autocast(original_autocast):  # type: ignore[misc,valid-type]
        def __init__(self, device_type: str, *args: Any, **kwargs: Any) -> None:
            super().__init__("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    torch.autocast = autocast


class CpuFactories:
    """The module's `torch`, with tensors it creates on device "cuda" created on the CPU instead (a stand-in for
    the GPU: fsdp_utils.py's `_sync_non_persistent_buffers` allocates its broadcast buffer with device="cuda").
    Everything else is torch's own."""

    FACTORIES = ("empty", "zeros", "ones", "full", "tensor", "arange", "empty_like", "zeros_like", "ones_like")

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._torch, name)
        if name not in self.FACTORIES:
            return value

        def on_cpu(*args: Any, **kwargs: Any) -> Any:
            device = kwargs.get("device")
            if device is not None and str(device).startswith("cuda"):
                kwargs["device"] = "cpu"
            return value(*args, **kwargs)

        return on_cpu
