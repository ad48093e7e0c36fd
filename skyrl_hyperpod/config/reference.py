"""Generate the configuration reference (docs/configuration.md) from the typed model itself.

`skyrl-hp config reference > docs/configuration.md`; a test keeps the file in sync, and another loads every
section's example (EXAMPLES) through the configuration loader.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel

from .project import ProjectConfig


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _default(model: BaseModel, name: str) -> str:
    value = getattr(model, name)
    if isinstance(value, BaseModel):
        return ""
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return f"{len(value)} item(s), see below"
    return json.dumps(value if not isinstance(value, tuple) else list(value))


def _summary(model: type[BaseModel]) -> str:
    """A model's docstring up to its first blank line, as one line (its summary may span several lines)."""
    doc = (model.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(doc.split())


def _markdown(text: str) -> str:
    """Outside `code spans`, `<name>` shows as written instead of being read as an HTML tag."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code span
        parts = [text]
    for index in range(0, len(parts), 2):
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _submodel(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _submodel(arg)
        if found:
            return found
    return None


def _rows(model: BaseModel, prefix: str) -> list[str]:
    rows: list[str] = []
    nested: list[tuple[str, BaseModel]] = []
    for name, field in type(model).model_fields.items():
        path = f"{prefix}{name}"
        sub = _submodel(field.annotation)
        value = getattr(model, name)
        if sub is not None and isinstance(value, BaseModel):
            nested.append((path, value))
            continue
        description = _markdown(field.description or "").replace("|", "\\|")
        type_name = _type_name(field.annotation)
        default = _default(model, name).replace("|", "\\|")
        rows.append(f"| `{path}` | `{type_name}` | `{default}` | {description} |")
        if sub is not None and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    nested.append((f"{path}[{index}]", item))
    for path, value in nested:
        summary = _markdown(_summary(type(value))).replace("|", "\\|")
        rows.append(f"| **`{path}`** | section | | {summary} |")
        rows.extend(_rows(value, f"{path}."))
    return rows


TABLE_HEADER = ["| key | type | default | notes |", "|---|---|---|---|"]

# One example per section: a file that names only what it changes (every key is laid over its defaults).
# tests/test_docs.py loads each through the configuration loader, so an example that stops loading fails.
TOP_LEVEL = "top-level keys"
EXAMPLES: dict[str, str] = {
    TOP_LEVEL: """\
name_prefix: skyrl-dev          # every stack and physical name starts with it
""",
    "env": """\
env:
  region: us-west-2             # account left unset: synth stays offline
""",
    "network": """\
network:
  hyperpod_az_id: usw2-az1      # the AZ id where you have capacity for the GPU type
  nat_gateways: 2               # one per AZ
""",
    "eks": """\
eks:
  admin_principal_arns: ["arn:aws:iam::111111111111:role/platform-admin"]
  public_access_cidrs: ["203.0.113.0/24"]   # your egress CIDR, /16 or narrower
""",
    "hyperpod": """\
hyperpod:
  worker_group:
    instance_type: ml.g7e.24xlarge   # the group keeps its name, its count and its deep health checks
""",
    "fsx": """\
fsx:
  storage_capacity_gib: 2400
  per_unit_storage_throughput: 500
""",
    "observability": """\
observability:
  grafana: true                 # needs IAM Identity Center in the account
  metrics_level: Advanced
""",
    "alerts": """\
alerts:
  email_addresses: [ops@example.com]
""",
    "studio": """\
studio:
  enabled: true                 # a SageMaker Studio domain inside the VPC: a route to the private API endpoint
""",
    "ray_endpoint_operator": """\
ray_endpoint_operator:
  enabled: true
  domain: ray.example.com                               # a Route 53 domain you own
  commit: 0123456789abcdef0123456789abcdef01234567      # a commit that has the operator's chart
  spaces_addon_configuration:     # passed to the Spaces add-on verbatim: the keys its schema names for web browser access
    <key from describe-addon-configuration>: <value>
""",
    "versions": """\
versions:
  kuberay_operator_chart: "1.7.0"   # must equal the KubeRay release the manifests are validated against
""",
    "helm_installer": """\
helm_installer:
  archive_mirror: s3://my-bucket/helm-archives   # install without internet access
""",
    "training_image": """\
training_image:
  build_compute_type: X2_LARGE
  build_log_retention_days: 90
""",
    "serving_image": """\
serving_image:
  image: public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda-v1.0
  ray_version: "2.58.0"
""",
    "workloads": """\
workloads:
  namespace: skyrl-dev
  outputs_file: outputs-dev.json
""",
    "training": """\
training:
  knobs:
    lora_rank: 64
    lora_alpha: 64
  experiments:
    - name: maze-grpo
    - name: lr-1e-5
      overrides: {trainer.policy.optimizer_config.lr: 1.0e-5}
  data:
    train_rows: 128
  cluster:
    worker_shm_gib: 32
  jobs:
    failure_budget_gpu_hours: 9     # checkpoint twice as often as the reference
""",
    "tracking": """\
tracking:
  backend: mlflow               # SkyRL's MLflow logger; no tracking_uri: the stacks create a managed MLflow App
""",
    "serving": """\
serving:
  max_num_adapters_per_replica: 8
  client_namespaces: [apps]
  publish:
    experiment: maze-grpo
    step: 80
""",
}


def _example(section: str) -> list[str]:
    if section not in EXAMPLES:
        raise KeyError(f"configuration reference: no example for section {section!r}; add one to EXAMPLES")
    return ["Example:", "", "```yaml", *EXAMPLES[section].rstrip("\n").splitlines(), "```", ""]


def _anchor(heading: str) -> str:
    return heading.lower().replace(" ", "-")


def render() -> str:
    """The whole reference: a table of contents, the top-level keys, then one `## <section>` heading (the anchor
    the configuration errors point to) with its summary, its example and its table per section."""
    config = ProjectConfig()
    header = [
        "# Configuration reference",
        "",
        "Generated from `skyrl_hyperpod/config/` by `skyrl-hp config reference`; do not edit by hand.",
        "Every key is optional: a YAML file names only what it changes (see `config/example.yaml`), and each",
        "section is laid over its defaults, nested ones too (a list replaces the default list whole).",
        "Unknown keys are errors. Defaults reproduce the reference deployment. How the file is found, and the",
        "knobs worth knowing before a first deploy: [configuring.md](configuring.md).",
        "",
    ]
    top_level: list[str] = []
    sections: list[str] = []
    names: list[str] = []
    for name, field in ProjectConfig.model_fields.items():
        value = getattr(config, name)
        if _submodel(field.annotation) is None or not isinstance(value, BaseModel):
            top_level += _rows_for_field(config, name)
            continue
        names.append(name)
        sections += ["", f"## {name}", ""]
        summary = _summary(type(value))
        if summary:
            sections += [_markdown(summary), ""]
        sections += _example(name)
        sections += TABLE_HEADER + _rows(value, f"{name}.")
    toc = [f"- [{TOP_LEVEL}](#{_anchor(TOP_LEVEL)})", *(f"- [{name}](#{name})" for name in names)]
    top = ["", f"## {TOP_LEVEL}", "", *_example(TOP_LEVEL), *TABLE_HEADER, *top_level]
    return "\n".join(header + toc + top + sections) + "\n"


def _rows_for_field(model: BaseModel, name: str) -> list[str]:
    field = type(model).model_fields[name]
    description = _markdown(field.description or "").replace("|", "\\|")
    default = _default(model, name).replace("|", "\\|")
    return [f"| `{name}` | `{_type_name(field.annotation)}` | `{default}` | {description} |"]
