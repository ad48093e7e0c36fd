"""Runs derived from the validated training configuration: the worker layout SkyRL sees, each experiment's
SkyRL knobs with the derived batch sizes and placement filled in, SkyRL's own batch rule, and the paths a
run writes. `resolve_runs` is called by configuration validation (so a run that does not fit is refused
before anything is synthesized) and by `ProjectConfig.derived`, which the charts read.
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass

from .catalog import InstanceSpec
from .hyperpod import HyperPodConfig, InstanceGroupConfig
from .lora_targets import skyrl_value, target_modules_problem
from .shared_memory import worker_shm_gib
from .training import (
    MULTIMODAL_LIMITS_KEY,
    RECIPE_MICRO_BATCH_SIZE,
    RECIPE_MINI_BATCH_SIZE,
    RECIPE_TRAIN_BATCH_SIZE,
    TRAINING_WORKER_SHM_GIB,
    Experiment,
    Scalar,
    SkyRLKnobs,
    TrainingConfig,
    TrainingJobsConfig,
    rayjob_name,
)
from .vllm_memory import engine_memory, max_model_len_problem, multimodal_limits
from .workloads import WorkloadsConfig


@dataclass(frozen=True)
class WorkerLayout:
    """What the RayCluster's GPU worker group offers SkyRL."""

    group: InstanceGroupConfig
    replicas: int
    gpus_per_pod: int
    shm_gib: int  # /dev/shm per worker pod: training.cluster.worker_shm_gib, else the default that fits the node

    @property
    def instance_type(self) -> str:
        return self.group.instance_type

    @property
    def spec(self) -> InstanceSpec:
        return self.group.spec

    @property
    def total_gpus(self) -> int:
        return self.replicas * self.gpus_per_pod


def worker_layout(training: TrainingConfig, hyperpod: HyperPodConfig) -> WorkerLayout:
    group = hyperpod.worker_group
    return WorkerLayout(
        group=group,
        replicas=training.cluster.worker_replicas or group.instance_count,
        gpus_per_pod=training.cluster.worker_gpus or group.spec.gpus,
        shm_gib=worker_shm_gib(training.cluster.worker_shm_gib, TRAINING_WORKER_SHM_GIB, group.allocatable_memory_gib),
    )


@dataclass(frozen=True)
class ResolvedRun:
    """One experiment with every derived value filled in: what its RayJob runs."""

    experiment: Experiment
    job_name: str
    run_id: str
    knobs: SkyRLKnobs
    run_dir: str
    ckpt_path: str
    export_path: str
    lora_sync_path: str
    total_steps: int
    # The job's GPUs and the step time the failure cost is priced with (docs/failures.md).
    gpus: int
    step_seconds: float

    @property
    def steps_per_epoch(self) -> int:
        return self.total_steps // self.knobs.epochs

    @property
    def export_steps(self) -> tuple[int, ...]:
        """Steps SkyRL exports an adapter (global_step_<N>/policy under export_path) at: multiples of
        hf_save_interval, epoch ends and the last step (skyrl/train/trainer.py, `hf_model_save`)."""
        return checkpoint_steps(self.knobs.hf_save_interval, self.steps_per_epoch, self.total_steps)

    @property
    def failure_cost(self) -> FailureCost:
        return FailureCost(
            interval=self.knobs.ckpt_interval,
            steps_per_epoch=self.steps_per_epoch,
            total_steps=self.total_steps,
            gpus=self.gpus,
            step_seconds=self.step_seconds,
        )

    @property
    def query_example_path(self) -> str:
        """Where train_job.py writes the run's query example (its first VisGym observation and generation settings)."""
        return posixpath.join(self.run_dir, QUERY_EXAMPLE_FILE)

    @property
    def multimodal_limits(self) -> dict[str, int]:
        """The training engines' limit_mm_per_prompt: a maze frame per turn."""
        return multimodal_limits(self.knobs.max_turns)

    def overrides(self) -> dict[str, str]:
        """SkyRL `key=value` pairs in a stable order: every knob, then the run's paths. The model
        path and the data files are added by train_job.py, which prepares them."""
        values: dict[str, str] = {}
        for name, field in SkyRLKnobs.model_fields.items():
            value = getattr(self.knobs, name)
            if value is not None:
                values[field.alias or name] = (
                    "null" if value == "none" and name == "resume_mode" else _skyrl_value(value)
                )
        values.update(
            {f"{MULTIMODAL_LIMITS_KEY}.{modality}": str(count) for modality, count in self.multimodal_limits.items()}
        )
        values.update(
            {
                "trainer.policy.model.lora.lora_sync_path": self.lora_sync_path,
                "trainer.ckpt_path": self.ckpt_path,
                "trainer.export_path": self.export_path,
                "trainer.run_name": self.run_id,
            }
        )
        return values


# The run's query example: docker/train_job.py's checkpoint check writes it (--query-example), the publish Job copies it
# into the adapter's S3 folder under the same name, `skyrl-hp serve query` reads it from there.
QUERY_EXAMPLE_FILE = "query-example.json"


def _skyrl_value(value: Scalar | tuple[str, ...]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return skyrl_value(value)
    return str(value)


def shared_path(workloads: WorkloadsConfig, *parts: str) -> str:
    return posixpath.join(workloads.shared_mount_path, *parts)


def model_path(training: TrainingConfig, workloads: WorkloadsConfig) -> str:
    """Where train_job.py puts the SFT weights (the contents of <model_subfolder>, not the folder)."""
    return shared_path(workloads, training.data.model_dir)


@dataclass(frozen=True)
class BatchSizes:
    """SkyRL's batch knobs for one data-parallel layout, and the two rules SkyRL holds them to."""

    train: int
    mini: int
    micro_train: int
    n_samples_per_prompt: int
    policy_data_parallel: int
    ref_data_parallel: int | None = None

    @property
    def lcm_data_parallel(self) -> int:
        """The data-parallel size SkyRL shards each batch over: the policy's, and the reference model's when used."""
        dp = self.policy_data_parallel
        return math.lcm(dp, self.ref_data_parallel) if self.ref_data_parallel else dp

    @property
    def prompt_stride(self) -> int:
        """SkyRL keeps a multiple of this many prompts per step (`RayPPOTrainer._remove_tail_data`)."""
        lcm = self.lcm_data_parallel
        return lcm // math.gcd(lcm, self.n_samples_per_prompt)

    def accepted(self) -> bool:
        """Whether SkyRL accepts these sizes at the start of the run and at every step (`problem` without the
        message)."""
        return self.validate_batch_sizes_problem() is None and self.train % self.prompt_stride == 0

    def problem(self) -> str | None:
        """The first of SkyRL's batch rules these sizes break, as one line naming the rule; None when both pass.

        SkyRL checks `validate_batch_sizes` (skyrl/train/utils/utils.py) when the run starts, and at every step
        trims the prompts to a multiple of `prompt_stride` and asserts that `train_batch_size` remain
        (`compute_prompt_mini_batch_boundaries`, skyrl/train/dataset/preprocess.py): a schedule that passes the
        first can still crash at step 1, after the cluster, the evaluation and the first rollout."""
        problem = self.validate_batch_sizes_problem()
        if problem is not None:
            return f"{problem} (SkyRL's validate_batch_sizes)"
        return self.first_step_problem()

    def validate_batch_sizes_problem(self) -> str | None:
        """The first rule of SkyRL's `validate_batch_sizes` (FSDP, no sequence parallelism) these sizes break.

        SkyRL divides with FLOOR division (per-GPU batch = batch x n_samples // dp) and the trainer pads
        each batch to a multiple of dp; the micro batch only sets gradient accumulation."""
        n, dp = self.n_samples_per_prompt, self.policy_data_parallel
        if self.train < self.mini:
            return f"trainer.train_batch_size = {self.train}: smaller than trainer.policy_mini_batch_size ({self.mini})"
        if self.train % self.mini:
            return (
                f"trainer.train_batch_size = {self.train}: must be a multiple of trainer.policy_mini_batch_size "
                f"({self.mini})"
            )
        mini_per_gpu = self.mini * n // dp
        if mini_per_gpu == 0:
            return (
                f"trainer.policy_mini_batch_size = {self.mini}: {self.mini} x n_samples_per_prompt {n} // {dp} "
                "data-parallel GPUs = 0 per GPU"
            )
        if mini_per_gpu % self.micro_train:
            return (
                f"trainer.micro_train_batch_size_per_gpu = {self.micro_train}: must divide the per-GPU mini batch "
                f"trainer.policy_mini_batch_size {self.mini} x n_samples_per_prompt {n} // {dp} data-parallel GPUs "
                f"= {mini_per_gpu} (accepted: {', '.join(map(str, _divisors(mini_per_gpu)))})"
            )
        train_per_gpu = self.train * n // dp
        if train_per_gpu % mini_per_gpu:
            return (
                f"trainer.train_batch_size = {self.train}: {self.train} x n_samples_per_prompt {n} // {dp} "
                f"data-parallel GPUs = {train_per_gpu} per GPU is not a multiple of the per-GPU mini batch "
                f"{mini_per_gpu}"
            )
        if self.train * n < self.lcm_data_parallel:
            return (
                f"trainer.train_batch_size = {self.train}: {self.train} x n_samples_per_prompt {n} samples are fewer "
                f"than the {self.lcm_data_parallel} data-parallel GPUs of the policy and reference models"
            )
        return None

    def first_step_problem(self) -> str | None:
        """SkyRL's step rule: the prompts left after `_remove_tail_data` must be exactly `train_batch_size`."""
        stride = self.prompt_stride
        if self.train % stride == 0:
            return None
        lcm, n = self.lcm_data_parallel, self.n_samples_per_prompt
        accepted = ", ".join(f"{t}/{m}" for t, m in self.accepted_nearby())
        return (
            f"trainer.train_batch_size = {self.train}: SkyRL trims each step to a multiple of {stride} prompts "
            f"({lcm} data-parallel ranks / gcd({lcm}, n_samples_per_prompt {n})), {self.train} -> "
            f"{self.train // stride * stride}, and then fails its assertion that {self.train} remain, at step 1 "
            f"(RayPPOTrainer._remove_tail_data, compute_prompt_mini_batch_boundaries); accepted train/mini with "
            f"micro batch {self.micro_train} and {self.train // self.mini} mini-batches per step: "
            f"{accepted or 'none near it'}"
        )

    def accepted_nearby(self, count: int = 2) -> list[tuple[int, int]]:
        """The `count` train/mini pairs nearest this one that both rules accept, with the same micro batch and
        the same number of mini-batches per step."""
        per_step = max(1, self.train // self.mini)
        fits = [
            (per_step * mini, mini)
            for mini in range(1, self.mini + 4 * self.lcm_data_parallel)
            if self._with(per_step * mini, mini).accepted()
        ]
        return sorted(fits, key=lambda pair: (abs(pair[0] - self.train), pair[0]))[:count]

    def _with(self, train: int, mini: int) -> BatchSizes:
        return BatchSizes(
            train, mini, self.micro_train, self.n_samples_per_prompt, self.policy_data_parallel, self.ref_data_parallel
        )


def _divisors(value: int) -> list[int]:
    return [d for d in range(1, value + 1) if value % d == 0]


def largest_micro_batch(mini: int, n_samples_per_prompt: int, data_parallel: int) -> int:
    """The largest micro batch SkyRL accepts that is no larger than the recipe's (memory per micro batch)."""
    mini_per_gpu = mini * n_samples_per_prompt // data_parallel
    return max([d for d in _divisors(mini_per_gpu) if d <= RECIPE_MICRO_BATCH_SIZE] or [1])


def _closest_to_recipe(pair: tuple[int, int]) -> tuple[int, int]:
    # On a tie the smaller batch: 256 rows keep the recipe's 8 steps an epoch at 30, not at 34.
    return abs(pair[0] - RECIPE_TRAIN_BATCH_SIZE), pair[0]


def derive_batches(knobs: SkyRLKnobs, policy_dp: int, ref_dp: int | None) -> BatchSizes:
    """Fill in the batch sizes the user left unset; a value the user set is never changed.

    Unset train and mini: the pair with the recipe's 2 mini-batches per step closest to the recipe's 32 / 16
    that both of SkyRL's rules accept on `policy_dp` GPUs (30 / 15 on 6 GPUs with 8 samples). One of them set:
    the other by the recipe's ratio where SkyRL accepts it, else the nearest that it does. The micro batch, when
    unset, is the largest SkyRL accepts up to the recipe's 4. A micro batch the user set does not steer the
    derived sizes; when SkyRL refuses it with them, `problem` says so with the accepted values."""
    n = knobs.n_samples_per_prompt

    def sizes(train: int, mini: int) -> BatchSizes:
        return BatchSizes(train, mini, largest_micro_batch(mini, n, policy_dp), n, policy_dp, ref_dp)

    train, mini = knobs.train_batch_size, knobs.policy_mini_batch_size
    limit = RECIPE_TRAIN_BATCH_SIZE + 4 * policy_dp * (ref_dp or 1)
    if train is not None and mini is not None:
        candidates = [(train, mini)]
    elif mini is not None:
        candidates = sorted(((mini * k, mini) for k in range(1, limit)), key=_closest_to_recipe)
    elif train is not None:
        halves = [train // 2] if train % 2 == 0 else []
        candidates = [(train, m) for m in [*halves, *reversed(_divisors(train))]]
    else:
        candidates = sorted(((2 * m, m) for m in range(1, limit)), key=_closest_to_recipe)
    # Nothing fits (an n_samples that no size satisfies): keep the recipe's sizes so the check reports
    # SkyRL's rule against them.
    chosen = next(
        (found for found in (sizes(*pair) for pair in candidates) if found.accepted()),
        sizes(train or RECIPE_TRAIN_BATCH_SIZE, mini or RECIPE_MINI_BATCH_SIZE),
    )
    if knobs.micro_train_batch_size_per_gpu is None:
        return chosen
    return BatchSizes(chosen.train, chosen.mini, knobs.micro_train_batch_size_per_gpu, n, policy_dp, ref_dp)


def batch_sizes(knobs: SkyRLKnobs) -> BatchSizes:
    """The batch sizes of resolved knobs (placement filled in)."""
    policy_dp = knobs.policy_num_nodes * knobs.policy_num_gpus_per_node
    ref_dp = knobs.ref_num_nodes * knobs.ref_num_gpus_per_node if knobs.use_kl_loss else None
    return BatchSizes(
        train=knobs.train_batch_size,
        mini=knobs.policy_mini_batch_size,
        micro_train=knobs.micro_train_batch_size_per_gpu,
        n_samples_per_prompt=knobs.n_samples_per_prompt,
        policy_data_parallel=policy_dp,
        ref_data_parallel=ref_dp,
    )


def checkpoint_steps(interval: int, steps_per_epoch: int, total_steps: int) -> tuple[int, ...]:
    """The steps after which SkyRL saves, for an interval: its multiples, every epoch end, and the last step."""
    steps = {s for s in range(1, total_steps + 1) if s % interval == 0 or s % steps_per_epoch == 0}
    return tuple(sorted(steps | {total_steps}))


@dataclass(frozen=True)
class FailureCost:
    """The steps one failure makes a run redo, and their GPU time.

    SkyRL saves a checkpoint after step N when N is a multiple of trainer.ckpt_interval or ends an epoch,
    and after the last step (skyrl/train/trainer.py, `train`: `is_epoch_end or global_step % ckpt_interval
    == 0`, then the final save; epoch-end saves since SkyRL PR #1490, in skyrl 0.3.0). A retry resumes after
    the newest complete checkpoint, so a failure just before a save completes redoes the whole gap."""

    interval: int
    steps_per_epoch: int
    total_steps: int
    gpus: int
    step_seconds: float

    @property
    def checkpoint_steps(self) -> tuple[int, ...]:
        return checkpoint_steps(self.interval, self.steps_per_epoch, self.total_steps)

    @property
    def gaps(self) -> tuple[int, ...]:
        marks = (0, *self.checkpoint_steps)
        return tuple(b - a for a, b in zip(marks, marks[1:], strict=False))

    @property
    def worst_case_steps(self) -> int:
        return max(self.gaps)

    @property
    def mean_steps(self) -> float:
        """Expected redone steps for a failure at a uniformly random moment of the run."""
        return sum(gap * gap for gap in self.gaps) / (2 * self.total_steps)

    def gpu_hours(self, steps: float) -> float:
        return steps * self.gpus * self.step_seconds / 3600

    def hours(self, steps: float) -> float:
        return steps * self.step_seconds / 3600


def budget_interval(jobs: TrainingJobsConfig, gpus: int, total_steps: int, target_steps: int) -> int:
    """The most steps between checkpoints whose redo fits jobs.failure_budget_gpu_hours on `gpus` GPUs at
    jobs.estimated_step_seconds, rounded down to a divisor of data.target_steps so that a checkpoint and an
    adapter export land on the target step (serving.publish.step); at least 1, at most the run's steps."""
    # The tolerance keeps a budget that is an exact multiple (18 GPU-hours = 20 steps) from rounding down.
    fits = math.floor(jobs.failure_budget_gpu_hours * 3600 / (gpus * jobs.estimated_step_seconds) + 1e-9)
    limit = max(1, min(total_steps, fits))
    return max(d for d in _divisors(target_steps) if d <= limit) if limit < target_steps else limit


def _resolve_knobs(knobs: SkyRLKnobs, layout: WorkerLayout, training: TrainingConfig) -> SkyRLKnobs:
    nodes = knobs.policy_num_nodes or layout.replicas
    gpus_per_node = knobs.policy_num_gpus_per_node or layout.gpus_per_pod
    policy_gpus = nodes * gpus_per_node
    engines = knobs.num_engines or max(1, policy_gpus // knobs.tensor_parallel_size)
    ref_gpus = (knobs.ref_num_nodes or nodes) * (knobs.ref_num_gpus_per_node or gpus_per_node)
    batches = derive_batches(knobs, policy_gpus, ref_gpus if knobs.use_kl_loss else None)
    train = batches.train
    epochs = knobs.epochs
    steps_per_epoch = max(1, training.data.train_rows // train)
    if epochs is None:
        epochs = math.ceil(training.data.target_steps / steps_per_epoch)
    # The job's cluster holds every worker GPU while a failed interval is redone.
    ckpt_interval = knobs.ckpt_interval or budget_interval(
        training.jobs, layout.total_gpus, steps_per_epoch * epochs, training.data.target_steps
    )
    return knobs.model_copy(
        update={
            "policy_num_nodes": nodes,
            "policy_num_gpus_per_node": gpus_per_node,
            "ref_num_nodes": knobs.ref_num_nodes or nodes,
            "ref_num_gpus_per_node": knobs.ref_num_gpus_per_node or gpus_per_node,
            "num_engines": engines,
            "train_batch_size": batches.train,
            "policy_mini_batch_size": batches.mini,
            "micro_train_batch_size_per_gpu": batches.micro_train,
            "epochs": epochs,
            "ckpt_interval": ckpt_interval,
            "hf_save_interval": knobs.hf_save_interval or ckpt_interval,
        }
    )


def _check_run(knobs: SkyRLKnobs, layout: WorkerLayout, training: TrainingConfig) -> None:
    """SkyRL's placement rules, its batch rule (`BatchSizes.problem`) and vLLM's memory and LoRA limits,
    each as one line with the field, the value and the rule."""
    policy_gpus = knobs.policy_num_nodes * knobs.policy_num_gpus_per_node
    engine_gpus = knobs.num_engines * knobs.tensor_parallel_size
    if knobs.policy_num_gpus_per_node > layout.gpus_per_pod:
        raise ValueError(
            f"trainer.placement.policy_num_gpus_per_node = {knobs.policy_num_gpus_per_node}: a worker pod has "
            f"{layout.gpus_per_pod} GPUs"
        )
    if knobs.colocate_all:
        if policy_gpus != engine_gpus:
            raise ValueError(
                f"generator.inference_engine.num_engines = {knobs.num_engines}: with colocate_all, policy GPUs "
                f"({knobs.policy_num_nodes} nodes x {knobs.policy_num_gpus_per_node}) = {policy_gpus} must equal "
                f"num_engines x tensor_parallel_size = {knobs.num_engines} x {knobs.tensor_parallel_size} "
                f"= {engine_gpus}"
            )
        needed = policy_gpus
    else:
        needed = policy_gpus + engine_gpus
    if needed > layout.total_gpus:
        raise ValueError(
            f"placement needs {needed} GPUs but the RayCluster has {layout.replicas} worker pods x "
            f"{layout.gpus_per_pod} GPUs = {layout.total_gpus}"
        )
    if knobs.tensor_parallel_size > layout.gpus_per_pod:
        raise ValueError(
            f"generator.inference_engine.tensor_parallel_size = {knobs.tensor_parallel_size}: an engine must fit one "
            f"worker pod ({layout.gpus_per_pod} GPUs)"
        )
    problem = batch_sizes(knobs).problem()
    if problem:
        raise ValueError(problem)
    if knobs.lora_rank and (problem := target_modules_problem(knobs.lora_target_modules)):
        raise ValueError(
            f"trainer.policy.model.lora.target_modules = {skyrl_value(knobs.lora_target_modules)}: {problem}"
        )
    # SkyRL's engines load the one adapter being trained (SkyRL's lora.max_loras default, 1).
    memory = engine_memory(
        gpu_memory_gb=layout.spec.gpu_memory_gib,
        gpu_memory_utilization=knobs.gpu_memory_utilization,
        tensor_parallel=knobs.tensor_parallel_size,
        max_loras=1 if knobs.lora_rank else 0,
        max_lora_rank=knobs.lora_rank,
    )
    problem = max_model_len_problem(
        knobs.max_model_len, memory, utilization=knobs.gpu_memory_utilization, gpu=gpu_name(layout.group)
    )
    if problem:
        key = "generator.inference_engine.engine_init_kwargs.max_model_len"
        raise ValueError(f"{key} = {knobs.max_model_len}: {problem}")
    if knobs.max_input_length < knobs.max_prompt_length:
        raise ValueError(
            f"generator.max_input_length = {knobs.max_input_length}: multi-turn needs at least "
            f"trainer.max_prompt_length ({knobs.max_prompt_length})"
        )
    if knobs.vision_language_generator is not True or knobs.remove_microbatch_padding is not False:
        raise ValueError(
            "generator.vision_language_generator must be true and trainer.remove_microbatch_padding false: "
            "Qwen3-VL is a vision-language model"
        )
    if training.data.train_rows < knobs.train_batch_size:
        raise ValueError(
            f"data.train_rows = {training.data.train_rows}: fewer than one trainer.train_batch_size ({knobs.train_batch_size})"
        )


def gpu_name(group: InstanceGroupConfig) -> str:
    return f"{group.spec.gpu_memory_gib} GB GPU of {group.instance_type}"


def resolve_runs(training: TrainingConfig, hyperpod: HyperPodConfig, workloads: WorkloadsConfig) -> list[ResolvedRun]:
    """Every experiment with overrides applied and derived values filled; raises ValueError naming
    the experiment, the key, the value and the rule that fails."""
    layout = worker_layout(training, hyperpod)
    if layout.gpus_per_pod > layout.spec.gpus:
        raise ValueError(
            f"cluster.worker_gpus = {layout.gpus_per_pod}: {layout.instance_type} has {layout.spec.gpus} GPUs per instance"
        )
    if layout.replicas > hyperpod.worker_group.instance_count:
        raise ValueError(
            f"cluster.worker_replicas = {layout.replicas}: hyperpod.worker_group has {hyperpod.worker_group.instance_count} "
            f"instances (one worker pod per node)"
        )
    worker_memory = layout.group.allocatable_memory_gib
    if layout.shm_gib * 2 > worker_memory:
        raise ValueError(
            f"cluster.worker_shm_gib = {training.cluster.worker_shm_gib}: /dev/shm counts against the pod's memory; keep it at most "
            f"half of the {worker_memory} GiB a pod may use (at most {worker_memory // 2}, or unset for the default that fits)"
        )
    runs: list[ResolvedRun] = []
    for experiment in training.experiments:
        knobs = SkyRLKnobs.model_validate({**training.knobs.model_dump(by_alias=True), **experiment.overrides})
        knobs = _resolve_knobs(knobs, layout, training)
        try:
            _check_run(knobs, layout, training)
        except ValueError as exc:
            raise ValueError(f"experiment {experiment.name!r}: {exc}") from None
        run_id = experiment.effective_run_id
        run_dir = shared_path(workloads, training.data.runs_dir, run_id)
        steps_per_epoch = max(1, training.data.train_rows // knobs.train_batch_size)
        runs.append(
            ResolvedRun(
                experiment=experiment,
                job_name=rayjob_name(training, experiment),
                run_id=run_id,
                knobs=knobs,
                run_dir=run_dir,
                # SkyRL writes global_step_<N>/ under both: keep checkpoints apart from the HF exports.
                ckpt_path=posixpath.join(run_dir, "ckpt"),
                export_path=run_dir,
                lora_sync_path=posixpath.join(run_dir, "lora_sync"),
                total_steps=steps_per_epoch * knobs.epochs,
                gpus=layout.total_gpus,
                step_seconds=training.jobs.estimated_step_seconds,
            )
        )
    return runs
