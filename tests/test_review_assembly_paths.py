"""`skyrl-hp review` reads only inside the cloud assemblies it is given.

In CI the head's assembly is a pull request's output (docs/review-gate.md, "In CI"): its manifest.json can name any path. Each
case puts a valid template where a path leads outside the assembly, so that the confinement is the only reason
the review refuses it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skyrl_hyperpod.cli import cli

STACK = "skyrl-hp-storage"
TEMPLATE = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic", "Properties": {}}}}


def write_manifest(directory: Path, artifacts: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return directory


def stack(template_file: str) -> dict:
    return {STACK: {"type": "aws:cloudformation:stack", "properties": {"templateFile": template_file}}}


def review(base: Path, head: Path):
    return CliRunner().invoke(cli, ["review", str(base), str(head)])


@pytest.fixture
def base(tmp_path: Path) -> Path:
    directory = write_manifest(tmp_path / "base" / "cdk.out", stack("storage.template.json"))
    (directory / "storage.template.json").write_text(json.dumps(TEMPLATE))
    return directory


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    # A readable, valid template beside the assembly: were the path followed, the review would succeed.
    file = tmp_path / "elsewhere" / "storage.template.json"
    file.parent.mkdir()
    file.write_text(json.dumps(TEMPLATE))
    return file


def refused(result, field: str, value: str) -> None:
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"review error: {field} {value!r} of artifact ")
    assert line.endswith(": only paths inside it are read") and "is outside the cloud assembly" in line
    assert "Traceback" not in result.output


def test_a_template_inside_the_assembly_is_read(tmp_path, base):
    head = write_manifest(tmp_path / "head" / "cdk.out", stack("nested/dir/../storage.template.json"))
    (head / "nested" / "dir").mkdir(parents=True)
    (head / "nested" / "storage.template.json").write_text(json.dumps(TEMPLATE))
    result = review(base, head)
    assert result.exit_code == 0, result.output
    assert "No changes" in result.stdout


def test_a_relative_path_out_of_the_assembly_is_refused(tmp_path, base, outside):
    head = write_manifest(tmp_path / "head" / "cdk.out", stack("../../elsewhere/storage.template.json"))
    assert (head / "../../elsewhere/storage.template.json").resolve() == outside.resolve()
    refused(review(base, head), "templateFile", "../../elsewhere/storage.template.json")


def test_an_absolute_path_is_refused(tmp_path, base, outside):
    head = write_manifest(tmp_path / "head" / "cdk.out", stack(str(outside)))
    refused(review(base, head), "templateFile", str(outside))


def test_a_link_out_of_the_assembly_is_refused(tmp_path, base, outside):
    head = write_manifest(tmp_path / "head" / "cdk.out", stack("storage.template.json"))
    (head / "storage.template.json").symlink_to(outside)
    refused(review(base, head), "templateFile", "storage.template.json")


def test_a_nested_assembly_is_confined_to_the_outer_one(tmp_path, base, outside):
    # A CDK stage: the outer manifest names a directory holding the inner assembly.
    stage = {"type": "cdk:cloud-assembly", "properties": {"directoryName": "assembly-Stage"}}
    head = write_manifest(tmp_path / "head" / "cdk.out", {"Stage": stage})
    inner = write_manifest(head / "assembly-Stage", stack("../storage.template.json"))
    (head / "storage.template.json").write_text(json.dumps(TEMPLATE))
    # Inside the outer assembly, one level up from the inner one: allowed.
    result = review(base, head)
    assert result.exit_code == 0, result.output
    write_manifest(inner, stack("../../../elsewhere/storage.template.json"))
    refused(review(base, head), "templateFile", "../../../elsewhere/storage.template.json")
    stage["properties"]["directoryName"] = "../../elsewhere"
    write_manifest(head, {"Stage": stage})
    write_manifest(outside.parent, stack("storage.template.json"))
    refused(review(base, head), "directoryName", "../../elsewhere")
