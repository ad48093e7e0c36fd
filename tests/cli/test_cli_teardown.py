"""`skyrl-hp teardown --plan`: an ordered plan that runs nothing, and docs/teardown.md lists what it leaves behind;
`--execute`: the plan carried out (CloudFormation through botocore's Stubber, the cluster through a fake API server)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO_ROOT, TEST_REGION

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients, CliState
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.ops.preflight import STACK_DEPENDENCIES, project_stack_components
from skyrl_hyperpod.ops.teardown import leftovers, plan, replaced_file_systems_query
from skyrl_hyperpod.ops.teardown_run import deletion_rounds
from skyrl_hyperpod.values.stack_ownership import OWNERSHIP_OUTPUT_KEY, ownership_marker


def run(*args):
    return CliRunner().invoke(cli, ["teardown", *args])


def test_plan_orders_workloads_then_stacks_and_names_the_projects_resources(default_config):
    result = run("--plan")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("Teardown plan (nothing has been run")
    titles = [step.title for step in plan(default_config)]
    positions = [out.index(f"{n}. {title}") for n, title in enumerate(titles, start=1)]
    assert positions == sorted(positions)
    # The FSx id is recorded before the stacks (and their outputs) go; workloads stop before the final backup.
    assert out.index("FSX_ID=") < out.index("kubectl delete") < out.index("cdk destroy --all")
    assert f"--stack-name {default_config.names.stack('storage')}" in out
    assert "Studio" not in "".join(titles)  # Studio is off by default


def test_plan_with_studio_takes_the_home_efs_out_of_the_vpc_before_the_network_goes(tmp_path):
    file = tmp_path / "studio.yaml"
    file.write_text(yaml.safe_dump({"studio": {"enabled": True}, "name_prefix": "team-a"}))
    result = run("--plan", "--config", str(file))
    assert result.exit_code == 0, result.output
    out = result.stdout
    order = ["delete-user-profile", "cdk destroy team-a-studio", "delete-mount-target", "delete-security-group",
             "cdk destroy --all"]  # fmt: skip
    assert [out.index(marker) for marker in order] == sorted(out.index(marker) for marker in order)
    assert "Studio home EFS file system" in out


def test_without_plan_nothing_happens_and_the_flag_is_named():
    result = run()
    assert result.exit_code == 2
    assert "--plan" in result.output


def test_teardown_page_lists_every_leftover_and_the_plan_command():
    section = (REPO_ROOT / "docs" / "teardown.md").read_text()
    assert "skyrl-hp teardown --plan" in section
    everything = validate_config({"studio": {"enabled": True}, "observability": {"enabled": True}})
    for item in leftovers(everything):
        # The page names each leftover by its first words, generically (no prefix).
        words = re.sub(r"skyrl-hp", "<name_prefix>", item.what).split(" (")[0]
        assert words.split(":")[0] in section, words


# --- --execute -------------------------------------------------------------------------------------------------

STACK_TIME = "2026-11-20T10:00:00Z"
EXPORT = "skyrl-hp-network:ExportsOutputRefVpc"


DEFAULT = validate_config({})


def marker(name: str, config=DEFAULT) -> list[dict]:
    """The ownership output the CDK app gives stack `name` of `config`'s deployment."""
    component = name.removeprefix(f"{config.name_prefix}-")
    return [{"OutputKey": OWNERSHIP_OUTPUT_KEY, "OutputValue": ownership_marker(config, component)}]


def stack(name: str, outputs: list[dict] | None = None, status: str = "CREATE_COMPLETE", *, owned: bool = True) -> dict:
    """A describe_stacks entry; one of the default deployment's stacks carries its ownership marker unless `owned`
    is False."""
    ours = owned and name in project_stack_components(DEFAULT)
    listed = [*(outputs or []), *(marker(name) if ours else [])]
    return {"StackName": name, "StackStatus": status, "CreationTime": STACK_TIME, "Outputs": listed}


# Another deployment's stacks, whose name_prefix starts with this one's: `skyrl-hp-*` matches them, this
# configuration's stack names never do.
NESTED_DEPLOYMENT = ["skyrl-hp-dev-hyperpod", "skyrl-hp-dev-image-build", "skyrl-hp-dev-observability"]
PROJECT_STACKS = [
    stack("skyrl-hp-network", [{"OutputKey": "ExportsOutputRefVpc", "OutputValue": "vpc-1", "ExportName": EXPORT}]),
    stack("skyrl-hp-storage", [{"OutputKey": "FsxFileSystemId", "OutputValue": "fs-0123456789abcdef0"}]),
    stack("skyrl-hp-eks"),
    stack("other-team-network"),  # another configuration's stack: never touched
    *(stack(name) for name in NESTED_DEPLOYMENT),
]


def gone(stubber, name: str) -> None:
    stubber.add_client_error(
        "describe_stacks",
        "ValidationError",
        f"Stack with id {name} does not exist",
        expected_params={"StackName": name},
    )


FSX_ID = "fs-0123456789abcdef0"
BACKUP_ID = "backup-0123456789abcdef0"


def lustre(file_system_id: str, project: str = "skyrl-hp") -> dict:
    return {"FileSystemId": file_system_id, "FileSystemType": "LUSTRE", "Tags": [{"Key": "project", "Value": project}]}


def backup(lifecycle: str) -> dict:
    return {"BackupId": BACKUP_ID, "Lifecycle": lifecycle, "Type": "USER_INITIATED",
            "CreationTime": STACK_TIME, "FileSystem": {"FileSystemId": FSX_ID}}  # fmt: skip


def test_execute_deletes_workloads_then_stacks_dependants_first(stub_aws, kube, fake_aws_env):
    namespace = "/api/v1/namespaces/skyrl"
    kube.put(namespace, {"metadata": {"name": "skyrl"}})
    kube.put("/apis/ray.io/v1/namespaces/skyrl/rayclusters/skyrl-visgym", {"metadata": {"name": "skyrl-visgym"}})
    kube.put("/api/v1/persistentvolumes/skyrl-fsx-shared", {"metadata": {"name": "skyrl-fsx-shared"}})
    cloudformation, stubber = stub_aws("cloudformation")
    fsx, fsx_stubber = stub_aws("fsx")
    # Only the storage stack's own file system carries the project's tag: nothing was replaced.
    fsx_stubber.add_response(
        "describe_file_systems", {"FileSystems": [lustre(FSX_ID), lustre("fs-0aaaaaaaaaaaaaaaa", "other")]}, {}
    )
    # A full backup, AVAILABLE before any stack is deleted.
    fsx_stubber.add_response("create_backup", {"Backup": backup("CREATING")}, {"FileSystemId": FSX_ID})
    fsx_stubber.add_response("describe_backups", {"Backups": [backup("CREATING")]}, {"BackupIds": [BACKUP_ID]})
    fsx_stubber.add_response("describe_backups", {"Backups": [backup("AVAILABLE")]}, {"BackupIds": [BACKUP_ID]})
    stubber.add_response("describe_stacks", {"Stacks": PROJECT_STACKS}, {})  # the stacks, their FSx id
    stubber.add_response("list_imports", {"Imports": ["skyrl-hp-storage", "skyrl-hp-eks"]}, {"ExportName": EXPORT})
    # Round 1: eks reads the storage stack's artifacts bucket (a dependency of the app, not an export).
    stubber.add_response("delete_stack", {}, {"StackName": "skyrl-hp-eks"})
    stubber.add_response(
        "describe_stacks",
        {"Stacks": [stack("skyrl-hp-eks", status="DELETE_IN_PROGRESS")]},
        {"StackName": "skyrl-hp-eks"},
    )
    gone(stubber, "skyrl-hp-eks")
    stubber.add_response(
        "update_termination_protection",
        {"StackId": "skyrl-hp-storage"},
        {"EnableTerminationProtection": False, "StackName": "skyrl-hp-storage"},
    )
    stubber.add_response("delete_stack", {}, {"StackName": "skyrl-hp-storage"})  # round 2
    stubber.add_response(
        "describe_stacks",
        {"Stacks": [stack("skyrl-hp-storage", status="DELETE_COMPLETE")]},
        {"StackName": "skyrl-hp-storage"},
    )
    stubber.add_response("delete_stack", {}, {"StackName": "skyrl-hp-network"})  # round 3: its importers are gone
    gone(stubber, "skyrl-hp-network")
    stubber.activate()
    fsx_stubber.activate()
    state = CliState(
        aws=AwsClients(overrides={"cloudformation": cloudformation, "fsx": fsx}), kube=kube.api_client(), poll_seconds=0
    )
    result = CliRunner().invoke(cli, ["teardown", "--execute", "--region", TEST_REGION], obj=state, input="skyrl-hp\n")
    assert result.exit_code == 0, result.output
    stubber.assert_no_pending_responses()
    fsx_stubber.assert_no_pending_responses()
    assert result.stdout.index(f"FSx backup {BACKUP_ID} is AVAILABLE") < result.stdout.index("deleting stack")
    assert kube.deleted() == [
        "/apis/ray.io/v1/namespaces/skyrl/rayclusters/skyrl-visgym",
        namespace,
        "/api/v1/persistentvolumes/skyrl-fsx-shared",
    ]
    out = result.stdout
    assert "FSx file system fs-0123456789abcdef0" in out
    assert out.index("deleted stack skyrl-hp-eks") < out.index("deleting stack skyrl-hp-storage")
    assert out.index("deleted stack skyrl-hp-storage") < out.index("deleting stack skyrl-hp-network")
    assert "deleted 3 stack(s) in us-west-2" in out
    assert "What remains" in out
    assert not any(name in out for name in [*NESTED_DEPLOYMENT, "other-team-network"])


def add_gone_rounds(stubber, rounds: list[list[str]]) -> None:
    """Stub a deletion in `rounds`: each round's stacks deleted side by side, then waited for, in name order."""
    for names in rounds:
        for name in names:
            if name == "skyrl-hp-storage":
                stubber.add_response(
                    "update_termination_protection",
                    {"StackId": name},
                    {"EnableTerminationProtection": False, "StackName": name},
                )
            stubber.add_response("delete_stack", {}, {"StackName": name})
        for name in names:
            gone(stubber, name)


# The platform's stacks as the app synthesizes them: cross-stack references are weak (Fn::GetStackOutput), so none
# of these exports anything a ListImports could find.
DEFAULT_PLATFORM = ["network", "storage", "registry", "image-build", "eks", "hyperpod", "observability"]


def run_execute(stub_aws, kube, listed: list[dict], rounds: list[list[str]]):
    """`teardown --execute` against an account listing `listed` (no FSx file system, no exports), expecting the
    deletion in `rounds`; the CLI's result."""
    cloudformation, stubber = stub_aws("cloudformation")
    stubber.add_response("describe_stacks", {"Stacks": listed}, {})  # the stacks (no FSx id: no output here)
    add_gone_rounds(stubber, rounds)
    fsx, fsx_stubber = stub_aws("fsx")
    fsx_stubber.add_response("describe_file_systems", {"FileSystems": []}, {})
    stubber.activate()
    fsx_stubber.activate()
    state = CliState(
        aws=AwsClients(overrides={"cloudformation": cloudformation, "fsx": fsx}), kube=kube.api_client(), poll_seconds=0
    )
    result = CliRunner().invoke(cli, ["teardown", "--execute", "--region", TEST_REGION], obj=state, input="skyrl-hp\n")
    assert result.exit_code == 0, result.output
    stubber.assert_no_pending_responses()  # a delete_stack out of order, or of a stack not stubbed, matches no stub
    return result


def test_execute_never_deletes_a_deployment_whose_name_prefix_starts_with_this_one(stub_aws, kube, fake_aws_env):
    listed = [stack("skyrl-hp-network"), *(stack(name) for name in NESTED_DEPLOYMENT)]
    result = run_execute(stub_aws, kube, listed, [["skyrl-hp-network"]])
    assert "deleted 1 stack(s) in us-west-2" in result.stdout
    assert not any(name in result.stdout for name in NESTED_DEPLOYMENT)


def test_execute_deletes_storage_after_every_stack_that_reads_it(stub_aws, kube, fake_aws_env):
    # Dependants first, by the app's dependencies: hyperpod and eks read the storage stack's buckets (and their
    # nodes mount its file system), so its final backup and the FSx deletion wait until both are gone.
    listed = [stack(f"skyrl-hp-{component}") for component in DEFAULT_PLATFORM]
    rounds = [
        ["skyrl-hp-image-build", "skyrl-hp-observability"],
        ["skyrl-hp-hyperpod", "skyrl-hp-registry"],
        ["skyrl-hp-eks"],
        ["skyrl-hp-storage"],
        ["skyrl-hp-network"],
    ]
    result = run_execute(stub_aws, kube, listed, rounds)
    assert "deleted 7 stack(s) in us-west-2" in result.stdout


def test_deletion_rounds_follow_the_apps_dependencies(default_config):
    names = {default_config.names.stack(component) for component in STACK_DEPENDENCIES}
    rounds = deletion_rounds(names, default_config)
    position = {name: number for number, names in enumerate(rounds) for name in names}
    for component, needs in STACK_DEPENDENCIES.items():
        for dependency in needs:
            stack_name, needed = default_config.names.stack(component), default_config.names.stack(dependency)
            assert position[stack_name] < position[needed], f"{stack_name} must go before {needed}"
    # An export another remaining stack imports holds its stack back as well.
    registry, image_build = default_config.names.stack("registry"), default_config.names.stack("image-build")
    network = default_config.names.stack("network")
    held = deletion_rounds({registry, network}, default_config, importers={network: {registry}})
    assert held == [[registry], [network]]
    assert deletion_rounds({registry, image_build}, default_config) == [[image_build], [registry]]


def test_execute_refuses_while_the_studio_stack_remains(stub_aws, kube, fake_aws_env):
    # Studio off in the configuration but its stack still deployed: its users, spaces and home EFS come first.
    cloudformation, stubber = stub_aws("cloudformation")
    stubber.add_response("describe_stacks", {"Stacks": [*PROJECT_STACKS, stack("skyrl-hp-studio")]}, {})
    stubber.activate()
    state = CliState(
        aws=AwsClients(overrides={"cloudformation": cloudformation}), kube=kube.api_client(), poll_seconds=0
    )
    result = CliRunner().invoke(cli, ["teardown", "--execute", "--region", TEST_REGION], obj=state, input="skyrl-hp\n")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "teardown: stack skyrl-hp-studio is still deployed: remove Studio's apps, spaces and user profiles and that "
        "stack first (skyrl-hp teardown --plan with studio.enabled: true); nothing was deleted"
    )
    assert kube.requests == []


def test_execute_without_the_typed_prefix_deletes_nothing(stub_aws, kube, fake_aws_env):
    cloudformation, stubber = stub_aws("cloudformation")
    stubber.add_response("describe_stacks", {"Stacks": PROJECT_STACKS}, {})  # listed in the confirmation
    stubber.activate()
    state = CliState(
        aws=AwsClients(overrides={"cloudformation": cloudformation}), kube=kube.api_client(), poll_seconds=0
    )
    result = CliRunner().invoke(cli, ["teardown", "--execute", "--region", TEST_REGION], obj=state, input="yes\n")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == "teardown: you typed 'yes', not 'skyrl-hp': nothing was deleted"
    assert kube.requests == []


def test_execute_stops_at_a_load_balancer_service(stub_aws, kube, fake_aws_env):
    kube.put(
        "/api/v1/services/web", {"metadata": {"name": "web", "namespace": "team"}, "spec": {"type": "LoadBalancer"}}
    )
    cloudformation, stubber = stub_aws("cloudformation")
    stubber.add_response("describe_stacks", {"Stacks": PROJECT_STACKS}, {})
    fsx, fsx_stubber = stub_aws("fsx")
    fsx_stubber.add_response("describe_file_systems", {"FileSystems": [lustre(FSX_ID)]}, {})
    stubber.activate()
    fsx_stubber.activate()
    state = CliState(
        aws=AwsClients(overrides={"cloudformation": cloudformation, "fsx": fsx}), kube=kube.api_client(), poll_seconds=0
    )
    result = CliRunner().invoke(cli, ["teardown", "--execute", "--region", TEST_REGION], obj=state, input="skyrl-hp\n")
    assert result.exit_code == 1
    assert "Services of type LoadBalancer remain (team/web)" in result.stderr
    stubber.assert_no_pending_responses()  # no stack was asked to delete, no backup taken
    fsx_stubber.assert_no_pending_responses()


def test_execute_refuses_while_a_replaced_file_system_remains(stub_aws, kube, fake_aws_env):
    cloudformation, stubber = stub_aws("cloudformation")
    stubber.add_response("describe_stacks", {"Stacks": PROJECT_STACKS}, {})
    fsx, fsx_stubber = stub_aws("fsx")
    fsx_stubber.add_response(
        "describe_file_systems", {"FileSystems": [lustre(FSX_ID), lustre("fs-0bbbbbbbbbbbbbbbb")]}, {}
    )
    stubber.activate()
    fsx_stubber.activate()
    state = CliState(
        aws=AwsClients(overrides={"cloudformation": cloudformation, "fsx": fsx}), kube=kube.api_client(), poll_seconds=0
    )
    result = CliRunner().invoke(cli, ["teardown", "--execute", "--region", TEST_REGION], obj=state, input="skyrl-hp\n")
    assert result.exit_code == 1
    assert "fs-0bbbbbbbbbbbbbbbb were replaced by an update and kept with their data" in result.stderr
    assert kube.requests == []  # nothing deleted, not even the workloads


def test_execute_stops_when_the_full_backup_fails(stub_aws, kube, fake_aws_env):
    cloudformation, stubber = stub_aws("cloudformation")
    stubber.add_response("describe_stacks", {"Stacks": PROJECT_STACKS}, {})
    fsx, fsx_stubber = stub_aws("fsx")
    fsx_stubber.add_response("describe_file_systems", {"FileSystems": [lustre(FSX_ID)]}, {})
    fsx_stubber.add_response("create_backup", {"Backup": backup("CREATING")}, {"FileSystemId": FSX_ID})
    failed = {**backup("FAILED"), "FailureDetails": {"Message": "file system busy"}}
    fsx_stubber.add_response("describe_backups", {"Backups": [failed]}, {"BackupIds": [BACKUP_ID]})
    stubber.activate()
    fsx_stubber.activate()
    state = CliState(
        aws=AwsClients(overrides={"cloudformation": cloudformation, "fsx": fsx}), kube=kube.api_client(), poll_seconds=0
    )
    result = CliRunner().invoke(cli, ["teardown", "--execute", "--region", TEST_REGION], obj=state, input="skyrl-hp\n")
    assert result.exit_code == 1
    assert f"FSx backup {BACKUP_ID} FAILED: file system busy; no stack was deleted" in result.stderr
    stubber.assert_no_pending_responses()  # no delete_stack was stubbed: none was called


def test_execute_with_studio_points_to_the_manual_steps(tmp_path, fake_aws_env):
    file = tmp_path / "studio.yaml"
    file.write_text("studio:\n  enabled: true\n")
    result = CliRunner().invoke(cli, ["--config", str(file), "teardown", "--execute"], input="skyrl-hp\n")
    assert result.exit_code == 2
    assert "remove Studio's apps, spaces and user profiles first" in result.stderr


def test_plan_backs_up_fsx_and_lifts_the_storage_stacks_protection_before_the_destroy(default_config):
    out = run("--plan").stdout
    storage = default_config.names.stack("storage")
    order = [
        "kubectl delete",
        "aws fsx create-backup --file-system-id $FSX_ID",
        "aws fsx describe-backups --backup-ids $BACKUP_ID",
        "aws fsx delete-file-system",
        f"update-termination-protection --no-enable-termination-protection --stack-name {storage}",
        "cdk destroy --all",
    ]
    positions = [out.index(marker) for marker in order]
    assert positions == sorted(positions)
    # CloudFormation's hour (ServiceTimeout 1-3600 s) bounds the final backup; nothing promises two.
    assert "2 hours" not in out and "an hour" in out


def test_replaced_file_systems_query_finds_only_the_projects_other_file_systems(default_config):
    import jmespath  # type: ignore[import-untyped]  # botocore's dependency; ships no type information

    current = "fs-0123456789abcdef0"
    listed = {"FileSystems": [
        {"FileSystemId": current, "Tags": [{"Key": "project", "Value": default_config.name_prefix}]},
        {"FileSystemId": "fs-0aaaaaaaaaaaaaaa0", "Tags": [{"Key": "project", "Value": default_config.name_prefix}]},
        {"FileSystemId": "fs-0bbbbbbbbbbbbbbb0", "Tags": [{"Key": "project", "Value": "another-project"}]},
        {"FileSystemId": "fs-0ccccccccccccccc0", "Tags": []},
    ]}  # fmt: skip
    query = replaced_file_systems_query(default_config.name_prefix, current=current)
    assert jmespath.search(query, listed) == ["fs-0aaaaaaaaaaaaaaa0"]
    # The plan prints the same query, reading the id recorded in its first step.
    assert replaced_file_systems_query(default_config.name_prefix) in run("--plan").stdout


def test_teardown_page_matches_the_plan():
    section = (REPO_ROOT / "docs" / "teardown.md").read_text()
    assert "2 hours" not in section
    for marker in ("aws fsx create-backup", "UpdateReplacePolicy: Retain", "update-termination-protection"):
        assert marker in section, marker


# --- only what is provably this deployment's --------------------------------------------------------------------------


def tagged_template(project: str) -> dict:
    return {
        "Resources": {
            "Thing": {"Type": "AWS::IAM::Role", "Properties": {"Tags": [{"Key": "project", "Value": project}]}}
        }
    }


def add_template(stubber, name: str, template: dict) -> None:
    stubber.add_response(
        "get_template", {"TemplateBody": json.dumps(template)}, {"StackName": name, "TemplateStage": "Original"}
    )


def execute(tmp_path, stub_aws, listed, templates, fsx_systems=None):
    """Stubs for `teardown --execute` of the default deployment against `listed`: the unmarked stacks' `templates` and
    FSx listing `fsx_systems` (None: FSx is never asked). (CloudFormation stubber, its client, the clients for
    AwsClients, the FSx stubber, the configuration file); the caller stubs the deletions and activates."""
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump({"name_prefix": DEFAULT.name_prefix}))
    cloudformation, stubber = stub_aws("cloudformation")
    stubber.add_response("describe_stacks", {"Stacks": listed}, {})
    for name, template in templates:
        add_template(stubber, name, template)
    overrides = {"cloudformation": cloudformation}
    fsx_stubber = None
    if fsx_systems is not None:
        fsx, fsx_stubber = stub_aws("fsx")
        fsx_stubber.add_response("describe_file_systems", {"FileSystems": fsx_systems}, {})
        fsx_stubber.activate()
        overrides["fsx"] = fsx
    return stubber, cloudformation, overrides, fsx_stubber, file


def run_teardown(state, file, typed):
    return CliRunner().invoke(
        cli, ["--config", str(file), "teardown", "--execute", "--region", TEST_REGION], obj=state, input=typed
    )


class FakeCloudFormation:
    """One account's CloudFormation in one region, answered in-process behind a real botocore client: each request is
    built and checked against botocore's service model, then answered from `stacks` instead of being sent. DeleteStack
    refuses a termination-protected stack, as CloudFormation does; `changes` records every call that changes
    something."""

    CHANGING = ("UpdateTerminationProtection", "DeleteStack", "CreateStack", "UpdateStack", "CreateChangeSet")

    def __init__(self, stacks: list[dict], templates: dict[str, dict]):
        self.stacks = {s["StackName"]: dict(s) for s in stacks}
        self.templates = templates
        self.changes: list[tuple[str, str]] = []
        self._params: dict = {}

    def client(self):
        from skyrl_hyperpod.cli.common import new_session

        client = new_session(None, None).client("cloudformation", region_name=TEST_REGION)
        client.meta.events.register("before-parameter-build.cloudformation", self._keep_params)
        client.meta.events.register("before-call.cloudformation", self._answer)
        return client

    def _keep_params(self, params, **_):
        self._params = dict(params)

    def _answer(self, model, **_):
        from botocore.awsrequest import AWSResponse

        name = self._params.get("StackName")
        if model.name in self.CHANGING:
            self.changes.append((model.name, name))
        try:
            parsed, status = getattr(self, f"_{model.name}")(name), 200
        except LookupError as error:
            parsed, status = {"Error": {"Code": "ValidationError", "Message": str(error.args[0])}}, 400
        return AWSResponse("https://cloudformation.invalid", status, {}, None), parsed

    def _live(self, name: str) -> dict:
        stack = self.stacks.get(name)
        if stack is None or stack["StackStatus"] == "DELETE_COMPLETE":
            raise LookupError(f"Stack with id {name} does not exist")
        return stack

    def _DescribeStacks(self, name):
        listed = (
            [self._live(name)] if name else [s for s in self.stacks.values() if s["StackStatus"] != "DELETE_COMPLETE"]
        )
        return {"Stacks": listed}

    def _GetTemplate(self, name):
        self._live(name)
        return {"TemplateBody": json.dumps(self.templates.get(name, {"Resources": {}}))}

    def _UpdateTerminationProtection(self, name):
        self._live(name)["EnableTerminationProtection"] = self._params["EnableTerminationProtection"]
        return {"StackId": name}

    def _DeleteStack(self, name):
        stack = self._live(name)
        if stack.get("EnableTerminationProtection"):
            raise LookupError(f"Stack [{name}] cannot be deleted while TerminationProtection is enabled")
        stack["StackStatus"] = "DELETE_COMPLETE"
        return {}


def test_another_applications_stacks_of_the_same_names_are_left_alone(stub_aws, tmp_path, kube, fake_aws_env):
    # With name_prefix prod, another application owns prod-network, prod-storage (termination-protected) and
    # prod-database, its resources tagged project: prod. Once `teardown --execute` lifted prod-storage's protection
    # and deleted it and prod-network.
    account = FakeCloudFormation(
        [stack("prod-network", owned=False), {**stack("prod-storage", owned=False), "EnableTerminationProtection": True},
         stack("prod-database", owned=False)],
        {name: tagged_template("prod") for name in ("prod-network", "prod-storage", "prod-database")},
    )  # fmt: skip
    fsx, fsx_stubber = stub_aws("fsx")
    fsx_stubber.add_response("describe_file_systems", {"FileSystems": []}, {})
    fsx_stubber.activate()
    file = tmp_path / "config.yaml"
    file.write_text("name_prefix: prod\n")
    state = CliState(
        aws=AwsClients(overrides={"cloudformation": account.client(), "fsx": fsx}),
        kube=kube.api_client(),
        poll_seconds=0,
    )
    result = run_teardown(state, file, "prod\n")
    assert result.exit_code == 1, result.output
    assert account.changes == []  # no termination protection lifted, no stack deleted
    assert account.stacks["prod-storage"]["EnableTerminationProtection"] is True
    assert {s["StackStatus"] for s in account.stacks.values()} == {"CREATE_COMPLETE"}
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == (
        "teardown: no stack in us-west-2 is shown to be this deployment's; those above are left alone and nothing was "
        "deleted"
    )
    left = [line for line in lines if line.startswith("Left alone: stack ")]
    assert [line.split()[3] for line in left] == ["prod-network", "prod-storage"]
    assert all("has no SkyrlHpOwnership output" in line for line in left)
    assert "prod-database" not in result.output
    assert "Type the name prefix" not in result.output  # nothing of this deployment's to confirm
    assert kube.requests == []  # prod-eks is not shown to be ours either: its cluster is never asked


def test_the_fake_refuses_to_delete_a_protected_stack_as_cloudformation_does():
    from botocore.exceptions import ClientError

    account = FakeCloudFormation([{**stack("x", owned=False), "EnableTerminationProtection": True}], {})
    client = account.client()
    with pytest.raises(ClientError, match="cannot be deleted while TerminationProtection is enabled"):
        client.delete_stack(StackName="x")
    client.update_termination_protection(EnableTerminationProtection=False, StackName="x")
    client.delete_stack(StackName="x")
    assert account.changes == [("DeleteStack", "x"), ("UpdateTerminationProtection", "x"), ("DeleteStack", "x")]
    with pytest.raises(ClientError, match="does not exist"):
        client.describe_stacks(StackName="x")


def test_only_this_deployments_stacks_are_listed_and_deleted(tmp_path, stub_aws, kube, fake_aws_env):
    # This deployment's network (marked), another application's skyrl-hp-storage (termination-protected).
    listed = [
        stack("skyrl-hp-network"),
        {**stack("skyrl-hp-storage", owned=False), "EnableTerminationProtection": True},
    ]
    stubber, _, overrides, fsx_stubber, file = execute(
        tmp_path, stub_aws, listed, [("skyrl-hp-storage", tagged_template("someone-else"))], fsx_systems=[]
    )
    stubber.add_response("delete_stack", {}, {"StackName": "skyrl-hp-network"})
    gone(stubber, "skyrl-hp-network")
    stubber.activate()
    state = CliState(aws=AwsClients(overrides=overrides), kube=kube.api_client(), poll_seconds=0)
    result = run_teardown(state, file, "skyrl-hp\n")
    assert result.exit_code == 0, result.output
    stubber.assert_no_pending_responses()  # never update_termination_protection, never delete_stack of storage
    fsx_stubber.assert_no_pending_responses()
    err = result.stderr
    listing = err.index("In us-west-2, this deletes:")
    assert listing < err.index("  - stack skyrl-hp-network (round 1; this deployment's: its SkyrlHpOwnership output)")
    assert err.index("Left alone: stack skyrl-hp-storage has one of this configuration's names") < err.index(
        "Type the name prefix 'skyrl-hp' to delete what is listed above"
    )
    assert "the workloads" not in err and kube.requests == []  # the eks stack is not there: no cluster to ask
    assert "deleted 1 stack(s) in us-west-2" in result.stdout
    assert "skyrl-hp-storage" not in result.stdout


def test_a_deployment_from_before_the_marker_is_torn_down(tmp_path, stub_aws, kube, fake_aws_env):
    fingerprint = [{"OutputKey": "ConfigFingerprint", "OutputValue": "0123456789abcdef"}]
    listed = [stack("skyrl-hp-network", fingerprint, owned=False), stack("skyrl-hp-registry", owned=False)]
    templates = [("skyrl-hp-network", tagged_template("skyrl-hp")), ("skyrl-hp-registry", tagged_template("skyrl-hp"))]
    stubber, _, overrides, _, file = execute(tmp_path, stub_aws, listed, templates, fsx_systems=[])
    add_gone_rounds(stubber, [["skyrl-hp-network", "skyrl-hp-registry"]])  # neither depends on the other
    stubber.activate()
    state = CliState(aws=AwsClients(overrides=overrides), kube=kube.api_client(), poll_seconds=0)
    result = run_teardown(state, file, "skyrl-hp\n")
    assert result.exit_code == 0, result.output
    stubber.assert_no_pending_responses()
    assert "this deployment's: deployed before the SkyrlHpOwnership output" in result.stderr
    assert "deleted 2 stack(s) in us-west-2" in result.stdout


def test_termination_protection_is_lifted_only_by_delete_stacks_for_a_stack_shown_to_be_ours(default_config):
    from skyrl_hyperpod.ops.preflight import ProjectStacks
    from skyrl_hyperpod.ops.teardown_run import delete_stacks

    class Refusing:
        """A CloudFormation client that fails any call: nothing is ours, so nothing may be asked."""

        def __getattr__(self, name):
            raise AssertionError(f"{name} called")

    storage = default_config.names.stack("storage")
    nothing_ours = ProjectStacks(ours={}, evidence={}, unverified={storage: "no marker"})
    assert delete_stacks(Refusing(), default_config, nothing_ours, print, poll=0, timeout=1) == []


def test_the_documented_steps_are_numbered_as_the_plan_numbers_them():
    """docs/teardown.md's numbered steps are the default plan's, in its order and with its titles; the Studio
    steps sit after step 5 and shift the last two, as the text says."""
    from skyrl_hyperpod.config import validate_config
    from skyrl_hyperpod.ops.teardown import plan

    text = (REPO_ROOT / "docs" / "teardown.md").read_text()
    section = text.split("The steps as `--plan` numbers them", 1)[1].split("**Nothing retained", 1)[0]
    documented = re.findall(r"^(\d+)\. (.+)$", section, flags=re.MULTILINE)
    titles = [step.title.split(" (", 1)[0] for step in plan(validate_config({}))]
    assert [int(number) for number, _ in documented] == list(range(1, len(titles) + 1))
    for (_, line), title in zip(documented, titles, strict=True):
        assert line.startswith(title), (line, title)
    studio = [step.title for step in plan(validate_config({"studio": {"enabled": True}}))]
    assert studio[:5] == [step.title for step in plan(validate_config({}))][:5] and len(studio) == len(titles) + 3
    assert "three Studio steps come after step 5" in section and "the last two become 9 and 10" in section
    assert studio[-2].startswith("Turn off") and len(studio) == 10
