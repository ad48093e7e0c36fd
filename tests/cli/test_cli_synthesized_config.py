"""Manifests from another configuration: every chart file `make synth-k8s` writes names the configuration it was
synthesized from (its fingerprint), and every command that applies or reads them refuses another one offline, in
one line, before any AWS or cluster call. `skyrl-hp validate` on a CDK cloud assembly is one line, and each
finding of validate names its file."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO_ROOT
from deployed_cluster import deployed_outputs, write_dist
from fake_kube import FakeKube

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients, CliState
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.values.stack_outputs import FIELD_BY_OUTPUT_KEY, OperatorOutputKey
from skyrl_hyperpod.values.synthesized_manifests import config_fingerprint, read_stamp, stamp_files

pytestmark = pytest.mark.usefixtures("fake_aws_env", "isolated")

# The case: dist/ synthesized for 3 GPU nodes and 2 experiments, the command run with 2 nodes.
BIG = {
    "training": {
        "jobs": {"self_contained_jobs": False},
        "experiments": [
            {"name": "maze-grpo"},
            {"name": "lr-1e-5", "overrides": {"trainer.policy.optimizer_config.lr": 1.0e-5}},
        ],
    }
}
SMALL = {"hyperpod": {"worker_group": {"instance_count": 2}}, "training": {"jobs": {"self_contained_jobs": False}}}


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.delenv("SKYRL_HP_OUTPUTS", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "big.yaml").write_text(yaml.safe_dump(BIG))
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(SMALL))


class NoAws(AwsClients):
    """Fails the test on any AWS client: the refusals come before any AWS call."""

    def with_session(self, profile: str | None, region: str | None) -> AwsClients:
        return self

    def __call__(self, service: str, region: str | None = None) -> None:
        raise AssertionError(f"an AWS call ({service}) before the configuration was checked")


def run(*args: str, kube: FakeKube | None = None):
    state = CliState(aws=NoAws(), kube=kube.api_client() if kube else None, poll_seconds=0)
    return CliRunner().invoke(cli, list(args), obj=state)


COMMANDS = {
    "train start": ["train", "start"],
    "serve up": ["serve", "up", "--yes"],
    "ray submit": ["ray", "submit", "--experiment", "maze-grpo"],
    "adapter publish": ["adapter", "publish", "--experiment", "maze-grpo"],
    "validate": ["validate"],
}


@pytest.mark.parametrize("command", COMMANDS, ids=list(COMMANDS))
def test_every_command_that_reads_the_manifests_refuses_another_configurations_in_one_line(command, tmp_path, kube):
    write_dist(tmp_path / "dist", validate_config(BIG), config_file="big.yaml")
    big, small = config_fingerprint(validate_config(BIG)), config_fingerprint(validate_config(SMALL))
    result = run("--config", "small.yaml", *COMMANDS[command], kube=kube)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    prefix = "validation error" if command == "validate" else "manifest error"
    assert line.startswith(f"{prefix}: dist/"), line
    assert line.split(": ", 2)[2] == (
        f"was synthesized from big.yaml (fingerprint {big}), this command reads small.yaml (fingerprint {small}): "
        "synthesize again with this configuration: SKYRL_HP_CONFIG=small.yaml make synth-k8s"
    ) or line.endswith(  # the chart file name sits between the prefix and the sentence
        f"was synthesized from big.yaml (fingerprint {big}), this command reads small.yaml (fingerprint {small}): "
        "synthesize again with this configuration: SKYRL_HP_CONFIG=small.yaml make synth-k8s"
    )
    assert kube.requests == []  # and NoAws saw no client either


def test_the_defaults_are_named_and_the_same_values_from_another_file_are_the_same_configuration(tmp_path, kube):
    write_dist(tmp_path / "dist", validate_config({}))
    result = run("--config", "small.yaml", "validate")
    assert result.exit_code == 2
    assert "was synthesized from the defaults (fingerprint " in result.stderr
    # The fingerprint is of the values, not of the file: a copy elsewhere, or the values written out in full, match.
    shutil.copy("small.yaml", "copy.yaml")
    write_dist(tmp_path / "dist", validate_config(SMALL), config_file="small.yaml")
    assert run("--config", "copy.yaml", "validate").exit_code == 0


def test_train_start_refuses_manifests_that_do_not_say_which_configuration_they_are_from(tmp_path, kube):
    write_dist(tmp_path / "dist", validate_config(SMALL), stamp=False)
    result = run("--config", "small.yaml", "train", "start", kube=kube)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("manifest error: dist/01-platform.k8s.yaml does not say which configuration")
    assert line.endswith("SKYRL_HP_CONFIG=small.yaml make synth-k8s")
    assert kube.requests == []


def test_a_matching_dist_is_applied(tmp_path, kube):
    write_dist(tmp_path / "dist", validate_config(SMALL), config_file="small.yaml")
    result = run("--config", "small.yaml", "train", "start", kube=kube)
    assert result.exit_code == 0, result.output


# --- the cdk8s app stamps what it writes, and a failed synth leaves nothing that looks current ----------------


def k8s_app(cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "k8s_app.py")],
        cwd=cwd,
        env={"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
    )


def outputs_json(path: Path, fingerprint: str) -> None:
    """outputs.json as `cdk deploy --outputs-file` writes it for a deploy of the configuration `fingerprint`."""
    values = deployed_outputs(validate_config({})).model_dump()
    stack = {key: values[field] for key, field in FIELD_BY_OUTPUT_KEY.items()}
    stack[OperatorOutputKey.CONFIG_FINGERPRINT.value] = fingerprint
    path.write_text(json.dumps({"skyrl-hp-network": stack}))


def test_the_cdk8s_app_stamps_every_chart_and_a_failed_synth_removes_the_previous_ones(tmp_path):
    deployed = config_fingerprint(validate_config(BIG))
    outputs_json(tmp_path / "outputs.json", deployed)
    first = k8s_app(tmp_path, SKYRL_HP_CONFIG="small.yaml", SKYRL_HP_OUTPUTS="outputs.json")
    assert first.returncode == 0, first.stderr
    small = config_fingerprint(validate_config(SMALL))
    # The platform was deployed from another configuration: said at synth, and by the commands that apply.
    assert (
        f"warning: the stack outputs come from a deploy of configuration fingerprint {deployed}; these manifests are "
        f"synthesized from small.yaml (fingerprint {small})"
    ) in first.stderr
    charts = sorted((tmp_path / "dist").glob("*.k8s.yaml"))
    assert [file.name for file in charts] == [
        "01-platform.k8s.yaml", "02-raycluster.k8s.yaml", "03-rayjobs.k8s.yaml", "04-publish-adapter.k8s.yaml",
        "05-rayservice.k8s.yaml",
    ]  # fmt: skip
    for file in charts:
        stamp_line, generated, body = file.read_text().split("\n", 2)
        stamp = json.loads(stamp_line.removeprefix("# skyrl-hp-config: "))
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        assert stamp == {
            "fingerprint": small,
            "config": "small.yaml",
            "outputs_fingerprint": deployed,
            "digest": digest,
        }
        assert generated.startswith("# Generated by make synth-k8s") and "do not edit" in generated
    result = run("--config", "small.yaml", "validate")
    assert result.exit_code == 0, result.output
    # A synth that fails (here: a configuration that does not load) leaves no chart of the previous one.
    (tmp_path / "broken.yaml").write_text("training:\n  cluster:\n    worker_gpus: 9\n")
    second = k8s_app(tmp_path, SKYRL_HP_CONFIG="broken.yaml", SKYRL_HP_OUTPUTS="outputs.json")
    assert second.returncode == 2
    assert list((tmp_path / "dist").glob("*.k8s.yaml")) == []


def test_train_start_notes_a_platform_deployed_from_another_configuration(tmp_path, kube):
    small = validate_config(SMALL)
    outputs = deployed_outputs(small).model_copy(update={"config_fingerprint": "0123456789ab"})
    write_dist(tmp_path / "dist", small, outputs, config_file="small.yaml")
    result = run("--config", "small.yaml", "train", "start", kube=kube)
    assert result.exit_code == 0, result.output
    assert (
        f"note: dist/01-platform.k8s.yaml is from configuration fingerprint {config_fingerprint(small)}, the platform "
        "was deployed from fingerprint 0123456789ab (outputs.json): if the node groups or names changed, cdk deploy "
        "this configuration first"
    ) in result.stderr.splitlines()


@pytest.mark.parametrize("command", [("validate", "dist"), ("train", "start")])
def test_a_hand_edited_manifest_is_refused_like_one_of_another_configuration(tmp_path, kube, command):
    small = validate_config(SMALL)
    write_dist(tmp_path / "dist", small, config_file="small.yaml")
    rayjobs = tmp_path / "dist" / "03-rayjobs.k8s.yaml"
    text = rayjobs.read_text()
    assert "micro_train_batch_size_per_gpu=" in text
    # The edit a synth would refuse (micro batch above the mini batch), made by hand below the stamp.
    rayjobs.write_text(re.sub(r"micro_train_batch_size_per_gpu=\d+", "micro_train_batch_size_per_gpu=4096", text))
    result = run("--config", "small.yaml", *command, kube=kube)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.endswith(
        "dist/03-rayjobs.k8s.yaml was changed after it was synthesized (its content does not match the digest in its "
        "first line): change the configuration instead and synthesize again: SKYRL_HP_CONFIG=small.yaml make synth-k8s"
    )
    assert kube.requests == []


# --- validate: a cloud assembly, and the file of each finding --------------------------------------------------


def test_validate_on_a_cdk_cloud_assembly_is_one_line(tmp_path):
    assembly = tmp_path / "cdk.out"
    assembly.mkdir()
    (assembly / "cdk.out").write_text('{"version":"48.0.0"}')
    (assembly / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": {}}))
    for stack in ("network", "storage", "eks"):
        template = {"Resources": {"Vpc": {"Type": "AWS::EC2::VPC", "Properties": {}}}}
        (assembly / f"skyrl-hp-{stack}.template.json").write_text(json.dumps(template))
    result = run("validate", "cdk.out")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "validation error: cdk.out is a CDK cloud assembly (CloudFormation templates from cdk synth), not Kubernetes "
        "manifests: skyrl-hp validate checks the manifests cdk8s writes (skyrl-hp validate dist, after make "
        "synth-k8s); the templates are checked by cfn-lint and cdk-nag in make test"
    ]


def test_every_finding_of_validate_names_its_file(tmp_path):
    dist = write_dist(tmp_path / "dist", validate_config(SMALL), config_file="small.yaml")
    rayjobs = dist / "03-rayjobs.k8s.yaml"
    stamp = read_stamp(rayjobs)
    assert stamp is not None
    [job] = list(yaml.safe_load_all(rayjobs.read_text()))
    job["spec"]["backoffLimitt"] = 1
    # As a synth that wrote it would stamp it (a hand edit is refused before validation: its digest differs).
    rayjobs.write_text(yaml.safe_dump(job))
    stamp_files([rayjobs], stamp)
    (dist / "extra.yaml").write_text(yaml.safe_dump_all([{"apiVersion": "v1", "kind": "ConfigMap"}, ["not", "a map"]]))
    result = run("--config", "small.yaml", "validate")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith(("dist/03-rayjobs.k8s.yaml: ", "dist/extra.yaml: ")) for line in lines), lines
    assert any(
        line.startswith("dist/03-rayjobs.k8s.yaml: RayJob/skyrl-visgym-maze-grpo: spec.backoffLimitt") for line in lines
    )
    assert any(line.startswith("dist/extra.yaml: document[") for line in lines)


def test_a_failed_cdk_synth_leaves_no_cloud_assembly_that_looks_current(tmp_path):
    """The CDK CLI reuses cdk.out: the app removes the previous assembly's manifest before anything can fail."""
    assembly = tmp_path / "cdk.out"
    assembly.mkdir()
    (assembly / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": {}}))
    (tmp_path / "broken.yaml").write_text("fsx:\n  storage_capacity_gib: 1000\n")
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py")],
        cwd=REPO_ROOT,
        env={"PATH": str(Path(sys.executable).parent), "SKYRL_HP_CONFIG": str(tmp_path / "broken.yaml"),
             "CDK_OUTDIR": str(assembly)},
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert not (assembly / "manifest.json").exists()


def test_a_manifest_stamped_before_the_digest_is_asked_to_be_synthesized_again(tmp_path, kube):
    small = validate_config(SMALL)
    write_dist(tmp_path / "dist", small, config_file="small.yaml")
    rayjobs = tmp_path / "dist" / "03-rayjobs.k8s.yaml"
    stamp_line, rest = rayjobs.read_text().split("\n", 1)
    old = json.loads(stamp_line.removeprefix("# skyrl-hp-config: "))
    del old["digest"]
    rayjobs.write_text("# skyrl-hp-config: " + json.dumps(old) + "\n" + rest)
    result = run("--config", "small.yaml", "train", "start", kube=kube)
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(
        "dist/03-rayjobs.k8s.yaml carries no content digest (synthesized by an earlier skyrl-hp): synthesize it "
        "again: SKYRL_HP_CONFIG=small.yaml make synth-k8s"
    )
