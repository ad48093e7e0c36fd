"""Facts of the upstream projects this project builds on (Kubernetes, KubeRay, Ray, the HyperPod add-ons), one
place for each, with its public source. Settings live in skyrl_hyperpod/config/; these are not settings.
"""

from __future__ import annotations

# Kubernetes' name rules: k8s.io/apimachinery/pkg/util/validation/validation.go (IsDNS1123Label,
# IsDNS1123Subdomain, IsDNS1035Label), https://kubernetes.io/docs/concepts/overview/working-with-objects/names/.
DNS1123_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # most names: namespaces, service accounts
DNS1123_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1035_LABEL_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"  # Services: a letter first

# The namespaces every Kubernetes cluster starts with
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces): kube-system
# holds the control plane's add-ons (CoreDNS, kube-proxy, the VPC CNI, the FSx CSI driver on EKS).
KUBE_SYSTEM_NAMESPACE = "kube-system"
KUBERNETES_INITIAL_NAMESPACES = ("default", KUBE_SYSTEM_NAMESPACE, "kube-public", "kube-node-lease")

# Well-known node label the kubelet sets from the EC2 instance type; HyperPod nodes carry their
# ml.* instance type in it.
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

# The extended resource NVIDIA's device plugin advertises for each GPU (containers request it in their limits):
# https://github.com/NVIDIA/k8s-device-plugin
GPU_RESOURCE = "nvidia.com/gpu"

# The KubeRay release this project installs and validates against: https://github.com/ray-project/kuberay/tree/v1.7.0
# (ray-operator/controllers/ray/utils/constant.go for the name limits, ray-operator/config/crd/bases/ for the CRDs).
# The kuberay-operator Helm chart version and the git tag (v<release>) of the CRDs that validation pins; the
# Makefile reads KUBERAY_RELEASE from this line.
KUBERAY_RELEASE = "1.7.0"
KUBERAY_TAG = f"v{KUBERAY_RELEASE}"
KUBERAY_API_VERSION = "ray.io/v1"
# Longest names KubeRay accepts: generated child objects (pods, services, a job's cluster) append suffixes.
RAYCLUSTER_NAME_MAX = 53
RAYJOB_NAME_MAX = 47  # RayJob and RayService
# RayCluster, RayJob and RayService names must be DNS-1035 labels (a letter first), since they name Services:
# Validate<Kind>Metadata in ray-operator/controllers/ray/utils/validation.go.
KUBERAY_NAME_PATTERN = DNS1035_LABEL_PATTERN

# The kuberay-operator Helm chart's name. The chart labels the operator's pods with it and with the release name
# (helm-chart/kuberay-operator/templates/deployment.yaml, v1.7.0: app.kubernetes.io/name = the chart name,
# app.kubernetes.io/instance = the release), which is how the NetworkPolicies tell the operator from any other
# pod in its namespace.
KUBERAY_OPERATOR_CHART = "kuberay-operator"
# The chart's source: the release tag's commit of https://github.com/ray-project/kuberay (tag v1.7.0), where
# helm-chart/kuberay-operator/Chart.yaml reads `version: 1.7.0` and crds/ holds the CRDs validation pins (byte-identical
# to ray-operator/config/crd/bases/). The git Helm installer installs it from there, every file checked against
# skyrl_hyperpod/validation/chart_sums/<commit>.sha256.
KUBERAY_COMMIT = "59d663aeec13760646da3db9c1cf8cfe883e30b7"
KUBERAY_OPERATOR_CHART_PATH = f"helm-chart/{KUBERAY_OPERATOR_CHART}"
# Where CDK's HelmChart fetched the chart before the git installer took it over (a deployment moving over keeps that
# resource for one deploy: docs/helm-installer.md, "Moving the KubeRay release").
KUBERAY_HELM_REPOSITORY = "https://ray-project.github.io/kuberay-helm/"
# The namespace the SageMaker HyperPod observability EKS add-on (amazon-sagemaker-hyperpod-observability) installs
# its collector in, which scrapes Ray's metrics port: the add-on fixes it, the Ray pods' NetworkPolicies admit it.
HYPERPOD_OBSERVABILITY_NAMESPACE = "hyperpod-observability"

# Ray's default head ports (https://docs.ray.io/en/latest/ray-core/configure.html#ports-configurations):
# the charts publish them on the head Service and admit them in the NetworkPolicies.
RAY_GCS_PORT = 6379
RAY_DASHBOARD_PORT = 8265  # dashboard and job submission API
RAY_CLIENT_PORT = 10001
# Ray Serve's HTTP proxies (HTTPOptions.port, default 8000:
# https://docs.ray.io/en/latest/serve/api/doc/ray.serve.config.HTTPOptions.html); the RayService's serveConfigV2
# leaves it at the default, so the head pod publishes this port.
RAY_SERVE_HTTP_PORT = 8000

# VisGym's environments (https://github.com/visgym/VisGym, its own `gymnasium` package) and SkyRL's VisGym example
# (examples/train/visgym of https://github.com/NovaSky-AI/SkyRL: entrypoint.py, env_sft.py, dataset.py, ...) at the
# commits `make drill` runs, every file checked against skyrl_hyperpod/validation/upstream_sums/<name>-<commit>.sha256
# (`skyrl-hp fetch visgym`). The training image builds VisGym from the fork its configuration pins
# (training_image.visgym_repository, visgym_ref) and the example from SkyRL's release tag; these are the newest
# upstream commits whose files this project lists (docs/drill.md says what may differ).
VISGYM_REPOSITORY = "visgym/VisGym"
VISGYM_COMMIT = "0289034b0cefa6fbbad27f7dd8c01545df324afd"
SKYRL_REPOSITORY = "NovaSky-AI/SkyRL"
SKYRL_VISGYM_EXAMPLE_COMMIT = "a9564572eb8e91076be43c1bd5e4615e3de17265"
SKYRL_VISGYM_EXAMPLE_PATH = "examples/train/visgym"

# Namespaces the sub-charts of the HyperPod dependencies chart at the pinned commit (b01cf906, release v3.9.0) install
# into besides their release's: aws-hyperpod (helm_chart/HyperPodHelmChart/charts/{health-monitoring-agent,
# deep-health-check,job-auto-restart}/values.yaml `namespace`), kubeflow (charts/training-operators' manifests) and
# mpi-operator (the Namespace in charts/mpi-operator/templates/rbac.yaml).
# tests/validation/test_hyperpod_chart.py checks them against the chart's render.
HYPERPOD_DEPENDENCIES_CHART_NAMESPACES = ("aws-hyperpod", "kubeflow", "mpi-operator")

# Chart locations inside aws/sagemaker-hyperpod-cli (helm_chart/HyperPodHelmChart at release v3.9.0; the
# operator's sub-chart from release v3.10.0 on).
HYPERPOD_CHART_PATH = "helm_chart/HyperPodHelmChart"
RAY_ENDPOINT_OPERATOR_CHART_PATH = f"{HYPERPOD_CHART_PATH}/charts/hyperpod-ray-endpoint-operator"

# HyperPod's managed Karpenter autoscaling (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html
# and its pages on the IAM role, the cluster, the NodeClass and the NodePool). The service principal the cluster role
# trusts, the AutoScaling values of the cluster, the NodeClass's API (up to 10 instance groups per NodeClass).
HYPERPOD_AUTOSCALING_PRINCIPAL = "hyperpod.sagemaker.amazonaws.com"
HYPERPOD_AUTOSCALER_TYPE = "Karpenter"
HYPERPOD_NODECLASS_GROUP = "karpenter.sagemaker.amazonaws.com"
HYPERPOD_NODECLASS_API_VERSION = f"{HYPERPOD_NODECLASS_GROUP}/v1"
HYPERPOD_NODECLASS_KIND = "HyperpodNodeClass"
NODECLASS_MAX_INSTANCE_GROUPS = 10
# The autoscaling page's prerequisites: continuous node provisioning, automatic node recovery, and the health
# monitoring agent at this version or later.
HYPERPOD_EKS_NODE_PROVISIONING_MODE = "Continuous"
AUTOSCALING_NODE_RECOVERY = "Automatic"
AUTOSCALING_MIN_AGENT_TAG = "1.0.742.0_1.0.241.0"
# Karpenter's v1 API (https://karpenter.sh/docs/concepts/nodepools/): the NodePool kind, and the pod annotation that
# keeps Karpenter from voluntarily disrupting (consolidating, expiring, drifting) the node a pod runs on
# (https://karpenter.sh/docs/concepts/disruption/#pod-level-controls). The release whose NodePool CRD validation reads:
# https://github.com/kubernetes-sigs/karpenter/tree/v1.14.1 (pkg/apis/crds/karpenter.sh_nodepools.yaml); the Makefile
# reads KARPENTER_RELEASE from this line.
KARPENTER_RELEASE = "1.14.1"
KARPENTER_TAG = f"v{KARPENTER_RELEASE}"
KARPENTER_API_VERSION = "karpenter.sh/v1"
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
