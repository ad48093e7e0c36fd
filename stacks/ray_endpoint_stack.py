"""The optional HyperPod Ray endpoint operator (`ray_endpoint_operator.enabled`).

Deployed after the HyperPod stack (see compose.py): the SageMaker Spaces add-on it depends on is Active
only once nodes run its pods, and AWS installs the operator only after that.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig

from .components.ray_endpoint_operator import RayEndpointOperator


class RayEndpointStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ProjectConfig,
        eks_cluster: eks.Cluster,
        kubectl_layer: lambda_.ILayerVersion,
        awscli_layer: lambda_.ILayerVersion,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.operator = RayEndpointOperator(
            self,
            "RayEndpointOperator",
            config=config,
            cluster=eks_cluster,
            kubectl_layer=kubectl_layer,
            awscli_layer=awscli_layer,
        )
