"""A replaced or removed git Helm installer release: the installer installs the new release and uninstalls the old
one, or uninstalls the release it owns (stacks/components/git_helm_installer_handler/index.py)."""

from __future__ import annotations

from ..model import Disruption, ReviewContext, ReviewRule
from ..replacement import HELM_INSTALLER_SOURCE, HELM_RELEASE_TYPE


def check(context: ReviewContext) -> list[Disruption]:
    found = []
    for stack in context.stacks:
        added = {c.logical_id for c in stack.resources if c.action == "ADD" and c.resource_type == HELM_RELEASE_TYPE}
        for change in stack.resources:
            if change.resource_type != HELM_RELEASE_TYPE or change.action not in ("REPLACE", "REMOVE"):
                continue
            if change.action == "REPLACE":
                text = "replaced: " + "; ".join(change.reasons[-1:])
            elif added:
                text = (
                    f"removed while {', '.join(f'`{a}`' for a in sorted(added))} is added: a new resource takes the "
                    "release over and this one's delete leaves it installed only if the release names match"
                )
            else:
                text = "removed: the installer uninstalls the release it owns"
            found.append(
                Disruption(f"Helm release `{change.cdk_path or change.logical_id}`", text, HELM_INSTALLER_SOURCE)
            )
    return found


RULE = ReviewRule(
    name="helm_release",
    flags="a git Helm installer release replaced (identity or ServiceToken changed) or removed",
    section="helm",
    check=check,
)
