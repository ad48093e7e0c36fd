"""Snapshots of every synthesized manifest (default configuration, placeholder outputs).

A change to a manifest shows up here as a diff; review it, then `pytest --snapshot-update`.
The training script is a fixed stub so the snapshots do not copy docker/train_job.py
(tests/charts/test_charts.py checks that the real file lands in the ConfigMap).
"""

from __future__ import annotations

import json

import cdk8s
import pytest

from charts import ChartInputs, build_charts
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME
from skyrl_hyperpod.values.stack_outputs import StackOutputs

STUB_SCRIPT = "print('train_job stub')\n"
CHART_IDS = ("01-platform", "03-rayjobs", "04-publish-adapter", "05-rayservice")


def synth(config) -> dict[str, list[dict]]:
    """Manifests with the training image tag masked: it is a digest of docker/, asserted
    in tests/charts/test_charts.py, and editing the Dockerfile must not churn these snapshots."""
    inputs = ChartInputs(
        config=config, outputs=StackOutputs.placeholder(config), job_files={JOB_SCRIPT_NAME: STUB_SCRIPT}
    )
    charts = {chart.node.id: chart.to_json() for chart in build_charts(cdk8s.App(), inputs)}
    tag = config.training_image.tag
    return json.loads(json.dumps(charts).replace(f":{tag}", ":<training-image-tag>"))


@pytest.fixture(scope="module")
def default_manifests(default_config):
    return synth(default_config)


@pytest.mark.parametrize("chart_id", CHART_IDS)
def test_default_manifests(default_manifests, chart_id, snapshot):
    assert default_manifests[chart_id] == snapshot


def test_jobs_on_the_shared_raycluster(snapshot):
    config = validate_config({"training": {"jobs": {"self_contained_jobs": False}}})
    manifests = synth(config)
    assert {"02-raycluster": manifests["02-raycluster"], "03-rayjobs": manifests["03-rayjobs"]} == snapshot
