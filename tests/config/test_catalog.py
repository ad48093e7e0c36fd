"""The instance catalog offers only types HyperPod accepts: each is an allowed value of the
AWS::SageMaker::Cluster instance group InstanceType in the resource data cfn-lint ships."""

from __future__ import annotations

import json
from pathlib import Path

import cfnlint
import pytest
import yaml
from conftest import REPO_ROOT, TEST_REGION

from skyrl_hyperpod.config import INSTANCE_CATALOG, ConfigError, validate_config

# cfn-lint's per-region allowed values for ClusterInstanceGroup.InstanceType (its schema extension
# for AWS::SageMaker::Cluster, refreshed from the SageMaker price list with each release).
ENUM_FILE = Path(cfnlint.__file__).parent / "data/schemas/extensions/aws_sagemaker_cluster/instancetype_enum.json"
PRICES_DIR = REPO_ROOT / "skyrl_hyperpod" / "prices"
PRICE_REGIONS = sorted(p.stem for p in PRICES_DIR.glob("*.yaml"))


def allowed_types(region: str) -> set[str]:
    return set(json.loads(ENUM_FILE.read_text())[region]["enum"])


@pytest.mark.parametrize("region", sorted({TEST_REGION, *PRICE_REGIONS}))
def test_every_catalog_type_is_a_hyperpod_instance_type_in_the_region(region):
    assert set(INSTANCE_CATALOG) - allowed_types(region) == set()


@pytest.mark.parametrize("instance_type", ["ml.r5d.4xlarge", "ml.r5d.8xlarge"])
def test_types_hyperpod_rejects_are_refused_by_the_config(instance_type):
    assert instance_type not in allowed_types(TEST_REGION)  # why they left the catalog
    with pytest.raises(ConfigError) as raised:
        validate_config({"hyperpod": {"head_group": {"instance_type": instance_type}}})
    [line] = raised.value.problems
    assert line.startswith(
        f"config error: hyperpod.head_group.instance_type = '{instance_type}': unknown instance type"
    )


@pytest.mark.parametrize("region", PRICE_REGIONS)
def test_price_files_list_only_catalog_types(region):
    prices = yaml.safe_load((PRICES_DIR / f"{region}.yaml").read_text())
    assert set(prices["hyperpod_instance_hour"]) <= set(INSTANCE_CATALOG)
