"""Literals shared by the CDK stacks and the cdk8s charts (facts of Kubernetes/EKS, not settings)."""

from __future__ import annotations

# Well-known node label the kubelet sets from the EC2 instance type; HyperPod nodes carry their
# ml.* instance type in it.
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
