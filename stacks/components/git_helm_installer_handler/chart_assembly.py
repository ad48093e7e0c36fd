"""The git Helm installer's chart assembly: the chart as Helm loads it, verified, and the commands it runs.

`assemble_chart` makes a chart directory what Helm installs (the rules are below, above `Dependency`):
file:// sub-charts stay folders, stale archives beside them are removed, the remote dependencies Helm
enables are obtained (by the caller's `obtain_archive`, which verifies them) and the ones the values disable
stand as placeholders. `chart_members` and `tree_problems` select and verify the chart's files; Helm itself
reads every YAML file (`read_yaml_files`: the Lambda runtime has no YAML library). Every command runs under a
deadline (`run_command`): on expiry its process group gets SIGTERM (Helm >= 3.7 then marks the release failed
instead of leaving it pending-*, helm/helm pull request 9180) and SIGKILL only TERM_GRACE_S later.

Shared by the installer's Lambda handler (index.py, which imports this file as the top-level module
`chart_assembly`: the asset directory is the function's task root, on sys.path) and by `skyrl-hp chart-check
--render` (skyrl_hyperpod/validation/hyperpod_chart.py, `chart_assembly_module()`), which loads it by path and
runs it offline with the same Helm binary. Nothing here talks to CloudFormation, the cluster or the network:
the Helm binary, the runner and the archives come from the caller.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any, NamedTuple

# A mirror holds files under their upstream names; only exact chart versions map to one file.
EXACT_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.+-]+)?$")
# A chart archive as Helm writes it (chartutil.Save: <name>-<version>.tgz).
ARCHIVE_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.+-]+)?\.tgz$")
# file:// sub-charts of file:// sub-charts: deeper than this is a loop.
MAX_CHART_NESTING = 4
# Between SIGTERM and SIGKILL: Helm records the failed release in this time.
TERM_GRACE_S = 20
# What sha256_file (and the handler's downloads) read at a time.
DOWNLOAD_CHUNK = 1 << 20
# Output of a Helm/kubectl/AWS CLI run that failed for a reason worth retrying.
TRANSIENT_OUTPUT = re.compile(
    r"i/o timeout|connection refused|connection reset|TLS handshake timeout|no such host|"
    r"temporary failure in name resolution|unexpected EOF|Client\.Timeout exceeded|"
    r"server is currently unable to handle the request|etcdserver: request timed out|"
    r"too many requests|status code:? (?:429|5[0-9][0-9])|\b(?:502|503|504) ",
    re.IGNORECASE,
)

Runner = Callable[[list[str]], str]


class InstallError(RuntimeError):
    """A failure reported to CloudFormation as is."""


class TransientError(InstallError):
    """A failure that may pass on a later attempt (network, throttling)."""


class CommandTimeout(InstallError):
    """A process outlived its deadline and was terminated."""


# --- the chart's files ----------------------------------------------------------------------------


def chart_members(names: list[str], chart_path: str) -> tuple[str, list[str]]:
    """(archive top directory, member names under <top>/<chart_path>/) of a GitHub tarball."""
    chart = PurePosixPath(chart_path.rstrip("/"))
    if chart.is_absolute() or ".." in chart.parts or not chart.parts:
        raise ValueError(f"chart path {chart_path!r} must be a relative path inside the repository")
    tops = {PurePosixPath(name).parts[0] for name in names if name}
    if len(tops) != 1:
        raise ValueError(f"expected one top-level directory in the archive, found {sorted(tops)}")
    top = tops.pop()
    root = f"{top}/{chart}"
    members = [name for name in names if name == root or name.startswith(root + "/")]
    if not members:
        raise ValueError(f"chart path {chart_path!r} is not in the archive")
    return top, members


def tree_problems(chart_dir: str, expected: dict[str, str]) -> list[str]:
    """One line per file of `chart_dir` that differs from, is missing from or is not in `expected`
    (relative path -> sha256); links are refused."""
    found: dict[str, str] = {}
    problems: list[str] = []
    for root, dirs, files in os.walk(chart_dir):
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, chart_dir).replace(os.sep, "/")
            if os.path.islink(path):
                problems.append(f"{relative} is a link: refused")
            elif os.path.isfile(path):
                found[relative] = sha256_file(path)
    for relative in sorted(set(found) | set(expected)):
        if relative not in expected:
            problems.append(f"{relative} is not in the chart's sha256 list")
        elif relative not in found:
            problems.append(f"{relative} is missing")
        elif found[relative] != expected[relative]:
            problems.append(f"{relative} has sha256 {found[relative]}, expected {expected[relative]}")
    return problems


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(DOWNLOAD_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def archive_names(name: str, version: str) -> list[str]:
    """File names a chart repository may give `name` at exact `version` (with and without a leading v:
    aws/eks-charts publishes aws-efa-k8s-device-plugin 0.5.20 as ...-v0.5.20.tgz)."""
    bare = version.removeprefix("v")
    return list(dict.fromkeys([f"{name}-{version}.tgz", f"{name}-{bare}.tgz", f"{name}-v{bare}.tgz"]))


# --- Helm's environment and the files it reads ---------------------------------------------------


def helm_environment(workdir: str, base: dict[str, str]) -> dict[str, str]:
    """Every tool's home and cache under `workdir` (Lambda's file system is read-only outside /tmp)."""
    return {
        **base,
        "HOME": workdir,
        "KUBECONFIG": os.path.join(workdir, "kubeconfig"),
        "HELM_CACHE_HOME": os.path.join(workdir, "helm-cache"),
        "HELM_CONFIG_HOME": os.path.join(workdir, "helm-config"),
        "HELM_DATA_HOME": os.path.join(workdir, "helm-data"),
    }


def template_args(
    helm: str, release: str, chart_dir: str, namespace: str, values_file: str, kube_version: str, output_dir: str
) -> list[str]:
    """`helm template` of the chart the handler's `upgrade_args` installs, with the same release, namespace and values."""
    return [
        helm, "template", release, chart_dir,
        "--namespace", namespace,
        "--values", values_file,
        "--kube-version", kube_version,
        "--output-dir", output_dir,
    ]  # fmt: skip


def write_values(workdir: str, values_json: str) -> str:
    """The values file `helm upgrade` (and `helm template`) read: the resource's `Values` JSON as given."""
    path = os.path.join(workdir, "values.json")
    with open(path, "w", encoding="utf-8") as out:
        out.write(values_json or "{}")
    return path


# --- chart assembly: the chart as Helm loads it ------------------------------------------------------
#
# What Helm does (helm/helm v4.1.4):
# - pkg/chart/v2/loader/load.go LoadFiles: every folder and every .tgz directly in charts/ is loaded as a
#   dependency (names starting with "_" or "." are skipped). A folder and a stale archive of the same chart
#   are BOTH loaded, in Go map order, i.e. at random;
# - pkg/action/install.go CheckDependencies (run by `helm install`, `helm upgrade` and `helm template` on the
#   top chart only): every dependency in Chart.yaml must be present in charts/ by name, enabled or not;
# - pkg/chart/v2/util/dependencies.go processDependencyEnabled: tags, then conditions (the first condition
#   path that holds a bool decides) remove disabled dependencies before anything renders; the first loaded
#   chart whose name and version match a Chart.yaml entry is the one rendered;
# - `helm dependency build` (pkg/downloader/manager.go) packages file:// charts without checking their own
#   dependencies and does not descend into them; `helm package` runs CheckDependencies, which is why
#   packaging a file:// sub-chart that declares remote dependencies it does not ship fails.
# So: file:// sub-charts stay folders in charts/ and any archive of the same chart there is removed; remote
# dependencies Helm enables are downloaded and verified; a remote dependency the values disable is present
# only as an empty placeholder (for CheckDependencies) whose only template fails, so that Helm ever
# enabling it stops the install instead of installing nothing; a file:// sub-chart's own dependencies are
# assembled the same way when it is enabled, and not touched when it is disabled.


class Dependency(NamedTuple):
    name: str
    version: str
    repository: str
    alias: str = ""
    condition: str = ""
    tags: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Where its values live in the parent's values (and the name it renders under)."""
        return self.alias or self.name


class Assembly:
    """What `assemble_chart` did to one chart (and, in `nested`, to its enabled file:// sub-charts)."""

    def __init__(self, chart: str) -> None:
        self.chart = chart
        self.local: list[str] = []
        self.downloaded: list[str] = []
        self.placeholders: list[str] = []
        self.removed: list[str] = []
        self.disabled: list[str] = []
        self.nested: dict[str, Assembly] = {}

    def describe(self) -> str:
        parts = [
            f"{len(self.local)} file:// sub-charts kept as folders",
            f"remote archives: {', '.join(self.downloaded) or '-'}",
            f"disabled remote dependencies not downloaded: {', '.join(self.placeholders) or '-'}",
            f"stale archives removed: {', '.join(self.removed) or '-'}",
        ]
        text = f"{self.chart}: " + "; ".join(parts)
        return "\n".join([text, *(sub.describe() for sub in self.nested.values())])


def dependencies_of(chart_meta: Any) -> list[Dependency]:
    """The `dependencies` of a parsed Chart.yaml."""
    entries = chart_meta.get("dependencies") if isinstance(chart_meta, dict) else None
    found = []
    for entry in entries or []:
        if not isinstance(entry, dict) or not entry.get("name"):
            raise InstallError(f"Chart.yaml dependency {entry!r} has no name")
        found.append(
            Dependency(
                name=str(entry["name"]),
                version=str(entry.get("version") or ""),
                repository=str(entry.get("repository") or ""),
                alias=str(entry.get("alias") or ""),
                condition=str(entry.get("condition") or ""),
                tags=tuple(str(t) for t in entry.get("tags") or ()),
            )
        )
    return found


def merge_values(base: Any, override: Any) -> Any:
    """Helm's coalescing of values: mappings merge key by key, anything else (lists too) is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge_values(base.get(key), value) if key in base else value
        return merged
    return override


def _path_value(values: Any, path: str) -> tuple[bool, Any]:
    node = values
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def dependency_enabled(dependency: Dependency, values: dict) -> bool | None:
    """Helm's verdict on `dependency` under the parent's coalesced `values`: tags, then the first condition
    path holding a bool. None when nothing in `values` decides (Helm then keeps the dependency; its own
    defaults, unknown before it is downloaded, could still decide a condition)."""
    verdict: bool | None = None
    table = values.get("tags")
    tags: dict = table if isinstance(table, dict) else {}
    flags = [tags[t] for t in dependency.tags if isinstance(tags.get(t), bool)]
    if flags:
        verdict = any(flags)
    for condition in (c.strip() for c in dependency.condition.split(",")):
        found, value = _path_value(values, condition) if condition else (False, None)
        if found and isinstance(value, bool):
            return value
    return verdict


PROBE_CHART = "apiVersion: v2\nname: yaml-reader\nversion: 0.0.0\n"
# Each input file, parsed by Helm's own YAML reader (`fromYaml`: sigs.k8s.io/yaml, as for Chart.yaml and
# values), as one JSON object keyed by file name. The Lambda runtime has no YAML library.
PROBE_TEMPLATE = (
    '{{- $out := dict -}}{{- range $path, $bytes := .Files.Glob "in/*" -}}'
    "{{- $_ := set $out (base $path) (fromYaml ($.Files.Get $path)) -}}{{- end -}}{{ toJson $out }}\n"
)


def read_yaml_files(paths: list[str], *, helm: str, run: Runner, workdir: str) -> list[Any]:
    """Each file parsed (None for a file that does not exist), with one `helm template` run."""
    probe = tempfile.mkdtemp(dir=workdir, prefix="yaml-reader-")
    os.makedirs(os.path.join(probe, "templates"))
    os.makedirs(os.path.join(probe, "in"))
    with open(os.path.join(probe, "Chart.yaml"), "w", encoding="utf-8") as out:
        out.write(PROBE_CHART)
    with open(os.path.join(probe, "templates", "read.yaml"), "w", encoding="utf-8") as out:
        out.write(PROBE_TEMPLATE)
    names: list[str | None] = []
    for index, path in enumerate(paths):
        if os.path.isfile(path):
            names.append(f"{index:04d}.yaml")
            shutil.copyfile(path, os.path.join(probe, "in", f"{index:04d}.yaml"))
        else:
            names.append(None)
    text = run([helm, "template", "yaml-reader", probe])
    shutil.rmtree(probe, ignore_errors=True)
    parsed = json.loads(text[text.index("{") :]) if "{" in text else {}
    results = []
    for path, name in zip(paths, names, strict=True):
        value = parsed.get(name) if name else None
        if isinstance(value, dict) and set(value) == {"Error"}:
            raise InstallError(f"{path} is not valid YAML: {value['Error']}")
        results.append(value)
    return results


def place_local_subchart(dependency: Dependency, source: str, charts_dir: str) -> str:
    """The folder Helm loads for a file:// dependency: `source` itself when it sits directly in charts/,
    else a copy of it there (Helm loads nothing deeper)."""
    if os.path.dirname(os.path.normpath(source)) == os.path.normpath(charts_dir):
        return source
    target = os.path.join(charts_dir, os.path.basename(os.path.normpath(source)))
    if os.path.exists(target):
        raise InstallError(f"sub-chart {dependency.name}: charts/{os.path.basename(target)} already exists")
    shutil.copytree(source, target, symlinks=False)
    return target


def write_placeholder(dependency: Dependency, charts_dir: str) -> str:
    """An empty chart standing for a disabled remote dependency: it satisfies CheckDependencies and Helm
    drops it with the dependency; its only template fails if Helm ever renders it."""
    folder = os.path.join(charts_dir, f"disabled-{dependency.name}")
    os.makedirs(os.path.join(folder, "templates"), exist_ok=True)
    with open(os.path.join(folder, "Chart.yaml"), "w", encoding="utf-8") as out:
        out.write(
            f"apiVersion: v2\nname: {json.dumps(dependency.name)}\nversion: {json.dumps(dependency.version)}\n"
            'description: "Placeholder: this dependency is disabled by the values, so it was not downloaded."\n'
        )
    message = (
        f"skyrl-hp: {dependency.name} {dependency.version} was judged disabled (condition "
        f"{dependency.condition or '-'}, tags {','.join(dependency.tags) or '-'}) and not downloaded, but Helm "
        "enables it: the installer's reading of the values differs from Helm's"
    )
    with open(os.path.join(folder, "templates", "disabled.yaml"), "w", encoding="utf-8") as out:
        out.write("{{ fail " + json.dumps(message) + " }}\n")
    return folder


def remove_stale_archives(charts_dir: str, dependencies: list[Dependency]) -> list[str]:
    """Archives in charts/ of a chart this assembly places itself (a file:// folder, a download or a
    placeholder): Helm would load them next to the placed chart and render either."""
    managed = {d.name for d in dependencies if d.repository}
    removed = []
    for name in sorted(os.listdir(charts_dir)):
        path = os.path.join(charts_dir, name)
        if not os.path.isfile(path) or not name.endswith(".tgz"):
            continue
        if any(name.startswith(f"{chart}-") and ARCHIVE_VERSION.fullmatch(name[len(chart) + 1 :]) for chart in managed):
            os.remove(path)
            removed.append(name)
    return removed


def is_local(repository: str) -> bool:
    return repository.startswith("file://")


def local_sources(chart_dir: str, dependencies: list[Dependency], root: str) -> dict[Dependency, str]:
    """The folder of each file:// dependency of the chart in `chart_dir`; one outside `root` is refused."""
    sources: dict[Dependency, str] = {}
    for dependency in dependencies:
        if is_local(dependency.repository):
            source = os.path.normpath(os.path.join(chart_dir, dependency.repository[len("file://") :]))
            if not source.startswith(os.path.normpath(root) + os.sep):
                raise InstallError(
                    f"sub-chart {dependency.name} points outside the downloaded repository: {dependency.repository}"
                )
            sources[dependency] = source
    return sources


def coalesced_values(defaults: Any, values: dict, local_defaults: dict[Dependency, Any]) -> dict:
    """The parent's values as Helm coalesces them before judging conditions: the chart's defaults under the
    given values, each file:// sub-chart's defaults under its key (the parent's entries win)."""
    coalesced: dict = merge_values(defaults if isinstance(defaults, dict) else {}, values)
    for dependency, sub_defaults in local_defaults.items():
        if isinstance(sub_defaults, dict):
            coalesced[dependency.key] = merge_values(sub_defaults, coalesced.get(dependency.key) or {})
    return coalesced


def check_local_chart(dependency: Dependency, meta: Any) -> None:
    """The file:// sub-chart's parsed Chart.yaml `meta` exists and names the chart `dependency` asks for."""
    if not isinstance(meta, dict):
        raise InstallError(f"sub-chart {dependency.name}: {dependency.repository} has no Chart.yaml")
    if meta.get("name") != dependency.name:
        raise InstallError(
            f"sub-chart {dependency.name}: {dependency.repository}/Chart.yaml is named {meta.get('name')!r}"
        )


def place_dependencies(
    dependencies: list[Dependency],
    coalesced: dict,
    *,
    sources: dict[Dependency, str],
    local_meta: dict[Dependency, Any],
    charts_dir: str,
    assembly: Assembly,
    obtain_archive: Callable[[Dependency, str], str],
) -> dict[Dependency, str]:
    """Each dependency put where Helm loads it (a file:// folder, a downloaded archive or a placeholder), as
    `assembly` records; the folders of the file:// sub-charts."""
    folders: dict[Dependency, str] = {}
    for dependency in dependencies:
        enabled = dependency_enabled(dependency, coalesced)
        if enabled is False:
            assembly.disabled.append(dependency.key)
        if dependency in sources:
            check_local_chart(dependency, local_meta[dependency])
            folders[dependency] = place_local_subchart(dependency, sources[dependency], charts_dir)
            assembly.local.append(dependency.key)
        elif not dependency.repository:
            continue  # "no repository": the chart is expected in charts/ already (Helm's rule too)
        elif enabled is False and EXACT_VERSION.fullmatch(dependency.version):
            write_placeholder(dependency, charts_dir)
            assembly.placeholders.append(f"{dependency.name}-{dependency.version}")
        else:
            assembly.downloaded.append(obtain_archive(dependency, charts_dir))
    return folders


def sub_chart_values(coalesced: dict, dependency: Dependency) -> dict:
    """The values Helm hands a sub-chart: the parent's section under its key, with the parent's globals."""
    section = coalesced.get(dependency.key)
    sub_values = section if isinstance(section, dict) else {}
    if "global" in coalesced:
        sub_values = merge_values(sub_values, {"global": coalesced["global"]})
    return sub_values


def assemble_chart(
    chart_dir: str,
    values: dict,
    *,
    helm: str,
    run: Runner,
    workdir: str,
    root: str,
    obtain_archive: Callable[[Dependency, str], str],
    depth: int = 0,
) -> Assembly:
    """Make `chart_dir` what Helm installs (see the rules above). `values` are the values given to this
    chart; `obtain_archive(dependency, charts_dir)` puts a verified archive of a remote dependency into
    charts_dir and returns its file name; file:// paths must stay inside `root`."""
    if depth > MAX_CHART_NESTING:
        raise InstallError(f"{chart_dir}: file:// sub-charts nest deeper than {MAX_CHART_NESTING} levels")
    chart_meta, defaults = read_yaml_files(
        [os.path.join(chart_dir, "Chart.yaml"), os.path.join(chart_dir, "values.yaml")],
        helm=helm,
        run=run,
        workdir=workdir,
    )
    if not isinstance(chart_meta, dict):
        raise InstallError(f"{chart_dir} has no Chart.yaml")
    assembly = Assembly(chart=str(chart_meta.get("name") or os.path.basename(chart_dir)))
    dependencies = dependencies_of(chart_meta)
    charts_dir = os.path.join(chart_dir, "charts")
    os.makedirs(charts_dir, exist_ok=True)

    sources = local_sources(chart_dir, dependencies, root)
    local_files = read_yaml_files(
        [os.path.join(sources[d], f) for d in sources for f in ("Chart.yaml", "values.yaml")],
        helm=helm,
        run=run,
        workdir=workdir,
    )
    local_meta = {d: local_files[2 * i] for i, d in enumerate(sources)}
    coalesced = coalesced_values(defaults, values, {d: local_files[2 * i + 1] for i, d in enumerate(sources)})

    assembly.removed = remove_stale_archives(charts_dir, dependencies)
    folders = place_dependencies(
        dependencies,
        coalesced,
        sources=sources,
        local_meta=local_meta,
        charts_dir=charts_dir,
        assembly=assembly,
        obtain_archive=obtain_archive,
    )

    for dependency, folder in folders.items():
        if dependency_enabled(dependency, coalesced) is False or not dependencies_of(local_meta[dependency]):
            continue
        assembly.nested[dependency.key] = assemble_chart(
            folder,
            sub_chart_values(coalesced, dependency),
            helm=helm,
            run=run,
            workdir=workdir,
            root=root,
            obtain_archive=obtain_archive,
            depth=depth + 1,
        )
    return assembly


# --- commands under a deadline -------------------------------------------------------------------

# The clock of every Deadline (the tests replace it).
clock = time.monotonic


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = clock() + seconds

    def left(self) -> float:
        return self.end - clock()


def wait_for_exit(process: subprocess.Popen, timeout_s: float) -> None:
    """process.wait(timeout=timeout_s), woken by the exit itself: Popen.wait with a timeout polls, sleeping up to
    50 ms between checks, and a request runs a dozen short Helm commands. A pidfd (Linux >= 5.3) becomes readable
    when the process exits."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux, or a kernel without pidfd_open
        process.wait(timeout=timeout_s)
        return
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        exited = poller.poll(max(timeout_s, 0) * 1000)
    finally:
        os.close(pidfd)
    if not exited:
        raise subprocess.TimeoutExpired(process.args, timeout_s)
    process.wait()


def terminate(process: subprocess.Popen) -> str:
    """SIGTERM the process group, SIGKILL it after TERM_GRACE_S; how it ended."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return "had exited"
    try:
        wait_for_exit(process, TERM_GRACE_S)
        return "stopped on SIGTERM"
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return f"ignored SIGTERM for {TERM_GRACE_S}s and was killed (SIGKILL)"


def run_command(args: list[str], env: dict, deadline_s: float, stdin: str | None = None, quiet: bool = False) -> str:
    """Run `args` within `deadline_s` seconds; its output, or InstallError/TransientError/CommandTimeout.
    `quiet`: the output is not logged when the command succeeds."""
    if deadline_s <= 0:
        raise InstallError(f"no time left to run {' '.join(args[:3])}")
    print("$", " ".join(args), flush=True)
    with tempfile.TemporaryFile("w+") as output:
        # Own process group: the signals reach Helm's children (plugins, credential helpers) too.
        process = subprocess.Popen(
            args,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            if stdin is not None and process.stdin is not None:
                process.stdin.write(stdin)
                process.stdin.close()
            wait_for_exit(process, deadline_s)
            ended = None
        except subprocess.TimeoutExpired:
            ended = terminate(process)
        output.seek(0)
        text = output.read().strip()
    command = " ".join(args[:3])
    if not quiet or ended is not None or process.returncode != 0:
        print(text, flush=True)
    if ended is not None:
        raise CommandTimeout(f"{command} did not finish within {deadline_s:.0f}s: {ended}. Output: {text[-1000:]}")
    if process.returncode != 0:
        error = TransientError if TRANSIENT_OUTPUT.search(text) else InstallError
        raise error(f"{command} failed ({process.returncode}): {text[-1500:]}")
    return text
