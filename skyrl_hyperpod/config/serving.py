"""Serving configuration: the Ray Serve LLM RayService and the Job that publishes a trained adapter.

Defaults follow the reference run (docs/sources.md): model id `visgym-qwen3vl`, base weights from the shared
file system, adapters loaded on demand from s3://<artifacts bucket>/<adapters prefix>/.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..plumbing.upstream import KUBERAY_NAME_PATTERN, RAYJOB_NAME_MAX
from .base import PinnedImage, StrictModel
from .hyperpod import HyperPodConfig
from .shared_memory import MIN_SHM_GIB, worker_shm_gib
from .training import TrainingConfig
from .training_runs import ResolvedRun, gpu_name
from .vllm_memory import engine_memory, max_model_len_problem
from .workloads import K8S_NAME_PATTERN

# vLLM accepts only these LoRA ranks for max_lora_rank.
VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
# /dev/shm a serving worker pod gets by default where the node allows it.
SERVING_WORKER_SHM_GIB = 32
REMOTE_LORA_SCHEMES = ("s3://", "gs://", "abfss://", "azure://")


class PublishAdapterConfig(StrictModel):
    """The Jobs that copy trained adapters from /shared to the S3 prefix the RayService reads: one Job per
    experiment, each adapter named after its experiment unless `adapter_name` says otherwise."""

    experiment: str | None = Field(
        default=None, description="Publish only this experiment. Default: every experiment that trains a LoRA adapter."
    )
    step: int | None = Field(
        default=None,
        gt=0,
        description="global_step_<N> to publish: a multiple of hf_save_interval, or the run's last step. Default: "
        "each run's last step (SkyRL always exports the final model).",
    )
    adapter_name: str | None = Field(
        default=None,
        pattern=K8S_NAME_PATTERN,
        max_length=40,
        description="S3 folder name = the adapter's name in requests (model='<model_id>:<adapter_name>'). Default: "
        "the experiment's name. Only with `experiment` (two experiments would share one folder).",
    )
    image: PinnedImage = Field(
        default="public.ecr.aws/aws-cli/aws-cli:2.32.9",
        description="AWS CLI image, pinned by tag (not latest) or digest (EKS Pod Identity needs AWS CLI 2.15 or "
        "newer).",
    )


@dataclass(frozen=True)
class Publication:
    """One adapter to publish: which run, which exported step, under which S3 folder name."""

    run: ResolvedRun
    step: int
    adapter_name: str

    @property
    def job_name(self) -> str:
        # Job specs are immutable: the step is in the name, so publishing another step is a new Job.
        return f"publish-{self.adapter_name}-step-{self.step}"


# Job names are DNS labels: "publish-" + adapter + "-step-" + up to 6 digits within 63 characters.
ADAPTER_NAME_MAX = 40


def exported_steps_problem(run: ResolvedRun, step: int) -> str | None:
    """None when SkyRL exports `step` for `run` (ResolvedRun.export_steps), else why not, in one line."""
    if run.knobs.lora_rank == 0:
        return f"experiment {run.experiment.name!r} is a full fine-tune (LoRA rank 0): it has no adapter to publish"
    if step not in run.export_steps:
        return (
            f"step {step} is never exported: run {run.run_id!r} exports every {run.knobs.hf_save_interval} steps, "
            f"at each epoch's end ({run.steps_per_epoch} steps) and at its last step {run.total_steps}"
        )
    return None


def publication(run: ResolvedRun, step: int | None = None, adapter_name: str | None = None) -> Publication:
    """The publication of `run` at `step` (default: its last step) under `adapter_name` (default: the experiment's
    name); ValueError in one line when that step is never exported."""
    chosen = step or run.total_steps
    problem = exported_steps_problem(run, chosen)
    if problem:
        raise ValueError(problem)
    name = adapter_name or run.experiment.name
    if len(name) > ADAPTER_NAME_MAX or not re.fullmatch(K8S_NAME_PATTERN, name):
        raise ValueError(
            f"adapter name {name!r}: at most {ADAPTER_NAME_MAX} lowercase letters, digits and '-', starting and ending "
            "with a letter or digit"
        )
    return Publication(run=run, step=chosen, adapter_name=name)


def published_runs(serving: ServingConfig, runs: Sequence[ResolvedRun]) -> list[ResolvedRun]:
    """The runs whose adapters are published: `publish.experiment`'s, else every LoRA run."""
    experiment = serving.publish.experiment
    if experiment is not None:
        return [run for run in runs if run.experiment.name == experiment]
    return [run for run in runs if run.knobs.lora_rank]


def publications(serving: ServingConfig, runs: Sequence[ResolvedRun]) -> list[Publication]:
    """What the publish chart writes: one Job per published experiment (none when serving is off)."""
    if not serving.enabled:
        return []
    publish = serving.publish
    return [publication(run, publish.step, publish.adapter_name) for run in published_runs(serving, runs)]


class ServingConfig(StrictModel):
    """Ray Serve LLM RayService serving the SFT base model plus LoRA adapters from S3."""

    enabled: bool = Field(
        default=True,
        description="False: neither the RayService nor the publish Jobs are synthesized, and the training head may "
        "use the whole head node.",
    )
    rayservice_name: str = Field(default="visgym-serve", max_length=RAYJOB_NAME_MAX, pattern=KUBERAY_NAME_PATTERN)
    application_name: str = Field(default="visgym-llm", pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$")
    model_id: str = Field(default="visgym-qwen3vl", pattern=r"^[a-zA-Z0-9][a-zA-Z0-9._-]*$")
    max_lora_rank: int | None = Field(
        default=None,
        description="Default: the largest LoRA rank among the experiments, rounded up to one vLLM accepts.",
    )
    max_num_adapters_per_replica: int = Field(default=16, gt=0, description="Also vLLM's max_loras.")
    max_model_len: int | None = Field(default=None, gt=0, description="Default: the training knob max_model_len.")
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    tensor_parallel_size: int = Field(default=1, gt=0, description="GPUs per model replica.")
    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(default=2, gt=0)
    target_ongoing_requests: int = Field(default=16, gt=0, description="Autoscaling target per replica.")
    worker_replicas: int = Field(default=1, gt=0, description="GPU worker pods (one per node of the GPU group).")
    worker_idle_seconds: int = Field(
        default=300,
        ge=0,
        le=86400,
        description="hyperpod.worker_group.scaling on_demand: how long a serving worker pod without Serve replicas "
        "stays before KubeRay's autoscaler removes it (its idleTimeoutSeconds); its node goes "
        "hyperpod.worker_group.scale_down_after_minutes later.",
    )
    autoscaler_cpus: int = Field(
        default=1, gt=0, le=16, description="The Ray autoscaler container in the head pod (on_demand)."
    )
    autoscaler_memory_gib: int = Field(default=1, gt=0, le=64)
    worker_shm_gib: int | None = Field(
        default=None,
        ge=MIN_SHM_GIB,
        description=f"/dev/shm per worker pod (Ray's object store). Default: {SERVING_WORKER_SHM_GIB} GiB, at most "
        "half of the memory a pod may use on the GPU node.",
    )
    head_cpus: int = Field(default=8, gt=0, description="The serve head runs the proxy and controller, no model.")
    head_memory_gib: int = Field(default=32, gt=0)
    head_shm_gib: int = Field(default=4, ge=MIN_SHM_GIB, description="/dev/shm per head pod (Ray's object store).")
    upgrade_strategy: Literal["NewCluster", "None"] = Field(
        default="NewCluster",
        description="RayService upgradeStrategy.type. KubeRay's NewClusterWithIncrementalUpgrade needs the Ray "
        "autoscaler and a Gateway API class (ValidateClusterUpgradeOptions), which this project does not deploy.",
    )
    lora_path_override: str | None = Field(
        default=None,
        description="dynamic_lora_loading_path. Default: s3://<artifacts bucket>/<workloads.adapters_prefix>.",
    )
    publish: PublishAdapterConfig = PublishAdapterConfig()
    client_namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces whose pods may call the Serve endpoint (port 8000) in-cluster. Default: none "
        "(kubectl port-forward only).",
    )

    @field_validator("client_namespaces")
    @classmethod
    def _namespace_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if len(name) > 63 or not re.fullmatch(K8S_NAME_PATTERN, name):
                raise ValueError(f"{name!r} is not a Kubernetes namespace name (lowercase letters, digits, '-')")
        return value

    @model_validator(mode="after")
    def _own_rules(self) -> ServingConfig:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas = {self.min_replicas}: larger than max_replicas ({self.max_replicas})")
        if self.max_lora_rank is not None and self.max_lora_rank not in VLLM_LORA_RANKS:
            raise ValueError(
                f"max_lora_rank = {self.max_lora_rank}: vLLM accepts {', '.join(map(str, VLLM_LORA_RANKS))}"
            )
        if self.lora_path_override is not None and not self.lora_path_override.startswith(REMOTE_LORA_SCHEMES):
            raise ValueError(
                f"lora_path_override = {self.lora_path_override!r}: Ray Serve LLM loads adapters from remote storage "
                f"only ({', '.join(REMOTE_LORA_SCHEMES)}); use s3://bucket/prefix"
            )
        return self


def serving_head_requests(serving: ServingConfig, hyperpod: HyperPodConfig) -> tuple[int, int]:
    """(vCPUs, GiB) the serving head pod requests: its Ray container, and with an autoscaled GPU group KubeRay's
    autoscaler container beside it (autoscalerOptions.resources)."""
    if not serving.enabled:
        return 0, 0
    if hyperpod.worker_group.autoscaled:
        return serving.head_cpus + serving.autoscaler_cpus, serving.head_memory_gib + serving.autoscaler_memory_gib
    return serving.head_cpus, serving.head_memory_gib


def training_head_size(training: TrainingConfig, serving: ServingConfig, hyperpod: HyperPodConfig) -> tuple[int, int]:
    """(vCPUs, GiB) of the training head pod: explicit, or what one head node has left after the
    serving head, so the RayService head schedules beside the training RayCluster."""
    head = hyperpod.head_group
    serving_cpus, serving_memory = serving_head_requests(serving, hyperpod)
    cpus = training.cluster.head_cpus or head.allocatable_vcpus - serving_cpus
    memory = training.cluster.head_memory_gib or head.allocatable_memory_gib - serving_memory
    return cpus, memory


def _check_head_node(
    serving: ServingConfig, *, training: TrainingConfig, hyperpod: HyperPodConfig, training_head: tuple[int, int]
) -> None:
    """Both heads on one head node: their requests together must fit what a pod there may request."""
    head = hyperpod.head_group
    training_cpus, training_memory = training_head
    serving_cpus, serving_memory = serving_head_requests(serving, hyperpod)
    for key, unit, allocatable, training_value, serving_value in (
        ("head_cpus", "vCPUs", head.allocatable_vcpus, training_cpus, serving_cpus),
        ("head_memory_gib", "GiB", head.allocatable_memory_gib, training_memory, serving_memory),
    ):
        if training_value < 1 or training_value + serving_value > allocatable:
            raise ValueError(
                f"training.cluster.{key} + serving.{key} = {training_value} + {serving_value}: both heads share one "
                f"{head.instance_type} node (threads_per_core {head.threads_per_core}), where pods may request "
                f"{allocatable} {unit}"
            )
    if training.cluster.head_shm_gib * 2 > training_memory:
        raise ValueError(
            f"training.cluster.head_shm_gib = {training.cluster.head_shm_gib}: /dev/shm counts against the pod's memory; keep it at "
            f"most half of the training head's {training_memory} GiB"
        )


def effective_max_model_len(serving: ServingConfig, training: TrainingConfig) -> int:
    """vLLM's max_model_len for serving: explicit, else the training engines' (what the policy was trained at)."""
    return serving.max_model_len or training.knobs.max_model_len


def effective_max_lora_rank(serving: ServingConfig, runs: Sequence[ResolvedRun]) -> int:
    """vLLM's max_lora_rank: explicit, else the smallest rank vLLM offers that holds every run's adapter."""
    if serving.max_lora_rank is not None:
        return serving.max_lora_rank
    largest = max(run.knobs.lora_rank for run in runs)
    return next((rank for rank in VLLM_LORA_RANKS if rank >= largest), VLLM_LORA_RANKS[-1])


def effective_multimodal_limits(runs: Sequence[ResolvedRun]) -> dict[str, int]:
    """The serving engine's limit_mm_per_prompt: what the longest of the runs' conversations holds, as training's."""
    return max((run.multimodal_limits for run in runs), key=lambda limits: limits["image"])


def check_serving(
    serving: ServingConfig,
    *,
    training: TrainingConfig,
    hyperpod: HyperPodConfig,
    runs: Sequence[ResolvedRun],
    training_head: tuple[int, int],
) -> None:
    """Cross-checks against the training runs, the GPU group and the head node the two heads share (the training
    head's (vCPUs, GiB) as derived); ValueError naming field, value, rule. Nothing to check when serving is off."""
    if not serving.enabled:
        return
    rank = effective_max_lora_rank(serving, runs)
    for run in runs:
        if run.knobs.lora_rank > rank:
            raise ValueError(
                f"max_lora_rank = {rank}: experiment {run.experiment.name!r} trains LoRA rank {run.knobs.lora_rank}; "
                f"vLLM cannot load an adapter above max_lora_rank"
            )
    if rank > VLLM_LORA_RANKS[-1]:
        raise ValueError(f"max_lora_rank = {rank}: vLLM's largest LoRA rank is {VLLM_LORA_RANKS[-1]}")
    group = hyperpod.worker_group
    if serving.worker_replicas > group.instance_count:
        raise ValueError(
            f"worker_replicas = {serving.worker_replicas}: hyperpod.worker_group has {group.instance_count} instances"
        )
    if serving.tensor_parallel_size > group.spec.gpus:
        raise ValueError(
            f"tensor_parallel_size = {serving.tensor_parallel_size}: a replica must fit one {group.instance_type} "
            f"({group.spec.gpus} GPUs)"
        )
    max_model_len = effective_max_model_len(serving, training)
    memory = engine_memory(
        gpu_memory_gb=group.spec.gpu_memory_gib,
        gpu_memory_utilization=serving.gpu_memory_utilization,
        tensor_parallel=serving.tensor_parallel_size,
        max_loras=serving.max_num_adapters_per_replica,
        max_lora_rank=rank,
    )
    problem = max_model_len_problem(
        max_model_len, memory, utilization=serving.gpu_memory_utilization, gpu=gpu_name(group)
    )
    if problem:
        raise ValueError(f"max_model_len = {max_model_len}: {problem}")
    per_pod = group.spec.gpus // serving.tensor_parallel_size
    capacity = serving.worker_replicas * per_pod
    if serving.max_replicas > capacity:
        pods_needed = -(-serving.max_replicas // per_pod)
        more_pods = (
            f" or serving.worker_replicas to {pods_needed} (the GPU group has {group.instance_count} nodes)"
            if pods_needed <= group.instance_count
            else ""
        )
        raise ValueError(
            f"max_replicas = {serving.max_replicas}: {serving.worker_replicas} worker pod(s) x {group.spec.gpus} GPUs "
            f"hold {capacity} replica(s) of {serving.tensor_parallel_size} GPU(s): set serving.max_replicas to at most "
            f"{capacity}{more_pods}"
        )
    if serving_worker_shm_gib(serving, hyperpod) * 2 > group.allocatable_memory_gib:
        raise ValueError(
            f"worker_shm_gib = {serving.worker_shm_gib}: keep /dev/shm at most half of the "
            f"{group.allocatable_memory_gib} GiB a pod may use (at most {group.allocatable_memory_gib // 2}, or "
            "unset for the default that fits)"
        )
    _check_head_node(serving, training=training, hyperpod=hyperpod, training_head=training_head)
    publish = serving.publish
    names = [experiment.name for experiment in training.experiments]
    if publish.experiment is not None and publish.experiment not in names:
        raise ValueError(
            f"publish.experiment = {publish.experiment!r}: not one of the experiments ({', '.join(names)})"
        )
    lora_runs = [run for run in runs if run.knobs.lora_rank]
    if not lora_runs:
        raise ValueError(
            "enabled = true but every experiment is a full fine-tune (LoRA rank 0): the RayService serves LoRA "
            "adapters; set serving.enabled: false, or give an experiment trainer.policy.model.lora.rank"
        )
    if publish.adapter_name is not None and publish.experiment is None and len(lora_runs) > 1:
        raise ValueError(
            f"publish.adapter_name = {publish.adapter_name!r}: {len(lora_runs)} experiments would publish into that "
            "one folder; set publish.experiment too, or leave adapter_name unset (each adapter is named after its "
            "experiment)"
        )
    for pub_run in published_runs(serving, runs):
        try:
            publication(pub_run, publish.step, publish.adapter_name)
        except ValueError as exc:
            key = (
                f"publish.experiment = {pub_run.experiment.name!r}"
                if pub_run.knobs.lora_rank == 0
                else f"publish.step = {publish.step or pub_run.total_steps}"
            )
            raise ValueError(f"{key}: {exc}") from None


def serving_worker_shm_gib(serving: ServingConfig, hyperpod: HyperPodConfig) -> int:
    """The serving worker pods' /dev/shm: serving.worker_shm_gib, else the default that fits the GPU node."""
    group = hyperpod.worker_group
    return worker_shm_gib(serving.worker_shm_gib, SERVING_WORKER_SHM_GIB, group.allocatable_memory_gib)
