"""Jobs that publish trained LoRA adapters to the S3 prefix the RayService reads: one Job per experiment.

Each copies /shared/<runs>/<run_id>/global_step_<N>/policy to s3://<bucket>/<prefix>/<adapter>/ with the
TRAINING service account: its Pod Identity role may write the adapters prefix, while the serving identity
is read-only by design. The folder name is the adapter's name in requests; by default it is the
experiment's name, so a sweep publishes every run under its own name.

The manifest is the plain mapping skyrl_hyperpod/values/publish_job.py builds, which `skyrl-hp adapter publish`
also creates directly (another step or name without a re-synth).
"""

from __future__ import annotations

import cdk8s
from constructs import Construct

from skyrl_hyperpod.config.serving import publications
from skyrl_hyperpod.values.publish_job import publish_job

from .inputs import ChartInputs


class PublishAdapterChart(cdk8s.Chart):
    """One publish Job per experiment that trains an adapter (or only `serving.publish.experiment`)."""

    def __init__(self, scope: Construct, construct_id: str, *, inputs: ChartInputs) -> None:
        super().__init__(scope, construct_id, labels=inputs.labels, disable_resource_name_hashes=True)
        config = inputs.config
        self.jobs: list[cdk8s.ApiObject] = []
        for pub in publications(config.serving, config.derived.runs):
            manifest = publish_job(config, inputs.outputs, pub, {})
            job = cdk8s.ApiObject(
                self,
                f"Job-{pub.run.experiment.name}",
                api_version="batch/v1",
                kind="Job",
                metadata=manifest["metadata"],
            )
            job.add_json_patch(cdk8s.JsonPatch.add("/spec", manifest["spec"]))
            self.jobs.append(job)
