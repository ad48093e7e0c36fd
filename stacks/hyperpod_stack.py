"""STUB: HyperPodStack (being written)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig


class HyperPodStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: ProjectConfig, **kwargs: Any) -> None:
        refs = {k: kwargs.pop(k) for k in list(kwargs) if k != "env"}
        super().__init__(scope, construct_id, **kwargs)
        self.refs = refs
