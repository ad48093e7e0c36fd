"""The cdk8s charts built in-process for tests (cdk8s.App + Chart.to_json: no synth to disk, no subprocess), and
readers of their objects; shared by the chart, drill, configuration and node-health tests."""

from __future__ import annotations

from collections.abc import Mapping

import cdk8s

from charts import ChartInputs, build_charts
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME
from skyrl_hyperpod.values.stack_outputs import StackOutputs

STUB_SCRIPT = "print('train_job stub')\n"


def synth(
    config,
    outputs: StackOutputs | None = None,
    job_script: str = STUB_SCRIPT,
    job_files: Mapping[str, str] | None = None,
) -> dict[str, list[dict]]:
    files = {JOB_SCRIPT_NAME: job_script} if job_files is None else job_files
    inputs = ChartInputs(config=config, outputs=outputs or StackOutputs.placeholder(config), job_files=files)
    return {chart.node.id: chart.to_json() for chart in build_charts(cdk8s.App(), inputs)}


def objects(charts: dict[str, list[dict]], kind: str) -> list[dict]:
    return [doc for docs in charts.values() for doc in docs if doc["kind"] == kind]


def one(charts: dict[str, list[dict]], kind: str) -> dict:
    (found,) = objects(charts, kind)
    return found
