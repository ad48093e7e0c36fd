"""`review()`: read both sides, diff them, run the rules."""

from __future__ import annotations

from pathlib import Path

from .diff import diff_manifests, diff_platform, resolve_platform
from .model import ManifestChange, Node, Review, ReviewContext, StackDiff, Templates
from .readers import COST_FILE, load_synth_output
from .replacement import ReplacementFacts
from .rules import run_review_rules


def review(
    base_dir: Path, head_dir: Path, facts: ReplacementFacts, gpu_fallback: dict[str, int] | None = None
) -> Review:
    base, head = load_synth_output(base_dir), load_synth_output(head_dir)
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
