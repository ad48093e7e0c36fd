"""A CDK HelmChart resource replaced or removed without a retain policy: its handler's Delete runs `helm uninstall`
of the release, also when another resource (the git Helm installer) has just taken the release over."""

from __future__ import annotations

from ..model import ChangeEvent, ChangeRule
from ..replacement import CDK_HELM_CHART_TYPE, HELM_INSTALLER_SOURCE, RETAIN_POLICIES


def check(event: ChangeEvent) -> None:
    old = event.old
    if old.get("Type") != CDK_HELM_CHART_TYPE or old.get("DeletionPolicy") in RETAIN_POLICIES:
        return
    props = old.get("Properties") or {}
    release = f"{props.get('Namespace', 'default')}/{props.get('Release')}"
    event.change.risks.append(
        f"CDK's Helm handler uninstalls release {release} when CloudFormation deletes this resource, also if another "
        f"resource has taken the release over in this deploy: retain it for one deploy first ({HELM_INSTALLER_SOURCE})"
    )


RULE = ChangeRule(
    name="cdk_helm_release",
    flags="a CDK HelmChart resource replaced or removed without DeletionPolicy Retain (its Delete uninstalls the release)",
    section="risks",
    moments=frozenset({"replaced", "removed"}),
    check=check,
)
