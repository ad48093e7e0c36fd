"""What every chart reads: the typed configuration, the deployed stack outputs, derived values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.training_runs import WorkerLayout, shared_path
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.upstream import KARPENTER_DO_NOT_DISRUPT
from skyrl_hyperpod.values.job_files import config_map_key
from skyrl_hyperpod.values.publish_job import lora_loading_path
from skyrl_hyperpod.values.stack_outputs import StackOutputs

from .constructs.ray_pods import SCHEDULABLE_NODE, SharedVolume


@dataclass(frozen=True)
class ChartInputs:
    config: ProjectConfig
    outputs: StackOutputs
    # {path in the mount: text}: docker/train_job.py and its package (skyrl_hyperpod.values.job_files.read_job_files),
    # read at synth time and shipped in a ConfigMap.
    job_files: Mapping[str, str]

    @property
    def namespace(self) -> str:
        return self.config.workloads.namespace

    @property
    def labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/part-of": self.config.name_prefix, "app.kubernetes.io/managed-by": "cdk8s"}

    @property
    def training_image(self) -> str:
        return f"{self.outputs.ecr_repository_uri}:{self.config.training_image.tag}"

    @property
    def mlflow_tracking_uri(self) -> str | None:
        """The training jobs' MLflow tracking URI: the configured one, else the managed App's ARN (a stack output)."""
        tracking = self.config.tracking
        if not tracking.mlflow:
            return None
        if tracking.tracking_uri is not None:
            return tracking.tracking_uri
        if self.outputs.mlflow_app_arn is None:
            raise InputError(
                [
                    "outputs error: tracking.backend is mlflow without a tracking_uri, and the outputs lack "
                    "MlflowAppArn: deploy the storage stack with this configuration (cdk deploy --outputs-file)"
                ]
            )
        return self.outputs.mlflow_app_arn

    @property
    def job_script_config_map(self) -> str:
        return f"{self.config.training.cluster.raycluster_name}-job-script"

    @property
    def job_script_items(self) -> tuple[tuple[str, str], ...]:
        """(ConfigMap key, path in the mount) of each job file: the ConfigMap's data and the volume's items."""
        return tuple((config_map_key(path), path) for path in self.job_files)

    @property
    def persistent_volume_name(self) -> str:
        return f"{self.namespace}-{self.config.workloads.shared_pvc_name}"

    @cached_property
    def layout(self) -> WorkerLayout:
        return self.config.derived.worker_layout

    def shared_volume(self, *, read_only: bool = False) -> SharedVolume:
        workloads = self.config.workloads
        return SharedVolume(
            claim_name=workloads.shared_pvc_name, mount_path=workloads.shared_mount_path, read_only=read_only
        )

    def shared(self, *parts: str) -> str:
        return shared_path(self.config.workloads, *parts)

    @property
    def cache_env(self) -> tuple[tuple[str, str], ...]:
        workloads = self.config.workloads
        return (
            ("HF_HOME", self.shared(workloads.hf_cache_dir)),
            ("VLLM_CACHE_ROOT", self.shared(workloads.vllm_cache_dir)),
        )

    @property
    def head_service_source_ranges(self) -> tuple[str, ...]:
        """Clients a NodePort/LoadBalancer training head admits: configured, or the VPC."""
        training = self.config.training
        return tuple(training.cluster.head_service_source_ranges or [self.config.network.vpc_cidr])

    @property
    def lora_loading_path(self) -> str:
        return lora_loading_path(self.config, self.outputs)

    @property
    def ray_pod_annotations(self) -> dict[str, str]:
        """With an autoscaled group, every Ray pod keeps Karpenter from voluntarily disrupting its node
        (https://karpenter.sh/docs/concepts/disruption/#pod-level-controls): a Ray worker's actors and GPU memory do
        not move, so a node goes only once its pods are gone."""
        return {KARPENTER_DO_NOT_DISRUPT: "true"} if self.config.hyperpod.autoscaled_groups else {}

    @property
    def worker_node_labels(self) -> tuple[tuple[str, str], ...]:
        """Labels a GPU worker's node must carry. Not HyperPod's Schedulable health label on an autoscaled group:
        Karpenter starts a node for a pending pod only when its NodePool shows the node will carry every label the
        pod requires (https://karpenter.sh/docs/concepts/scheduling/), and HyperPod sets that label on the node
        itself; its node-health taint still keeps Ray off a node under repair (ray_pods.ray_pod_template)."""
        return () if self.config.hyperpod.worker_group.autoscaled else SCHEDULABLE_NODE
