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
