"""cdk-nag finding ids, and acknowledgment of granular IAM5 (wildcard) findings with a reason per pattern.

cdk-nag reports each wildcard separately, with the resource rendered from the *final*
template (`Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:...:network-interface/*`, or a
cross-stack reference). That text depends on the environment and on cross-stack wiring, which
CDK settles only while synthesizing. This helper therefore computes the findings the same way
cdk-nag does, after references are resolved (construct validation runs before the policy
validation plugins), and acknowledges exactly those that match a declared pattern. A wildcard
that matches no pattern stays unacknowledged and fails the synth, as it should.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from constructs import IConstruct, IValidation

AWS_SOLUTIONS_RULE_PREFIX = "AwsSolutions::AwsSolutions-"
# AWS managed policies CDK attaches to the Lambdas it creates (custom-resource handlers).
LAMBDA_BASIC_EXECUTION_POLICY = "service-role/AWSLambdaBasicExecutionRole"
LAMBDA_VPC_ACCESS_POLICY = "service-role/AWSLambdaVPCAccessExecutionRole"


def nag_rule(rule: str) -> str:
    """The id cdk-nag prints for an AwsSolutions rule or granular finding, e.g. `nag_rule("L1")`."""
    return f"{AWS_SOLUTIONS_RULE_PREFIX}{rule}"


def managed_policy_finding(policy_name: str) -> str:
    """The IAM4 finding id of the AWS managed policy `policy_name` (e.g. `service-role/AWSLambdaBasicExecutionRole`)."""
    return nag_rule(f"IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy_name}]")


IAM5 = nag_rule("IAM5")
# One ARN field as cdk-nag renders it: a literal (`us-west-2`) or a flattened reference
# (`<AWS::Region>`, which itself contains colons).
_ARN_FIELD = r"(?:<[^<>]*>|[^:<>]*)"


def vpc_lambda_managed_policies(who: str) -> list[cdk.Acknowledgment]:
    """Acknowledgments for the two AWS-managed policies every in-VPC Lambda role carries."""
    return [
        cdk.Acknowledgment(
            id=managed_policy_finding(LAMBDA_BASIC_EXECUTION_POLICY),
            reason=f"{who}: AWS-managed baseline for a Lambda to write its own CloudWatch logs; nothing else.",
        ),
        cdk.Acknowledgment(
            id=managed_policy_finding(LAMBDA_VPC_ACCESS_POLICY),
            reason=f"{who}: AWS-managed ENI permissions to run in the VPC, next to the private EKS API endpoint.",
        ),
    ]


def arn_pattern(service: str, resource: str) -> str:
    """Regex for `Resource::arn:<partition>:<service>:<region>:<account>:<resource>` findings.

    `resource` is a regular expression, e.g. `r"network-interface/\\*"`.
    """
    return rf"Resource::arn:{_ARN_FIELD}:{service}:{_ARN_FIELD}:{_ARN_FIELD}:{resource}"


def flatten_reference(value: Any) -> str:
    """Render a resolved CloudFormation value the way cdk-nag's `flattenCfnReference` does."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.replace("${", "<").replace("}", ">")
    if isinstance(value, dict):
        if value.get("Fn::Join"):
            delimiter, items = value["Fn::Join"]
            return delimiter.join(flatten_reference(item) for item in items)
        if value.get("Fn::Sub"):
            return flatten_reference(value["Fn::Sub"])
        if value.get("Fn::GetAtt"):
            resource, attribute = value["Fn::GetAtt"]
            return f"<{flatten_reference(resource)}.{flatten_reference(attribute)}>"
        if value.get("Fn::ImportValue"):
            return flatten_reference(value["Fn::ImportValue"])
        if value.get("Ref"):
            return f"<{flatten_reference(value['Ref'])}>"
    return json.dumps(value, separators=(",", ":"))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def wildcard_findings(policy_document: Mapping[str, Any]) -> list[str]:
    """The IAM5 findings (`Action::...`, `Resource::...`) of one resolved policy document."""
    findings: dict[str, None] = {}
    for statement in policy_document.get("Statement", []):
        if statement.get("Effect") != "Allow":
            continue
        for action in _as_list(statement.get("Action")):
            if isinstance(action, str) and "*" in action:
                findings[f"Action::{action}"] = None
        for resource in _as_list(statement.get("Resource")):
            flat = flatten_reference(resource)
            if "*" in flat:
                findings[f"Resource::{flat}"] = None
    return list(findings)


def _policy_documents(construct: IConstruct) -> list[Mapping[str, Any]]:
    stack = cdk.Stack.of(construct)
    if isinstance(construct, (iam.CfnPolicy, iam.CfnManagedPolicy)):
        return [stack.resolve(construct.policy_document)]
    if isinstance(construct, iam.CfnRole):
        return [stack.resolve(stack.resolve(p).get("policyDocument")) for p in stack.resolve(construct.policies) or []]
    return []


@jsii.implements(IValidation)
class _AcknowledgeMatchingWildcards:
    def __init__(self, scope: IConstruct, reasons: Mapping[str, str]) -> None:
        self._scope = scope
        self._reasons = {re.compile(pattern): reason for pattern, reason in reasons.items()}

    def validate(self) -> list[str]:
        for construct in self._scope.node.find_all():
            for document in _policy_documents(construct):
                for finding in wildcard_findings(document):
                    reason = next((r for p, r in self._reasons.items() if p.fullmatch(finding)), None)
                    if reason is not None:
                        cdk.Validations.of(construct).acknowledge(
                            cdk.Acknowledgment(id=f"{IAM5}[{finding}]", reason=reason)
                        )
        return []


def acknowledge_iam_wildcards(scope: IConstruct, reasons: Mapping[str, str]) -> None:
    """Acknowledge IAM5 findings under `scope` whose text fully matches a regex key of `reasons`.

    Keys are regular expressions over the finding text, e.g. `r"Action::s3:GetObject\\*"`,
    `r"Resource::\\*"` or `arn_pattern("ec2", r"network-interface/\\*")`.
    """
    scope.node.add_validation(_AcknowledgeMatchingWildcards(scope, reasons))
