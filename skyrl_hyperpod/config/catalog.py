"""Instance catalog: the one place that knows what each HyperPod instance type offers.

Everything that depends on an instance type (GPU counts, EFA devices, SkyRL placement, cost,
and through InstanceGroupConfig the pod requests) reads it from here. Sources (docs/sources.md): the EC2
instance pages for ml.g7e.12xlarge and ml.r5d.16xlarge; the other sizes follow the sagemaker-hyperpod-cli instance
constants (`INSTANCE_RESOURCES`). EFA counts for ml.g7e.24xlarge/48xlarge are unconfirmed.
Only types HyperPod accepts are listed: tests/config/test_catalog.py checks each against the
AWS::SageMaker::Cluster InstanceType values cfn-lint ships (ml.r5d.4xlarge and 8xlarge are not among them).
"""

from __future__ import annotations

import difflib
import re

from pydantic import BaseModel, ConfigDict, Field

# Every catalog type lists its vCPUs with hyperthreading on: two threads per core. What a node
# exposes also depends on its group's threads_per_core (InstanceGroupConfig.node_vcpus).
THREADS_PER_CORE_WITH_HYPERTHREADING = 2


class InstanceSpec(BaseModel):
    """What one instance type offers, before Kubernetes and HyperPod take their share.

    Pod-sized figures (allocatable vCPUs and memory) belong to InstanceGroupConfig: the vCPUs a node
    exposes depend on the group's threads_per_core, not on the type alone."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vcpus: int = Field(gt=0)
    memory_gib: int = Field(gt=0)
    gpus: int = Field(ge=0)
    gpu_memory_gib: int = Field(default=0, ge=0)
    gpu_model: str | None = None
    efa_interfaces: int = Field(default=0, ge=0)
    # EFA RDMA read/write (GPUDirect RDMA over EFA). Only where AWS documents it: for g7e it is not
    # confirmed, so FI_EFA_USE_DEVICE_RDMA stays unset there and libfabric decides from the device.
    efa_device_rdma: bool = False
    local_nvme: str | None = None

    @property
    def physical_cores(self) -> int:
        """Cores behind `vcpus`: the catalog counts vCPUs with hyperthreading on."""
        return self.vcpus // THREADS_PER_CORE_WITH_HYPERTHREADING


_RTX_PRO_6000 = "NVIDIA RTX PRO 6000 Blackwell Server Edition"

INSTANCE_CATALOG: dict[str, InstanceSpec] = {
    # GPU workers: RTX PRO 6000 Blackwell, 96 GB each, PCIe (no NVLink).
    "ml.g7e.2xlarge": InstanceSpec(vcpus=8, memory_gib=64, gpus=1, gpu_memory_gib=96, gpu_model=_RTX_PRO_6000),
    "ml.g7e.4xlarge": InstanceSpec(vcpus=16, memory_gib=128, gpus=1, gpu_memory_gib=96, gpu_model=_RTX_PRO_6000),
    "ml.g7e.8xlarge": InstanceSpec(
        vcpus=32, memory_gib=256, gpus=1, gpu_memory_gib=96, gpu_model=_RTX_PRO_6000, efa_interfaces=1
    ),
    "ml.g7e.12xlarge": InstanceSpec(
        vcpus=48,
        memory_gib=512,
        gpus=2,
        gpu_memory_gib=96,
        gpu_model=_RTX_PRO_6000,
        efa_interfaces=1,
        local_nvme="1 x 3.8 TB",
    ),
    "ml.g7e.24xlarge": InstanceSpec(
        vcpus=96, memory_gib=1024, gpus=4, gpu_memory_gib=96, gpu_model=_RTX_PRO_6000, efa_interfaces=2
    ),
    "ml.g7e.48xlarge": InstanceSpec(
        vcpus=192, memory_gib=2048, gpus=8, gpu_memory_gib=96, gpu_model=_RTX_PRO_6000, efa_interfaces=4
    ),
    # CPU heads.
    "ml.r5d.16xlarge": InstanceSpec(vcpus=64, memory_gib=512, gpus=0, local_nvme="4 x 600 GB"),
    "ml.m5.4xlarge": InstanceSpec(vcpus=16, memory_gib=64, gpus=0),
    "ml.m5.8xlarge": InstanceSpec(vcpus=32, memory_gib=128, gpus=0),
}


def instance_spec(instance_type: str) -> InstanceSpec:
    """The catalog entry; configuration validation guarantees the key exists."""
    return INSTANCE_CATALOG[instance_type]


# The families Amazon EC2 Instance Types lists under "Accelerated computing": P and G (GPUs), Trn (Trainium),
# Inf (Inferentia), DL (Gaudi); the family is the name up to the first '.' ("Amazon EC2 instance type naming
# conventions"), after SageMaker's "ml." prefix. Only an unknown type's kind is guessed from it; a catalog type's
# kind is its GPU count.
_ACCELERATED_FAMILY = re.compile(r"^(ml\.)?(p|g|trn|inf|dl)[0-9]")


def _kind(instance_type: str) -> str:
    spec = INSTANCE_CATALOG.get(instance_type)
    if spec is not None:
        return "GPU" if spec.gpus else "CPU"
    return "GPU" if _ACCELERATED_FAMILY.match(instance_type) else "CPU"


def unknown_instance_type(instance_type: str) -> str:
    """Why `instance_type` is refused: the catalog's types of its kind (GPU or CPU, from its family), the closest
    of them, and how to add a type."""
    kind = _kind(instance_type)
    same_kind = [name for name in INSTANCE_CATALOG if _kind(name) == kind]
    guess = difflib.get_close_matches(instance_type, same_kind, n=1, cutoff=0.8)
    hint = f"did you mean {guess[0]}? " if guess else ""
    return (
        f"unknown instance type; {hint}the catalog's {kind} types are {', '.join(same_kind)}; to add a type, give "
        "its facts in skyrl_hyperpod/config/catalog.py and its price in skyrl_hyperpod/prices/<region>.yaml"
    )
