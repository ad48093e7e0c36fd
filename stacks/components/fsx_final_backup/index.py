"""Custom-resource handler: a final backup of an FSx for Lustre file system before CloudFormation deletes it.

CloudFormation deletes an `AWS::FSx::FileSystem` with DeleteFileSystem's defaults, and for Lustre
that means no final backup (`SkipFinalBackup` defaults to true:
https://docs.aws.amazon.com/fsx/latest/APIReference/API_DeleteFileSystemLustreConfiguration.html),
while automatic backups are deleted together with the file system. This resource references the
file system, so CloudFormation deletes it first: `on_event` starts a user-initiated backup (kept
after the file system is gone) and `is_complete` waits until it is AVAILABLE. A backup that fails
fails the delete, and the file system stays: nothing is deleted without its backup.

The backup carries the delete request's id in a tag, so each poll finds it again without state, and
a backup that could not start yet (another backup of the file system was running) is started by a
later poll.

CloudFormation waits at most an hour for a custom resource. `on_event` sets a deadline inside that hour
(the resource's WaitSeconds property from now, passed to every poll in the event's Data); a backup still running
then fails the delete with a message that names it, and the file system stays. Deleting again joins
it: the new request's backup cannot start while that one runs (FSx answers BackupInProgress), so it
waits for it and then takes its own, which copies only what changed since (FSx backups are
incremental: https://docs.aws.amazon.com/fsx/latest/LustreGuide/using-backups-fsx.html). The backup
that lets the delete proceed is always one started by that delete.
Run by the CDK custom-resource provider framework (aws_cdk.custom_resources.Provider).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

FINAL_BACKUP_TAG = "final-backup-of"
REQUEST_TAG = "final-backup-request"
# FSx accepts at most 63 characters of idempotency token and 50 tags; a CloudFormation RequestId is a UUID.
_TOKEN_LENGTH = 63
_MAX_TAGS = 50
WAIT_PROPERTY = "WaitSeconds"
# Key of the deadline (epoch seconds, as text) in the Data that on_event hands every is_complete poll.
DEADLINE_KEY = "FinalBackupDeadline"
RUNNING_LIFECYCLES = ("CREATING", "TRANSFERRING", "PENDING", "COPYING")


def _fsx() -> Any:
    import boto3

    return boto3.client("fsx")


def _file_system(fsx: Any, file_system_id: str) -> dict | None:
    try:
        (file_system,) = fsx.describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    except fsx.exceptions.FileSystemNotFound:
        return None
    return file_system


def _start_backup(fsx: Any, file_system: dict, request_id: str) -> None:
    """Start the final backup; an automatic backup that is still running makes FSx refuse, for now."""
    file_system_id = file_system["FileSystemId"]
    # The file system's own tags (the project tag finds the backup later); `aws:` tags are reserved.
    tags = [tag for tag in file_system.get("Tags", []) if not tag["Key"].startswith("aws:")]
    markers = [{"Key": FINAL_BACKUP_TAG, "Value": file_system_id}, {"Key": REQUEST_TAG, "Value": request_id}]
    try:
        backup = fsx.create_backup(
            FileSystemId=file_system_id,
            ClientRequestToken=request_id[:_TOKEN_LENGTH],
            Tags=[*tags[: _MAX_TAGS - len(markers)], *markers],
        )["Backup"]
    except fsx.exceptions.BackupInProgress:
        print(f"a backup of {file_system_id} is in progress; the final backup starts after it")
        return
    print(f"final backup {backup['BackupId']} of {file_system_id} started")


def _final_backup(fsx: Any, file_system_id: str, request_id: str) -> dict | None:
    pages = fsx.get_paginator("describe_backups").paginate(
        Filters=[
            {"Name": "file-system-id", "Values": [file_system_id]},
            {"Name": "backup-type", "Values": ["USER_INITIATED"]},
        ]
    )
    for page in pages:
        for backup in page["Backups"]:
            if {"Key": REQUEST_TAG, "Value": request_id} in backup.get("Tags", []):
                return backup
    return None


def _running_backup(fsx: Any, file_system_id: str) -> dict | None:
    """A backup of the file system still being made (an automatic one, or an earlier delete's final one)."""
    pages = fsx.get_paginator("describe_backups").paginate(
        Filters=[{"Name": "file-system-id", "Values": [file_system_id]}]
    )
    for page in pages:
        for backup in page["Backups"]:
            if backup["Lifecycle"] in RUNNING_LIFECYCLES:
                return backup
    return None


def _describe(backup: dict) -> str:
    progress = backup.get("ProgressPercent")
    done = f", {progress}% copied" if progress is not None else ""
    return f"{backup['BackupId']} ({backup['Lifecycle']}{done})"


def _out_of_time(fsx: Any, target: str, backup: dict | None) -> RuntimeError:
    again = (
        "the file system is kept. Delete the stack again (cdk destroy): the delete waits for that backup, then "
        "takes the final one, which copies only what changed since"
    )
    if backup is not None:
        return RuntimeError(
            f"final backup {_describe(backup)} of {target} is not done within CloudFormation's hour; {again}"
        )
    running = _running_backup(fsx, target)
    blocking = f"backup {_describe(running)}" if running is not None else "another backup"
    return RuntimeError(
        f"the final backup of {target} could not start within CloudFormation's hour: FSx is still making "
        f"{blocking}; {again}"
    )


def on_event(
    event: dict[str, Any], context: Any = None, fsx: Any = None, clock: Callable[[], float] = time.time
) -> dict[str, Any]:
    file_system_id = event["ResourceProperties"]["FileSystemId"]
    if event["RequestType"] in ("Create", "Update"):
        # The physical id is the file system: a replacement makes CloudFormation delete (and so back
        # up) the old file system's resource during cleanup, before it deletes that file system.
        return {"PhysicalResourceId": file_system_id}
    target = event["PhysicalResourceId"]
    fsx = fsx or _fsx()
    file_system = _file_system(fsx, target)
    if file_system is not None:
        _start_backup(fsx, file_system, event["RequestId"])
    answer: dict[str, Any] = {"PhysicalResourceId": target}
    wait = event["ResourceProperties"].get(WAIT_PROPERTY)
    if wait:
        answer["Data"] = {DEADLINE_KEY: str(int(clock()) + int(wait))}
    return answer


def is_complete(
    event: dict[str, Any], context: Any = None, fsx: Any = None, clock: Callable[[], float] = time.time
) -> dict[str, Any]:
    if event["RequestType"] != "Delete":
        return {"IsComplete": True}
    target, request_id = event["PhysicalResourceId"], event["RequestId"]
    deadline = (event.get("Data") or {}).get(DEADLINE_KEY)
    out_of_time = deadline is not None and clock() >= int(deadline)
    fsx = fsx or _fsx()
    backup = _final_backup(fsx, target, request_id)
    if backup is None:
        file_system = _file_system(fsx, target)
        if file_system is None:
            return {"IsComplete": True}  # already gone before the delete: nothing to back up
        if out_of_time:
            raise _out_of_time(fsx, target, None)
        _start_backup(fsx, file_system, request_id)
        return {"IsComplete": False}
    backup_id, lifecycle = backup["BackupId"], backup["Lifecycle"]
    if lifecycle == "AVAILABLE":
        print(f"final backup {backup_id} of {target} is available")
        return {"IsComplete": True, "Data": {"BackupId": backup_id}}
    if lifecycle in ("FAILED", "DELETED"):
        reason = backup.get("FailureDetails", {}).get("Message", "no details")
        raise RuntimeError(
            f"final backup {backup_id} of {target} is {lifecycle} ({reason}); the file system is kept: "
            "back it up by hand (aws fsx create-backup) and delete the stack again"
        )
    if out_of_time:
        raise _out_of_time(fsx, target, backup)
    return {"IsComplete": False}
