"""Values derived from the validated configuration, computed once: the layer the charts and the review
read instead of recomputing them from the raw sections.

This module imports the sections and computes from them; no section imports it (tests/config/test_config_imports.py),
and ProjectConfig (project.py) calls `derive` with its sections.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .hyperpod import HyperPodConfig
from .images import TrainingImageConfig
from .names import DerivedNames
from .serving import ServingConfig, training_head_size
from .tracking import MLFLOW_BACKEND, TrackingConfig
from .training import TrainingConfig, entrypoint_env_problem, split_job_env
from .training_runs import ResolvedRun, WorkerLayout, resolve_runs, worker_layout
from .workloads import WorkloadsConfig


@dataclass(frozen=True)
class PodSize:
    cpus: int
    memory_gib: int


@dataclass(frozen=True)
class DerivedValues:
    names: DerivedNames
    worker_layout: WorkerLayout  # GPU worker pods per node and their GPUs
    runs: tuple[ResolvedRun, ...]  # one per experiment: job name, SkyRL knobs, paths
    training_head: PodSize  # explicit, or what the head node leaves after the serving head
    gpus_by_instance_type: dict[str, int]  # GPUs the HyperPod groups bring, per instance type (review)
    # training.jobs' environment, split by where it must be set (TrainingJobsConfig.runtime_env_vars):
    driver_env: dict[str, str]  # on the RayJob's entrypoint; SkyRL's driver passes these on
    job_runtime_env: dict[str, str]  # in the RayJob's runtimeEnvYAML; Ray applies them to every process of the job

    def run(self, experiment: str) -> ResolvedRun:
        return next(run for run in self.runs if run.experiment.name == experiment)


def derive(
    *,
    names: DerivedNames,
    hyperpod: HyperPodConfig,
    training_image: TrainingImageConfig,
    workloads: WorkloadsConfig,
    training: TrainingConfig,
    serving: ServingConfig,
    tracking: TrackingConfig | None = None,
) -> DerivedValues:
    """Raises ValueError (one line) when the training runs do not fit the cluster."""
    cpus, memory = training_head_size(training, serving, hyperpod)
    release = training_image.skyrl_release
    job_env = training.jobs.job_env_vars
    runs = tuple(resolve_runs(training, hyperpod, workloads))
    if tracking is not None and tracking.mlflow:
        runs = tuple(replace(run, knobs=run.knobs.model_copy(update={"logger": MLFLOW_BACKEND})) for run in runs)
    if problem := entrypoint_env_problem(job_env, release):
        raise ValueError(f"jobs.{problem}")
    driver_env, job_runtime_env = split_job_env(job_env, release)
    gpus: dict[str, int] = {}
    for group in hyperpod.instance_groups.values():
        gpus[group.instance_type] = gpus.get(group.instance_type, 0) + group.spec.gpus * group.instance_count
    return DerivedValues(
        names=names,
        worker_layout=worker_layout(training, hyperpod),
        runs=runs,
        training_head=PodSize(cpus=cpus, memory_gib=memory),
        gpus_by_instance_type=gpus,
        driver_env=driver_env,
        job_runtime_env=job_runtime_env,
    )
