"""The meta path finder `sitecustomize` installs in the drill (HP_DRILL_BOUNDARY=1): it finds each module it patches
through the other finders, then patches it around its execution. SkyRL's `main_base` is patched for every stop point;
the `train-on-cpu` stand-ins and behaviour changes only when the run directory's `stop-at` says `train-on-cpu`, and
only in the processes that import those modules."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
from typing import Any

from . import cuda_standins, flash_attn_standin, main_base_patch, reward_shaping, stop_points, weight_sync_skip

PATCHED_ON_CPU = (
    *cuda_standins.CUDA_MODULES,
    flash_attn_standin.MODEL_WRAPPER,
    weight_sync_skip.WEIGHT_SENDERS,
    reward_shaping.VISGYM_ENV_MODULE,
)


def train_on_cpu() -> bool:
    return os.environ.get("HP_DRILL_BOUNDARY") == "1" and stop_points.stop_at() == stop_points.TRAIN_ON_CPU


class PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the patched modules through the other finders, then patches them around their execution."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != main_base_patch.TARGET and not (fullname in PATCHED_ON_CPU and train_on_cpu()):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        self._loaders = getattr(self, "_loaders", {})
        self._loaders[fullname] = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: Any) -> Any:
        return self._loaders[spec.name].create_module(spec)

    def exec_module(self, module: Any) -> None:
        name = module.__spec__.name
        loader = self._loaders[name]
        if name == main_base_patch.TARGET:
            loader.exec_module(module)
            main_base_patch.patch(module)
            return
        if name == reward_shaping.VISGYM_ENV_MODULE:
            loader.exec_module(module)
            reward_shaping.patch_visgym_env(module)
            return
        cuda_standins.patch_torch_for_cpu()
        if name == flash_attn_standin.MODEL_WRAPPER:
            flash_attn_standin.exec_with_standin(loader, module)
            return
        loader.exec_module(module)
        if name == weight_sync_skip.WEIGHT_SENDERS:
            weight_sync_skip.patch_weight_senders(module)
        elif getattr(module, "torch", None) is not None:
            module.torch = cuda_standins.CpuFactories(module.torch)
