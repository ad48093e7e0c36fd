"""A replaced or removed resource that holds state, or that a retain policy leaves behind, orphaned."""

from __future__ import annotations

from ..model import ChangeEvent, ChangeRule
from ..replacement import RETAIN_POLICIES


def check(event: ChangeEvent) -> None:
    change, old = event.change, event.old
    replaced = event.moment == "replaced"
    policy_key = "UpdateReplacePolicy" if replaced else "DeletionPolicy"
    policy = old.get(policy_key, "Delete")
    what = (
        "the old resource stays, a new empty one is created"
        if replaced
        else "the old resource stays and is no longer managed"
    )
    stateful = event.facts.stateful_reason(str(old.get("Type")))
    if policy in RETAIN_POLICIES:
        change.risks.append(f"retained, orphaned ({policy_key} {policy}): {what}")
        change.stateful_loss = True
    elif policy == "Snapshot":
        change.risks.append(f"{'old resource ' if replaced else ''}deleted after a snapshot ({policy_key} Snapshot)")
        change.stateful_loss = stateful is not None
    elif stateful is not None:
        change.risks.append(f"DATA LOSS: the {'old ' if replaced else ''}{old.get('Type')} is deleted with {stateful}")
        change.stateful_loss = True
    if replaced and old.get("DeletionPolicy") in RETAIN_POLICIES and not change.stateful_loss:
        change.risks.append("retained, orphaned on replacement (DeletionPolicy Retain)")
        change.stateful_loss = True


RULE = ChangeRule(
    name="stateful_loss",
    flags="a replaced or removed resource that holds state (FSx, S3, ECR, the HyperPod and EKS clusters, what the "
    "CDK service spec marks isStateful) or that a Retain policy orphans; fails the gate",
    section="risks",
    moments=frozenset({"replaced", "removed"}),
    check=check,
)
