"""The drill's GPU boundary, loaded by every Python process of the drill's Ray nodes (their PYTHONPATH).

SkyRL's trainer runs everything up to its placement group on a CPU: it parses and validates the
overrides, starts Ray with its runtime env, loads the tokenizer and the datasets and waits for the
placement group of the configured layout (`BasePPOExp.__init__`). The next step,
`BasePPOExp._setup_trainer`, imports the FSDP workers (flash-attn, a CUDA build) and starts the vLLM
engines on the placement group's GPUs: the first step that needs a CUDA device. This module replaces
that method, in the drill only, with a report of what ran, printed as one marker line, followed by
`GPUBoundaryReached`. Nothing else is changed; outside the drill (no HP_DRILL_BOUNDARY) it does nothing.

A scenario that only needs to see the trainer process start (which variables reached it) can stop there
instead: the run directory's `stop-at` file then says `trainer-start`, and `BasePPOExp.__init__` reports
before it loads anything. A scenario that needs another stop point adds it here the same way: a name for the
`stop-at` file, a patch in `_patch`, and a report printed after MARKER.

`resume` (the resume scenarios): `_setup_trainer` builds SkyRL's own `RayPPOTrainer` (its tracker, datasets,
dataloader, placement group) and `run` goes on into SkyRL's `train()`, which calls `load_checkpoints` for
resume_mode=latest, restores the dataloader state and computes the first step to train. Stand-ins replace only
what needs the GPUs: the FSDP workers behind `trainer.dispatch` (their model/optimizer state is a small file,
written and read where SkyRL hands them a checkpoint folder), the vLLM engines (no inference client, no
generator) and the evaluation they run before training. At SkyRL's first `on_step_start` callback the trainer
reports the step it is about to train and what it loaded. With a `resume-plan.json` asking for it, the trainer
then plays the rest of a run that a node loss ends: SkyRL's own `save_checkpoints` writes its first
`complete_saves` checkpoints, then starts the next one and hangs in the policy save until the drill kills the
job's driver. Without one it stops (DrillStop).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
from collections import Counter
from typing import Any

MARKER = "SKYRL_HP_DRILL_STOP"
TARGET = "skyrl.train.entrypoints.main_base"
GPU_BOUNDARY = "gpu-boundary"
TRAINER_START = "trainer-start"
RESUME = "resume"
TRAIN_ON_CPU = "train-on-cpu"
RESUME_PLAN = "resume-plan.json"
TRAIN_PLAN = "train-plan.json"
STEP_MARKER = "SKYRL_HP_DRILL_STEP"
EVENT_MARKER = "SKYRL_HP_DRILL_EVENT"
HUNG = "hung"
FROZEN = "frozen"
STANDIN_STATE = "standin-model-state.txt"
# How long the stand-in policy save hangs waiting for the drill to kill the driver before it gives up.
HANG_SECONDS = 600
NEXT_STEP = "trainer setup: FSDP workers (flash-attn) and vLLM engines on the placement group's GPUs need CUDA"


class GPUBoundaryReached(RuntimeError):
    """Raised where the first step needing a CUDA device would run."""


class DrillStop(RuntimeError):
    """Raised where a scenario asked the trainer to stop."""


def _drill_file(name: str) -> str:
    return os.path.join(os.environ.get("HP_DRILL_DIR", ""), name)


def _stop_at() -> str:
    try:
        with open(_drill_file("stop-at"), encoding="utf-8") as handle:
            return handle.read().strip() or GPU_BOUNDARY
    except OSError:
        return GPU_BOUNDARY


def _common(cfg: Any, at: str) -> dict[str, Any]:
    import ray
    import skyrl
    import skyrl.env_vars
    import torch

    report: dict[str, Any] = {
        "at": at,
        "skyrl": skyrl.__version__,
        "ray": ray.__version__,
        "torch": torch.__version__,
        "python": ".".join(map(str, sys.version_info[:3])),
        "cuda_available": torch.cuda.is_available(),
        "pg_timeout_s": skyrl.env_vars.SKYRL_RAY_PG_TIMEOUT_IN_S,
        "placement": {
            "policy_num_nodes": cfg.trainer.placement.policy_num_nodes,
            "policy_num_gpus_per_node": cfg.trainer.placement.policy_num_gpus_per_node,
            "num_engines": cfg.generator.inference_engine.num_engines,
        },
    }
    if os.path.isfile(_drill_file("report-env-names")):
        with open(_drill_file("report-env-names"), encoding="utf-8") as handle:
            names = [line.strip() for line in handle if line.strip()]
        report["env"] = {name: os.environ.get(name) for name in names}
    return report


def _report(experiment: Any) -> dict[str, Any]:
    from ray.util import placement_group_table

    report = _common(experiment.cfg, GPU_BOUNDARY)
    report.update(
        {
            "train_rows": len(experiment.train_dataset),
            "eval_rows": len(experiment.eval_dataset) if experiment.eval_dataset is not None else 0,
            "tokenizer": type(experiment.tokenizer).__name__,
            "next": NEXT_STEP,
        }
    )
    pg = experiment.colocate_pg
    if pg is not None:
        table = placement_group_table(pg.pg)
        per_node = Counter(table["bundles_to_node_id"].values())
        report["placement_group"] = {
            "state": table["state"],
            "strategy": table["strategy"],
            "bundles": [dict(bundle) for bundle in pg.pg.bundle_specs],
            "bundles_per_node": sorted(per_node.values(), reverse=True),
        }
    return report


def _boundary(self: Any) -> Any:
    print(f"{MARKER} {json.dumps(_report(self), sort_keys=True)}", flush=True)
    raise GPUBoundaryReached(NEXT_STEP)


class _StandInDispatch:
    """The FSDP workers' side of SkyRL's WorkerDispatch, for the calls `train()`, `save_checkpoints` and
    `load_checkpoints` make before the first step's GPU work: model/optimizer state is one small file per model."""

    def __init__(self, hang_in_save: bool = False) -> None:
        self.loaded: list[dict[str, Any]] = []
        self.hang_in_save = hang_in_save

    def init_weight_sync_state(self, client: Any) -> None:
        return None

    async def save_weights_for_sampler(self) -> None:
        return None

    def get_node_ids(self) -> list[str]:
        return []

    def save_checkpoint(self, model: str, ckpt_dir: str, tokenizer: Any = None) -> None:
        os.makedirs(ckpt_dir, exist_ok=True)
        if self.hang_in_save:
            # Half of a model's shards on disk, then the node is lost.
            with open(os.path.join(ckpt_dir, STANDIN_STATE + ".partial"), "w", encoding="utf-8") as handle:
                handle.write("stand-in shard 0 of 2\n")
            import time

            time.sleep(HANG_SECONDS)
            raise DrillStop(f"the drill did not kill the driver within {HANG_SECONDS} s")
        with open(os.path.join(ckpt_dir, STANDIN_STATE), "w", encoding="utf-8") as handle:
            handle.write(f"stand-in {model} model and optimizer state\n")

    def load_checkpoint(self, model: str, ckpt_dir: str, **kwargs: Any) -> None:
        self.loaded.append(
            {"model": model, "dir": ckpt_dir, "state": os.path.isfile(os.path.join(ckpt_dir, STANDIN_STATE))}
        )


def _plan(name: str) -> dict[str, Any]:
    """A plan file the drill wrote in the run directory, {} when there is none."""
    try:
        with open(_drill_file(name), encoding="utf-8") as handle:
            plan: dict[str, Any] = json.load(handle)
            return plan
    except OSError:
        return {}


def _resume_plan() -> dict[str, Any]:
    return _plan(RESUME_PLAN)


def _resume_trainer(self: Any) -> Any:
    """SkyRL's `_setup_trainer` up to `build_models` (upstream skyrl/train/entrypoints/main_base.py), with the
    stand-ins for what needs the GPUs."""
    from skyrl.train.utils.callbacks import TrainingCallback

    os.makedirs(self.cfg.trainer.export_path, exist_ok=True)
    os.makedirs(self.cfg.trainer.ckpt_path, exist_ok=True)
    trainer = self.get_trainer(
        cfg=self.cfg,
        tracker=self.get_tracker(),
        tokenizer=self.tokenizer,
        train_dataset=self.train_dataset,
        eval_dataset=self.eval_dataset,
        inference_engine_client=None,
        generator=None,
        colocate_pg=self.colocate_pg,
    )
    trainer.trajectory_logger = self.get_trajectory_logger()
    self.trainer = trainer
    dispatch = _StandInDispatch()
    trainer.dispatch = dispatch

    async def no_eval(*args: Any, **kwargs: Any) -> dict[str, float]:
        return {}

    trainer.eval = no_eval
    plan = _resume_plan()

    class FirstStep(TrainingCallback):  # type: ignore[misc]  # SkyRL's classes are untyped (Any)
        def on_step_start(self, trainer: Any, callback_input: Any, control: Any) -> None:
            report = _common(trainer.cfg, RESUME)
            report.update(
                {
                    "first_step": trainer.global_step,
                    "epoch": callback_input.epoch,
                    "steps_per_epoch": callback_input.steps_per_epoch,
                    "resume_mode": trainer.resume_mode.value,
                    "ckpt_path": trainer.cfg.trainer.ckpt_path,
                    "ckpt_interval": trainer.cfg.trainer.ckpt_interval,
                    "loaded": dispatch.loaded,
                    "standins": "FSDP workers (model/optimizer state), vLLM engines, the evaluation before training",
                }
            )
            if complete := int(plan.get("complete_saves", 0)):
                # The steps SkyRL saves after (trainer.py `train`: every ckpt_interval steps and at each epoch's
                # end). The steps in between are GPU work; SkyRL's own save_checkpoints writes each checkpoint.
                per_epoch, interval = callback_input.steps_per_epoch, trainer.cfg.trainer.ckpt_interval
                steps = [s for s in range(1, 100 * per_epoch) if s % per_epoch == 0 or s % interval == 0]
                saves, dying = steps[:complete], steps[complete]
                for step in saves:
                    trainer.global_step = step
                    trainer.save_checkpoints()
                report["saved"] = saves
                report["dying_in_save_of"] = trainer.global_step = dying
                dispatch.hang_in_save = True
                print(f"{MARKER} {json.dumps(report, sort_keys=True)}", flush=True)
                trainer.save_checkpoints()
            print(f"{MARKER} {json.dumps(report, sort_keys=True)}", flush=True)
            raise DrillStop("the scenario stops at the first training step")

    trainer.add_callback(FirstStep())
    return trainer


def _patch(module: Any) -> None:
    experiment = module.BasePPOExp
    original_init = experiment.__init__

    def __init__(self: Any, cfg: Any) -> None:
        if _stop_at() == TRAINER_START:
            print(f"{MARKER} {json.dumps(_common(cfg, TRAINER_START), sort_keys=True)}", flush=True)
            raise DrillStop("the scenario stops at the trainer's start")
        original_init(self, cfg)

    original_setup = experiment._setup_trainer

    def _setup_trainer(self: Any) -> Any:
        if _stop_at() == RESUME:
            return _resume_trainer(self)
        if _stop_at() == TRAIN_ON_CPU:
            plan = _train_plan()
            trainer = original_setup(self)
            trainer.add_callback(_train_report_callback())
            if plan.get("hang_at_step"):
                _hang_in_generation(trainer, int(plan["hang_at_step"]))
            if plan.get("freeze_at_step"):
                trainer.add_callback(_freeze_callback(int(plan["freeze_at_step"])))
            return trainer
        return _boundary(self)

    experiment.__init__ = __init__
    experiment._setup_trainer = _setup_trainer
    if _stop_at() == TRAIN_ON_CPU:
        module.PromptDataset = _in_process_filter(module.PromptDataset)


def _in_process_filter(prompt_dataset: Any) -> Any:
    """SkyRL's PromptDataset with its prompt-length filter in this process (`get_train_dataset` asks for 8 spawned
    processes, each importing datasets and transformers: a minute of two cores per attempt). The rows it keeps are
    the same; the drill lists this with the sizes it cuts (cpu_training.py SHRUNK_SITE)."""

    class PromptDataset(prompt_dataset):  # type: ignore[misc]  # SkyRL's classes are untyped (Any)
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["num_workers"] = 1
            super().__init__(*args, **kwargs)

    return PromptDataset


def _train_report_callback() -> Any:
    """Observes SkyRL's real training (it changes nothing): one report line as `train()` starts (what SkyRL runs
    with), then a STEP_MARKER line per step with its reward and loss from the metrics SkyRL logs."""
    from skyrl.train.utils.callbacks import TrainingCallback

    class TrainReport(TrainingCallback):  # type: ignore[misc]  # SkyRL's classes are untyped (Any)
        def on_log(self, trainer: Any, callback_input: Any, control: Any) -> None:
            logs = callback_input.logs or {}
            wanted = {
                key: float(value)
                for key, value in logs.items()
                if isinstance(value, (int, float))
                and (key.startswith("reward/") or key.startswith("policy/") or key.startswith("loss/"))
            }
            if "trainer/global_step" in logs:
                step = {"step": int(logs["trainer/global_step"]), **wanted}
                # One line per step as it ends: an attempt that hangs or is fenced later has printed its steps.
                print(f"{STEP_MARKER} {json.dumps(step, sort_keys=True)}", flush=True)

        def on_train_start(self, trainer: Any, callback_input: Any, control: Any) -> None:
            # At the start, not the end: an attempt that hangs or is fenced never reaches on_train_end.
            report = _common(trainer.cfg, TRAIN_ON_CPU)
            report.update(
                {
                    "global_step": trainer.global_step,
                    "export_path": trainer.cfg.trainer.export_path,
                    "ckpt_path": trainer.cfg.trainer.ckpt_path,
                    "lora_sync_path": trainer.cfg.trainer.policy.model.lora.lora_sync_path,
                    "train_batch_size": trainer.cfg.trainer.train_batch_size,
                    "policy_mini_batch_size": trainer.cfg.trainer.policy_mini_batch_size,
                    "n_samples_per_prompt": trainer.cfg.generator.n_samples_per_prompt,
                    "vision_language_generator": trainer.cfg.generator.vision_language_generator,
                    "generator": type(trainer.generator).__name__,
                }
            )
            print(f"{MARKER} {json.dumps(report, sort_keys=True)}", flush=True)

    return TrainReport()


def _train_plan() -> dict[str, Any]:
    """What the drill asks of this attempt's real training (`train-plan.json`, read once as the trainer is built):
    `hang_at_step`, `freeze_at_step`."""
    return _plan(TRAIN_PLAN)


def _event(name: str, step: int, **extra: Any) -> None:
    """An event of this attempt for the drill: `<name>.json` in the run directory (pid, step, wall time)."""
    import time

    record = {"pid": os.getpid(), "step": step, "at": time.time(), **extra}
    staging = _drill_file(f".{name}.json.{os.getpid()}")
    with open(staging, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(staging, _drill_file(f"{name}.json"))
    print(f"{EVENT_MARKER} {name} {json.dumps(record, sort_keys=True)}", flush=True)


def _hang_in_generation(trainer: Any, step: int) -> None:
    """The hang stand-in: step `step`'s rollout never returns, as when a vLLM engine stops answering while its process
    lives (the trainer awaits the generator's output forever). Only the drill's watchdog check ends it."""
    import asyncio

    original = trainer.generate

    async def generate(*args: Any, **kwargs: Any) -> Any:
        if trainer.global_step == step:
            _event(HUNG, step)
            await asyncio.Event().wait()
        return await original(*args, **kwargs)

    trainer.generate = generate


def _freeze_callback(step: int) -> Any:
    """At step `step`'s on_step_end, before SkyRL saves that step's checkpoint (trainer.py `train`), the process
    running the training loop stops itself with SIGSTOP, as a node that lost its kubelet keeps a stale attempt's
    processes; the drill freezes the job's driver too and later resumes both with SIGCONT."""
    import signal

    from skyrl.train.utils.callbacks import TrainingCallback

    class Freeze(TrainingCallback):  # type: ignore[misc]  # SkyRL's classes are untyped (Any)
        first_step: int | None = None

        def on_step_start(self, trainer: Any, callback_input: Any, control: Any) -> None:
            if self.first_step is None:
                self.first_step = int(trainer.global_step)

        def on_step_end(self, trainer: Any, callback_input: Any, control: Any) -> None:
            if trainer.global_step == step:
                _event(FROZEN, step, first_step=self.first_step)
                os.kill(os.getpid(), signal.SIGSTOP)

    return Freeze()


# --- train-on-cpu: stand-ins for the CUDA calls of SkyRL's FSDP workers ------------------------------------------------
#
# Applied only in processes that import SkyRL's trainer-side worker modules (the FSDP workers, the trainer), only when
# the scenario is `train-on-cpu`. Each is listed, with what it leaves unproven, in CPU_FORCED
# (drill/cpu_training.py), which the drill prints.
CUDA_MODULES = (
    "skyrl.backends.skyrl_train.workers.worker",
    "skyrl.backends.skyrl_train.workers.fsdp.fsdp_worker",
    "skyrl.backends.skyrl_train.distributed.strategy",
    "skyrl.backends.skyrl_train.distributed.fsdp_strategy",
    "skyrl.backends.skyrl_train.distributed.fsdp_utils",
)
# SkyRL imports flash-attn's padding helpers at the top of its model wrapper (workers/model_wrapper.py); they run
# only with trainer.remove_microbatch_padding=true, which the manifests set to false.
MODEL_WRAPPER = "skyrl.backends.skyrl_train.workers.model_wrapper"
WEIGHT_SENDERS = "skyrl.backends.skyrl_train.weight_sync.weight_senders"
# SkyRL's VisGym environment of the SFT recipe (examples/train/visgym/env_sft.py), which the entry point registers.
VISGYM_ENV_MODULE = "examples.train.visgym.env_sft"
# The shaping stand-in's reward per cell a step brings the agent closer to the goal (away: the same, negative).
SHAPING_PER_CELL = 0.5
_TORCH_PATCHED = False


class StandInUsed(RuntimeError):
    """A stand-in that must never run was called."""


def _cpu_device() -> Any:
    import torch

    return torch.device("cpu")


def _patch_torch_for_cpu() -> None:
    """torch's CUDA entry points SkyRL's FSDP workers call, as CPU equivalents (stand-ins for the GPU)."""
    global _TORCH_PATCHED
    if _TORCH_PATCHED:
        return
    _TORCH_PATCHED = True
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

    torch.cuda.current_device = _cpu_device
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


def _standin_flash_attn() -> dict[str, Any]:
    """flash_attn and flash_attn.bert_padding as stand-in modules whose functions refuse to run."""
    import types

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StandInUsed("flash-attn stand-in called: the drill runs with trainer.remove_microbatch_padding=false")

    package = types.ModuleType("flash_attn")
    package.__path__ = []
    padding = types.ModuleType("flash_attn.bert_padding")
    padding.pad_input = refuse  # type: ignore[attr-defined]
    padding.unpad_input = refuse  # type: ignore[attr-defined]
    package.bert_padding = padding  # type: ignore[attr-defined]
    return {"flash_attn": package, "flash_attn.bert_padding": padding}


def _patch_weight_senders(module: Any) -> None:
    """BEHAVIOUR CHANGE, not a hardware stand-in: the weight-sync engine's NCCL rendezvous with the vLLM workers is
    skipped. With LoRA SkyRL sends the adapter through files in lora_sync_path and loads it into vLLM by name; the
    NCCL engine built here carries full weights only, which the LoRA path does not send."""
    original = module.build_trainer_engine

    def build_trainer_engine(*args: Any, **kwargs: Any) -> Any:
        return None

    build_trainer_engine.__wrapped__ = original  # type: ignore[attr-defined]
    module.build_trainer_engine = build_trainer_engine


def _distance_to_goal(env: Any) -> int:
    """The agent's distance to the goal in VisGym's maze, in cells (Manhattan), from the environment's own state
    (maze_2d's get_init_state: the current agent and target locations)."""
    state = env.visgym_env.unwrapped.get_init_state()
    agent, target = state["agent_location"], state["target_location"]
    return int(abs(agent[0] - target[0]) + abs(agent[1] - target[1]))


def _patch_visgym_env(module: Any) -> None:
    """BEHAVIOUR CHANGE, not a hardware stand-in: each step of SkyRL's VisGymEnv also earns SHAPING_PER_CELL for every
    cell it brings the agent closer to the goal (and loses it for every cell away). The recipe's reward (0.8 x reaching
    the goal + 0.2 x answers in the SFT format, at the episode's end) is 0 for every sample of a random-weight model,
    so GRPO's advantages, and the update, would be 0; this gives the samples of a group different rewards."""
    environment = module.VisGymEnv
    original_step = environment.step

    def step(self: Any, action: str) -> Any:
        before = _distance_to_goal(self)
        output = original_step(self, action)
        shaping = SHAPING_PER_CELL * (before - _distance_to_goal(self))
        output["reward"] = float(output["reward"]) + shaping
        output["metadata"] = {**(output.get("metadata") or {}), "drill_reward_shaping": shaping}
        return output

    environment.step = step


def _train_on_cpu() -> bool:
    return os.environ.get("HP_DRILL_BOUNDARY") == "1" and _stop_at() == TRAIN_ON_CPU


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the patched modules through the other finders, then patches them around their execution."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        patched_on_cpu = (*CUDA_MODULES, MODEL_WRAPPER, WEIGHT_SENDERS, VISGYM_ENV_MODULE)
        if fullname != TARGET and not (fullname in patched_on_cpu and _train_on_cpu()):
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
        if name == TARGET:
            loader.exec_module(module)
            _patch(module)
            return
        if name == VISGYM_ENV_MODULE:
            loader.exec_module(module)
            _patch_visgym_env(module)
            return
        _patch_torch_for_cpu()
        if name == MODEL_WRAPPER:
            # The stand-ins exist only while SkyRL's module binds them: transformers must not see a flash_attn.
            standins = _standin_flash_attn()
            saved = {key: sys.modules.get(key) for key in standins}
            sys.modules.update(standins)
            try:
                loader.exec_module(module)
            finally:
                for key, value in saved.items():
                    if value is None:
                        sys.modules.pop(key, None)
                    else:
                        sys.modules[key] = value
            return
        loader.exec_module(module)
        if name == WEIGHT_SENDERS:
            _patch_weight_senders(module)
        elif getattr(module, "torch", None) is not None:
            module.torch = _CpuFactories(module.torch)


class _CpuFactories:
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


if os.environ.get("HP_DRILL_BOUNDARY") == "1":
    sys.meta_path.insert(0, _PatchOnImport())
