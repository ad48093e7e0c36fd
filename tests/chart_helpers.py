"""The cdk8s charts built in-process for tests (cdk8s.App + Chart.to_json: no synth to disk, no subprocess), and
readers of their objects; shared by the chart, drill, configuration and node-health tests."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping

import cdk8s

from charts import ChartInputs, build_charts
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME
from skyrl_hyperpod.values.stack_outputs import StackOutputs

STUB_SCRIPT = "print('train_job stub')\n"


def build_chart_documents(inputs: ChartInputs) -> dict[str, list[dict]]:
    """{chart id: its objects}, built now."""
    return {chart.node.id: chart.to_json() for chart in build_charts(cdk8s.App(), inputs)}


# The charts are a function of their inputs alone (configuration, stack outputs, job files): many tests build the same
# ones, so each test process builds each distinct set once.
_BUILT: dict[str, dict[str, list[dict]]] = {}


def chart_documents(inputs: ChartInputs) -> dict[str, list[dict]]:
    """{chart id: its objects}, each call's own copy to change."""
    key = json.dumps(
        [inputs.config.model_dump(mode="json"), inputs.outputs.model_dump(mode="json"), dict(inputs.job_files)],
        sort_keys=True,
    )
    if key not in _BUILT:
        _BUILT[key] = build_chart_documents(inputs)
    return copy.deepcopy(_BUILT[key])


def synth(
    config,
    outputs: StackOutputs | None = None,
    job_script: str = STUB_SCRIPT,
    job_files: Mapping[str, str] | None = None,
) -> dict[str, list[dict]]:
    files = {JOB_SCRIPT_NAME: job_script} if job_files is None else job_files
    return chart_documents(
        ChartInputs(config=config, outputs=outputs or StackOutputs.placeholder(config), job_files=files)
    )


def objects(charts: dict[str, list[dict]], kind: str) -> list[dict]:
    return [doc for docs in charts.values() for doc in docs if doc["kind"] == kind]


def one(charts: dict[str, list[dict]], kind: str) -> dict:
    (found,) = objects(charts, kind)
    return found
