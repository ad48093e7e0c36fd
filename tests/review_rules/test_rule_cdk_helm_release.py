"""rules/cdk_helm_release.py: a CDK HelmChart resource whose Delete would uninstall its release."""

from __future__ import annotations

from typing import Any

import pytest

from skyrl_hyperpod.ops.review import ReplacementFacts
from skyrl_hyperpod.ops.review.model import ChangeEvent, Moment, ResourceChange
from skyrl_hyperpod.ops.review.rules import cdk_helm_release

KUBERAY = {
    "Type": "Custom::AWSCDK-EKS-HelmChart",
    "Properties": {"Release": "kuberay-operator", "Namespace": "kuberay-system", "Chart": "kuberay-operator"},
}


def ask(moment: Moment, old: dict[str, Any]) -> ResourceChange:
    change = ResourceChange("skyrl-hp-eks", "KubeRayOperatorC85C2BA7", str(old["Type"]), "REMOVE")
    cdk_helm_release.RULE.check(ChangeEvent(moment, change, old, {}, ReplacementFacts()))
    return change


@pytest.mark.parametrize("moment", ["removed", "replaced"])
def test_fires_when_cdks_handler_would_uninstall_the_release(moment):
    [risk] = ask(moment, KUBERAY).risks
    assert risk.startswith("CDK's Helm handler uninstalls release kuberay-system/kuberay-operator")
    assert "retain it for one deploy first (docs/helm-installer.md)" in risk


@pytest.mark.parametrize(
    "old",
    [
        {**KUBERAY, "DeletionPolicy": "Retain"},  # the first deploy of the move: dropped without its Delete
        {**KUBERAY, "Type": "Custom::HelmChartFromGit"},  # the git installer's own rule (helm_release) covers it
        {"Type": "AWS::EC2::SecurityGroup"},
    ],
    ids=["retained", "git installer", "not a chart"],
)
def test_quiet_when_nothing_would_be_uninstalled(old):
    assert ask("removed", old).risks == []
