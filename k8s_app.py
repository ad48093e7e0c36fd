#!/usr/bin/env python3
"""cdk8s app entry point: `cdk8s synth` writes one manifest file per chart to dist/ (or `-o DIR`).

Configuration: $SKYRL_HP_CONFIG, else ./skyrl-hp.yaml: the one way the CDK app, this app and the CLI all read (cdk8s
never sees `cdk -c` context). Stack outputs: the file written by
`cdk deploy --outputs-file <file>`, at workloads.outputs_file or $SKYRL_HP_OUTPUTS; without it the
manifests use placeholder values and are not deployable. Manifests are validated before writing.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.loader import load_config_with_source, read_lock
from skyrl_hyperpod.config.upstream_lock import lock_status
from skyrl_hyperpod.config.workloads import OUTPUTS_FILE_ENV_VAR
from skyrl_hyperpod.ops.summary import workloads_summary
from skyrl_hyperpod.plumbing.errors import ProblemsError
from skyrl_hyperpod.plumbing.runtime import exit_after_synth, fail, prefer_venv_node
from skyrl_hyperpod.values.job_files import read_job_files
from skyrl_hyperpod.values.stack_outputs import StackOutputs, load_stack_outputs
from skyrl_hyperpod.values.synthesized_manifests import (
    STAMP_PREFIX,
    SynthStamp,
    chart_file,
    config_fingerprint,
    source_name,
    stamp_files,
)

REPO_ROOT = Path(__file__).resolve().parent


def stack_outputs(config: ProjectConfig) -> StackOutputs:
    path = Path(os.environ.get(OUTPUTS_FILE_ENV_VAR) or config.workloads.outputs_file)
    if not path.is_file():
        print(
            f"warning: stack outputs file {str(path)!r} not found (cdk deploy --outputs-file {path}); "
            "using PLACEHOLDER values: the manifests are not deployable",
            file=sys.stderr,
        )
        return StackOutputs.placeholder(config)
    return load_stack_outputs(path, config)


def output_directory() -> Path:
    """Where cdk8s.App writes: $CDK8S_OUTDIR (`cdk8s synth -o DIR` sets it), else dist/."""
    return Path(os.environ.get("CDK8S_OUTDIR") or "dist")


def remove_previous_charts(directory: Path) -> None:
    """Chart files an earlier synth stamped: gone before this one starts, so a synth that fails leaves nothing that
    looks current. `cdk8s synth` empties the directory itself; `python k8s_app.py` does not."""
    for file in directory.glob("*.k8s.yaml"):
        with file.open(encoding="utf-8", errors="replace") as stream:
            stamped = stream.readline().startswith(STAMP_PREFIX)
        if stamped:
            file.unlink()


def main() -> None:
    outdir = output_directory()
    remove_previous_charts(outdir)
    try:
        config, source = load_config_with_source(None)
        for line in workloads_summary(config, source):
            print(line, file=sys.stderr)
        if lock_warning := lock_status(config, read_lock()).synth_warning():
            print(lock_warning, file=sys.stderr)
        outputs, job_files = stack_outputs(config), read_job_files()
    except ProblemsError as error:  # the configuration, the stack outputs file or the training script
        fail(error.problems)
    # Imported once the inputs are known to be good: a bad file fails before cdk8s's Node process starts.
    prefer_venv_node()
    import cdk8s

    from charts import ChartInputs, build_charts, manifests
    from skyrl_hyperpod.validation import validation_report

    inputs = ChartInputs(config=config, outputs=outputs, job_files=job_files)
    # No outdir: cdk8s.App takes $CDK8S_OUTDIR, which `cdk8s synth -o DIR` sets (default dist/).
    app = cdk8s.App(yaml_output_type=cdk8s.YamlOutputType.FILE_PER_CHART)
    charts = build_charts(app, inputs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # each skipped check is printed below, as one line
            problems, skipped = validation_report(manifests(charts), config=config)
    except ProblemsError as error:  # e.g. the KubeRay CRDs are not where KUBERAY_CRDS_DIR says
        problems, skipped = error.problems, []
    for line in skipped:
        print(f"warning: {line}", file=sys.stderr)
    if problems:
        fail(problems)
    fingerprint = config_fingerprint(config)
    if outputs.config_fingerprint and outputs.config_fingerprint != fingerprint:
        print(
            f"warning: the stack outputs come from a deploy of configuration fingerprint {outputs.config_fingerprint}; "
            f"these manifests are synthesized from {source_name(source.path)} (fingerprint {fingerprint}): if the "
            "node groups or names changed, cdk deploy this configuration first",
            file=sys.stderr,
        )
    app.synth()
    stamp = SynthStamp(fingerprint, None if source.path is None else str(source.path), outputs.config_fingerprint)
    # Only the files this synth wrote: a chart file another synth left behind keeps its own stamp, or none.
    stamp_files([outdir / chart_file(chart.node.id) for chart in charts], stamp)
    exit_after_synth()


if __name__ == "__main__":
    main()
