"""A deployed cluster's side for the command-line tests: the configured namespace and shared RayCluster, the stack
outputs a deploy would give, and dist/ as `make synth-k8s` writes it for them."""

from __future__ import annotations

from pathlib import Path

import cdk8s
import yaml

from charts import ChartInputs, build_charts
from skyrl_hyperpod.plumbing.yaml_loading import SAFE_DUMPER
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME
from skyrl_hyperpod.values.stack_outputs import StackOutputs
from skyrl_hyperpod.values.synthesized_manifests import SynthStamp, config_fingerprint, stamp_files

NAMESPACE = "skyrl"
RAYCLUSTER = "skyrl-visgym"
# The command-line tests drive the long-lived RayCluster (02-raycluster); test_cli_cluster.py ends with the default
# (self-contained RayJobs).
SHARED_CLUSTER = {"training": {"jobs": {"self_contained_jobs": False}}}


def deployed_outputs(config) -> StackOutputs:
    return StackOutputs.placeholder(config).model_copy(
        update={
            "fsx_file_system_id": "fs-0123456789abcdef0",
            "fsx_dns_name": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
            "fsx_mount_name": "abcdefgh",
            "artifacts_bucket_name": "skyrl-hp-artifacts-111111111111",
            "serving_role_arn": "arn:aws:iam::111111111111:role/serving",
            "training_role_arn": "arn:aws:iam::111111111111:role/training",
            "is_placeholder": False,
        }
    )


def write_dist(directory: Path, config, outputs: StackOutputs | None = None, *, stamp: bool = True,
               config_file: str | None = None) -> Path:  # fmt: skip
    """The charts of `config` as `make synth-k8s` writes them: one file per chart, each starting with the stamp
    naming the configuration (`config_file`, else the defaults) unless `stamp` is false."""
    inputs = ChartInputs(
        config=config, outputs=outputs or deployed_outputs(config), job_files={JOB_SCRIPT_NAME: "print('stub')\n"}
    )
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for chart in build_charts(cdk8s.App(), inputs):
        files.append(directory / f"{chart.node.id}.k8s.yaml")
        files[-1].write_text(yaml.dump_all(chart.to_json(), Dumper=SAFE_DUMPER))
    if stamp:
        stamp_files(files, SynthStamp(config_fingerprint(config), config_file, inputs.outputs.config_fingerprint))
    return directory
