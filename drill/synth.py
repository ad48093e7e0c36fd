"""RayJob manifests of a variant of the configuration, built in-process by the charts (as `cdk8s synth` does)."""

from __future__ import annotations

from typing import Any

from skyrl_hyperpod.config import ProjectConfig, validate_config
from skyrl_hyperpod.plumbing.locations import DOCKER_DIR
from skyrl_hyperpod.values.stack_outputs import StackOutputs

JOB_SCRIPT = DOCKER_DIR / "train_job.py"


def with_overlay(config: ProjectConfig, overlay: dict[str, Any]) -> ProjectConfig:
    """`config` with `overlay` laid over it, validated like a configuration file."""
    return validate_config(overlay, config)


def rayjobs(config: ProjectConfig) -> list[dict[str, Any]]:
    from skyrl_hyperpod.plumbing.runtime import prefer_venv_node

    prefer_venv_node()
    import cdk8s

    from charts import ChartInputs, build_charts

    inputs = ChartInputs(config=config, outputs=StackOutputs.placeholder(config), job_script=JOB_SCRIPT.read_text())
    documents = [doc for chart in build_charts(cdk8s.App(), inputs) for doc in chart.to_json()]
    return [doc for doc in documents if doc["kind"] == "RayJob"]
