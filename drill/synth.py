"""RayJob manifests of a variant of the configuration, built in-process by the charts (as `cdk8s synth` does)."""

from __future__ import annotations

from typing import Any

from skyrl_hyperpod.config import ProjectConfig, validate_config
from skyrl_hyperpod.values.job_files import read_job_files
from skyrl_hyperpod.values.stack_outputs import StackOutputs


def with_overlay(config: ProjectConfig, overlay: dict[str, Any]) -> ProjectConfig:
    """`config` with `overlay` laid over it, validated like a configuration file."""
    return validate_config(overlay, config)


def rayjobs(config: ProjectConfig) -> list[dict[str, Any]]:
    from skyrl_hyperpod.plumbing.runtime import prefer_venv_node

    prefer_venv_node()
    import cdk8s

    from charts import ChartInputs, build_charts

    inputs = ChartInputs(config=config, outputs=StackOutputs.placeholder(config), job_files=read_job_files())
    documents = [doc for chart in build_charts(cdk8s.App(), inputs) for doc in chart.to_json()]
    return [doc for doc in documents if doc["kind"] == "RayJob"]
