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
HYPERPOD_OBSERVABILITY_NAMESPACE = "hyperpod-observability"

# Ray's default head ports (https://docs.ray.io/en/latest/ray-core/configure.html#ports-configurations):
# the charts publish them on the head Service and admit them in the NetworkPolicies.
RAY_GCS_PORT = 6379
RAY_DASHBOARD_PORT = 8265  # dashboard and job submission API
RAY_CLIENT_PORT = 10001
