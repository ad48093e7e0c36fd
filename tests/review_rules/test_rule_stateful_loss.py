"""rules/stateful_loss.py: a replaced or removed resource that holds state, or that a Retain policy orphans."""

from __future__ import annotations

from typing import Any

import pytest

from skyrl_hyperpod.ops.review import ReplacementFacts
from skyrl_hyperpod.ops.review.model import ChangeEvent, Moment, ResourceChange
from skyrl_hyperpod.ops.review.rules import stateful_loss


def ask(moment: Moment, old: dict[str, Any]) -> ResourceChange:
    change = ResourceChange(
        "skyrl-hp-storage", "Thing", str(old["Type"]), "REPLACE" if moment == "replaced" else "REMOVE"
    )
    stateful_loss.RULE.check(ChangeEvent(moment, change, old, old if moment == "replaced" else {}, ReplacementFacts()))
    return change


@pytest.mark.parametrize(
    ("moment", "old", "risk"),
    [
        # Stateful per the CDK service spec's isStateful.
        ("removed", {"Type": "AWS::FSx::FileSystem"}, "DATA LOSS: the AWS::FSx::FileSystem is deleted with its data"),
        # Stateful per the review's own list (the spec does not mark it).
        ("replaced", {"Type": "AWS::SageMaker::Cluster"}, "DATA LOSS: the old AWS::SageMaker::Cluster is deleted"),
        (
            "replaced",
            {"Type": "AWS::EC2::SecurityGroup", "UpdateReplacePolicy": "Retain"},
            "retained, orphaned (UpdateReplacePolicy Retain): the old resource stays, a new empty one is created",
        ),
        (
            "replaced",
            {"Type": "AWS::EC2::SecurityGroup", "DeletionPolicy": "Retain"},
            "retained, orphaned on replacement (DeletionPolicy Retain)",
        ),
    ],
)
def test_fires_on_state_that_is_lost_or_orphaned(moment, old, risk):
    change = ask(moment, old)
    assert change.stateful_loss
    assert any(line.startswith(risk) for line in change.risks), change.risks


def test_a_snapshot_of_a_stateless_resource_is_noted_but_does_not_fail_the_gate():
    change = ask("removed", {"Type": "AWS::EC2::SecurityGroup", "DeletionPolicy": "Snapshot"})
    assert change.risks == ["deleted after a snapshot (DeletionPolicy Snapshot)"] and not change.stateful_loss


@pytest.mark.parametrize("moment", ["replaced", "removed"])
def test_quiet_on_a_stateless_resource_without_a_policy(moment):
    change = ask(moment, {"Type": "AWS::EC2::SecurityGroup", "DeletionPolicy": "Delete"})
    assert change.risks == [] and not change.stateful_loss
