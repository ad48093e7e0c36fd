"""Shared fixtures: the default platform is synthesized once per test session (once per xdist worker)."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from skyrl_hyperpod.runtime import prefer_venv_node

prefer_venv_node()
# aws-cdk-lib's built-in synth-time CloudFormation validation is off in the tests: every template they
# synthesize is checked with cfn-lint instead (`cfn_lint_errors`), which covers the same resource
# schemas, and the built-in check would add ~1.5 s to each synth. Set before aws_cdk is imported, so
# the jsii runtime and every subprocess app (`app.py` runs in test_config) inherit it.
# `cdk synth` / `cdk deploy` keep it on (see README, "Performance").
os.environ["CDK_VALIDATION"] = "false"

import aws_cdk as cdk  # noqa: E402

from skyrl_hyperpod.config import ProjectConfig, load_config, validate_config  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
# KubeRay CRDs are read from ../shared (never committed); override with KUBERAY_CRDS_DIR.
KUBERAY_CRDS_DIR = Path(os.environ.get("KUBERAY_CRDS_DIR", REPO_ROOT.parent / "shared" / "kuberay-crds" / "v1.7.0"))


def cdk_json_context() -> dict:
    """The feature flags from cdk.json, which the CLI would pass to the app."""
    return json.loads((REPO_ROOT / "cdk.json").read_text())["context"]


@functools.cache
def _cfn_lint_runner():
    """cfn-lint's rules and config, built once per process: `cfnlint.api.lint()` rebuilds its ~300 rules
    and reloads the resource schemas on every call (~0.5 s per template)."""
    from cfnlint.api import ManualArgs
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner import Runner

    # E = errors against the CloudFormation resource schemas; warnings are reviewed, not gated.
    config = ConfigMixIn(**ManualArgs(regions=["us-west-2"], ignore_checks=["W", "I"]))
    return config, Runner(config).rules


def cfn_lint_errors(template: dict) -> list[str]:
    """cfn-lint's errors (E rules, us-west-2) on a synthesized template: "<rule id> <message> at <path>"."""
    from cfnlint.decode.decode import decode_str
    from cfnlint.runner import run_template_by_data

    config, rules = _cfn_lint_runner()
    decoded, decode_errors = decode_str(json.dumps(template))
    matches = decode_errors or run_template_by_data(decoded, config, rules)
    return [f"{m.rule.id} {m.message} at {'/'.join(map(str, m.path))}" for m in matches]


def synth_platform(config: ProjectConfig, outdir: Path) -> cdk.cx_api.CloudAssembly:
    """Synthesize the whole CDK app in-process (cdk-nag included), like `cdk synth` would."""
    from stacks import build_platform

    context = {**cdk_json_context(), "aws:cdk:disable-asset-staging": True}
    app = cdk.App(outdir=str(outdir), context=context)
    build_platform(app, config)
    return app.synth()


@pytest.fixture(scope="session")
def default_config() -> ProjectConfig:
    return load_config(None)


@pytest.fixture(scope="session")
def platform_assembly(default_config, tmp_path_factory) -> cdk.cx_api.CloudAssembly:
    return synth_platform(default_config, tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def templates(platform_assembly) -> dict[str, dict]:
    """Stack name -> synthesized CloudFormation template (as a dict)."""
    return {stack.stack_name: stack.template for stack in platform_assembly.stacks}


@pytest.fixture(scope="session")
def assembly_for():
    """Synthesize a variant of the default configuration: assembly_for({'hyperpod': {...}})."""
    cache: dict[str, cdk.cx_api.CloudAssembly] = {}

    def build(overrides: dict, tmp_root: Path | None = None) -> cdk.cx_api.CloudAssembly:
        key = json.dumps(overrides, sort_keys=True)
        if key not in cache:
            import tempfile

            cache[key] = synth_platform(validate_config(overrides), Path(tempfile.mkdtemp(prefix="cdk.out.")))
        return cache[key]

    return build


def pytest_collection_finish(session):
    # The modules, schemas and jsii proxies loaded by collection live for the whole session: move them
    # out of the cyclic collector's reach so its full passes (and pytest's gc.collect() calls at the end
    # of the session) only walk the objects the tests create.
    import gc

    gc.collect()
    gc.freeze()

