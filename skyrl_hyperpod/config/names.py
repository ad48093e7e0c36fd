"""Names this project gives things (its conventions, not settings and not upstream facts: skyrl_hyperpod/upstream.py)."""

from __future__ import annotations

# The tag key build_platform puts on every stack (and so on every resource that takes tags); its value is
# name_prefix. The Studio role finds the HyperPod cluster by it, the teardown plan the project's leftovers.
PROJECT_TAG_KEY = "project"

# The namespace and Helm release stacks/eks_stack.py installs the KubeRay operator as. The Ray pods'
# NetworkPolicies admit the operator's pods (it polls each head's dashboard/job API) by namespace and by the
# chart's selector labels (upstream.KUBERAY_OPERATOR_CHART); the HyperPod Ray endpoint operator's namespace is
# `ray_endpoint_operator.namespace`.
KUBERAY_NAMESPACE = "kuberay-system"
KUBERAY_OPERATOR_RELEASE = "kuberay-operator"

# Name of the Ray container in every head pod the charts generate (training, self-contained jobs, serving):
# the alert rules watch its restarts.
RAY_HEAD_CONTAINER = "ray-head"
