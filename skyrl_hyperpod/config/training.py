"""Training configuration: SkyRL GRPO knobs, named experiments, and the RayCluster/RayJob around them.

Defaults are the reference run (LoRA rank 32 on the VisGym SFT checkpoint, colocated vLLM engines,
one engine per GPU, SkyRL's VisGym batch schedule; docs/reference-run.md lists each knob and its
source). Knobs are typed fields whose alias is SkyRL's dotted
key, so an experiment's overrides use the keys SkyRL documents and an unknown key is an error.

This module is the schema only. Placement is derived from the HyperPod GPU group (nodes x GPUs per pod),
so scaling the group rescales SkyRL: training_runs.py applies each experiment's overrides, fills the derived
values and checks SkyRL's rules.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from ..plumbing.upstream import KUBERAY_NAME_PATTERN, RAYCLUSTER_NAME_MAX, RAYJOB_NAME_MAX
from .base import Cidr, CommitId, StrictModel
from .credentials import CREDENTIAL_ENV_NAME, CREDENTIAL_NAMES_SHOWN, credential_in_value
from .images import VisGymEnvId
from .lora_targets import LANGUAGE_MODEL_LORA_MODULES, TARGET_MODULES_KEY, parse_target_modules
from .shared_memory import MIN_SHM_GIB
from .version_lock import DEFAULT_SKYRL_VERSION, SKYRL_RELEASES, SkyRLRelease
from .vllm_memory import MULTIMODAL_LIMITS_ARGUMENT, multimodal_limits
from .workloads import K8S_NAME_PATTERN, relative_path

# /dev/shm a training worker pod gets by default where the node allows it.
TRAINING_WORKER_SHM_GIB = 64
# SkyRL's driver waits this many seconds for its placement group (its GPUs) before failing.
SKYRL_PLACEMENT_GROUP_TIMEOUT_ENV = "SKYRL_RAY_PG_TIMEOUT_IN_S"
# A name `env NAME=VALUE` accepts and Ray passes on.
ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Values that reach the driver through the entrypoint cross KubeRay's submitter shell (`bash -c`), `ray job
# submit`'s re-quoting (subprocess.list2cmdline) and the job supervisor's shell: these characters survive all three.
ENTRYPOINT_SAFE_VALUE = re.compile(r"[A-Za-z0-9_.,:/=+@%^-]*")
# Long enough for one job to queue behind another on the shared RayCluster, short enough that a
# missing GPU/EFA resource or a stuck worker fails the same day (SkyRL's own default is 180 s).
DEFAULT_PLACEMENT_GROUP_TIMEOUT_SECONDS = 7200

# SkyRL's VisGym recipe, examples/train/visgym/run_visgym_from_sft.sh in NovaSky-AI/SkyRL:
# trainer.train_batch_size=32, policy_mini_batch_size=16, micro_{train,forward}_batch_size_per_gpu=4,
# epochs=20 (256 rows / 32 = 8 steps an epoch: 160 steps). Unset batch knobs are derived from
# these for the actual data-parallel size, under both of SkyRL's batch rules (`training_runs.derive_batches`).
RECIPE_TRAIN_BATCH_SIZE = 32
RECIPE_MINI_BATCH_SIZE = 16
RECIPE_MICRO_BATCH_SIZE = 4
REFERENCE_TARGET_STEPS = 160

# Wall time of one reference run (160 steps). No public figure for the reference run's duration was
# found, so this is a stated assumption, shared with `skyrl-hp cost` (its default run length): a day.
REFERENCE_RUN_HOURS = 24.0
# The step time the checkpoint interval is derived from, until a measured one replaces it.
REFERENCE_STEP_SECONDS = REFERENCE_RUN_HOURS * 3600 / REFERENCE_TARGET_STEPS
# GPU time one failure may cost by default: the reference's checkpoint interval (20 steps) on its
# 6 GPUs at the assumed step time, so the derived interval reproduces the reference's 20.
REFERENCE_CKPT_INTERVAL = 20
REFERENCE_GPUS = 6
DEFAULT_FAILURE_BUDGET_GPU_HOURS = REFERENCE_CKPT_INTERVAL * REFERENCE_GPUS * REFERENCE_STEP_SECONDS / 3600
# Upper bounds far beyond any run (256 nodes of 8 GPUs for a month is 1.5 million GPU-hours; a step that takes a
# day is no measurement), which keep the checkpoint arithmetic finite.
MAX_FAILURE_BUDGET_GPU_HOURS = 10_000_000
MAX_STEP_SECONDS = 86_400
# The OpenAI API's range (https://platform.openai.com/docs/api-reference/chat/create), which vLLM's server follows:
# above 2 sampling is close to uniform over the vocabulary. The training knob and `serve query --temperature`.
MAX_SAMPLING_TEMPERATURE = 2.0
# The stall watchdog (docker/skyrl_hp_job/watchdog.py) ends an attempt whose trainer finishes no step within a bound.
# Between two step ends a later step can also run an evaluation (every eval_interval steps), a checkpoint and
# an adapter export, and a multi-turn rollout's length varies: three step times. The first step also waits for
# SkyRL's placement group (SKYRL_RAY_PG_TIMEOUT_IN_S, which must fail first, with SkyRL's own message), then
# loads the model into the FSDP workers and the vLLM engines from FSx, loads the checkpoint, runs the evaluation
# before training and the first rollout: the placement wait plus four step times.
STALL_STEP_TIMES = 3
STALL_FIRST_STEP_TIMES = 4
# Neither derived bound goes below this: a checkpoint of the policy's FSDP state can fall between two step ends,
# and a Lustre client blocks (rather than fails) through a file server failover and the server's recovery
# window (https://wiki.lustre.org/Lustre_Recovery_Overview), so a bound of a few minutes would end healthy
# attempts of a fast-stepping configuration.
STALL_FLOOR_SECONDS = 900

Scalar = str | int | float | bool


def _key(skyrl_key: str, default: Any, description: str = "", **constraints: Any) -> Any:
    return Field(
        default=default, alias=skyrl_key, description=f"SkyRL `{skyrl_key}`. {description}".strip(), **constraints
    )


class SkyRLKnobs(StrictModel):
    """SkyRL overrides; `null` = derived from the cluster (placement, engines) or the recipe (batches)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, populate_by_name=True)

    advantage_estimator: str = _key("trainer.algorithm.advantage_estimator", "grpo")
    use_kl_loss: bool = _key("trainer.algorithm.use_kl_loss", False)
    loss_reduction: str = _key("trainer.algorithm.loss_reduction", "token_mean_legacy")
    lora_rank: int = _key("trainer.policy.model.lora.rank", 32, "0 = full fine-tune (no adapter to serve).", ge=0)
    lora_alpha: int = _key("trainer.policy.model.lora.alpha", 32, gt=0)
    lora_dropout: float | None = _key("trainer.policy.model.lora.dropout", None, ge=0, lt=1)
    lora_target_modules: tuple[str, ...] = _key(
        TARGET_MODULES_KEY,
        LANGUAGE_MODEL_LORA_MODULES,
        "A list; the modules every vLLM engine applies (SkyRL's all-linear would also train the vision tower).",
    )
    # The VisGym recipe's 1e-6 is for a full fine-tune; the Qwen3-VL-8B LoRA recipe uses 3e-5.
    # At most 1: above it every optimizer step overshoots (fine-tuning rates are 1e-6 to 1e-4).
    learning_rate: float = _key("trainer.policy.optimizer_config.lr", 3e-5, "LoRA recipe value.", gt=0, le=1)
    strategy: str = _key("trainer.strategy", "fsdp")
    colocate_all: bool = _key("trainer.placement.colocate_all", True)
    policy_num_nodes: int | None = _key("trainer.placement.policy_num_nodes", None, "Default: worker pods.", gt=0)
    policy_num_gpus_per_node: int | None = _key(
        "trainer.placement.policy_num_gpus_per_node", None, "Default: GPUs per worker pod.", gt=0
    )
    ref_num_nodes: int | None = _key("trainer.placement.ref_num_nodes", None, "Default: as policy.", gt=0)
    ref_num_gpus_per_node: int | None = _key(
        "trainer.placement.ref_num_gpus_per_node", None, "Default: as policy.", gt=0
    )
    num_engines: int | None = _key(
        "generator.inference_engine.num_engines", None, "Default: policy GPUs / tensor parallel size.", gt=0
    )
    tensor_parallel_size: int = _key("generator.inference_engine.tensor_parallel_size", 1, gt=0)
    gpu_memory_utilization: float = _key("generator.inference_engine.gpu_memory_utilization", 0.45, gt=0, le=1)
    inference_backend: str = _key("generator.inference_engine.backend", "vllm")
    max_model_len: int = _key("generator.inference_engine.engine_init_kwargs.max_model_len", 60000, gt=0)
    n_samples_per_prompt: int = _key("generator.n_samples_per_prompt", 8, gt=0)
    max_turns: int = _key("generator.max_turns", 15, gt=0)
    max_input_length: int = _key("generator.max_input_length", 8192, gt=0)
    vision_language_generator: bool = _key("generator.vision_language_generator", True)
    batched: bool | None = _key("generator.batched", None)
    max_generate_length: int = _key("generator.sampling_params.max_generate_length", 1024, gt=0)
    temperature: float = _key("generator.sampling_params.temperature", 0.7, ge=0, le=MAX_SAMPLING_TEMPERATURE)
    train_batch_size: int | None = _key(
        "trainer.train_batch_size",
        None,
        "Default: the nearest to the recipe's 32 that SkyRL runs on the worker GPUs (30 on the default 6).",
        gt=0,
    )
    policy_mini_batch_size: int | None = _key(
        "trainer.policy_mini_batch_size",
        None,
        "Default: half the train batch, as the recipe's 16 of 32 (15 on the default 6 GPUs).",
        gt=0,
    )
    micro_train_batch_size_per_gpu: int | None = _key(
        "trainer.micro_train_batch_size_per_gpu",
        None,
        "Default: the largest SkyRL accepts up to the recipe's 4 (gradient accumulation only).",
        gt=0,
    )
    micro_forward_batch_size_per_gpu: int = _key("trainer.micro_forward_batch_size_per_gpu", 4, gt=0)
    epochs: int | None = _key(
        "trainer.epochs", None, "Default: enough epochs to reach training.data.target_steps.", gt=0
    )
    max_prompt_length: int = _key("trainer.max_prompt_length", 2048, gt=0)
    ckpt_interval: int | None = _key(
        "trainer.ckpt_interval",
        None,
        "Default: the most steps training.jobs.failure_budget_gpu_hours allows (20 for the reference).",
        gt=0,
    )
    hf_save_interval: int | None = _key("trainer.hf_save_interval", None, "Default: as trainer.ckpt_interval.", gt=0)
    eval_interval: int = _key("trainer.eval_interval", 10, gt=0)
    resume_mode: Literal["latest", "none"] = _key("trainer.resume_mode", "latest")
    logger: str = _key("trainer.logger", "console", "console prints eval/all/pass_at_1 to the job log.")
    project_name: str = _key("trainer.project_name", "visgym-maze")
    remove_microbatch_padding: bool = _key("trainer.remove_microbatch_padding", False)
    env_class: str = _key("environment.env_class", "visgym")

    @field_validator("lora_target_modules", mode="before")
    @classmethod
    def _target_modules_list(cls, value: Any) -> Any:
        return parse_target_modules(value)


# Not overridable: the charts derive the run's paths and name per experiment, and train_job.py
# points the model path and the data files at what it prepared on the shared file system.
# vLLM's limit_mm_per_prompt in SkyRL's engines, one key per modality: derived from generator.max_turns.
MULTIMODAL_LIMITS_KEY = f"generator.inference_engine.engine_init_kwargs.{MULTIMODAL_LIMITS_ARGUMENT}"
DERIVED_KEYS = (
    *(f"{MULTIMODAL_LIMITS_KEY}.{modality}" for modality in multimodal_limits(1)),
    "trainer.policy.model.path",
    "trainer.policy.model.lora.lora_sync_path",
    "trainer.ckpt_path",
    "trainer.export_path",
    "trainer.run_name",
    "data.train_data",
    "data.val_data",
)
OVERRIDABLE_KEYS: tuple[str, ...] = tuple(field.alias or name for name, field in SkyRLKnobs.model_fields.items())
KNOWN_KEYS = OVERRIDABLE_KEYS + DERIVED_KEYS


def _dotted_items(mapping: dict[Any, Any], prefix: str = "") -> dict[str, Any]:
    """{trainer: {epochs: 2}} -> {"trainer.epochs": 2}."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, dict) and value:
            flat.update(_dotted_items(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return str(value)


class Experiment(StrictModel):
    """One training run = one RayJob: a name and SkyRL overrides on training.knobs."""

    name: str = Field(
        max_length=RAYJOB_NAME_MAX,
        pattern=K8S_NAME_PATTERN,
        description="Lowercase DNS label; the RayJob is <cluster.raycluster_name>-<name>.",
    )
    run_id: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        description="Default: the name. Outputs: /shared/runs/<run_id>.",
    )
    overrides: dict[str, Scalar] = Field(default_factory=dict, description="SkyRL dotted key -> value.")

    @field_validator("overrides", mode="before")
    @classmethod
    def _dotted_not_nested(cls, value: Any) -> Any:
        # SkyRL's own YAML files nest its keys (Hydra's form, trainer: {policy: ...}); an override here is one
        # dotted key, as on SkyRL's command line. Said once, with the dotted form of what was written, instead of
        # pydantic's four lines per nested value (one per Scalar type).
        if isinstance(value, dict) and any(isinstance(item, dict) for item in value.values()):
            flat = _dotted_items(value)
            shown = ", ".join(f"{key}: {_yaml_scalar(item)}" for key, item in list(flat.items())[:4])
            more = ", ..." if len(flat) > 4 else ""
            raise ValueError(
                f"overrides take SkyRL's dotted keys, not nested sections: write overrides: {{{shown}{more}}}"
            )
        return value

    @field_validator("overrides")
    @classmethod
    def _known_keys(cls, value: dict[str, Scalar]) -> dict[str, Scalar]:
        for key in value:
            if key.startswith("+"):
                raise ValueError(f"{key!r}: SkyRL rejects the '+' prefix; name an existing key")
            if key in DERIVED_KEYS:
                raise ValueError(
                    f"{key!r} is derived from the experiment (paths, run name, data; the engines' multimodal limits from generator.max_turns): not overridable"
                )
            knob = SkyRLKnobs.model_fields.get(key)
            if knob is not None and knob.alias:
                raise ValueError(
                    f"unknown SkyRL key {key!r}: overrides take SkyRL's dotted keys, and training.knobs.{key} is "
                    f"SkyRL's {knob.alias!r}"
                )
            if key not in OVERRIDABLE_KEYS:
                close = difflib.get_close_matches(key, OVERRIDABLE_KEYS, n=1, cutoff=0.8)
                hint = f"did you mean {close[0]!r}?" if close else "see docs/configuration.md (training.knobs)"
                raise ValueError(f"unknown SkyRL key {key!r}: {hint}")
        return value

    @property
    def effective_run_id(self) -> str:
        return self.run_id or self.name


# Retries on a fresh cluster: a replaced GPU node fails one attempt, and the retry can land while a
# second node is still in HyperPod's repair; resume_mode=latest continues from the newest checkpoint.
DEFAULT_SELF_CONTAINED_BACKOFF_LIMIT = 2


class TrainingDataConfig(StrictModel):
    """Starting weights and data of the reference run (docs/sources.md), and where runs write."""

    model_repo: str = Field(default="VisGym/visgym_model", description="Hugging Face repository of the SFT checkpoint.")
    model_revision: CommitId | None = Field(
        default=None,
        description="Commit of model_repo to download. Unset: the commit upstream-lock.yaml records for model_repo.",
    )
    model_subfolder: str = Field(default="mixed_qwen3vl", description="Sub-folder of model_repo holding the weights.")
    checkpoint_gb: float = Field(
        default=17.5,
        gt=0,
        le=10_000,
        description="Size of the SFT checkpoint's weights in GB, for the cold start's estimate in the failure costs: "
        "Qwen3-VL-8B's 8.8 B parameters in bf16, 2 bytes each.",
    )
    model_dir: str = Field(default="models/visgym-sft", description="Download target, relative to the shared mount.")
    data_dir: str = Field(
        default="datasets/visgym-maze", description="Dataset directory, relative to the shared mount."
    )
    runs_dir: str = Field(default="runs", description="Per-run outputs, relative to the shared mount.")
    env_id: VisGymEnvId = Field(
        default="maze_2d/easy", description="VisGym environment id: one the training image checks at build time."
    )
    train_rows: int = Field(default=256, gt=0)
    eval_rows: int = Field(default=64, gt=0)
    eval_seed: int = Field(default=42, ge=0)
    target_steps: int = Field(
        default=REFERENCE_TARGET_STEPS, gt=0, description="Steps the derived epoch count reaches (reference: 160)."
    )

    @field_validator("model_dir", "data_dir", "runs_dir")
    @classmethod
    def _relative(cls, value: str) -> str:
        return relative_path(value)


class TrainingClusterConfig(StrictModel):
    """The training RayCluster: its name, pod sizes and how its head is reached. Worker requests are the GPU
    group's allocatable figures (one pod per node)."""

    raycluster_name: str = Field(
        default="skyrl-visgym",
        max_length=RAYCLUSTER_NAME_MAX,
        pattern=KUBERAY_NAME_PATTERN,
        description="RayCluster name.",
    )
    job_script_mount: str = Field(default="/opt/skyrl-job", description="Where the head mounts the training script.")
    run_as_user: int = Field(default=1000, ge=1, description="UID of the training image's ray user.")
    run_as_group: int = Field(default=100, ge=0, description="GID of the training image's ray user.")
    worker_replicas: int | None = Field(default=None, gt=0, description="Default: every node of the GPU group.")
    worker_gpus: int | None = Field(
        default=None, gt=0, description="GPUs per worker pod. Default: all of the instance's."
    )
    worker_shm_gib: int | None = Field(
        default=None,
        ge=MIN_SHM_GIB,
        description="/dev/shm (memory-backed) per worker pod: Ray's object store (three quarters) plus NCCL and vLLM. "
        f"Default: {TRAINING_WORKER_SHM_GIB} GiB, at most half of the memory a pod may use on the GPU node.",
    )
    head_shm_gib: int = Field(default=8, ge=MIN_SHM_GIB, description="/dev/shm per head pod (Ray's object store).")
    head_cpus: int | None = Field(
        default=None,
        gt=0,
        description="Training head pod vCPUs. Default: the head node's allocatable vCPUs minus serving.head_cpus, "
        "so the RayService head schedules beside the training RayCluster.",
    )
    head_memory_gib: int | None = Field(
        default=None,
        gt=0,
        description="Training head pod memory (GCS, object store, /dev/shm). Default: the head node's allocatable "
        "memory minus serving.head_memory_gib.",
    )
    head_service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        default="ClusterIP",
        description="ClusterIP keeps the dashboard in-cluster (kubectl port-forward). LoadBalancer is an internal "
        "NLB; NodePort/LoadBalancer admit head_service_source_ranges to the dashboard and client ports.",
    )
    head_service_source_ranges: list[Cidr] = Field(
        default_factory=list,
        description="NodePort/LoadBalancer only: client CIDRs admitted to the head's dashboard (8265) and client "
        "(10001) ports, by the load balancer and the head's NetworkPolicy. Default: network.vpc_cidr.",
    )

    @field_validator("job_script_mount")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or ".." in value.split("/"):
            raise ValueError("must be an absolute path inside the container without '..'")
        return value.rstrip("/")


# Names the charts or KubeRay set on the Ray containers themselves (charts/inputs.py cache_env, config/efa.py,
# KubeRay's RAY_* such as RAY_AUTH_TOKEN): a Secret may not replace them.
POD_ENV_NAMES = frozenset({"HF_HOME", "VLLM_CACHE_ROOT", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_IFNAME"})
POD_ENV_PREFIXES = ("RAY_", "KUBERAY_")
# What a Secret's data key may hold (Kubernetes: alphanumerics, '-', '_' or '.'); a letter or digit first here.
SECRET_KEY_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9._-]*$"


class SecretKeyRef(StrictModel):
    """One key of a Kubernetes Secret in the workload namespace (`skyrl-hp secrets set SECRET KEY` writes it)."""

    secret: str = Field(max_length=63, pattern=K8S_NAME_PATTERN, description="The Secret's name.")
    key: str = Field(max_length=253, pattern=SECRET_KEY_PATTERN, description="The key in the Secret's data.")


def _check_env_var_name(name: str) -> None:
    if not ENV_VAR_NAME.fullmatch(name):
        raise ValueError(
            f"{name!r}: an environment variable name is letters, digits and '_', not starting with a digit"
        )


class TrainingJobsConfig(StrictModel):
    """How the RayJobs run: each on its own cluster (retried, resumed) or on the shared RayCluster, deadlines,
    what a failure may cost, environment."""

    self_contained_jobs: bool = Field(
        default=True,
        description="true: each RayJob creates its own RayCluster, is retried on a fresh one and resumes from its "
        "newest checkpoint; false: submit to the long-lived RayCluster (clusterSelector), which KubeRay never "
        "retries (docs/failures.md).",
    )
    job_backoff_limit: int | None = Field(
        default=None,
        ge=0,
        description="Self-contained jobs only: retries, each on a fresh cluster (resume_mode=latest resumes from the "
        "newest complete checkpoint). Default: 2. KubeRay cannot retry a job on the shared RayCluster (clusterSelector).",
    )
    job_active_deadline_seconds: int = Field(
        default=172800, gt=0, description="Give up after this long (default 48 h); KubeRay does not retry past it."
    )
    placement_group_timeout_seconds: int = Field(
        default=DEFAULT_PLACEMENT_GROUP_TIMEOUT_SECONDS,
        gt=0,
        description="How long SkyRL waits for its GPUs (SKYRL_RAY_PG_TIMEOUT_IN_S) before the job fails: long enough "
        "to queue behind one other job (default 2 h), short enough to surface a scheduling fault. Raise it (up to "
        "job_active_deadline_seconds) for longer queues.",
    )
    job_ttl_seconds_after_finished: int = Field(
        default=3600,
        ge=0,
        description="Self-contained jobs: after success, delete the job's cluster this long after it finished; after "
        "the last failed attempt, delete its GPU workers this long after (their logs readable until then).",
    )
    failed_head_ttl_seconds: int = Field(
        default=86400,
        ge=0,
        description="Self-contained jobs: after the last failed attempt, keep the head pod (driver and Ray logs) this "
        "long before the cluster is deleted; at least job_ttl_seconds_after_finished (KubeRay's rule).",
    )
    failure_budget_gpu_hours: float = Field(
        default=DEFAULT_FAILURE_BUDGET_GPU_HOURS,
        gt=0,
        le=MAX_FAILURE_BUDGET_GPU_HOURS,
        description="The most GPU time one failure may cost in redone steps: trainer.ckpt_interval (and "
        "hf_save_interval) default to the most steps that fit, at estimated_step_seconds on every GPU the job "
        "holds, rounded down to a divisor of data.target_steps. The default reproduces the reference's 20.",
    )
    estimated_step_seconds: float = Field(
        default=REFERENCE_STEP_SECONDS,
        gt=0,
        le=MAX_STEP_SECONDS,
        description="Wall time of one training step, for the checkpoint interval. Default: an assumed 24 h reference "
        "run / 160 steps (no public duration of the reference run was found); replace it with a measured figure.",
    )
    stall_alert_minutes: int = Field(
        default=30,
        ge=5,
        description="Alert when a RayJob stays Running this long while the GPUs' mean utilisation stays below "
        "stall_gpu_utilization_percent (longer than the start-up model load and a checkpoint write).",
    )
    stall_gpu_utilization_percent: float = Field(
        default=10, gt=0, lt=100, description="GPU utilisation (DCGM_FI_DEV_GPU_UTIL, %) below which a job is idle."
    )
    stall_timeout_first_step_s: int | None = Field(
        default=None,
        ge=0,
        description="The job's stall watchdog (docker/skyrl_hp_job/watchdog.py) ends an attempt whose trainer has not finished "
        "its first step this long after SkyRL starts; KubeRay retries it on a fresh cluster and it resumes from "
        "the newest checkpoint. Default: placement_group_timeout_seconds (SkyRL's own GPU wait fails first) plus "
        f"{STALL_FIRST_STEP_TIMES} x estimated_step_seconds (model load from FSx, vLLM start, evaluation before "
        f"training, the first step), at least {STALL_FLOOR_SECONDS} s beyond the placement wait. 0 = no watchdog.",
    )
    measured_start_seconds: int | None = Field(
        default=None,
        gt=0,
        le=MAX_STEP_SECONDS,
        description="Time from a RayJob's creation to its first training step on this deployment, as `skyrl-hp train "
        "timeline` measured it: the failure costs count it for every retry. Unset: an estimate on paper (each GPU node "
        "reading data.checkpoint_gb at FSx's baseline throughput), a lower bound.",
    )
    stall_timeout_step_s: int | None = Field(
        default=None,
        ge=0,
        description="The watchdog's bound between two finished steps. Default: "
        f"{STALL_STEP_TIMES} x estimated_step_seconds (a step plus an evaluation, a checkpoint and an adapter "
        f"export that can fall between two step ends), at least {STALL_FLOOR_SECONDS} s (a checkpoint write during "
        "an FSx file server failover blocks, it does not fail). 0 = no bound after the first step.",
    )
    runtime_env_vars: dict[str, str] = Field(
        default_factory=dict,
        description="Extra env vars for the training job, any name. Where each ends up: a name SkyRL "
        f"{DEFAULT_SKYRL_VERSION}'s driver passes on to its actors itself (every SKYRL_* and "
        f"{', '.join(sorted(SKYRL_RELEASES[DEFAULT_SKYRL_VERSION].runtime_env_names))}) is set on the RayJob's "
        "entrypoint (`env NAME=VALUE python ...`): the driver gets it and SkyRL forwards it to its actors (for the "
        "few SkyRL sets itself, such as VLLM_ALLOW_RUNTIME_LORA_UPDATING, SkyRL's value wins in its actors); its value "
        "may use letters, digits and _.,:/=+@%^- only (it crosses KubeRay's submitter shell). Every other name goes "
        "into the RayJob's runtimeEnvYAML, which Ray applies to the driver and every worker process of the job. Ray "
        "refuses a job whose runtimeEnvYAML repeats a name SkyRL passes on, hence the split. A name that looks like a "
        f"credential ({CREDENTIAL_NAMES_SHOWN}) or whose value holds one (a user:password in a URL, a token of a known "
        "format such as ghp_, hf_, sk-, AKIA, xoxb-, a long random-looking string) is refused: use secret_env.",
    )
    secret_env: dict[str, SecretKeyRef] = Field(
        default_factory=dict,
        description="Credentials for the training job (WANDB_API_KEY, HF_TOKEN, MLFLOW_TRACKING_TOKEN, ...): env var "
        "name -> {secret: NAME, key: KEY} of a Secret in the workload namespace, written with `skyrl-hp secrets set "
        "NAME KEY` (value from standard input). The training head and worker containers read it through "
        "secretKeyRef, so no value is in the configuration, dist/, the RayJob or Ray's job submission; SkyRL's "
        "driver passes the names it forwards (WANDB_API_KEY, HF_TOKEN, ...) on to its actors itself. The "
        "RayService gets none: serving reads the model from /shared and the adapters from S3 with its Pod "
        "Identity role.",
    )

    @model_validator(mode="after")
    def _retries_need_own_cluster(self) -> TrainingJobsConfig:
        # A KubeRay retry deletes and recreates the job's cluster: KubeRay rejects backoffLimit > 0
        # with clusterSelector (older operators deleted the shared RayCluster instead).
        if not self.self_contained_jobs and self.job_backoff_limit:
            raise ValueError(
                f"job_backoff_limit = {self.job_backoff_limit}: needs self_contained_jobs: true; KubeRay cannot retry "
                "a job on the shared RayCluster (resubmit it: kubectl delete, then apply the RayJob again)"
            )
        return self

    @property
    def effective_job_backoff_limit(self) -> int | None:
        """RayJob spec.backoffLimit, or None to leave it out (jobs on the shared RayCluster)."""
        if not self.self_contained_jobs:
            return None
        return DEFAULT_SELF_CONTAINED_BACKOFF_LIMIT if self.job_backoff_limit is None else self.job_backoff_limit

    @property
    def effective_stall_timeout_step_s(self) -> int:
        """train_job.py --stall-timeout-step: the bound between two finished steps (0 = none)."""
        if self.stall_timeout_step_s is not None:
            return self.stall_timeout_step_s
        return max(STALL_FLOOR_SECONDS, math.ceil(STALL_STEP_TIMES * self.estimated_step_seconds))

    @property
    def effective_stall_timeout_first_step_s(self) -> int:
        """train_job.py --stall-timeout-first-step: SkyRL's start to its first finished step (0 = no watchdog)."""
        if self.stall_timeout_first_step_s is not None:
            return self.stall_timeout_first_step_s
        startup = max(STALL_FLOOR_SECONDS, math.ceil(STALL_FIRST_STEP_TIMES * self.estimated_step_seconds))
        return self.placement_group_timeout_seconds + startup

    @model_validator(mode="after")
    def _stall_bounds_fit(self) -> TrainingJobsConfig:
        if self.placement_group_timeout_seconds > self.job_active_deadline_seconds:
            return self  # _placement_wait_within_deadline names the cause
        first = self.effective_stall_timeout_first_step_s
        if first and first <= self.placement_group_timeout_seconds:
            raise ValueError(
                f"stall_timeout_first_step_s = {first}: not longer than placement_group_timeout_seconds "
                f"({self.placement_group_timeout_seconds}); the watchdog would end an attempt still waiting for its "
                "GPUs before SkyRL's own timeout says so"
            )
        if first >= self.job_active_deadline_seconds:
            raise ValueError(
                f"stall_timeout_first_step_s = {first}: not shorter than job_active_deadline_seconds "
                f"({self.job_active_deadline_seconds}); KubeRay would end the job, without a retry, first"
            )
        return self

    @model_validator(mode="after")
    def _failed_head_outlives_workers(self) -> TrainingJobsConfig:
        # KubeRay v1.7.0 validateTTLConsistency: for one job status, DeleteCluster's TTL >= DeleteWorkers'.
        if self.failed_head_ttl_seconds < self.job_ttl_seconds_after_finished:
            raise ValueError(
                f"failed_head_ttl_seconds = {self.failed_head_ttl_seconds}: shorter than job_ttl_seconds_after_finished "
                f"({self.job_ttl_seconds_after_finished}); KubeRay deletes a failed job's workers first, then its cluster"
            )
        return self

    @model_validator(mode="after")
    def _placement_wait_within_deadline(self) -> TrainingJobsConfig:
        if self.placement_group_timeout_seconds > self.job_active_deadline_seconds:
            raise ValueError(
                f"placement_group_timeout_seconds = {self.placement_group_timeout_seconds}: longer than "
                f"job_active_deadline_seconds ({self.job_active_deadline_seconds}); the job would be killed first"
            )
        return self

    @field_validator("runtime_env_vars")
    @classmethod
    def _no_credentials(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            _check_env_var_name(name)
            if CREDENTIAL_ENV_NAME.fullmatch(name):
                aws = (
                    " (AWS credentials come from the pods' EKS Pod Identity roles)"
                    if name.upper().startswith("AWS_")
                    else ""
                )
                problem = f"{name!r} looks like a credential ({CREDENTIAL_NAMES_SHOWN}){aws}"
            elif kind := credential_in_value(text):
                problem = f"the value of {name!r} holds a credential ({kind}; the value is not shown)"
            else:
                continue
            raise ValueError(
                f"{problem} and its value would be in plain text in the RayJob, dist/ and the review: store it with "
                f"`skyrl-hp secrets set SECRET KEY` and name it in training.jobs.secret_env: "
                f"{{{name}: {{secret: SECRET, key: KEY}}}}"
            )
        return value

    @field_validator("secret_env")
    @classmethod
    def _secret_env_names(cls, value: dict[str, SecretKeyRef]) -> dict[str, SecretKeyRef]:
        for name in value:
            _check_env_var_name(name)
            if name in POD_ENV_NAMES or name.startswith(POD_ENV_PREFIXES) or name == SKYRL_PLACEMENT_GROUP_TIMEOUT_ENV:
                raise ValueError(
                    f"{name!r}: the charts or KubeRay set it on the Ray containers themselves; allowed are other names "
                    "(not HF_HOME, VLLM_CACHE_ROOT, the EFA variables, RAY_*, KUBERAY_*, SKYRL_RAY_PG_TIMEOUT_IN_S)"
                )
        return value

    @model_validator(mode="after")
    def _secret_env_not_also_plain(self) -> TrainingJobsConfig:
        if both := sorted(set(self.secret_env) & set(self.runtime_env_vars)):
            raise ValueError(
                f"secret_env and runtime_env_vars both set {', '.join(both)}: keep each name in one of them "
                "(credentials in secret_env)"
            )
        return self

    @property
    def secret_env_refs(self) -> tuple[tuple[str, str, str], ...]:
        """(env var name, Secret name, key) per secret_env entry, by name: what the Ray containers' secretKeyRefs say."""
        return tuple((name, ref.secret, ref.key) for name, ref in sorted(self.secret_env.items()))

    @property
    def job_env_vars(self) -> dict[str, str]:
        """runtime_env_vars, plus SkyRL's placement-group timeout unless set there explicitly.

        SkyRL's driver gives up after SKYRL_RAY_PG_TIMEOUT_IN_S (180 s by default) when it cannot get
        its GPUs; a second experiment on the shared cluster must wait for the first to finish, and a
        self-contained job's fresh cluster may still be pulling images, so the wait is
        placement_group_timeout_seconds: bounded, so a mis-scheduled job fails instead of idling.
        """
        return {SKYRL_PLACEMENT_GROUP_TIMEOUT_ENV: str(self.placement_group_timeout_seconds)} | self.runtime_env_vars


def split_job_env(env: dict[str, str], release: SkyRLRelease) -> tuple[dict[str, str], dict[str, str]]:
    """(driver env, job runtime env): the names `release`'s driver puts into its own `ray.init` runtime env go on the
    entrypoint, every other name into the RayJob's runtimeEnvYAML (see TrainingJobsConfig.runtime_env_vars)."""
    driver = {name: value for name, value in env.items() if release.passes_on(name)}
    return driver, {name: value for name, value in env.items() if name not in driver}


def entrypoint_env_problem(env: dict[str, str], release: SkyRLRelease) -> str | None:
    """One line for the first driver-side value the submission path would mangle, or None."""
    driver, _ = split_job_env(env, release)
    for name, value in driver.items():
        if not ENTRYPOINT_SAFE_VALUE.fullmatch(value):
            return (
                f"runtime_env_vars[{name!r}] = {value!r}: SkyRL passes {name} on from the driver's environment, so it "
                "is set on the RayJob's entrypoint, whose shell quoting allows only letters, digits and _.,:/=+@%^-"
            )
    return None


class TrainingConfig(StrictModel):
    """SkyRL GRPO training: knobs, experiments, and the data, cluster and jobs sections."""

    knobs: SkyRLKnobs = SkyRLKnobs()
    experiments: list[Experiment] = Field(
        default_factory=lambda: [Experiment(name="maze-grpo")],
        min_length=1,
        description="Each experiment becomes its own RayJob with its own run id and output paths.",
    )
    data: TrainingDataConfig = TrainingDataConfig()
    cluster: TrainingClusterConfig = TrainingClusterConfig()
    jobs: TrainingJobsConfig = TrainingJobsConfig()

    @model_validator(mode="after")
    def _experiments(self) -> TrainingConfig:
        seen_names: set[str] = set()
        seen_runs: set[str] = set()
        for index, experiment in enumerate(self.experiments):
            where = f"experiments[{index}]"
            if experiment.name in seen_names:
                raise ValueError(f"{where}.name = {experiment.name!r}: duplicate experiment name (each is one RayJob)")
            if experiment.effective_run_id in seen_runs:
                raise ValueError(
                    f"{where}.run_id = {experiment.effective_run_id!r}: two experiments would write the same "
                    "run directory"
                )
            seen_names.add(experiment.name)
            seen_runs.add(experiment.effective_run_id)
            job_name = rayjob_name(self, experiment)
            if len(job_name) > RAYJOB_NAME_MAX:
                raise ValueError(
                    f"{where}.name = {experiment.name!r}: RayJob name {job_name!r} has {len(job_name)} characters; "
                    f"KubeRay allows {RAYJOB_NAME_MAX} (shorten the experiment name or cluster.raycluster_name)"
                )
            try:
                SkyRLKnobs.model_validate({**self.knobs.model_dump(by_alias=True), **experiment.overrides})
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                key = ".".join(str(p) for p in first["loc"])
                message = first["msg"].removeprefix("Value error, ")
                raise ValueError(f"{where}.overrides[{key!r}] = {first.get('input')!r}: {message}") from None
        return self


def rayjob_name(training: TrainingConfig, experiment: Experiment) -> str:
    return f"{training.cluster.raycluster_name}-{experiment.name}"
