"""The stacks and dependencies the CLI knows without synthesizing (`preflight.STACK_DEPENDENCIES`) are those the
CDK app declares: its cloud assembly's manifest (cdk.out/manifest.json), which `cdk deploy` and `cdk destroy` order
stacks by and `skyrl-hp teardown --execute` deletes them by, dependants first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import VARIANT_OPTIONAL
from test_ray_endpoint import WITH_KMS  # type: ignore[import-not-found]  # a sibling: mypy_path is tests/ alone

from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.ops.preflight import STACK_DEPENDENCIES, project_stack_components, synthesized_stack_names
from skyrl_hyperpod.values.stack_ownership import OWNERSHIP_OUTPUT_KEY, marker_ownership, ownership_marker

# Between them, every optional stack: observability (on by default), Studio, the Ray endpoint operator.
VARIANTS = {
    "default": {},
    "studio": VARIANT_OPTIONAL,
    "ray-endpoint": WITH_KMS,
}


def manifest_dependencies(assembly) -> dict[str, set[str]]:
    """Stack name -> the stacks it depends on, as the manifest lists them (asset artifacts left out)."""
    artifacts = json.loads((Path(assembly.directory) / "manifest.json").read_text())["artifacts"]
    stacks = {
        artifact_id: artifact["properties"].get("stackName", artifact_id)
        for artifact_id, artifact in artifacts.items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    return {
        name: {stacks[d] for d in artifacts[artifact_id].get("dependencies", []) if d in stacks}
        for artifact_id, name in stacks.items()
    }


@pytest.fixture(scope="module")
def synthesized(assembly_for):
    return {variant: (validate_config(overrides), assembly_for(overrides)) for variant, overrides in VARIANTS.items()}


def test_the_cli_knows_every_stack_each_configuration_synthesizes(synthesized):
    for variant, (config, assembly) in synthesized.items():
        assert sorted(synthesized_stack_names(config)) == sorted(s.stack_name for s in assembly.stacks), variant


def test_the_cli_orders_stacks_by_the_dependencies_in_the_cloud_assembly_manifest(synthesized):
    declared: dict[str, set[str]] = {}
    for config, assembly in synthesized.values():
        component = project_stack_components(config)
        for name, needs in manifest_dependencies(assembly).items():
            declared.setdefault(component[name], set()).update(component[need] for need in needs)
    assert declared == {name: set(needs) for name, needs in STACK_DEPENDENCIES.items()}


def test_storage_goes_after_every_stack_that_mounts_or_reads_it(synthesized):
    # What the order protects: the final FSx backup runs once nothing that mounts the file system is left.
    config, assembly = synthesized["default"]
    needs = manifest_dependencies(assembly)
    storage = config.names.stack("storage")
    assert {name for name, deps in needs.items() if storage in deps} == {
        config.names.stack("eks"),
        config.names.stack("hyperpod"),
    }


def test_every_stack_carries_the_ownership_marker_of_its_deployment_and_component(synthesized):
    # What skyrl-hp teardown and preflight recognise a stack by: its name alone is another application's too.
    for variant, (config, assembly) in synthesized.items():
        component = project_stack_components(config)
        for stack in assembly.stacks:
            output = stack.template["Outputs"][OWNERSHIP_OUTPUT_KEY]
            assert output["Value"] == ownership_marker(config, component[stack.stack_name]), (variant, stack.stack_name)
            assert json.loads(output["Value"]) == {
                "managed-by": "skyrl-hp",
                "project": config.name_prefix,
                "component": component[stack.stack_name],
            }
            # As CloudFormation's describe_stacks returns it once deployed.
            described = {"Outputs": [{"OutputKey": OWNERSHIP_OUTPUT_KEY, "OutputValue": output["Value"]}]}
            ownership = marker_ownership(described, config, component[stack.stack_name])
            assert ownership is not None and ownership.ours


def test_the_stacks_themselves_carry_no_tags_so_the_marker_is_an_output(synthesized):
    # @aws-cdk/core:explicitStackTags: Tags.of(stack) tags the resources; the manifest gives the stacks none.
    _, assembly = synthesized["default"]
    artifacts = json.loads((Path(assembly.directory) / "manifest.json").read_text())["artifacts"]
    stacks = [a for a in artifacts.values() if a["type"] == "aws:cloudformation:stack"]
    assert stacks and all(not (a["properties"].get("tags") or {}) for a in stacks)
