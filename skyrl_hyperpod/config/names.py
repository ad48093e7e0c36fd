"""Names this project gives things: the physical names computed from name_prefix, and its conventions (neither
settings nor upstream facts, which are in skyrl_hyperpod/plumbing/upstream.py)."""

from __future__ import annotations

from .base import StrictModel

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


class DerivedNames(StrictModel):
    """Physical names computed once from name_prefix; stacks, charts and tooling read these."""

    prefix: str

    @property
    def eks_cluster(self) -> str:
        return f"{self.prefix}-eks"

    @property
    def hyperpod_cluster(self) -> str:
        return f"{self.prefix}-hyperpod"

    @property
    def mlflow_app(self) -> str:
        """The managed MLflow App (tracking.backend: mlflow without a tracking_uri)."""
        return f"{self.prefix}-mlflow"

    @property
    def ecr_repository(self) -> str:
        return f"{self.prefix}/skyrl-train"

    def autoscaling(self, group_name: str) -> str:
        """The HyperpodNodeClass and the NodePool of an autoscaled instance group (cluster-scoped objects, so the
        prefix keeps two deployments on one EKS cluster apart; Kubernetes names are lowercase)."""
        return f"{self.prefix}-{group_name}".lower()

    def stack(self, component: str) -> str:
        return f"{self.prefix}-{component}"

    def lifecycle_bucket(self, configured: str | None, *, account: str, region: str) -> str:
        """`hyperpod.lifecycle_bucket_name`, else `sagemaker-<prefix>-lifecycle-<account>-<region>`:
        globally unique and readable by the managed HyperPod instance policy (which reads only
        `sagemaker-*` buckets). account/region may be CloudFormation tokens."""
        return configured or f"sagemaker-{self.prefix}-lifecycle-{account}-{region}"
