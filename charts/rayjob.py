"""One RayJob per experiment: SkyRL's VisGym GRPO entry point through docker/train_job.py.

Default: submitted to the long-lived RayCluster (clusterSelector), as the reference run does;
experiments then queue on it, and KubeRay cannot retry them. With training.jobs.self_contained_jobs each
RayJob creates its own cluster (same spec), is retried on a fresh one, and deletes it when done.
"""

from __future__ import annotations

import shlex

import cdk8s
import yaml
from constructs import Construct

from skyrl_hyperpod.config.training_runs import ResolvedRun, model_path

from .constructs.kuberay import RayJob, RayJobProps
from .inputs import JOB_SCRIPT_NAME, ChartInputs
from .raycluster import training_cluster_spec


def entrypoint(inputs: ChartInputs, run: ResolvedRun) -> str:
    """The shell command the RayJob submits: prepare /shared once, then start SkyRL. The job variables that SkyRL's
    driver passes on to its actors itself are set here, in the driver's environment, and not in runtimeEnvYAML: Ray
    refuses the driver's `ray.init(runtime_env=...)` when the job's runtime env already sets one of its names."""
    config = inputs.config
    training, workloads = config.training, config.workloads
    driver_env = [f"{name}={value}" for name, value in config.derived.driver_env.items()]
    command = [
        *(["env", *driver_env] if driver_env else []),
        "python",
        f"{training.cluster.job_script_mount}/{JOB_SCRIPT_NAME}",
        "--shared-dir", workloads.shared_mount_path,
        "--model-repo", training.data.model_repo,
        "--model-subfolder", training.data.model_subfolder,
        "--model-dir", model_path(training, workloads),
        "--data-dir", inputs.shared(training.data.data_dir),
        "--env-id", training.data.env_id,
        "--train-rows", str(training.data.train_rows),
        "--eval-rows", str(training.data.eval_rows),
        "--eval-seed", str(training.data.eval_seed),
        "--skyrl-dir", config.training_image.skyrl_dir,
        "--",
        *(f"{key}={value}" for key, value in run.overrides().items()),
    ]  # fmt: skip
    return shlex.join(command)


class TrainingJobsChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, *, inputs: ChartInputs) -> None:
        super().__init__(scope, construct_id, labels=inputs.labels, disable_resource_name_hashes=True)
        config = inputs.config
        training = config.training
        env_vars = config.derived.job_runtime_env
        runtime_env = yaml.safe_dump({"env_vars": env_vars}) if env_vars else None
        cluster_spec = training_cluster_spec(inputs) if training.jobs.self_contained_jobs else None
        self.jobs: list[RayJob] = []
        for run in config.derived.runs:
            props = RayJobProps(
                entrypoint=entrypoint(inputs, run),
                submission_mode="K8sJobMode",
                active_deadline_seconds=training.jobs.job_active_deadline_seconds,
                cluster_name=None if cluster_spec else training.cluster.raycluster_name,
                cluster_spec=cluster_spec,
                ttl_seconds_after_finished=training.jobs.job_ttl_seconds_after_finished,
                backoff_limit=training.jobs.effective_job_backoff_limit,
                runtime_env_yaml=runtime_env,
            )
            self.jobs.append(RayJob(self, run.job_name, name=run.job_name, namespace=inputs.namespace, props=props))
