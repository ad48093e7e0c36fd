"""Custom-resource handler: a final backup of an FSx for Lustre file system before CloudFormation deletes it.

CloudFormation deletes an `AWS::FSx::FileSystem` with DeleteFileSystem's defaults, and for Lustre
that means no final backup (`SkipFinalBackup` defaults to true:
https://docs.aws.amazon.com/fsx/latest/APIReference/API_DeleteFileSystemLustreConfiguration.html),
while automatic backups are deleted together with the file system. This resource references the
file system, so CloudFormation deletes it first: `on_event` starts a user-initiated backup (kept
after the file system is gone) and `is_complete` waits until it is AVAILABLE. A backup that fails
fails the delete, and the file system stays: nothing is deleted without its backup.

Run by the CDK custom-resource provider framework (aws_cdk.custom_resources.Provider), which
passes `on_event`'s result on to `is_complete`.
"""

from __future__ import annotations

from typing import Any

# FSx accepts at most 63 characters of idempotency token; a CloudFormation RequestId is a UUID.
_TOKEN_LENGTH = 63
FINAL_BACKUP_TAG = "final-backup-of"
_MAX_TAGS = 50


def _fsx() -> Any:
    import boto3

    return boto3.client("fsx")


def on_event(event: dict[str, Any], context: Any = None, fsx: Any = None) -> dict[str, Any]:
    file_system_id = event["ResourceProperties"]["FileSystemId"]
    if event["RequestType"] in ("Create", "Update"):
        # The physical id is the file system: a replacement makes CloudFormation delete (and so back
        # up) the old file system's resource during cleanup, before it deletes that file system.
        return {"PhysicalResourceId": file_system_id}
    target = event["PhysicalResourceId"]
    fsx = fsx or _fsx()
    try:
        (file_system,) = fsx.describe_file_systems(FileSystemIds=[target])["FileSystems"]
    except fsx.exceptions.FileSystemNotFound:
        return {"PhysicalResourceId": target, "Data": {"BackupId": ""}}
    # The file system's own tags (the project tag finds the backup later) plus a marker; `aws:` tags are
    # reserved for AWS and cannot be set.
    tags = [tag for tag in file_system.get("Tags", []) if not tag["Key"].startswith("aws:")]
    backup = fsx.create_backup(
        FileSystemId=target,
        ClientRequestToken=event["RequestId"][:_TOKEN_LENGTH],
        Tags=[*tags, {"Key": FINAL_BACKUP_TAG, "Value": target}][:_MAX_TAGS],
    )["Backup"]
    print(f"final backup {backup['BackupId']} of {target} started")
    return {"PhysicalResourceId": target, "Data": {"BackupId": backup["BackupId"]}}


def is_complete(event: dict[str, Any], context: Any = None, fsx: Any = None) -> dict[str, Any]:
    if event["RequestType"] != "Delete":
        return {"IsComplete": True}
    backup_id = event.get("Data", {}).get("BackupId")
    if not backup_id:
        return {"IsComplete": True}  # the file system was already gone
    fsx = fsx or _fsx()
    (backup,) = fsx.describe_backups(BackupIds=[backup_id])["Backups"]
    lifecycle = backup["Lifecycle"]
    if lifecycle == "AVAILABLE":
        print(f"final backup {backup_id} of {event['PhysicalResourceId']} is available")
        return {"IsComplete": True}
    if lifecycle in ("FAILED", "DELETED"):
        reason = backup.get("FailureDetails", {}).get("Message", "no details")
        raise RuntimeError(
            f"final backup {backup_id} of {event['PhysicalResourceId']} is {lifecycle} ({reason}); the file system "
            "is kept: back it up by hand (aws fsx create-backup) and delete the stack again"
        )
    return {"IsComplete": False}
