"""One RayJob per experiment: SkyRL's VisGym GRPO entry point through docker/train_job.py.

Default (training.jobs.self_contained_jobs): each RayJob creates its own cluster (the training RayCluster's
spec), is retried on a fresh one up to backoffLimit times (SkyRL resumes from the newest complete
checkpoint in the experiment's own directory), and its cluster is deleted by deletion rules that keep a
failed job's head for its logs. Otherwise the jobs are submitted to the long-lived RayCluster
(clusterSelector), as the reference run did; KubeRay never retries those (docs/failures.md).
"""

from __future__ import annotations

import shlex

import cdk8s
import yaml
from constructs import Construct

from skyrl_hyperpod.config.tracking import MLFLOW_TRACKING_URI_ENV
from skyrl_hyperpod.config.training import TrainingJobsConfig
from skyrl_hyperpod.config.training_runs import ResolvedRun, model_path
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME
from skyrl_hyperpod.values.synthesized_manifests import config_fingerprint

from .constructs.kuberay_resources import RayJob, RayJobProps
from .inputs import ChartInputs
from .raycluster import training_cluster_spec


def deletion_rules(jobs: TrainingJobsConfig) -> tuple[dict, ...]:
    """KubeRay v1.7.0 deletionRules of a self-contained job, applied once it is Complete or (after its last
    retry) Failed: a succeeded job's cluster goes after job_ttl_seconds_after_finished; a failed job's GPU
    workers go then too (freeing the nodes), its head (driver and Ray logs) after failed_head_ttl_seconds.
    A retried attempt's cluster is deleted at once by KubeRay whatever the rules say (rayjob_controller.go,
    the Retrying state); its driver output stays in the submitter Job's log."""
    return (
        {
            "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": jobs.job_ttl_seconds_after_finished},
            "policy": "DeleteCluster",
        },
        {
            "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": jobs.job_ttl_seconds_after_finished},
            "policy": "DeleteWorkers",
        },
        {
            "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": jobs.failed_head_ttl_seconds},
            "policy": "DeleteCluster",
        },
    )


def entrypoint(inputs: ChartInputs, run: ResolvedRun) -> str:
    """The shell command the RayJob submits: prepare /shared once, then start SkyRL under train_job.py's stall
    watchdog (training.jobs.stall_timeout_*). The job variables that SkyRL's
    driver passes on to its actors itself are set here, in the driver's environment, and not in runtimeEnvYAML: Ray
    refuses the driver's `ray.init(runtime_env=...)` when the job's runtime env already sets one of its names."""
    config = inputs.config
    training, workloads = config.training, config.workloads
    env = dict(config.derived.driver_env)
    if inputs.mlflow_tracking_uri is not None:
        env[MLFLOW_TRACKING_URI_ENV] = inputs.mlflow_tracking_uri
    driver_env = [f"{name}={value}" for name, value in env.items()]
    command = [
        *(["env", *driver_env] if driver_env else []),
        "python",
        f"{training.cluster.job_script_mount}/{JOB_SCRIPT_NAME}",
        "--shared-dir", workloads.shared_mount_path,
        "--model-repo", training.data.model_repo,
        *(["--model-revision", training.data.model_revision] if training.data.model_revision else []),
        "--model-subfolder", training.data.model_subfolder,
        "--model-dir", model_path(training, workloads),
        "--data-dir", inputs.shared(training.data.data_dir),
        "--env-id", training.data.env_id,
        "--train-rows", str(training.data.train_rows),
        "--eval-rows", str(training.data.eval_rows),
        "--eval-seed", str(training.data.eval_seed),
        "--skyrl-dir", config.training_image.skyrl_dir,
        "--stall-timeout-first-step", str(training.jobs.effective_stall_timeout_first_step_s),
        "--stall-timeout-step", str(training.jobs.effective_stall_timeout_step_s),
        "--query-example", run.query_example_path,
        *(f"--mlflow-tag={key}={value}" for key, value in mlflow_tags(inputs, run).items()),
        "--",
        *(f"{key}={value}" for key, value in run.overrides().items()),
    ]  # fmt: skip
    return shlex.join(command)


def mlflow_tags(inputs: ChartInputs, run: ResolvedRun) -> dict[str, str]:
    """The tags of the run's MLflow run (tracking.backend: mlflow): what to filter a sweep's runs by."""
    config = inputs.config
    if not config.tracking.mlflow:
        return {}
    return {
        "skyrl_hp.rayjob": run.job_name,
        "skyrl_hp.config_fingerprint": config_fingerprint(config),
        "skyrl_hp.image_tag": config.training_image.tag,
        "skyrl_hp.skyrl_release": config.training_image.skyrl_release.version,
    }


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
                deletion_rules=deletion_rules(training.jobs) if cluster_spec else (),
                backoff_limit=training.jobs.effective_job_backoff_limit,
                runtime_env_yaml=runtime_env,
            )
            self.jobs.append(RayJob(self, run.job_name, name=run.job_name, namespace=inputs.namespace, props=props))
