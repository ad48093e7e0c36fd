"""cdk8s charts of the workloads, one per deployable unit (one file each in dist/).

Apply in file order: 01-platform (namespace, identities, storage, script), 02-raycluster,
03-rayjobs, then 04-publish-adapter once an adapter is trained, and 05-rayservice (neither of the last two
with `serving.enabled: false`).
"""

from __future__ import annotations

import cdk8s

from skyrl_hyperpod.values.synthesized_manifests import (
    PLATFORM_CHART,
    PUBLISH_CHART,
    RAYCLUSTER_CHART,
    RAYJOBS_CHART,
    RAYSERVICE_CHART,
)

from .inputs import ChartInputs
from .namespace_resources import NamespaceResourcesChart
from .publish_adapter import PublishAdapterChart
from .raycluster import TrainingClusterChart
from .rayjob import TrainingJobsChart
from .rayservice import ServingChart, serve_config


def build_charts(app: cdk8s.App, inputs: ChartInputs) -> list[cdk8s.Chart]:
    charts: list[cdk8s.Chart] = [NamespaceResourcesChart(app, PLATFORM_CHART, inputs=inputs)]
    if not inputs.config.training.jobs.self_contained_jobs:
        charts.append(TrainingClusterChart(app, RAYCLUSTER_CHART, inputs=inputs))
    charts.append(TrainingJobsChart(app, RAYJOBS_CHART, inputs=inputs))
    if inputs.config.serving.enabled:
        charts.append(PublishAdapterChart(app, PUBLISH_CHART, inputs=inputs))
        charts.append(ServingChart(app, RAYSERVICE_CHART, inputs=inputs))
    return charts


def manifests(charts: list[cdk8s.Chart]) -> list[dict]:
    """Every object of every chart, in apply order (what the validation step checks)."""
    return [document for chart in charts for document in chart.to_json()]


__all__ = ["ChartInputs", "build_charts", "manifests", "serve_config"]
