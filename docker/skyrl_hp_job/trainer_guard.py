"""In the trainer's process: the progress callback and the checkpoint fence, installed on SkyRL's RayPPOTrainer by
a Ray worker setup hook the driver routes to every worker of the job.

SkyRL's entry point runs the training loop in a Ray task (`@ray.remote(num_cpus=1)` around BasePPOExp.run in
examples/train/visgym/entrypoint.py and skyrl/train/entrypoints/main_base.py), a worker process on any node of
the cluster, not in the driver. What runs there is SkyRL's own: its trainer's callbacks
(skyrl/train/utils/callbacks.py; RayPPOTrainer.train fires on_train_start, on_step_end after each step and
on_train_end) report progress, and RayPPOTrainer.save_checkpoints / save_models and the `io.open_file` that
writes data.pt, trainer_state.pt and latest_ckpt_global_step.txt (skyrl/train/trainer.py) check the fence.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.abc
import os
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from .attempts import Attempt, check_fence
from .errors import PrepareError
from .progress import ProgressCallback
from .tracking import MLFLOW_RUN_ID_ENV, fence_tracker

# The module whose RayPPOTrainer runs the training loop, in the Ray task the entry point starts.
TRAINER_MODULE = "skyrl.train.trainer"


def _inside(path: str, directory: str) -> bool:
    path, directory = os.path.abspath(path), os.path.abspath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


class FencedIO:
    """SkyRL's io module as the trainer module sees it, with the fence checked before a file under the checkpoint
    directory is opened for writing (data.pt, trainer_state.pt, latest_ckpt_global_step.txt)."""

    def __init__(self, io: Any, attempt: Attempt) -> None:
        self._io = io
        self._attempt = attempt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._io, name)

    def open_file(self, path: Any, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if any(flag in mode for flag in "wax+") and _inside(str(path), self._attempt.ckpt_dir):
            check_fence(self._attempt, f"before writing {path}")
        return self._io.open_file(path, mode, *args, **kwargs)


def guard_trainer(module: ModuleType, attempt: Attempt) -> None:
    """Install the progress callback and the fence on `module`'s RayPPOTrainer (once)."""
    trainer_class = module.RayPPOTrainer
    if getattr(trainer_class, "_skyrl_hp_guarded", False):
        return
    original_init = trainer_class.__init__
    original_save_checkpoints = trainer_class.save_checkpoints
    original_save_models = trainer_class.save_models

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.add_callback(ProgressCallback(attempt))
        if getattr(self, "tracker", None) is not None:
            fence_tracker(self.tracker, attempt)

    def save_checkpoints(self: Any, *args: Any, **kwargs: Any) -> Any:
        check_fence(attempt, f"before writing checkpoint global_step_{self.global_step}")
        return original_save_checkpoints(self, *args, **kwargs)

    def save_models(self: Any, *args: Any, **kwargs: Any) -> Any:
        check_fence(attempt, f"before exporting global_step_{self.global_step}")
        return original_save_models(self, *args, **kwargs)

    trainer_class.__init__ = __init__
    trainer_class.save_checkpoints = save_checkpoints
    trainer_class.save_models = save_models
    trainer_class._skyrl_hp_guarded = True
    module.io = FencedIO(module.io, attempt)  # type: ignore[attr-defined]


class _GuardingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, attempt: Attempt) -> None:
        self._loader = loader
        self._attempt = attempt

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        guard_trainer(module, self._attempt)


class GuardOnImport(importlib.abc.MetaPathFinder):
    """Guards TRAINER_MODULE as it is imported: finds it through the other finders, then guards it after it ran."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != TRAINER_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is None:
                    return None
                spec.loader = _GuardingLoader(spec.loader, self.attempt)
                return spec
        return None


def arm_trainer_guard(fields: Mapping[str, Any], mlflow_run_id: str | None = None) -> None:
    """In a worker process of the job: guard RayPPOTrainer now if it is imported, else when it is. Only the process
    that runs the training loop constructs a trainer; in the others (FSDP workers, vLLM engines) this stays inert.
    With an MLflow run, MLFLOW_RUN_ID makes SkyRL's mlflow.start_run resume it in the trainer's process."""
    attempt = Attempt(**fields)
    if mlflow_run_id is not None:
        os.environ[MLFLOW_RUN_ID_ENV] = mlflow_run_id
    module = sys.modules.get(TRAINER_MODULE)
    if module is not None:
        guard_trainer(module, attempt)
    elif not any(isinstance(finder, GuardOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, GuardOnImport(attempt))


def worker_setup_hook(attempt: Attempt, mlflow_run_id: str | None = None) -> Callable[[], None]:
    """The job's Ray worker_process_setup_hook: Ray runs it in every worker process of the job before the process
    runs a task (https://docs.ray.io/en/latest/ray-core/api/doc/ray.runtime_env.RuntimeEnv.html). Ray pickles it
    with cloudpickle when the driver calls ray.init, by value together with the functions and classes it reaches
    (route_guard_to_workers registers this package for that): the package is not importable on the workers, whose
    pods do not mount the job script's ConfigMap."""
    fields = dataclasses.asdict(attempt)

    def skyrl_hp_trainer_guard() -> None:
        arm_trainer_guard(fields, mlflow_run_id)

    return skyrl_hp_trainer_guard


def route_guard_to_workers(ray: Any, hook: Callable[[], None]) -> None:
    """Add `hook` as worker_process_setup_hook to the runtime env of SkyRL's own `ray.init` call
    (skyrl/train/utils/utils.py initialize_ray: `ray.init(runtime_env={"env_vars": ...})`), which makes it the job's:
    every task and actor of the job inherits it, wherever Ray places them."""
    # cloudpickle pickles what an importable module defines by reference (the worker would import it) unless the
    # module, or a package above it, is registered to go by value
    # (https://github.com/cloudpipe/cloudpickle#overriding-pickles-serialization-mechanism-for-importable-constructs).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__package__])
    original = ray.init

    def init(*args: Any, **kwargs: Any) -> Any:
        runtime_env = dict(kwargs.get("runtime_env") or {})
        if runtime_env.get("worker_process_setup_hook") not in (None, hook):
            raise PrepareError(
                "ray.init already has a worker_process_setup_hook: the trainer's progress and checkpoint fence "
                "cannot be installed"
            )
        runtime_env["worker_process_setup_hook"] = hook
        kwargs["runtime_env"] = runtime_env
        return original(*args, **kwargs)

    ray.init = init
