"""Shared fixtures: the default platform is synthesized once per test session."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skyrl_hyperpod.runtime import prefer_venv_node

prefer_venv_node()

import aws_cdk as cdk  # noqa: E402

from skyrl_hyperpod.config import ProjectConfig, load_config, validate_config  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
# KubeRay CRDs are read from ../shared (never committed); override with KUBERAY_CRDS_DIR.
KUBERAY_CRDS_DIR = Path(os.environ.get("KUBERAY_CRDS_DIR", REPO_ROOT.parent / "shared" / "kuberay-crds" / "v1.7.0"))


def cdk_json_context() -> dict:
    """The feature flags from cdk.json, which the CLI would pass to the app."""
    return json.loads((REPO_ROOT / "cdk.json").read_text())["context"]


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
