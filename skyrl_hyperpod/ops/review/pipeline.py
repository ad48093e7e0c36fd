"""`review()`: read both sides, diff them, run the rules."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from .diff import diff_manifests, diff_platform, resolve_platform
from .model import ManifestChange, Node, Review, ReviewContext, StackDiff, Templates
from .readers import COST_FILE, SynthOutput, load_synth_output
from .replacement import ReplacementFacts
from .rules import run_review_rules

PSEUDO_PARAMETERS = {"account": "AWS::AccountId", "region": "AWS::Region"}


def with_environment(value: Any, known: dict[str, str]) -> Any:
    """`value` with the pseudo parameters of `known` ({"AWS::AccountId": "111111111111", ...}) written out: a Ref to
    one, `${...}` in an Fn::Sub string, and an Fn::Join whose parts all became text joined into one string."""
    if isinstance(value, list):
        return [with_environment(item, known) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        [(key, argument)] = value.items()
        if key == "Ref" and argument in known:
            return known[argument]
        if key == "Fn::Sub" and isinstance(argument, str):
            text = argument
            for name, literal in known.items():
                text = text.replace("${" + name + "}", literal)
            return text if "${" not in text else {"Fn::Sub": text}
        if key == "Fn::Join" and isinstance(argument, list) and len(argument) == 2:
            separator, parts = with_environment(argument[0], known), with_environment(argument[1], known)
            if isinstance(separator, str) and isinstance(parts, list) and all(isinstance(p, str) for p in parts):
                return separator.join(parts)
            return {"Fn::Join": [separator, parts]}
    return {key: with_environment(item, known) for key, item in value.items()}


def _align_environments(base: SynthOutput, head: SynthOutput) -> tuple[SynthOutput, SynthOutput]:
    """Setting env.account (or env.region) writes the account into names the other synth left to CloudFormation's
    pseudo parameters (`sagemaker-...-${AWS::AccountId}-...`, the CDK asset bucket): the same resolved value, not
    a change. The side that left them open gets the other side's values written in before the diff."""

    def filled(side: SynthOutput, other: SynthOutput) -> SynthOutput:
        known = {
            PSEUDO_PARAMETERS[field]: getattr(other, field)
            for field in PSEUDO_PARAMETERS
            if getattr(side, field) is None and getattr(other, field) is not None
        }
        if not known or side.stacks is None:
            return side
        stacks = {name: with_environment(template, known) for name, template in side.stacks.items()}
        return replace(side, stacks=stacks)

    return filled(base, head), filled(head, base)


def review(
    base_dir: Path, head_dir: Path, facts: ReplacementFacts, gpu_fallback: dict[str, int] | None = None
) -> Review:
    base, head = _align_environments(load_synth_output(base_dir), load_synth_output(head_dir))
    notes: list[str] = list(facts.notes)
    stacks: list[StackDiff] = []
    paths: dict[Node, str] = {}
    templates: tuple[Templates | None, Templates | None] = (None, None)
    if base.stacks is not None and head.stacks is not None:
        stacks, paths = diff_platform(base.stacks, head.stacks, facts)
        templates = resolve_platform(base.stacks), resolve_platform(head.stacks)
    elif (base.stacks is None) != (head.stacks is None):
        notes.append("only one side has a cloud assembly: CloudFormation templates were not compared")
    manifests: list[ManifestChange] = []
    if base.manifests is not None and head.manifests is not None:
        manifests = diff_manifests(base.manifests, head.manifests)
    elif (base.manifests is None) != (head.manifests is None):
        notes.append("only one side has dist/ manifests: Kubernetes manifests were not compared")
    both_manifests = base.manifests is not None and head.manifests is not None
    context = ReviewContext(
        stacks=stacks,
        base_templates=templates[0],
        head_templates=templates[1],
        head_assembly=head.stacks,
        base_manifests=base.manifests if both_manifests else None,
        head_manifests=head.manifests if both_manifests else None,
        gpu_fallback=gpu_fallback or {},
    )
    disruptions = run_review_rules(context)
    cost = (base.cost, head.cost) if base.cost is not None and head.cost is not None else None
    if cost is None and (base.cost is not None or head.cost is not None):
        notes.append(f"only one side has {COST_FILE}: costs were not compared")
    return Review(str(base_dir), str(head_dir), stacks, manifests, notes, disruptions, cost, paths)
