"""Facts of the KubeRay release this project installs and validates against (one place for each).

Source: https://github.com/ray-project/kuberay/tree/v1.7.0 (ray-operator/controllers/ray/utils/constant.go
for the name limits, ray-operator/config/crd/bases/ for the CRDs).
"""

from __future__ import annotations

from .k8s_names import DNS1035_LABEL_PATTERN

# The kuberay-operator Helm chart version and the git tag (v<release>) of the CRDs that validation pins.
KUBERAY_RELEASE = "1.7.0"
KUBERAY_TAG = f"v{KUBERAY_RELEASE}"
KUBERAY_API_VERSION = "ray.io/v1"
# Longest names KubeRay accepts: generated child objects (pods, services, a job's cluster) append suffixes.
RAYCLUSTER_NAME_MAX = 53
RAYJOB_NAME_MAX = 47  # RayJob and RayService
# RayCluster, RayJob and RayService names must be DNS-1035 labels (a letter first), since they name Services:
# Validate<Kind>Metadata in ray-operator/controllers/ray/utils/validation.go.
KUBERAY_NAME_PATTERN = DNS1035_LABEL_PATTERN
