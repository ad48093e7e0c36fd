"""Region look-ups from cfn-lint's bundled data: AWS regions, HyperPod's instance types per region, AZ id prefixes."""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
from pathlib import Path


def cfn_lint_data() -> Path:
    """cfn-lint's bundled CloudFormation resource data (the package is located, not imported: its import is slow)."""
    spec = importlib.util.find_spec("cfnlint")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("the cfn-lint package is not installed (requirements.txt): run `make setup`")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "schemas"


@functools.cache
def aws_regions() -> frozenset[str]:
    """Every region cfn-lint ships resource schemas for (data/schemas/providers/<region>.json)."""
    return frozenset(p.stem for p in (cfn_lint_data() / "providers").glob("*-*-*.json"))


@functools.cache
def hyperpod_instance_types_by_region() -> dict[str, frozenset[str]]:
    """AWS::SageMaker::Cluster InstanceType values per region, as cfn-lint ships them (its schema extension,
    refreshed from the SageMaker price list with each release); a region missing here has no HyperPod."""
    file = cfn_lint_data() / "extensions" / "aws_sagemaker_cluster" / "instancetype_enum.json"
    data = json.loads(file.read_text(encoding="utf-8"))
    return {region: frozenset(entry["enum"]) for region, entry in data.items() if isinstance(entry, dict)}


def region_problem(region: str, groups: dict[str, str]) -> str | None:
    """One line when `region` is not an AWS region, has no HyperPod, or lacks a group's instance type
    (`groups`: config key -> instance type); None when HyperPod offers every group there."""
    regions = aws_regions()
    if region not in regions:
        guess = difflib.get_close_matches(region, sorted(regions), n=1, cutoff=0.7)
        hint = f"; did you mean {guess[0]}?" if guess else ""
        return f"region = {region!r}: not an AWS region{hint}"
    offered = hyperpod_instance_types_by_region()
    if region not in offered:
        return (
            f"region = {region!r}: SageMaker HyperPod is not offered there; regions with HyperPod: "
            f"{', '.join(sorted(offered))}"
        )
    for key, instance_type in groups.items():
        if instance_type not in offered[region]:
            elsewhere = sorted(r for r, types in offered.items() if instance_type in types)
            return f"{key} = {instance_type!r}: not offered by HyperPod in {region}; it is in {', '.join(elsewhere)}"
    return None


# AZ ids start with the region's short code: the country, the initials of the direction words, the
# number (us-west-2 -> usw2, ap-northeast-1 -> apne1, us-gov-west-1 -> usgw1); see "AZ IDs for your
# AWS resources", https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html.
_DIRECTIONS = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
               "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}  # fmt: skip


def az_id_prefix(region: str) -> str | None:
    """`usw2` for us-west-2: what every AZ id of `region` starts with (None for an unrecognised name)."""
    parts = region.split("-")
    if len(parts) < 3 or not parts[-1].isdigit():
        return None
    words = parts[1:-1]
    code = "".join("g" if word == "gov" else _DIRECTIONS.get(word, "") for word in words)
    if len(code) < len(words) or not code:
        return None
    return f"{parts[0]}{code}{parts[-1]}"
