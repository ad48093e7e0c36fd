"""`skyrl-hp teardown --execute`: what `teardown --plan` prints, carried out for this configuration's stacks in
its region, after the user typed the name prefix.

1. Record the FSx file system id (the storage stack's output names the final backup later).
2. Refuse while a file system an update replaced is still there (the storage stack retains it, with its data;
   its network interfaces would make the network stack's deletion fail): the plan says how to remove it.
3. Delete the workloads through the Kubernetes API: the RayService, the RayJobs and RayClusters first
   (KubeRay's finalizers run while the operator is still there), then the workloads namespace and the
   project's PersistentVolume (reclaim policy Retain: FSx data is never deleted by Kubernetes); wait until
   the namespace is gone; refuse to go on while any Service of type LoadBalancer remains (its load balancer
   would keep network interfaces in the VPC).
4. Take a full FSx backup and wait until it is AVAILABLE: the storage stack's final backup then only copies
   what changed since, and fits in the hour CloudFormation gives it.
5. Delete the stacks through CloudFormation in rounds, dependants first: a stack is deleted once no remaining
   stack depends on it, by the dependencies the CDK app declares (`preflight.STACK_DEPENDENCIES`, the graph in
   the cloud assembly's manifest that `cdk destroy --all` orders by) or by importing one of its exports; each
   round's stacks are deleted side by side and waited for. For the default configuration: image-build and
   observability, then hyperpod and registry, then eks, then storage, then network. The storage stack's
   termination protection is turned off right before its deletion, and it takes the FSx final backup on its way
   out, after everything that mounts the file system is gone.

"This configuration's stacks" are the live stacks named `<name_prefix>-<component>` for every component the app
can synthesize, optional ones included (`preflight.project_stack_components`), never a `<name_prefix>-*` pattern:
another deployment's name_prefix may start with this one.

Studio's users, spaces and home EFS are not removed here: with `studio.enabled`, or while its stack is still
deployed, the plan's manual steps come first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.names import PROJECT_TAG_KEY
from skyrl_hyperpod.plumbing.errors import ProblemsError
from skyrl_hyperpod.values.stack_outputs import OutputKey

from .cluster_workloads import raycluster_path, rayjob_path, rayservice_path
from .kube import Cluster
from .preflight import STACK_DEPENDENCIES, ProjectStacks, project_stack_components

Echo = Callable[[str], None]


class TeardownError(ProblemsError):
    """A step that failed: nothing after it ran."""


def fsx_file_system_id(stacks: dict[str, dict[str, Any]], config: ProjectConfig) -> str | None:
    """The storage stack's FSx file system id, from this deployment's live stacks (`ProjectStacks.ours`)."""
    storage = stacks.get(config.names.stack("storage")) or {}
    for output in storage.get("Outputs") or []:
        if output.get("OutputKey") == OutputKey.FSX_FILE_SYSTEM_ID.value:
            return str(output["OutputValue"])
    return None


def replaced_file_systems(fsx: Any, config: ProjectConfig, current: str | None) -> list[str]:
    """The project's FSx file systems other than the storage stack's own: those an update replaced."""
    found = []
    for page in fsx.get_paginator("describe_file_systems").paginate():
        for file_system in page.get("FileSystems") or []:
            tags = {tag["Key"]: tag["Value"] for tag in file_system.get("Tags") or []}
            if tags.get(PROJECT_TAG_KEY) == config.name_prefix and file_system["FileSystemId"] != current:
                found.append(str(file_system["FileSystemId"]))
    return sorted(found)


def full_backup(fsx: Any, file_system_id: str, echo: Echo, *, poll: float, timeout: float) -> str:
    """Back `file_system_id` up and wait until the backup is AVAILABLE; its id."""
    backup_id = str(fsx.create_backup(FileSystemId=file_system_id)["Backup"]["BackupId"])
    echo(f"FSx backup {backup_id} of {file_system_id} started")
    deadline = time.monotonic() + timeout
    while True:
        [backup] = fsx.describe_backups(BackupIds=[backup_id])["Backups"]
        lifecycle = backup.get("Lifecycle")
        if lifecycle == "AVAILABLE":
            echo(f"FSx backup {backup_id} is AVAILABLE")
            return backup_id
        if lifecycle in ("FAILED", "DELETED"):
            reason = (backup.get("FailureDetails") or {}).get("Message") or "no reason given"
            raise TeardownError([f"teardown: FSx backup {backup_id} {lifecycle}: {reason}; no stack was deleted"])
        if time.monotonic() >= deadline:
            raise TeardownError(
                [f"teardown: FSx backup {backup_id} is still {lifecycle} after {timeout:.0f} s; no stack was deleted "
                 "(run --execute again once it is AVAILABLE)"]
            )  # fmt: skip
        time.sleep(poll)


def delete_workloads(cluster: Cluster, config: ProjectConfig, echo: Echo, *, poll: float, timeout: float) -> None:
    namespace = config.workloads.namespace
    ray_objects = [rayservice_path(namespace, config.serving.rayservice_name)]
    ray_objects += [rayjob_path(namespace, run.job_name) for run in config.derived.runs]
    ray_objects.append(raycluster_path(namespace, config.training.cluster.raycluster_name))
    for path in ray_objects:
        if cluster.get(path) is not None:
            cluster.delete_path(path)
            echo(f"deleted {path.rsplit('/', 2)[-2][:-1]} {path.rsplit('/', 1)[-1]}")
    namespace_path = f"/api/v1/namespaces/{namespace}"
    if cluster.get(namespace_path) is not None:
        cluster.delete_path(namespace_path)
        echo(f"deleting namespace {namespace} (its pods, claims, policies and service accounts)")
    volume = f"/api/v1/persistentvolumes/{namespace}-{config.workloads.shared_pvc_name}"
    if cluster.get(volume) is not None:
        cluster.delete_path(volume)
        echo(
            f"deleted PersistentVolume {namespace}-{config.workloads.shared_pvc_name} (reclaim policy Retain: FSx keeps its data)"
        )
    deadline = time.monotonic() + timeout
    while cluster.get(namespace_path) is not None:
        if time.monotonic() >= deadline:
            raise TeardownError(
                [f"teardown: namespace {namespace} still exists after {timeout:.0f} s; nothing else was deleted"]
            )
        time.sleep(poll)
    balancers = [
        f"{s['metadata'].get('namespace')}/{s['metadata']['name']}"
        for s in cluster.list_items("/api/v1/services")
        if (s.get("spec") or {}).get("type") == "LoadBalancer"
    ]
    if balancers:
        raise TeardownError(
            [
                f"teardown: Services of type LoadBalancer remain ({', '.join(balancers)}): delete them first, their load "
                "balancers keep network interfaces in the VPC"
            ]  # fmt: skip
        )


def _importers(cloudformation: Any, stack: dict[str, Any]) -> set[str]:
    from botocore.exceptions import ClientError

    found: set[str] = set()
    for output in stack.get("Outputs") or []:
        export = output.get("ExportName")
        if not export:
            continue
        try:
            for page in cloudformation.get_paginator("list_imports").paginate(ExportName=export):
                found.update(page.get("Imports") or [])
        except ClientError as error:
            if "is not imported by any stack" not in str(error):
                raise
    return found


def dependants(names: set[str], config: ProjectConfig) -> dict[str, set[str]]:
    """Each of this configuration's stacks in `names` -> those in `names` that depend on it
    (`preflight.STACK_DEPENDENCIES`): they are deleted before it."""
    component = project_stack_components(config)
    return {
        name: {other for other in names if component[name] in STACK_DEPENDENCIES[component[other]]} for name in names
    }


def deletion_rounds(
    names: set[str], config: ProjectConfig, importers: dict[str, set[str]] | None = None
) -> list[list[str]]:
    """`names` in the rounds `delete_stacks` deletes them: a stack once neither a stack that depends on it nor one
    that imports its exports (`importers`) remains."""
    blockers = dependants(names, config)
    for name, found in (importers or {}).items():
        blockers[name] |= found
    remaining, rounds = set(names), []
    while remaining:
        ready = sorted(name for name in remaining if not (blockers[name] & remaining) - {name})
        if not ready:
            raise TeardownError(
                [f"teardown: the stacks {', '.join(sorted(remaining))} depend on each other; no stack was deleted"]
            )
        rounds.append(ready)
        remaining -= set(ready)
    return rounds


def delete_stacks(
    cloudformation: Any,
    config: ProjectConfig,
    stacks: ProjectStacks,
    echo: Echo,
    *,
    poll: float,
    timeout: float,
) -> list[str]:
    """Delete the stacks shown to be this deployment's (`stacks.ours`, from `preflight.project_stacks`), dependants
    first (`deletion_rounds`); the names in deletion order. A stack with one of its names that is not shown to be
    its own is never touched: not its termination protection, not the stack."""
    remaining = dict(stacks.ours)
    importers = {name: _importers(cloudformation, stack) for name, stack in remaining.items()}
    deleted: list[str] = []
    for ready in deletion_rounds(set(remaining), config, importers):
        for name in ready:
            if name == config.names.stack("storage") and name in stacks.ours:
                # Termination protection keeps a stray delete of this stack alone from removing FSx under pods.
                cloudformation.update_termination_protection(EnableTerminationProtection=False, StackName=name)
            cloudformation.delete_stack(StackName=name)
            echo(f"deleting stack {name}")
        for name in ready:
            _wait_deleted(cloudformation, name, poll=poll, timeout=timeout)
            echo(f"deleted stack {name}")
            deleted.append(name)
            del remaining[name]
    return deleted


def _wait_deleted(cloudformation: Any, name: str, *, poll: float, timeout: float) -> None:
    from botocore.exceptions import ClientError

    deadline = time.monotonic() + timeout
    while True:
        try:
            [stack] = cloudformation.describe_stacks(StackName=name)["Stacks"]
        except ClientError as error:
            if "does not exist" in str(error):
                return
            raise
        status = stack["StackStatus"]
        if status == "DELETE_COMPLETE":
            return
        if status == "DELETE_FAILED":
            reason = stack.get("StackStatusReason") or "see the stack's events"
            raise TeardownError([f"teardown: stack {name} DELETE_FAILED: {reason}; nothing after it was deleted"])
        if time.monotonic() >= deadline:
            raise TeardownError([f"teardown: stack {name} still {status} after {timeout:.0f} s"])
        time.sleep(poll)
