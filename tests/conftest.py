"""Shared fixtures and helpers. The CDK stacks' tests live in tests/cdk/; the default platform they share is
synthesized at most once per test run, shared by the xdist workers."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from skyrl_hyperpod.plumbing.runtime import prefer_venv_node

# With PYTHONDONTWRITEBYTECODE set (as on some CI images) pytest cannot cache its assertion-rewritten test
# modules and re-parses and rewrites them all on every run. Bytecode writing is turned back on for
# the test processes only; the caches go to __pycache__ (gitignored), for the project's own modules too.
sys.dont_write_bytecode = False

prefer_venv_node()
# aws-cdk-lib's built-in synth-time CloudFormation validation is off in the tests: every template they
# synthesize is checked with cfn-lint instead (`cfn_lint_errors`), which covers the same resource
# schemas, and the built-in check would repeat that work in every synth (docs/performance.md). Set before aws_cdk is imported, so
# the jsii runtime and every subprocess app (`app.py` runs in test_config) inherit it.
# `cdk synth` / `cdk deploy` keep it on (see docs/performance.md).
os.environ["CDK_VALIDATION"] = "false"

if TYPE_CHECKING:
    import aws_cdk as cdk

    from skyrl_hyperpod.config import ProjectConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
# KubeRay CRDs are read from ../shared (never committed); override with KUBERAY_CRDS_DIR.
KUBERAY_CRDS_DIR = Path(os.environ.get("KUBERAY_CRDS_DIR", REPO_ROOT.parent / "shared" / "kuberay-crds" / "v1.7.0"))


def cdk_json_context() -> dict:
    """The feature flags from cdk.json, which the CLI would pass to the app."""
    return json.loads((REPO_ROOT / "cdk.json").read_text())["context"]


@functools.cache
def _cfn_lint_runner():
    """cfn-lint's rules and config, built once per process: `cfnlint.api.lint()` rebuilds its ~300 rules
    and reloads the resource schemas on every call."""
    from cfnlint.api import ManualArgs
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner import Runner

    # E = errors against the CloudFormation resource schemas; warnings are reviewed, not gated.
    config = ConfigMixIn(**ManualArgs(regions=[TEST_REGION], ignore_checks=["W", "I"]))
    return config, Runner(config).rules


def cfn_lint_errors(template: dict) -> list[str]:
    """cfn-lint's errors (E rules, us-west-2) on a synthesized template: "<rule id> <message> at <path>".

    The answer depends on the template's text alone, so each distinct template is linted once per session and
    the test processes share the answers (`session_shared`): a variant's stacks that come out the same as the
    default platform's, and the stacks several test modules lint, are not linted again."""
    text = json.dumps(template)
    return json.loads(session_shared("cfn-lint", text, lambda: json.dumps(_cfn_lint(text))))


def _cfn_lint(text: str) -> list[str]:
    from cfnlint.decode.decode import decode_str
    from cfnlint.runner import run_template_by_data

    config, rules = _cfn_lint_runner()
    decoded, decode_errors = decode_str(text)
    matches = decode_errors or run_template_by_data(decoded, config, rules)
    return [f"{m.rule.id} {m.message} at {'/'.join(map(str, m.path))}" for m in matches]


# A directory that every process of this pytest run shares (the xdist workers and the controller), and only
# this run: set by the session fixture below; None outside a session (nothing is shared then).
_SESSION_DIRECTORY: Path | None = None
_IN_PROCESS: dict[str, str] = {}


@pytest.fixture(scope="session", autouse=True)
def _session_directory(request, tmp_path_factory):
    """Under xdist each worker's base temporary directory sits in the run's own (`getbasetemp().parent`,
    pytest-xdist's documented way to share a session fixture between workers); without xdist the base
    directory is already the run's."""
    global _SESSION_DIRECTORY
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if hasattr(request.config, "workerinput") else base) / "session-shared"
    shared.mkdir(exist_ok=True)
    _SESSION_DIRECTORY = shared
    yield shared
    _SESSION_DIRECTORY = None
    _IN_PROCESS.clear()


@contextlib.contextmanager
def _exclusive(lock_file: Path):
    import fcntl

    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def session_shared(kind: str, key: str, compute: Callable[[], str]) -> str:
    """compute() for `key` once per test run: the first process to ask computes it (the others wait for it,
    so two workers never do the same work side by side) and writes it to the run's shared directory."""
    digest = f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:24]}"
    if digest in _IN_PROCESS:
        return _IN_PROCESS[digest]
    if _SESSION_DIRECTORY is None:
        value = compute()
    else:
        answer = _SESSION_DIRECTORY / digest
        with _exclusive(_SESSION_DIRECTORY / f"{digest}.lock"):
            if answer.exists():
                value = answer.read_text()
            else:
                value = compute()
                answer.write_text(value)
    _IN_PROCESS[digest] = value
    return value


@pytest.fixture
def kube():
    """A fake Kubernetes API server on 127.0.0.1 (tests/fake_kube.py), stopped when the test ends."""
    from fake_kube import FakeKube

    fake = FakeKube().start()
    yield fake
    fake.stop()


@pytest.fixture
def http():
    """A JSON HTTP server on 127.0.0.1 standing in for a pod's port behind a port-forward (tests/fake_http.py),
    stopped when the test ends."""
    from fake_http import FakeHttp

    fake = FakeHttp().start()
    yield fake
    fake.stop()


# Placeholders for the AWS account and region the CLI tests talk to.
TEST_ACCOUNT = "111111111111"
TEST_REGION = "us-west-2"


@pytest.fixture
def fake_aws_env(monkeypatch, tmp_path):
    """Credentials that sign but reach nothing, and none of the developer's own AWS configuration."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def install_fake_tools(directory: Path, *, aws: str | None = "2.27.50", kubectl: str | None = "v1.33.2") -> Path:
    """`aws` and `kubectl` stand-ins printing these versions (None: not installed), for PATH."""
    directory.mkdir(parents=True, exist_ok=True)
    scripts = {
        "aws": aws and f"echo 'aws-cli/{aws} Python/3.13.4 Linux/6.8 exe/x86_64'",
        "kubectl": kubectl and f"""echo '{{"clientVersion": {{"gitVersion": "{kubectl}"}}}}'""",
    }
    for name, body in scripts.items():
        if body:
            (directory / name).write_text(f"#!/bin/sh\n{body}\n")
            (directory / name).chmod(0o755)
    return directory


@pytest.fixture
def local_tools(monkeypatch, tmp_path) -> Path:
    """preflight's tool checks find the AWS CLI v2 and a kubectl of the cluster's version, not this machine's."""
    directory = install_fake_tools(tmp_path / "fake-tools")
    monkeypatch.setenv("PATH", f"{directory}:/usr/bin:/bin")
    return directory


@functools.cache
def _shared_aws_client(service: str, region: str):
    # Creating a botocore client parses its service model and builds a class with one method per API
    # operation; the clients carry no state of their own, so the whole test session shares them, made
    # from one boto3 session (whose loader keeps each parsed model).
    return _stub_session().client(service, region_name=region)


@functools.cache
def _stub_session():
    from skyrl_hyperpod.cli.common import new_session

    return new_session(None, None)


@pytest.fixture
def stub_aws():
    """stub_aws(service, region=TEST_REGION) -> (client, Stubber): a client whose calls botocore's Stubber
    answers, checking each request and each stubbed answer against botocore's service model. The Stubbers
    are deactivated when the test ends."""
    from botocore.stub import Stubber

    stubbers = []

    def stub(service: str, region: str = TEST_REGION):
        client = _shared_aws_client(service, region)
        stubber = Stubber(client)
        stubbers.append(stubber)
        return client, stubber

    yield stub
    for stubber in stubbers:
        stubber.deactivate()


def add_modeled_error(client, stubber, method: str, code: str, http_status_code: int, expected_params: dict) -> None:
    """Stub an error answer whose code the service model lists for that operation (the Stubber itself does
    not check error codes), so the code the CLI handles is one AWS documents."""
    operation = client.meta.method_to_api_mapping[method]
    modeled = {shape.name for shape in client.meta.service_model.operation_model(operation).error_shapes}
    assert code in modeled, f"{operation} does not return {code!r}; modeled errors: {sorted(modeled)}"
    stubber.add_client_error(method, code, http_status_code=http_status_code, expected_params=expected_params)


def stub_cloudformation(
    stub_aws,
    stacks: dict[str, dict[str, str]],
    region: str = TEST_REGION,
    templates: dict[str, dict] | list[tuple[str, dict]] | None = None,
):
    """A CloudFormation client whose one describe_stacks call lists `stacks` ({stack name: {output key:
    value}}, all CREATE_COMPLETE), then answers get_template for each of `templates` ({stack name: template}, or
    (stack name, template) pairs when one is asked for twice), in that order."""
    from datetime import datetime

    client, stubber = stub_aws("cloudformation", region)
    created = datetime(2026, 1, 1, tzinfo=UTC)
    described = [
        {"StackName": name, "StackStatus": "CREATE_COMPLETE", "CreationTime": created,
         "Outputs": [{"OutputKey": key, "OutputValue": value} for key, value in outputs.items()]}
        for name, outputs in stacks.items()
    ]  # fmt: skip
    stubber.add_response("describe_stacks", {"Stacks": described}, {})
    pairs = templates.items() if isinstance(templates, dict) else templates or []
    for name, template in pairs:
        stubber.add_response(
            "get_template", {"TemplateBody": json.dumps(template)}, {"StackName": name, "TemplateStage": "Original"}
        )
    stubber.activate()
    return client


def synth_platform(config: ProjectConfig, outdir: Path) -> cdk.cx_api.CloudAssembly:
    """Synthesize the whole CDK app in-process (cdk-nag included), like `cdk synth` would."""
    import aws_cdk as cdk

    from stacks import build_platform

    context = {**cdk_json_context(), "aws:cdk:disable-asset-staging": True}
    app = cdk.App(outdir=str(outdir), context=context)
    build_platform(app, config)
    return app.synth()


@pytest.fixture(scope="session")
def default_config() -> ProjectConfig:
    from skyrl_hyperpod.config import load_config

    return load_config(None)


def shared_platform(config: ProjectConfig) -> cdk.cx_api.CloudAssembly:
    """The whole CDK app synthesized for `config` once per test run: the first test process to need it
    synthesizes it into the run's shared directory, the others (xdist workers) read that cloud assembly."""
    import aws_cdk as cdk

    key = json.dumps(config.model_dump(mode="json"), sort_keys=True)

    def synthesize() -> str:
        if _SESSION_DIRECTORY is None:
            import tempfile

            return synth_platform(config, Path(tempfile.mkdtemp(prefix="cdk.out."))).directory
        outdir = _SESSION_DIRECTORY / f"cdk.out-{hashlib.sha256(key.encode()).hexdigest()[:24]}"
        return synth_platform(config, outdir).directory

    directory = session_shared("platform", key, synthesize)
    if directory not in _ASSEMBLIES:
        _ASSEMBLIES[directory] = cdk.cx_api.CloudAssembly(directory)
    return _ASSEMBLIES[directory]


_ASSEMBLIES: dict[str, cdk.cx_api.CloudAssembly] = {}


@pytest.fixture(scope="session")
def platform_assembly(default_config) -> cdk.cx_api.CloudAssembly:
    return shared_platform(default_config)


@pytest.fixture(scope="session")
def templates(platform_assembly) -> dict[str, dict]:
    """Stack name -> synthesized CloudFormation template (as a dict)."""
    return {stack.stack_name: stack.template for stack in platform_assembly.stacks}


# Whole-platform variants that several test modules check, each synthesized once (`assembly_for` caches).
VARIANT_ENV_PERSISTENT_1 = {
    "env": {"account": TEST_ACCOUNT, "region": TEST_REGION},
    "network": {"max_azs": 3, "nat_gateways": 2},
    "fsx": {"deployment_type": "PERSISTENT_1", "per_unit_storage_throughput": 100, "storage_capacity_gib": 4800},
}
# The GPU group under HyperPod's managed Karpenter: no deep health checks (the default group's carry over otherwise).
VARIANT_ON_DEMAND = {"hyperpod": {"worker_group": {"scaling": "on_demand", "deep_health_checks": []}}}
# Everything off by default, synthesized once for cfn-lint, checkov and the stack graph: Studio, alert subscriptions and
# the autoscaled GPU group (its cluster role).
VARIANT_OPTIONAL = {
    "studio": {"enabled": True},
    "alerts": {"email_addresses": ["ops@example.com"]},
    **VARIANT_ON_DEMAND,
}
VARIANT_NAMED_BUCKET = {"name_prefix": "team-a", "hyperpod": {"lifecycle_bucket_name": "sagemaker-team-a-scripts"}}


@pytest.fixture(scope="session")
def assembly_for():
    """Synthesize a variant of the default configuration: assembly_for({'hyperpod': {...}}), once per test run
    (`shared_platform`)."""

    def build(overrides: dict, tmp_root: Path | None = None) -> cdk.cx_api.CloudAssembly:
        from skyrl_hyperpod.config import validate_config

        return shared_platform(validate_config(overrides))

    return build


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "long_running(memory_heavy=False): a module (or a test) that runs far longer than most (real engines, "
        "processes that must hang); `make test-fast` leaves it out, and `make test` hands a module with one to a "
        "worker first, memory-heavy ones before the others",
    )


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """The training job's shared directory (FSx on the cluster), empty: for the tests of docker/skyrl_hp_job."""
    from train_job_stand_ins import shared_dir

    return shared_dir(tmp_path)


@pytest.fixture
def skyrl(tmp_path: Path) -> Path:
    """A SkyRL checkout whose VisGym example scripts record how the training job calls them."""
    from train_job_stand_ins import make_skyrl

    return make_skyrl(tmp_path / "SkyRL")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The order pytest-xdist hands out whole modules (`--dist loadfile --no-loadscope-reorder`): modules with a
    long_running test (or marked long_running as a whole) first, then the others by number of tests, most first.
    A long module handed out last keeps one worker busy while the other has nothing left to do. Memory-heavy ones
    go first of all: the workers' own memory grows with the synths they keep, so the suite's peak is lowest when
    those run early."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def order(entry: tuple[str, list[pytest.Item]]) -> tuple[bool, bool, int]:
        module_items = entry[1]
        markers = [marker for item in module_items if (marker := item.get_closest_marker("long_running"))]
        memory_heavy = any(marker.kwargs.get("memory_heavy", False) for marker in markers)
        return (not markers, not memory_heavy, -len(module_items))

    items[:] = [item for _, module_items in sorted(modules.items(), key=order) for item in module_items]


def pytest_collection_finish(session):
    # The modules, schemas and jsii proxies that collection loads live for the whole session. Freezing them
    # moves them out of the cyclic collector's reach, so its passes during the tests walk only what the tests
    # create (docs/performance.md measures it). Nothing is hidden: garbage the tests make is still collected
    # and its unraisable exceptions still reported; only cycles among these session-long objects are kept.
    import gc

    gc.collect()
    gc.freeze()
