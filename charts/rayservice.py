"""Ray Serve LLM RayService: the SFT base model from /shared plus LoRA adapters loaded from S3.

`serve_config` is the one place that writes serveConfigV2; the validation module and the tests
import it.
"""

from __future__ import annotations

import cdk8s
import yaml
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.names import RAY_HEAD_CONTAINER
from skyrl_hyperpod.config.serving import (
    effective_max_lora_rank,
    effective_max_model_len,
    effective_multimodal_limits,
    serving_worker_shm_gib,
)
from skyrl_hyperpod.config.training_runs import model_path
from skyrl_hyperpod.config.vllm_memory import MULTIMODAL_LIMITS_ARGUMENT
from skyrl_hyperpod.values.stack_outputs import StackOutputs

from .constructs.kuberay_resources import InTreeAutoscaling, RayClusterSpecProps, RayService
from .constructs.ray_network import ray_workload_labels
from .constructs.ray_pods import HEAD_PORTS, SERVE_PORT, RayPodProps, allocatable_pod
from .inputs import ChartInputs, lora_loading_path
from .ray_access import SERVING_COMPONENT

IMPORT_PATH = "ray.serve.llm:build_openai_app"


def serve_config(config: ProjectConfig, outputs: StackOutputs) -> dict:
    """serveConfigV2 as a dict: one OpenAI-compatible app with one LLMConfig.

    No accelerator_type: Ray's accelerator list has no RTX PRO 6000 entry (docs/sources.md)."""
    serving, training, workloads = config.serving, config.training, config.workloads
    max_model_len = effective_max_model_len(serving, training)
    llm_config = {
        "model_loading_config": {"model_id": serving.model_id, "model_source": model_path(training, workloads)},
        "engine_kwargs": {
            "enable_lora": True,
            "max_lora_rank": effective_max_lora_rank(serving, config.derived.runs),
            # vLLM's max_loras and Serve's per-replica adapter cap must agree.
            "max_loras": serving.max_num_adapters_per_replica,
            "max_model_len": max_model_len,
            "tensor_parallel_size": serving.tensor_parallel_size,
            "gpu_memory_utilization": serving.gpu_memory_utilization,
            # One maze frame per turn of the conversations the adapters were trained on, no video (vLLM profiles its
            # memory for 999 of each otherwise).
            MULTIMODAL_LIMITS_ARGUMENT: effective_multimodal_limits(config.derived.runs),
        },
        "lora_config": {
            "dynamic_lora_loading_path": lora_loading_path(config, outputs),
            "max_num_adapters_per_replica": serving.max_num_adapters_per_replica,
        },
        "deployment_config": {
            "autoscaling_config": {
                "min_replicas": serving.min_replicas,
                "max_replicas": serving.max_replicas,
                "target_ongoing_requests": serving.target_ongoing_requests,
            }
        },
    }
    return {
        "applications": [
            {
                "name": serving.application_name,
                "import_path": IMPORT_PATH,
                "route_prefix": "/",
                "args": {"llm_configs": [llm_config]},
            }
        ]
    }


def serving_cluster_spec(inputs: ChartInputs) -> RayClusterSpecProps:
    config = inputs.config
    serving, hyperpod, workloads = config.serving, config.hyperpod, config.workloads
    worker_group = hyperpod.worker_group
    worker_cpus, worker_memory = allocatable_pod(worker_group)
    # Ray Serve LLM's S3 client resolves the adapters bucket in the deployment's region.
    region_env = (("AWS_REGION", inputs.outputs.region),)
    head = RayPodProps(
        container_name=RAY_HEAD_CONTAINER,
        image=config.serving_image.image,
        service_account=workloads.serving_service_account,
        instance_type=hyperpod.head_group.instance_type,
        cpus=serving.head_cpus,
        memory_gib=serving.head_memory_gib,
        shm_gib=serving.head_shm_gib,
        ports=(*HEAD_PORTS, SERVE_PORT),
        env=region_env,
        # The ingress (OpenAI router) may run on the head and may read the base model's config.
        shared=inputs.shared_volume(read_only=True),
        labels=ray_workload_labels(SERVING_COMPONENT),
        annotations=inputs.ray_pod_annotations,
    )
    worker = RayPodProps(
        container_name="ray-worker",
        image=config.serving_image.image,
        service_account=workloads.serving_service_account,
        instance_type=worker_group.instance_type,
        cpus=worker_cpus,
        memory_gib=worker_memory,
        shm_gib=serving_worker_shm_gib(serving, config.hyperpod),
        gpus=worker_group.spec.gpus,
        ports=(SERVE_PORT,),
        env=region_env,
        # Read-only: serving never writes to the training outputs.
        shared=inputs.shared_volume(read_only=True),
        labels=ray_workload_labels(SERVING_COMPONENT),
        annotations=inputs.ray_pod_annotations,
        required_node_labels=inputs.worker_node_labels,
    )
    return RayClusterSpecProps(
        ray_version=config.serving_image.ray_version,
        head=head,
        worker_group_name=worker_group.name,
        worker=worker,
        worker_replicas=serving.worker_replicas,
        # Autoscaled GPU nodes: the worker group follows Serve's replicas, from none (a pending worker pod is what
        # makes Karpenter start a node); on fixed nodes it holds its nodes from the start.
        autoscaling=InTreeAutoscaling(
            min_replicas=0,
            idle_timeout_seconds=serving.worker_idle_seconds,
            cpus=serving.autoscaler_cpus,
            memory_gib=serving.autoscaler_memory_gib,
        )
        if worker_group.autoscaled
        else None,
    )


class ServingChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, *, inputs: ChartInputs) -> None:
        super().__init__(scope, construct_id, labels=inputs.labels, disable_resource_name_hashes=True)
        config = inputs.config
        self.service = RayService(
            self,
            "RayService",
            name=config.serving.rayservice_name,
            namespace=inputs.namespace,
            serve_config_v2=yaml.safe_dump(serve_config(config, inputs.outputs), sort_keys=False),
            cluster=serving_cluster_spec(inputs),
            upgrade_strategy=config.serving.upgrade_strategy,
        )
