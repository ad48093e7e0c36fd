"""The long-lived training RayCluster `skyrl-visgym` (name from the configuration).

Head on the CPU group, sized to leave room for the RayService head on the same node; one GPU worker
pod per node of the GPU group, requesting what that group's nodes expose (instance type and
threads_per_core), so changing either in the configuration rescales it.
"""

from __future__ import annotations

import cdk8s
from constructs import Construct

from skyrl_hyperpod.config.names import RAY_HEAD_CONTAINER

from .constructs.kuberay_resources import RayCluster, RayClusterSpecProps
from .constructs.ray_network import ray_workload_labels
from .constructs.ray_pods import (
    HEAD_PORTS,
    RayPodProps,
    ScriptVolume,
    allocatable_pod,
    prepare_shared_dirs_container,
)
from .inputs import ChartInputs
from .ray_access import TRAINING_COMPONENT, endpoint_opt_in_annotations


def training_cluster_spec(inputs: ChartInputs) -> RayClusterSpecProps:
    """The training cluster; also the rayClusterSpec of a self-contained RayJob."""
    config = inputs.config
    training, hyperpod, workloads = config.training, config.hyperpod, config.workloads
    layout = inputs.layout
    owner = (training.cluster.run_as_user, training.cluster.run_as_group)
    head_size = config.derived.training_head
    head_cpus, head_memory = head_size.cpus, head_size.memory_gib
    worker_cpus, worker_memory = allocatable_pod(layout.group)
    prepare = prepare_shared_dirs_container(
        image=inputs.training_image,
        mount_path=workloads.shared_mount_path,
        relative_dirs=[
            training.data.model_dir,
            training.data.data_dir,
            training.data.runs_dir,
            workloads.hf_cache_dir,
            workloads.vllm_cache_dir,
        ],
        owner=owner,
    )
    head = RayPodProps(
        container_name=RAY_HEAD_CONTAINER,
        image=inputs.training_image,
        service_account=workloads.training_service_account,
        instance_type=hyperpod.head_group.instance_type,
        cpus=head_cpus,
        memory_gib=head_memory,
        shm_gib=training.cluster.head_shm_gib,
        ports=HEAD_PORTS,
        env=inputs.cache_env,
        secret_env=training.jobs.secret_env_refs,
        shared=inputs.shared_volume(),
        script=ScriptVolume(
            config_map=inputs.job_script_config_map,
            mount_path=training.cluster.job_script_mount,
            items=inputs.job_script_items,
        ),
        run_as=owner,
        init_containers=(prepare,),
        labels=ray_workload_labels(TRAINING_COMPONENT),
        annotations=inputs.ray_pod_annotations,
    )
    worker = RayPodProps(
        container_name="ray-worker",
        image=inputs.training_image,
        service_account=workloads.training_service_account,
        instance_type=layout.instance_type,
        cpus=worker_cpus,
        memory_gib=worker_memory,
        shm_gib=layout.shm_gib,
        gpus=layout.gpus_per_pod,
        efa_devices=layout.spec.efa_interfaces,
        efa_device_rdma=layout.spec.efa_device_rdma,
        env=inputs.cache_env,
        # The driver (on the head) and the actors (on every worker) inherit the container's environment.
        secret_env=training.jobs.secret_env_refs,
        shared=inputs.shared_volume(),
        run_as=owner,
        labels=ray_workload_labels(TRAINING_COMPONENT),
        annotations=inputs.ray_pod_annotations,
        required_node_labels=inputs.worker_node_labels,
    )
    return RayClusterSpecProps(
        ray_version=config.training_image.ray_version,
        head=head,
        worker_group_name=hyperpod.worker_group.name,
        worker=worker,
        worker_replicas=layout.replicas,
        head_service_type=training.cluster.head_service_type,
        head_service_source_ranges=inputs.head_service_source_ranges,
    )


class TrainingClusterChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, *, inputs: ChartInputs) -> None:
        super().__init__(scope, construct_id, labels=inputs.labels, disable_resource_name_hashes=True)
        self.cluster = RayCluster(
            self,
            "RayCluster",
            name=inputs.config.training.cluster.raycluster_name,
            namespace=inputs.namespace,
            spec=training_cluster_spec(inputs),
        )
        for key, value in endpoint_opt_in_annotations(inputs.config).items():
            self.cluster.api_object.metadata.add_annotation(key, value)
