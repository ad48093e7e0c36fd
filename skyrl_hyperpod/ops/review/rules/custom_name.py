"""A replaced resource whose custom name stays the same: CloudFormation creates the replacement before it deletes
the old resource, and two resources cannot hold one name."""

from __future__ import annotations

from ..model import ChangeEvent, ChangeRule, strip_strength


def check(event: ChangeEvent) -> None:
    change = event.change
    name = event.facts.name_property(change.resource_type)
    old_props, new_props = event.old.get("Properties") or {}, event.new.get("Properties") or {}
    if name and name in new_props and strip_strength(old_props.get(name)) == strip_strength(new_props.get(name)):
        change.risks.append(
            f"custom name {name} is unchanged: CloudFormation cannot replace a custom-named resource, the update "
            "fails and rolls back; change the name too or delete the resource first"
        )


RULE = ChangeRule(
    name="custom_name",
    flags="a replaced resource whose name property (schema primaryIdentifier, <Resource>Name, Name) is unchanged",
    section="risks",
    moments=frozenset({"replaced"}),
    check=check,
)
