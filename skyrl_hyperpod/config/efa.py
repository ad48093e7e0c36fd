"""EFA for NCCL: what the training image installs and what every pod that requests EFA sets.

A pod that requests `vpc.amazonaws.com/efa` gets the device, but NCCL uses it only through
libfabric's `efa` provider and the aws-ofi-nccl plugin; without them it falls back to TCP sockets.
The training image installs both from AWS's EFA installer (docker/Dockerfile: pinned version,
signature checked against the key fingerprint AWS publishes in the EC2 User Guide, "Get started
with EFA and NCCL", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start-nccl.html), and
`efa_environment` is the environment the charts set on every pod that requests EFA
(charts/constructs/ray_pods.py: `ray_pod_template` adds it whenever it adds the EFA request).
"""

from __future__ import annotations

# Published by AWS for aws-efa-installer.key (EC2 User Guide, "Install the EFA software").
EFA_INSTALLER_KEY_FINGERPRINT = "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"
# The plugin file EFA installer >= 1.42 installs (aws-ofi-nccl >= 1.15 renamed it from
# libnccl-net-aws-ofi.so); NCCL_NET_PLUGIN=ofi makes NCCL dlopen exactly this name.
OFI_NCCL_PLUGIN_LIBRARY = "libnccl-net-ofi.so"
NCCL_NET_PLUGIN = "ofi"


def efa_environment(*, device_rdma: bool) -> tuple[tuple[str, str], ...]:
    """libfabric/NCCL environment for a pod with EFA devices, after AWS's EFA-on-EKS guidance:
    libfabric restricted to the `efa` provider (no silent fallback to its TCP provider), NCCL's
    bootstrap sockets kept off loopback and Docker bridges, and device RDMA switched on only where
    the instance type is known to support it (InstanceSpec.efa_device_rdma): set on one that does
    not, libfabric refuses to start."""
    env = [("FI_PROVIDER", "efa"), ("NCCL_SOCKET_IFNAME", "^lo,docker")]
    if device_rdma:
        env.append(("FI_EFA_USE_DEVICE_RDMA", "1"))
    return tuple(env)
