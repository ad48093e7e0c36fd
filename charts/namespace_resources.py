"""Namespace, service accounts, the FSx volume and claim, and the training script ConfigMap.

Applied first: every other chart lives in this namespace and mounts this claim, and the
namespace's NetworkPolicies (ray_access.py) are in place before any Ray pod starts. The service
accounts carry no annotations: EKS Pod Identity associations (CDK app) bind them to IAM roles.
"""

from __future__ import annotations

import cdk8s
import cdk8s_plus_33 as kplus
from constructs import Construct

from .constructs.node_autoscaling import HyperPodAutoscaling
from .constructs.ray_network import NetworkPolicy
from .inputs import ChartInputs
from .ray_access import namespace_network_policies

FSX_CSI_DRIVER = "fsx.csi.aws.com"


class NamespaceResourcesChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, *, inputs: ChartInputs) -> None:
        super().__init__(scope, construct_id, labels=inputs.labels, disable_resource_name_hashes=True)
        config, outputs, namespace = inputs.config, inputs.outputs, inputs.namespace
        workloads = config.workloads

        kplus.Namespace(self, "Namespace", metadata={"name": namespace})
        # Applied with the namespace, before any Ray pod exists: no pod starts unprotected.
        for name, spec in namespace_network_policies(inputs):
            NetworkPolicy(self, f"NetworkPolicy-{name}", name=name, namespace=namespace, spec=spec)
        self.training_service_account = kplus.ServiceAccount(
            self,
            "TrainingServiceAccount",
            metadata={"name": workloads.training_service_account, "namespace": namespace},
            automount_token=False,
        )
        self.serving_service_account = kplus.ServiceAccount(
            self,
            "ServingServiceAccount",
            metadata={"name": workloads.serving_service_account, "namespace": namespace},
            automount_token=False,
        )

        capacity = cdk8s.Size.gibibytes(config.fsx.storage_capacity_gib)
        volume = kplus.PersistentVolume(
            self,
            "SharedVolume",
            metadata={"name": inputs.persistent_volume_name},
            access_modes=[kplus.PersistentVolumeAccessMode.READ_WRITE_MANY],
            storage=capacity,
            storage_class_name="",
            # Checkpoints and adapters outlive the claim; deleting the file system is a CDK decision.
            reclaim_policy=kplus.PersistentVolumeReclaimPolicy.RETAIN,
            mount_options=["flock"],  # train_job.py serialises first-run preparation with flock
        )
        cdk8s.ApiObject.of(volume).add_json_patch(
            cdk8s.JsonPatch.add(
                "/spec/csi",
                {
                    "driver": FSX_CSI_DRIVER,
                    "volumeHandle": outputs.fsx_file_system_id,
                    "volumeAttributes": {"dnsname": outputs.fsx_dns_name, "mountname": outputs.fsx_mount_name},
                },
            )
        )
        kplus.PersistentVolumeClaim(
            self,
            "SharedClaim",
            metadata={"name": workloads.shared_pvc_name, "namespace": namespace},
            access_modes=[kplus.PersistentVolumeAccessMode.READ_WRITE_MANY],
            storage=capacity,
            storage_class_name="",
            volume=volume,
        )
        kplus.ConfigMap(
            self,
            "JobScript",
            metadata={"name": inputs.job_script_config_map, "namespace": namespace},
            data={key: inputs.job_files[path] for key, path in inputs.job_script_items},
        )
        groups = config.hyperpod.autoscaled_groups
        if groups:
            # Before any Ray pod: a pending GPU pod is what makes Karpenter start a node.
            HyperPodAutoscaling(
                self,
                "Autoscaling",
                node_class_name=config.names.hyperpod_cluster,
                node_pool_names={group.name: config.names.autoscaling(group.name) for group in groups},
                groups=groups,
            )
