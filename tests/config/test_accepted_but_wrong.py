"""Inputs the configuration once took and then acted on wrongly, or reported with a misleading line: numbers that are
no numbers (true for a count, .inf for a rate), system namespaces for the workloads, sizes AWS refuses, moving image
tags, YAML 1.1's boolean keys and tagged values, and config paths that are no regular file."""

from __future__ import annotations

import os
import typing
from pathlib import Path

import annotated_types
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel
from test_training_config import only_problem, problems_for  # type: ignore[import-not-found]  # a sibling

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.config import ConfigError, load_config, validate_config
from skyrl_hyperpod.config.eks import MAX_PUBLIC_ACCESS_CIDRS
from skyrl_hyperpod.config.project import ProjectConfig
from skyrl_hyperpod.config.workloads import RESERVED_NAMESPACES
from skyrl_hyperpod.ops.cost import PriceBook, PriceError, load_price_book, price_file_for


def one_line_for(data: dict) -> str:
    line = only_problem(data)
    assert line.startswith("config error: "), line
    return line


def problem_in(tmp_path: Path, text: str) -> str:
    """The one problem of a configuration file holding `text`."""
    file = tmp_path / "config.yaml"
    file.write_text(text)
    return read_problem(file)


def nested(path: list[str], value: object) -> dict:
    for part in reversed(path):
        value = {part: value}
    return value  # type: ignore[return-value]


def _scalars(annotation: object) -> set[type]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _scalars(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return {type(choice) for choice in typing.get_args(annotation)}
    if origin is not None:
        return set().union(*(_scalars(arg) for arg in typing.get_args(annotation))) if origin is not dict else set()
    return {annotation} if isinstance(annotation, type) else set()


def number_fields(model: type[BaseModel], path: tuple[str, ...] = ()) -> dict[tuple[str, ...], tuple[set[type], list]]:
    """Every field that takes a number directly, anywhere under `model` -> (its scalar types, its constraints);
    sections that are lists of models (experiments) or mappings of free-form values are left out."""
    found: dict[tuple[str, ...], tuple[set[type], list]] = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        submodels = [arg for arg in (annotation, *typing.get_args(annotation)) if isinstance(arg, type)]
        section = next((arg for arg in submodels if issubclass(arg, BaseModel)), None)
        if section is not None and typing.get_origin(annotation) is None:
            found |= number_fields(section, (*path, name))
            continue
        kinds = _scalars(annotation)
        if kinds & {int, float} and bool not in kinds and str not in kinds:
            found[(*path, name)] = (kinds, list(field.metadata))
    return found


CONFIG_NUMBERS = number_fields(ProjectConfig)
CONFIG_FLOATS = sorted(path for path, (kinds, _) in CONFIG_NUMBERS.items() if float in kinds)
PRICE_FLOATS = sorted(path for path, (kinds, _) in number_fields(PriceBook).items() if float in kinds)


def test_the_walk_finds_the_number_fields_it_must():
    assert ("training", "knobs", "learning_rate") in CONFIG_FLOATS
    assert ("training", "jobs", "estimated_step_seconds") in CONFIG_FLOATS
    assert ("hyperpod", "worker_group", "instance_count") in CONFIG_NUMBERS
    assert ("hours_per_month",) in PRICE_FLOATS
    assert ("eks_control_plane_hour", "usd") in PRICE_FLOATS
    assert len(CONFIG_FLOATS) >= 8 and len(CONFIG_NUMBERS) >= 70


@pytest.mark.parametrize("path", CONFIG_FLOATS, ids=".".join)
def test_every_decimal_field_has_an_upper_bound(path):
    _, constraints = CONFIG_NUMBERS[path]
    assert any(isinstance(c, (annotated_types.Le, annotated_types.Lt)) for c in constraints), ".".join(path)


@pytest.mark.parametrize("path", CONFIG_FLOATS, ids=".".join)
@pytest.mark.parametrize("written", [".inf", "-.inf", ".nan", "1e308", "1e400"])
def test_an_infinite_huge_or_nan_decimal_is_one_line_naming_the_field(tmp_path, path, written):
    line = problem_in(tmp_path, yaml.safe_dump(nested(list(path), "VALUE")).replace("VALUE", written))
    assert line.startswith(f"config error: {'.'.join(path)} = "), line


def test_learning_rate_inf_was_taken_and_is_now_refused():
    line = one_line_for({"training": {"knobs": {"learning_rate": float("inf")}}})
    assert line == (
        "config error: training.knobs.learning_rate = inf: must be a finite number (YAML reads .inf, .nan and "
        "literals beyond 1.8e308 as infinite or NaN)"
    )
    assert "less than or equal to 1" in one_line_for({"training": {"knobs": {"learning_rate": 1e308}}})


def test_a_non_finite_value_in_free_form_overrides_is_one_line():
    line = one_line_for(
        {
            "training": {
                "experiments": [
                    {"name": "maze-grpo", "overrides": {"trainer.policy.optimizer_config.lr": float("nan")}}
                ]
            }
        }
    )
    assert "trainer.policy.optimizer_config.lr: must be a finite number" in line


@pytest.mark.parametrize("path", PRICE_FLOATS, ids=".".join)
@pytest.mark.parametrize("written", [".inf", ".nan", "1e308"])
def test_a_price_file_refuses_infinite_huge_and_nan_numbers(tmp_path, path, written):
    shipped = yaml.safe_load(price_file_for("us-west-2").read_text())
    section = shipped
    for part in path[:-1]:
        section = section[part]
    section[path[-1]] = "VALUE"
    file = tmp_path / "prices.yaml"
    file.write_text(yaml.safe_dump(shipped).replace("VALUE", written))
    with pytest.raises(PriceError) as caught:
        load_price_book(file)
    [line] = caught.value.problems
    assert f": {'.'.join(path)}: " in line, line


@pytest.mark.parametrize(
    ("option", "value"),
    [("cost --hours", "inf"), ("cost --hours", "nan"), ("teardown --plan --timeout", "nan"),
     ("train start --timeout", "inf")],
)  # fmt: skip
def test_command_line_decimals_must_be_finite(option, value):
    *command, flag = option.split()
    result = CliRunner().invoke(cli, [*command, flag, value])
    assert result.exit_code == 2, result.output
    assert "is not a finite number" in result.output or "is not in the range" in result.output, result.output
    assert "Traceback" not in result.output


# --- whole numbers are written as whole numbers ---------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(CONFIG_NUMBERS), ids=".".join)
def test_true_is_no_number_for_any_number_field(path):
    kinds, _ = CONFIG_NUMBERS[path]
    line = one_line_for(nested(list(path), True))
    assert line.startswith(f"config error: {'.'.join(path)} = True: must be "), line
    assert line.endswith("not true/false"), line


def test_instance_count_true_was_one_node_and_is_now_refused():
    line = one_line_for({"hyperpod": {"worker_group": {"instance_count": True}}})
    assert line == "config error: hyperpod.worker_group.instance_count = True: must be a whole number, not true/false"


@pytest.mark.parametrize("value", [3.0, "3"])
def test_a_whole_number_field_refuses_a_decimal_or_quoted_digits(value):
    line = one_line_for({"hyperpod": {"worker_group": {"instance_count": value}}})
    assert "must be a whole number written as one (no decimal point, no quotes)" in line


# --- namespaces that are not the workloads' to take -----------------------------------------------------------------


@pytest.mark.parametrize("namespace", sorted(RESERVED_NAMESPACES))
def test_system_and_add_on_namespaces_are_refused_for_the_workloads(namespace):
    line = one_line_for({"workloads": {"namespace": namespace}})
    assert line.startswith(f"config error: workloads.namespace = {namespace!r}: {namespace!r} is "), line
    assert "choose one of their own" in line


def test_kube_system_and_the_operators_namespace_are_among_them():
    from skyrl_hyperpod.config.names import KUBERAY_NAMESPACE

    assert {"kube-system", "kube-public", "kube-node-lease", "default", KUBERAY_NAMESPACE} <= set(RESERVED_NAMESPACES)


def test_every_namespace_the_stacks_install_into_is_reserved():
    from skyrl_hyperpod.values.helm_values import HYPERPOD_DEPENDENCIES_NAMESPACE
    from stacks.components.eks_addons import FSX_CSI_NAMESPACE
    from stacks.components.observability import ADDON_NAMESPACE
    from stacks.eks_stack import KUBERAY_NAMESPACE

    assert {HYPERPOD_DEPENDENCIES_NAMESPACE, FSX_CSI_NAMESPACE, ADDON_NAMESPACE, KUBERAY_NAMESPACE} <= set(
        RESERVED_NAMESPACES
    )


def test_the_ray_endpoint_operators_namespace_is_refused_too():
    line = one_line_for({"workloads": {"namespace": "ray-ops"}, "ray_endpoint_operator": {"namespace": "ray-ops"}})
    assert line.startswith("config error: workloads: namespace 'ray-ops' is ray_endpoint_operator.namespace")
    assert validate_config({"workloads": {"namespace": "team-a"}}).workloads.namespace == "team-a"


# --- sizes and counts AWS refuses -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vpc", "subnet"), [("10.0.0.0/8", "10.128.0.0/18"), ("10.0.0.0/15", "10.1.0.0/18")], ids=["/8", "/15"]
)
def test_a_vpc_larger_than_aws_allows_is_refused(vpc, subnet):
    line = one_line_for({"network": {"vpc_cidr": vpc, "hyperpod_subnet_cidr": subnet}})
    assert f"vpc_cidr {vpc} is larger than AWS allows" in line and "use /16 to /20" in line


@pytest.mark.parametrize(("vpc", "subnet"), [("10.0.0.0/16", "10.0.128.0/18"), ("10.0.0.0/20", "10.0.8.0/22")])
def test_vpcs_from_16_to_20_are_accepted(vpc, subnet):
    assert validate_config({"network": {"vpc_cidr": vpc, "hyperpod_subnet_cidr": subnet}}).network.vpc_cidr == vpc


def egress_ranges(count: int) -> list[str]:
    return [f"198.18.{n // 256}.{n % 256}/32" for n in range(count)]


def test_public_access_cidrs_beyond_the_eks_quota_are_one_short_line():
    assert (
        len(
            validate_config(
                {"eks": {"public_access_cidrs": egress_ranges(MAX_PUBLIC_ACCESS_CIDRS)}}
            ).eks.public_access_cidrs
        )
        == 40
    )
    line = one_line_for({"eks": {"public_access_cidrs": egress_ranges(41)}})
    assert "41 CIDRs listed; EKS accepts at most 40 per cluster" in line
    line = one_line_for({"eks": {"public_access_cidrs": egress_ranges(5000)}})
    assert (
        line.startswith("config error: eks.public_access_cidrs = a list of 5,000 items: 5000 CIDRs listed")
        and len(line) < 400
    )


def test_a_gpu_type_for_the_head_group_is_refused():
    line = one_line_for({"hyperpod": {"head_group": {"instance_type": "ml.g7e.12xlarge"}}})
    assert line.startswith("config error: hyperpod: head_group.instance_type ml.g7e.12xlarge has 2 GPU(s)")
    assert "choose a CPU type such as ml.r5d.16xlarge" in line


# --- images pinned ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "image", "says"),
    [
        ({"serving_image": {"image": "rayproject/ray:latest"}}, "serving_image.image", "moving 'latest' tag"),
        ({"serving_image": {"image": "rayproject/ray"}}, "serving_image.image", "must name a tag or a digest"),
        ({"serving_image": {"image": "registry:5000/ray"}}, "serving_image.image", "must name a tag or a digest"),
        ({"serving": {"publish": {"image": "amazon/aws-cli:latest"}}}, "serving.publish.image", "moving 'latest'"),
        ({"serving": {"publish": {"image": "amazon/aws-cli"}}}, "serving.publish.image", "must name a tag"),
    ],
)
def test_serving_and_publish_images_need_a_tag_other_than_latest_or_a_digest(section, image, says):
    line = one_line_for(section)
    assert line.startswith(f"config error: {image} = ") and says in line, line


def test_pinned_images_with_a_registry_port_or_a_digest_are_accepted():
    digest = "amazon/aws-cli@sha256:" + "0" * 64
    config = validate_config(
        {"serving_image": {"image": "registry:5000/ray:2.57.0"}, "serving": {"publish": {"image": digest}}}
    )
    assert config.serving.publish.image == digest


# --- YAML that reads differently than it looks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line_number", "key"),
    [("on: 1\n", 1, "'on'"), ("eks:\n  yes: true\n", 2, "'eks.yes'"), ("training:\n  ~: 1\n", 2, "'training.~'"),
     ("Off:\n  a: 1\n", 1, "'Off'")],
)  # fmt: skip
def test_a_key_yaml_reads_as_a_boolean_or_null_is_one_line(tmp_path, text, line_number, key):
    line = problem_in(tmp_path, text)
    assert line.startswith(f"config error: {tmp_path / 'config.yaml'} at line {line_number}: key {key} is read as "), (
        line
    )
    assert "quote it" in line


def test_a_quoted_on_is_a_name():
    # Quoted, it is the word: an unknown section like any other, named as written.
    assert problems_for({"on": 1}) == [
        "config error: on: unknown section; the sections are "
        + ", ".join(ProjectConfig.model_fields)
        + " (see docs/configuration.md)"
    ]


@pytest.mark.parametrize(
    "text", ["name_prefix: !!binary cHJvZA==\n", "eks:\n  public_access_cidrs: !!set {198.18.0.1/32}\n",
             "serving:\n  client_namespaces: !!omap [apps: 1]\n"],
)  # fmt: skip
def test_tagged_values_that_load_as_bytes_sets_or_pairs_are_refused(tmp_path, text):
    # !!binary cHJvZA== is b"prod": pydantic took it as the name prefix "prod".
    line = problem_in(tmp_path, text)
    assert " is tagged !!" in line and "write the value itself" in line, line


# --- a config path that is no regular file ---------------------------------------------------------------------------


def read_problem(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    [line] = caught.value.problems
    return line


def test_a_directory_is_named_as_a_directory(tmp_path):
    assert read_problem(tmp_path) == (
        f"config error: {str(tmp_path)!r} is a directory, not a configuration file: name the YAML file inside it"
    )


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    assert read_problem(fifo) == (
        f"config error: {str(fifo)!r} is a named pipe (FIFO): a configuration must be a regular YAML file"
    )


def test_a_symlink_loop_and_a_broken_link_say_so(tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert "is a symbolic link that leads back to itself (a loop)" in read_problem(loop)
    broken = tmp_path / "broken.yaml"
    broken.symlink_to(tmp_path / "gone.yaml")
    assert read_problem(broken) == (
        f"config error: file {str(broken)!r} is a symbolic link to {str(tmp_path / 'gone.yaml')!r}, which does not exist"
    )
    assert read_problem(tmp_path / "absent.yaml").endswith("absent.yaml' does not exist")


def test_a_directory_named_like_the_default_file_is_reported_not_passed_over(tmp_path, monkeypatch):
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "skyrl-hp.yaml").mkdir()
    with pytest.raises(ConfigError, match="'skyrl-hp.yaml' is a directory"):
        load_config(None)
