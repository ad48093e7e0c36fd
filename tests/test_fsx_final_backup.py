"""The FSx final-backup handler: what it asks FSx for on each CloudFormation request, checked by botocore's
Stubber against the FSx service model, and what it answers the provider framework."""

from __future__ import annotations

import importlib.util

import pytest

from stacks.components.storage import FINAL_BACKUP_HANDLER_DIR

from conftest import add_modeled_error

pytestmark = pytest.mark.usefixtures("fake_aws_env")
FILE_SYSTEM = "fs-0123456789abcdef0"
OLD_FILE_SYSTEM = "fs-0fedcba9876543210"
BACKUP = "backup-0123456789abcdef0"
REQUEST_ID = "11111111-2222-3333-4444-555555555555"


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


def event(request_type: str, physical_id: str | None = None, **extra) -> dict:
    body = {"RequestType": request_type, "RequestId": REQUEST_ID, "ResourceProperties": {"FileSystemId": FILE_SYSTEM}}
    if physical_id:
        body["PhysicalResourceId"] = physical_id
    return body | extra


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
    fs_tags = [{"Key": "project", "Value": "skyrl-hp"}, {"Key": "aws:cloudformation:stack-name", "Value": "s"}]
    stubber.add_response("describe_file_systems",
                         {"FileSystems": [{"FileSystemId": OLD_FILE_SYSTEM, "Tags": fs_tags}]},
                         {"FileSystemIds": [OLD_FILE_SYSTEM]})
    stubber.add_response(
        "create_backup",
        {"Backup": {"BackupId": BACKUP, "Lifecycle": "CREATING", "Type": "USER_INITIATED", "CreationTime": 0,
                    "FileSystem": {"FileSystemId": OLD_FILE_SYSTEM}}},
        # The project tag is copied (it finds the backup later); AWS-reserved tags cannot be set.
        {"FileSystemId": OLD_FILE_SYSTEM, "ClientRequestToken": REQUEST_ID,
         "Tags": [{"Key": "project", "Value": "skyrl-hp"},
                  {"Key": handler.FINAL_BACKUP_TAG, "Value": OLD_FILE_SYSTEM}]},
    )  # fmt: skip
    stubber.activate()
    answer = handler.on_event(event("Delete", OLD_FILE_SYSTEM), fsx=client)
    assert answer == {"PhysicalResourceId": OLD_FILE_SYSTEM, "Data": {"BackupId": BACKUP}}


def test_delete_of_a_file_system_that_is_gone_backs_up_nothing(handler, fsx):
    client, stubber = fsx
    add_modeled_error(client, stubber, "describe_file_systems", "FileSystemNotFound", 400,
                      {"FileSystemIds": [FILE_SYSTEM]})  # fmt: skip
    stubber.activate()
    answer = handler.on_event(event("Delete", FILE_SYSTEM), fsx=client)
    assert answer["Data"] == {"BackupId": ""}
    assert handler.is_complete(event("Delete", FILE_SYSTEM) | answer, fsx=client) == {"IsComplete": True}


def backup_state(stubber, lifecycle: str, **details) -> None:
    stubber.add_response(
        "describe_backups",
        {"Backups": [{"BackupId": BACKUP, "Lifecycle": lifecycle, "Type": "USER_INITIATED", "CreationTime": 0,
                      "FileSystem": {"FileSystemId": FILE_SYSTEM}, **details}]},
        {"BackupIds": [BACKUP]},
    )  # fmt: skip


def test_delete_completes_only_when_the_backup_is_available(handler, fsx):
    client, stubber = fsx
    for lifecycle in ("PENDING", "CREATING", "TRANSFERRING", "AVAILABLE"):
        backup_state(stubber, lifecycle)
    stubber.activate()
    polled = event("Delete", FILE_SYSTEM, Data={"BackupId": BACKUP})
    answers = [handler.is_complete(polled, fsx=client)["IsComplete"] for _ in range(4)]
    assert answers == [False, False, False, True]


@pytest.mark.parametrize("lifecycle", ["FAILED", "DELETED"])
def test_a_failed_backup_fails_the_delete_so_the_file_system_stays(handler, fsx, lifecycle):
    client, stubber = fsx
    backup_state(stubber, lifecycle, FailureDetails={"Message": "internal error"})
    stubber.activate()
    with pytest.raises(RuntimeError, match=rf"{BACKUP} of {FILE_SYSTEM} is {lifecycle} \(internal error\).*kept"):
        handler.is_complete(event("Delete", FILE_SYSTEM, Data={"BackupId": BACKUP}), fsx=client)
