"""rules/helm_release.py: a git Helm installer release that is replaced or removed."""

from __future__ import annotations

from skyrl_hyperpod.ops.review.model import ResourceAction, ResourceChange, ReviewContext, StackDiff
from skyrl_hyperpod.ops.review.rules import helm_release

HELM = "Custom::HelmChartFromGit"


def findings(*changes: ResourceChange) -> list[str]:
    context = ReviewContext(
        stacks=[StackDiff("skyrl-hp-eks", "changed", list(changes), {})],
        base_templates={},
        head_templates={},
        head_assembly={},
        base_manifests=None,
        head_manifests=None,
        gpu_fallback={},
    )
    return [f"{d.subject}: {d.text}" for d in helm_release.RULE.check(context)]


def change(logical_id: str, action: ResourceAction, resource_type: str = HELM, reason: str = "") -> ResourceChange:
    return ResourceChange("skyrl-hp-eks", logical_id, resource_type, action, reasons=[reason] if reason else [])


def test_fires_on_a_replaced_release_with_the_reason():
    reason = "Helm release identity (Release) changed: kube-system/a → kube-system/b"
    assert findings(change("Deps", "REPLACE", reason=reason)) == [f"Helm release `Deps`: replaced: {reason}"]


def test_fires_on_a_removed_release_and_names_the_release_added_beside_it():
    [removed] = findings(change("Deps", "REMOVE"))
    assert removed == "Helm release `Deps`: removed: the installer uninstalls the release it owns"
    [renamed] = findings(change("Deps", "REMOVE"), change("DepsRenamed", "ADD"))
    assert renamed.startswith("Helm release `Deps`: removed while `DepsRenamed` is added")


def test_quiet_on_an_upgrade_in_place_and_on_other_resources():
    assert findings(change("Deps", "MODIFY"), change("Deps2", "ADD")) == []
    assert findings(change("Role", "REPLACE", "AWS::IAM::Role", "create-only property changed")) == []
