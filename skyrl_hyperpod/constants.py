"""Literals shared by the CDK stacks and the cdk8s charts (facts of Kubernetes/EKS, not settings)."""

from __future__ import annotations

# The tag key build_platform puts on every stack (and so on every resource that takes tags); its value is
# name_prefix. The Studio role finds the HyperPod cluster by it, the teardown plan the project's leftovers.
PROJECT_TAG_KEY = "project"

# Well-known node label the kubelet sets from the EC2 instance type; HyperPod nodes carry their
# ml.* instance type in it.
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

# Namespaces of operators the Ray pods' NetworkPolicies admit: the KubeRay operator (installed by
# stacks/eks_stack.py) polls each head's dashboard/job API (the HyperPod Ray endpoint operator's namespace is
# `ray_endpoint_operator.namespace`); the HyperPod observability add-on's
# collector scrapes Ray's metrics port.
KUBERAY_NAMESPACE = "kuberay-system"
# The kuberay-operator Helm chart and the release stacks/eks_stack.py installs it as. The chart labels the
# operator's pods with both (helm-chart/kuberay-operator/templates/deployment.yaml, v1.7.0:
# app.kubernetes.io/name = the chart name, app.kubernetes.io/instance = the release), which is how the
# NetworkPolicies tell the operator from any other pod in its namespace.
KUBERAY_OPERATOR_CHART = "kuberay-operator"
KUBERAY_OPERATOR_RELEASE = "kuberay-operator"
HYPERPOD_OBSERVABILITY_NAMESPACE = "hyperpod-observability"

# Ray's default head ports (https://docs.ray.io/en/latest/ray-core/configure.html#ports-configurations):
# the charts publish them on the head Service and admit them in the NetworkPolicies.
RAY_GCS_PORT = 6379
RAY_DASHBOARD_PORT = 8265  # dashboard and job submission API
RAY_CLIENT_PORT = 10001

# Name of the Ray container in every head pod the charts generate (training, self-contained jobs, serving):
# the alert rules watch its restarts.
RAY_HEAD_CONTAINER = "ray-head"
