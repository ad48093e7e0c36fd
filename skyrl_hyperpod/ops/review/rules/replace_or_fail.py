"""A stateful or retained resource whose update CloudFormation can only carry out by replacing it, or fails.

Either outcome blocks the pull request: a replacement loses or orphans the data, a failed update rolls back.
"""

from __future__ import annotations

from ..model import ChangeEvent, ChangeRule
from ..replacement import RETAIN_POLICIES


def check(event: ChangeEvent) -> None:
    change = event.change
    stateful = event.facts.stateful_reason(change.resource_type)
    if stateful or event.old.get("UpdateReplacePolicy") in RETAIN_POLICIES:
        change.risks.append(
            "if CloudFormation replaces it: " + (f"loses {stateful}" if stateful else "orphans the retained resource")
        )
        change.stateful_loss = True


RULE = ChangeRule(
    name="replace_or_fail",
    flags="a stateful or retained resource changed in a field its service's update operation does not take "
    "(replaced or a failed update); fails the gate",
    section="risks",
    moments=frozenset({"update_may_fail"}),
    check=check,
)
