"""The FSx final-backup handler: what it asks FSx for on each CloudFormation request, checked by botocore's
Stubber against the FSx service model, and what it answers the provider framework."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import add_modeled_error

from stacks.components.storage import FINAL_BACKUP_HANDLER_DIR

pytestmark = pytest.mark.usefixtures("fake_aws_env")
FILE_SYSTEM = "fs-0123456789abcdef0"
OLD_FILE_SYSTEM = "fs-0fedcba9876543210"
BACKUP = "backup-0123456789abcdef0"
REQUEST_ID = "11111111-2222-3333-4444-555555555555"
FS_TAGS = [{"Key": "project", "Value": "skyrl-hp"}, {"Key": "aws:cloudformation:stack-name", "Value": "s"}]


@pytest.fixture(scope="module")
def handler():
    spec = importlib.util.spec_from_file_location("fsx_final_backup_handler", FINAL_BACKUP_HANDLER_DIR / "index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fsx(stub_aws):
    client, stubber = stub_aws("fsx")
    yield client, stubber
    stubber.assert_no_pending_responses()


def event(request_type: str, physical_id: str | None = None) -> dict:
    body = {"RequestType": request_type, "RequestId": REQUEST_ID, "ResourceProperties": {"FileSystemId": FILE_SYSTEM}}
    return body | ({"PhysicalResourceId": physical_id} if physical_id else {})


def file_system_exists(stubber, file_system: str = FILE_SYSTEM) -> None:
    stubber.add_response("describe_file_systems", {"FileSystems": [{"FileSystemId": file_system, "Tags": FS_TAGS}]},
                         {"FileSystemIds": [file_system]})  # fmt: skip


def file_system_is_gone(client, stubber, file_system: str = FILE_SYSTEM) -> None:
    add_modeled_error(client, stubber, "describe_file_systems", "FileSystemNotFound", 400,
                      {"FileSystemIds": [file_system]})  # fmt: skip


def create_request(handler, file_system: str = FILE_SYSTEM) -> dict:
    # The project tag is copied (it finds the backup later); AWS-reserved tags cannot be set.
    return {"FileSystemId": file_system, "ClientRequestToken": REQUEST_ID, "Tags": [
        {"Key": "project", "Value": "skyrl-hp"}, {"Key": handler.FINAL_BACKUP_TAG, "Value": file_system},
        {"Key": handler.REQUEST_TAG, "Value": REQUEST_ID}]}  # fmt: skip


def backup_created(handler, stubber, file_system: str = FILE_SYSTEM) -> None:
    stubber.add_response("create_backup", {"Backup": {
        "BackupId": BACKUP, "Lifecycle": "CREATING", "Type": "USER_INITIATED", "CreationTime": 0,
        "FileSystem": {"FileSystemId": file_system}}}, create_request(handler, file_system))  # fmt: skip


def backups_listed(handler, stubber, lifecycles: list[str], request_id: str = REQUEST_ID, **details) -> None:
    """One describe_backups answer: a user backup of another request, then this request's backup if any."""
    common = {"Type": "USER_INITIATED", "CreationTime": 0, "FileSystem": {"FileSystemId": FILE_SYSTEM}}
    other = {"BackupId": "backup-0aaaaaaaaaaaaaaa0", "Lifecycle": "AVAILABLE", **common,
             "Tags": [{"Key": handler.REQUEST_TAG, "Value": "an-earlier-delete"}]}  # fmt: skip
    ours = [
        {
            "BackupId": BACKUP,
            "Lifecycle": lifecycle,
            **common,
            "Tags": [{"Key": handler.REQUEST_TAG, "Value": request_id}],
            **details,
        }
        for lifecycle in lifecycles
    ]
    stubber.add_response(
        "describe_backups",
        {"Backups": [other, *ours]},
        {
            "Filters": [
                {"Name": "file-system-id", "Values": [FILE_SYSTEM]},
                {"Name": "backup-type", "Values": ["USER_INITIATED"]},
            ]
        },
    )


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_call_nothing_and_name_the_file_system(handler, fsx, request_type):
    client, stubber = fsx
    stubber.activate()
    answer = handler.on_event(event(request_type, OLD_FILE_SYSTEM), fsx=client)
    # A replaced file system gets a new physical id: CloudFormation then deletes (backs up) the old one.
    assert answer == {"PhysicalResourceId": FILE_SYSTEM}
    assert handler.is_complete(event(request_type) | answer, fsx=client) == {"IsComplete": True}


def test_delete_starts_a_tagged_backup_of_the_physical_file_system(handler, fsx):
    client, stubber = fsx
    file_system_exists(stubber, OLD_FILE_SYSTEM)
    backup_created(handler, stubber, OLD_FILE_SYSTEM)
    stubber.activate()
    assert handler.on_event(event("Delete", OLD_FILE_SYSTEM), fsx=client) == {"PhysicalResourceId": OLD_FILE_SYSTEM}


def test_delete_completes_only_when_the_backup_is_available(handler, fsx):
    client, stubber = fsx
    for lifecycle in ("CREATING", "TRANSFERRING", "AVAILABLE"):
        backups_listed(handler, stubber, [lifecycle])
    stubber.activate()
    answers = [handler.is_complete(event("Delete", FILE_SYSTEM), fsx=client) for _ in range(3)]
    assert answers == [{"IsComplete": False}, {"IsComplete": False}, {"IsComplete": True, "Data": {"BackupId": BACKUP}}]


def test_a_running_automatic_backup_delays_the_final_backup_without_failing(handler, fsx):
    client, stubber = fsx
    file_system_exists(stubber)
    add_modeled_error(client, stubber, "create_backup", "BackupInProgress", 400, create_request(handler))
    backups_listed(handler, stubber, [])  # first poll: no final backup yet, so start it again
    file_system_exists(stubber)
    backup_created(handler, stubber)
    backups_listed(handler, stubber, ["AVAILABLE"])
    stubber.activate()
    handler.on_event(event("Delete", FILE_SYSTEM), fsx=client)
    assert handler.is_complete(event("Delete", FILE_SYSTEM), fsx=client) == {"IsComplete": False}
    assert handler.is_complete(event("Delete", FILE_SYSTEM), fsx=client)["IsComplete"] is True


def test_delete_of_a_file_system_that_is_gone_backs_up_nothing(handler, fsx):
    client, stubber = fsx
    file_system_is_gone(client, stubber)
    backups_listed(handler, stubber, [])
    file_system_is_gone(client, stubber)
    stubber.activate()
    assert handler.on_event(event("Delete", FILE_SYSTEM), fsx=client) == {"PhysicalResourceId": FILE_SYSTEM}
    assert handler.is_complete(event("Delete", FILE_SYSTEM), fsx=client) == {"IsComplete": True}


@pytest.mark.parametrize("lifecycle", ["FAILED", "DELETED"])
def test_a_failed_backup_fails_the_delete_so_the_file_system_stays(handler, fsx, lifecycle):
    client, stubber = fsx
    backups_listed(handler, stubber, [lifecycle], FailureDetails={"Message": "internal error"})
    stubber.activate()
    with pytest.raises(RuntimeError, match=rf"{BACKUP} of {FILE_SYSTEM} is {lifecycle} \(internal error\).*kept"):
        handler.is_complete(event("Delete", FILE_SYSTEM), fsx=client)


# --- CloudFormation waits at most an hour: the delete gives up inside it, and a delete run again joins ---------

WAIT = 3000
STARTED = 1_800_000_000.0


def delete_event(handler, request_id: str = REQUEST_ID) -> dict:
    body = event("Delete", FILE_SYSTEM) | {"RequestId": request_id}
    body["ResourceProperties"] = body["ResourceProperties"] | {handler.WAIT_PROPERTY: str(WAIT)}
    return body


def test_delete_sets_a_deadline_from_the_resources_wait(handler, fsx):
    client, stubber = fsx
    file_system_exists(stubber)
    backup_created(handler, stubber)
    stubber.activate()
    answer = handler.on_event(delete_event(handler), fsx=client, clock=lambda: STARTED)
    assert answer == {"PhysicalResourceId": FILE_SYSTEM, "Data": {handler.DEADLINE_KEY: str(int(STARTED) + WAIT)}}


def test_a_backup_still_running_at_the_deadline_fails_the_delete_and_says_what_to_do(handler, fsx):
    client, stubber = fsx
    backups_listed(handler, stubber, ["CREATING"])
    backups_listed(handler, stubber, ["CREATING"], ProgressPercent=40)
    stubber.activate()
    polled = delete_event(handler) | {"Data": {handler.DEADLINE_KEY: str(int(STARTED) + WAIT)}}
    assert handler.is_complete(polled, fsx=client, clock=lambda: STARTED + WAIT - 1) == {"IsComplete": False}
    with pytest.raises(RuntimeError) as error:
        handler.is_complete(polled, fsx=client, clock=lambda: STARTED + WAIT)
    message = str(error.value)
    assert f"{BACKUP} (CREATING, 40% copied) of {FILE_SYSTEM}" in message
    assert "the file system is kept" in message and "Delete the stack again (cdk destroy)" in message


def test_a_delete_run_again_waits_for_the_running_backup_then_takes_its_own(handler, fsx):
    client, stubber = fsx
    again = "66666666-7777-8888-9999-000000000000"
    # The first delete's backup is still running: FSx refuses a second one until it is done ...
    file_system_exists(stubber)
    add_modeled_error(client, stubber, "create_backup", "BackupInProgress", 400,
                      create_request(handler) | {"ClientRequestToken": again, "Tags": [
                          {"Key": "project", "Value": "skyrl-hp"}, {"Key": handler.FINAL_BACKUP_TAG, "Value": FILE_SYSTEM},
                          {"Key": handler.REQUEST_TAG, "Value": again}]})  # fmt: skip
    stubber.activate()
    first = handler.on_event(delete_event(handler, again), fsx=client, clock=lambda: STARTED)
    stubber.assert_no_pending_responses()
    # ... once it is AVAILABLE, this delete still completes only on a backup it started itself (incremental,
    # and nothing written since the first delete started is lost).
    stubber.add_response("describe_backups", {"Backups": [{
        "BackupId": BACKUP, "Lifecycle": "AVAILABLE", "Type": "USER_INITIATED", "CreationTime": 0,
        "FileSystem": {"FileSystemId": FILE_SYSTEM}, "Tags": [{"Key": handler.REQUEST_TAG, "Value": REQUEST_ID}]}]},
        {"Filters": [{"Name": "file-system-id", "Values": [FILE_SYSTEM]},
                     {"Name": "backup-type", "Values": ["USER_INITIATED"]}]})  # fmt: skip
    file_system_exists(stubber)
    stubber.add_response("create_backup", {"Backup": {
        "BackupId": "backup-0bbbbbbbbbbbbbbb0", "Lifecycle": "CREATING", "Type": "USER_INITIATED", "CreationTime": 0,
        "FileSystem": {"FileSystemId": FILE_SYSTEM}}}, create_request(handler) | {"ClientRequestToken": again,
        "Tags": [{"Key": "project", "Value": "skyrl-hp"}, {"Key": handler.FINAL_BACKUP_TAG, "Value": FILE_SYSTEM},
                 {"Key": handler.REQUEST_TAG, "Value": again}]})  # fmt: skip
    polled = delete_event(handler, again) | first
    assert handler.is_complete(polled, fsx=client, clock=lambda: STARTED + 60) == {"IsComplete": False}
