"""`skyrl-hp cost`: per-component estimate from the dated price file, overrides, --live via the Price List API."""

from __future__ import annotations

import json
import re

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from click.testing import CliRunner

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients
from skyrl_hyperpod.ops.cost import PRICE_LIST_API_REGION, load_price_book, price_file_for

REGION = "us-west-2"


def run(*args, obj=None):
    return CliRunner().invoke(cli, ["cost", *args], obj=obj)


def cost_json(*args, obj=None) -> dict:
    result = run("--region", REGION, "--json", *args, obj=obj)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def item(data: dict, prefix: str) -> dict:
    return next(i for i in data["items"] if i["component"].startswith(prefix))


def write_config(tmp_path, data: dict):
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(data))
    return str(file)


@pytest.fixture(scope="module")
def book():
    return load_price_book(price_file_for(REGION))


def test_each_instance_group_is_priced_from_the_file_and_marked_unconfirmed(default_config, book):
    data = cost_json()
    for group in (default_config.hyperpod.head_group, default_config.hyperpod.worker_group):
        line = item(data, f"HyperPod group {group.name}")
        expected = book.hyperpod_instance_hour[group.instance_type].usd * group.instance_count
        assert line["hourly_usd"] == pytest.approx(expected)
        assert line["monthly_usd"] == pytest.approx(expected * 730)
        assert line["confirmed"] is False
        assert line["component"] in data["unconfirmed"]


def test_fsx_nat_and_control_plane_follow_the_config(default_config, book):
    data = cost_json()
    fsx = default_config.fsx
    fsx_price = book.fsx_lustre_gib_month[fsx.deployment_type][fsx.per_unit_storage_throughput].usd
    assert item(data, "FSx for Lustre")["monthly_usd"] == pytest.approx(fsx.storage_capacity_gib * fsx_price)
    assert item(data, "NAT gateway(s)")["hourly_usd"] == pytest.approx(
        default_config.network.nat_gateways * book.nat_gateway_hour.usd
    )
    assert item(data, "EKS control plane")["monthly_usd"] == pytest.approx(book.eks_control_plane_hour.usd * 730)


def test_totals_idle_day_and_training_run(book):
    data = cost_json("--hours", "10")
    hourly = sum(i["hourly_usd"] for i in data["items"])
    assert data["totals"]["hourly"] == pytest.approx(hourly, abs=1e-4)
    assert data["totals"]["monthly"] == pytest.approx(sum(i["monthly_usd"] for i in data["items"]), abs=0.01)
    assert data["totals"]["idle_per_day"] == pytest.approx(hourly * 24, abs=0.01)
    assert data["totals"]["training_run"] == {"hours": 10.0, "cost": pytest.approx(hourly * 10, abs=0.01)}
    assert data["prices_as_of"] == book.as_of.isoformat()


def test_config_changes_move_the_estimate(tmp_path, default_config, book):
    worker = default_config.hyperpod.worker_group
    config = write_config(
        tmp_path,
        {
            "hyperpod": {"worker_group": {**worker.model_dump(), "instance_count": worker.instance_count + 2}},
            "network": {"nat_gateways": 2},
            "observability": {"enabled": False},
        },
    )
    data = cost_json("--config", config)
    price = book.hyperpod_instance_hour[worker.instance_type].usd
    assert item(data, f"HyperPod group {worker.name}")["hourly_usd"] == pytest.approx(
        price * (worker.instance_count + 2)
    )
    assert item(data, "NAT gateway(s)")["hourly_usd"] == pytest.approx(2 * book.nat_gateway_hour.usd)
    assert not [i for i in data["items"] if "Prometheus" in i["component"]]


def test_table_output_names_components_and_the_unconfirmed_marker(default_config):
    result = run("--region", REGION, "--hours", "12")
    assert result.exit_code == 0, result.output
    assert (
        f"{default_config.hyperpod.worker_group.instance_count} x {default_config.hyperpod.worker_group.instance_type}"
        in result.stdout
    )
    assert "Idle cluster per day" in result.stdout
    assert "One training run of 12 h" in result.stdout
    assert "unconfirmed" in result.stdout
    assert "skyrl_hyperpod/prices/us-west-2.yaml" in result.stdout


def test_unknown_region_is_one_line():
    result = run("--region", "xx-nowhere-1")
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0
    assert "no price data for region 'xx-nowhere-1'" in result.stderr
    assert "Traceback" not in result.output


def test_user_price_file_overrides(tmp_path, default_config, book):
    data = book.model_dump(mode="json")
    worker_type = default_config.hyperpod.worker_group.instance_type
    data["hyperpod_instance_hour"][worker_type] = {"usd": 1.0, "source": "my negotiated rate", "confirmed": True}
    file = tmp_path / "prices.yaml"
    file.write_text(yaml.safe_dump(data))
    out = cost_json("--prices", str(file))
    line = item(out, f"HyperPod group {default_config.hyperpod.worker_group.name}")
    assert line["hourly_usd"] == pytest.approx(default_config.hyperpod.worker_group.instance_count * 1.0)
    assert line["confirmed"] is True


def test_price_file_without_the_configured_instance_type_is_one_line(tmp_path, default_config, book):
    data = book.model_dump(mode="json")
    worker_type = default_config.hyperpod.worker_group.instance_type
    del data["hyperpod_instance_hour"][worker_type]
    file = tmp_path / "prices.yaml"
    file.write_text(yaml.safe_dump(data))
    result = run("--prices", str(file))
    assert result.exit_code == 2
    assert f"no hourly price for {worker_type}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("region: [", "is not valid YAML at line"),
        ("- us-west-2\n", "must hold a mapping at the top level"),
        ("", "region"),  # an empty file is an empty price book: every required field is reported
        ("region: us-west-2\ncurrency: EUR\n", "currency"),
    ],
)
def test_malformed_price_file_is_reported_per_problem(tmp_path, content, message):
    file = tmp_path / "prices.yaml"
    file.write_text(content)
    result = run("--prices", str(file))
    assert result.exit_code == 2
    assert message in result.stderr
    assert all(line.startswith("cost error:") for line in result.stderr.strip().splitlines())


def test_missing_price_file_is_one_line(tmp_path):
    missing = tmp_path / "absent.yaml"
    result = run("--prices", str(missing))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"cost error: file {str(missing)!r} does not exist"


def test_bad_config_is_one_line_per_problem(tmp_path):
    config = write_config(tmp_path, {"fsx": {"storage_capacity_gib": 1000}, "network": {"nat_gateways": 0}})
    result = run("--config", config)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("config error:") for line in lines)


def _price_list_product(instance_type: str, hourly: str, component: str) -> str:
    return json.dumps(
        {
            "product": {
                "sku": "SKU123",
                "attributes": {"instanceName": instance_type, "regionCode": REGION, "component": component},
            },
            "terms": {
                "OnDemand": {
                    "SKU123.T": {"priceDimensions": {"SKU123.T.D": {"unit": "Hrs", "pricePerUnit": {"USD": hourly}}}}
                }
            },
        }
    )


def test_live_prices_come_from_the_price_list_api(default_config, book):
    pricing = boto3.client(
        "pricing", region_name=PRICE_LIST_API_REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    head, worker = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    stubber = Stubber(pricing)
    for instance_type in sorted({head.instance_type, worker.instance_type}):
        products = (
            [
                _price_list_product(instance_type, "99.0", "Training"),  # not HyperPod: ignored
                _price_list_product(instance_type, "12.5", "HyperPod"),
            ]
            if instance_type == worker.instance_type
            else []
        )
        stubber.add_response(
            "get_products",
            {"PriceList": products, "FormatVersion": "aws_v1"},
            {
                "ServiceCode": "AmazonSageMaker",
                "FormatVersion": "aws_v1",
                "Filters": [
                    {"Type": "TERM_MATCH", "Field": "regionCode", "Value": REGION},
                    {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
                ],
            },
        )
    with stubber:
        result = CliRunner().invoke(
            cli, ["cost", "--region", REGION, "--json", "--live"], obj=AwsClients(overrides={"pricing": pricing})
        )
    assert result.exit_code == 0, result.output
    stubber.assert_no_pending_responses()
    data = json.loads(result.stdout)
    worker_line = item(data, f"HyperPod group {worker.name}")
    assert worker_line["hourly_usd"] == pytest.approx(12.5 * worker.instance_count)
    assert worker_line["confirmed"] is True
    head_line = item(data, f"HyperPod group {head.name}")
    assert head_line["hourly_usd"] == pytest.approx(
        book.hyperpod_instance_hour[head.instance_type].usd * head.instance_count
    )
    assert f"no HyperPod price for {head.instance_type}" in result.stderr


def test_both_scaling_modes_side_by_side(default_config, book):
    from skyrl_hyperpod.ops.scaling_cost import SCALE_UP

    data = cost_json("--hours", "10")
    scaling = data["scaling"]
    group = default_config.hyperpod.worker_group
    node_hourly = book.hyperpod_instance_hour[group.instance_type].usd
    ebs_hourly = group.ebs_volume_gb * book.hyperpod_ebs_gb_month.usd / 730
    gpu_hourly = group.instance_count * (node_hourly + ebs_hourly)
    hourly = data["totals"]["hourly"]
    assert scaling["configured"] == "fixed" and scaling["nodes"] == 3
    # Fixed nodes bill around the clock; on_demand's idle day is everything but the GPU nodes and their volumes.
    assert scaling["fixed"] == {
        "idle_day_usd": pytest.approx(hourly * 24, abs=0.01),
        "run_usd": pytest.approx(hourly * 10, abs=0.01),
        "sweep_usd": pytest.approx(hourly * 10, abs=0.01),
    }
    assert scaling["on_demand"]["idle_day_usd"] == pytest.approx((hourly - gpu_hourly) * 24, abs=0.01)
    assert scaling["on_demand"]["idle_day_usd"] == pytest.approx(125.70, abs=0.01)  # at the shipped us-west-2 prices
    # A run pays the GPU nodes through one scale-up and the empty time before they go.
    # Every GPU node reads the checkpoint at once, sharing the file system's baseline throughput.
    data_config, fsx = default_config.training.data, default_config.fsx
    fsx_mb_per_s = fsx.per_unit_storage_throughput * fsx.storage_capacity_gib / 1024
    model_minutes = group.instance_count * data_config.checkpoint_gb * 1000 / fsx_mb_per_s / 60
    scale_up = SCALE_UP.node_provisioning_minutes + SCALE_UP.image_gb * 1000 / SCALE_UP.image_pull_mb_per_s / 60
    scale_up += model_minutes
    assert scaling["scale_up_minutes"]["total"] == pytest.approx(scale_up, abs=0.01)
    # ... and while the finished job's cluster stays (job_ttl_seconds_after_finished, 1 h by default).
    ttl_hours = default_config.training.jobs.job_ttl_seconds_after_finished / 3600
    assert scaling["cluster_ttl_minutes"] == ttl_hours * 60 == 60
    overhead = gpu_hourly * ((scale_up + group.scale_down_after_minutes) / 60 + ttl_hours)
    assert scaling["on_demand"]["run_usd"] == pytest.approx(hourly * 10 + overhead, abs=0.01)


def test_a_sweep_pays_one_scale_up_for_all_its_runs(tmp_path, default_config):
    config = write_config(
        tmp_path, {"training": {"experiments": [{"name": "a", "overrides": {}}, {"name": "b", "overrides": {}}]}}
    )
    data = cost_json("--config", config, "--hours", "10")
    scaling, hourly = data["scaling"], data["totals"]["hourly"]
    assert scaling["sweep_runs"] == 2
    # Back to back: the second job starts once the first one's cluster is gone, an hour after it finished.
    wall_hours = 2 * 10 + 1
    assert scaling["fixed"]["sweep_usd"] == pytest.approx(hourly * wall_hours, abs=0.01)
    rest_hourly = scaling["on_demand"]["idle_day_usd"] / 24
    gpu_hourly = hourly - rest_hourly
    scale_minutes = scaling["scale_up_minutes"]["total"] + scaling["scale_down_minutes"]
    expected = rest_hourly * wall_hours + gpu_hourly * (2 * (10 + 1) + scale_minutes / 60)
    assert scaling["on_demand"]["sweep_usd"] == pytest.approx(expected, abs=0.05)


def test_jobs_on_the_shared_cluster_leave_no_finished_cluster_behind(tmp_path):
    config = write_config(tmp_path, {"training": {"jobs": {"self_contained_jobs": False, "job_backoff_limit": 0}}})
    assert cost_json("--config", config)["scaling"]["cluster_ttl_minutes"] == 0


def test_the_table_shows_both_modes_and_the_scale_up_assumptions(tmp_path):
    config = write_config(tmp_path, {"hyperpod": {"worker_group": {"scaling": "on_demand", "deep_health_checks": []}}})
    result = run("--region", REGION, "--config", config)
    assert result.exit_code == 0, result.output
    assert "hyperpod.worker_group.scaling (configured: on_demand)" in result.output
    assert re.search(r"Idle day \(no job\)\s+\$729\.20\s+\$125\.70", result.output)
    assert "node provisioning without deep health checks 10 min, image pull 2.5 min" in result.output


def test_the_json_names_the_configuration_it_priced(tmp_path, default_config):
    from skyrl_hyperpod.config import validate_config
    from skyrl_hyperpod.values.synthesized_manifests import config_fingerprint

    assert cost_json()["config_fingerprint"] == config_fingerprint(default_config)
    other = {"network": {"nat_gateways": 2}}
    data = cost_json("--config", write_config(tmp_path, other))
    assert data["config_fingerprint"] == config_fingerprint(validate_config(other))
    assert data["config_fingerprint"] != config_fingerprint(default_config)


def test_a_sweep_is_priced_as_one_run_per_experiment(tmp_path):
    one = cost_json("--hours", "10")
    sweep = {"training": {"experiments": [{"name": "lr-a"}, {"name": "lr-b"}, {"name": "lr-c"}]}}
    config = write_config(tmp_path, sweep)
    data = cost_json("--config", config, "--hours", "10")
    # Same platform, same hourly price: the sweep is three runs of 10 h, one after the other, each of the two later
    # ones starting once the previous job's cluster is gone (job_ttl_seconds_after_finished, 1 h by default).
    assert data["totals"]["hourly"] == one["totals"]["hourly"]
    assert data["totals"]["sweep"] == {
        "experiments": ["lr-a", "lr-b", "lr-c"],
        "hours": 32,
        "cost": pytest.approx(3.2 * one["totals"]["training_run"]["cost"], abs=0.02),
    }
    # The scaling comparison's fixed sweep is the same figure, not a second computation of it.
    assert data["scaling"]["fixed"]["sweep_usd"] == pytest.approx(data["totals"]["sweep"]["cost"], abs=0.01)
    table = run("--region", REGION, "--config", config, "--hours", "10").stdout
    [line] = [line for line in table.splitlines() if line.startswith("The sweep")]
    assert line.startswith("The sweep, 3 experiments one at a time (lr-a, lr-b, lr-c): 32 h, $")
    assert float(line.rsplit("$", 1)[1].replace(",", "")) == pytest.approx(data["totals"]["sweep"]["cost"], abs=0.01)


def test_a_managed_mlflow_app_is_listed_unpriced_and_unconfirmed(tmp_path):
    from skyrl_hyperpod.ops.cost import MLFLOW_APP_COMPONENT

    console = cost_json()
    assert not [i for i in console["items"] if i["component"] == MLFLOW_APP_COMPONENT]
    managed = cost_json("--config", write_config(tmp_path, {"tracking": {"backend": "mlflow"}}))
    app = item(managed, MLFLOW_APP_COMPONENT)
    assert app["confirmed"] is False
    assert "not priced" in app["note"]
    assert MLFLOW_APP_COMPONENT in managed["unconfirmed"]
    # Nothing is guessed into the totals: the managed app adds no dollars to the console configuration's.
    assert managed["totals"]["hourly"] == pytest.approx(console["totals"]["hourly"])
    self_hosted = {"tracking": {"backend": "mlflow", "tracking_uri": "https://mlflow.example.com"}}
    own = cost_json("--config", write_config(tmp_path, self_hosted))
    assert not [i for i in own["items"] if i["component"] == MLFLOW_APP_COMPONENT]


def test_a_price_file_with_the_apps_rate_prices_the_managed_mlflow_app(tmp_path, book):
    from skyrl_hyperpod.ops.cost import MLFLOW_APP_COMPONENT

    managed = write_config(tmp_path, {"tracking": {"backend": "mlflow"}})
    unpriced = cost_json("--config", managed)
    data = book.model_dump(mode="json")
    data["mlflow_app_hour"] = {"usd": 0.5, "source": "my account's bill", "confirmed": True}
    file = tmp_path / "prices.yaml"
    file.write_text(yaml.safe_dump(data))
    priced = cost_json("--config", managed, "--prices", str(file))
    app = item(priced, MLFLOW_APP_COMPONENT)
    assert app["hourly_usd"] == pytest.approx(0.5) and app["confirmed"] is True
    assert MLFLOW_APP_COMPONENT not in priced["unconfirmed"]
    assert priced["totals"]["hourly"] == pytest.approx(unpriced["totals"]["hourly"] + 0.5)


def test_an_on_demand_group_is_left_out_of_the_idle_day_and_the_month_as_in_the_scaling_comparison(tmp_path):
    from conftest import VARIANT_ON_DEMAND

    fixed = cost_json()
    on_demand = cost_json("--config", write_config(tmp_path, VARIANT_ON_DEMAND))
    totals = on_demand["totals"]
    # The headline idle day is the comparison's on_demand one, not the fixed nodes' around-the-clock bill.
    assert totals["idle_per_day"] == pytest.approx(on_demand["scaling"]["on_demand"]["idle_day_usd"], abs=0.01)
    assert totals["idle_per_day"] < fixed["totals"]["idle_per_day"]
    assert totals["monthly"] < fixed["totals"]["monthly"]
    # A run holds every node: its cost is the fixed one.
    assert totals["training_run"] == fixed["totals"]["training_run"]
    group = item(on_demand, "HyperPod group gpu-workers")
    assert group["on_demand"] is True and group["quantity"].startswith("0 to 3 x ")
    assert item(on_demand, "HyperPod node EBS volumes (on-demand nodes)")["on_demand"] is True
    assert (
        "on-demand nodes at 0" in run("--region", REGION, "--config", write_config(tmp_path, VARIANT_ON_DEMAND)).stdout
    )
