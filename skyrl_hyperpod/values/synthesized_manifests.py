"""The one reader of synthesized Kubernetes manifests (`cdk8s synth`'s dist/), for validate, apply and review.

The review gate reads a pull request's dist/, made by the pull request's own code: every file is read with the bounded
loader and its limits for synthesized manifests (plumbing/yaml_loading.py, MANIFEST_LIMITS), all of a directory's
files against one value budget, so that no dist/ costs the reader more than its limits say."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..plumbing.errors import ProblemsError
from ..plumbing.yaml_loading import MANIFEST_LIMITS, ValueBudget, YAMLLimitError, load_all_bounded

if TYPE_CHECKING:
    from ..config.loader import ConfigSource
    from ..config.project import ProjectConfig

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# A directory's manifests together (the default synthesis: 4 files, 80 KB, about 1,300 values; each experiment adds
# a RayJob of about 420): far above what a synthesis writes, far below what costs the reader seconds.
MAX_MANIFEST_FILES = 256
MAX_MANIFEST_BYTES = 32 * 1024 * 1024
MAX_MANIFEST_VALUES = 1_000_000

# The charts, in apply order (charts/__init__.py builds them; `skyrl-hp train/serve/adapter` apply them).
PLATFORM_CHART = "01-platform"
RAYCLUSTER_CHART = "02-raycluster"
RAYJOBS_CHART = "03-rayjobs"
PUBLISH_CHART = "04-publish-adapter"
RAYSERVICE_CHART = "05-rayservice"


def chart_file(chart_id: str) -> str:
    """The file `cdk8s synth` writes a chart to (one file per chart)."""
    return f"{chart_id}.k8s.yaml"


@dataclass(frozen=True)
class ManifestDocument:
    file: Path
    number: int  # 1-based position of the document in its file
    content: Any


def read_manifest_documents(directory: Path, *, prefix: str) -> list[ManifestDocument]:
    """Every non-empty document of the manifest files under `directory`, in file-name order.

    Problems start with `prefix` (e.g. "validation error") so each command's errors read alike."""
    if not directory.is_dir():
        raise ProblemsError([f"{prefix}: manifest directory {str(directory)!r} does not exist (run cdk8s synth)"])
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
    if not files:
        raise ProblemsError([f"{prefix}: no *.yaml, *.yml or *.json manifests in {str(directory)!r}"])
    if len(files) > MAX_MANIFEST_FILES:
        raise ProblemsError(
            [f"{prefix}: {str(directory)!r} holds {len(files):,} manifest files; at most {MAX_MANIFEST_FILES} are read "
             "(cdk8s writes one per chart)"]
        )  # fmt: skip
    budget = ValueBudget(MAX_MANIFEST_VALUES, f"the manifests in {str(directory)!r}")
    documents: list[ManifestDocument] = []
    total = 0
    for path in files:
        try:
            with path.open("rb") as stream:
                raw = stream.read(MANIFEST_LIMITS.max_file_bytes + 1)
            total += len(raw)
            if len(raw) > MANIFEST_LIMITS.max_file_bytes:
                raise ProblemsError(
                    [f"{prefix}: {path} has more than {MANIFEST_LIMITS.max_file_bytes:,} bytes, the most a manifest file "
                     "may have (4 MiB)"]
                )  # fmt: skip
            if total > MAX_MANIFEST_BYTES:
                raise ProblemsError(
                    [f"{prefix}: the manifest files in {str(directory)!r} have more than {MAX_MANIFEST_BYTES:,} bytes "
                     "together (32 MiB), the most that is read"]
                )  # fmt: skip
            loaded = load_all_bounded(raw.decode("utf-8"), MANIFEST_LIMITS, budget)
        except YAMLLimitError as exc:
            where = f" at line {exc.problem_mark.line + 1}" if exc.problem_mark is not None else ""
            raise ProblemsError([f"{prefix}: {path}{where}: {exc.problem}"]) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise ProblemsError(
                [f"{prefix}: {path} is not valid YAML{where}: {getattr(exc, 'problem', exc)}"]
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ProblemsError([f"{prefix}: cannot read {path}: {exc}"]) from None
        documents += [
            ManifestDocument(path, number, doc) for number, doc in enumerate(loaded, start=1) if doc is not None
        ]
    return documents


# --- which configuration a synthesized file was made from --------------------------------------------------------
#
# The cdk8s app (k8s_app.py) starts every chart file it writes with one YAML comment carrying the fingerprint of
# the configuration it was synthesized from. A comment, not an annotation or a file of its own: `kubectl apply -f
# dist/` and every YAML reader skip it, a change of configuration does not touch the objects (review shows no
# change on every object), and a chart file left over from an earlier synth keeps its own, older stamp.
#
# The stamp also carries a digest of the file's content below it: a hand-edited file (a micro batch the synth would
# refuse, a changed image) is then refused like one from another configuration, instead of being validated and
# applied as if the configuration had made it. The line after the stamp says so to whoever opens the file.
STAMP_PREFIX = "# skyrl-hp-config: "
SYNTH_K8S = "make synth-k8s"
GENERATED_LINE = (
    "# Generated by make synth-k8s (k8s_app.py) from the configuration named above; do not edit: skyrl-hp refuses "
    "an edited file. Change the configuration and synthesize again.\n"
)


def config_fingerprint(config: ProjectConfig) -> str:
    """A stable hash of the validated configuration with every default filled in (the same for the same values,
    whatever file or key order they came from)."""
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def source_name(path: str | Path | None) -> str:
    """A configuration as messages name it: its file, or the defaults."""
    return "the defaults" if path is None else str(path)


def synth_k8s_command(source: ConfigSource, directory: Path = Path("dist")) -> str:
    """The command that synthesizes `directory` (make synth-k8s: dist/) from this configuration."""
    command = SYNTH_K8S if directory == Path("dist") else f"cdk8s synth --no-check-upgrade -o {directory}"
    if source.path is None or source.origin.startswith("./"):
        return command  # the cdk8s app finds the defaults and ./skyrl-hp.yaml on its own
    return f"SKYRL_HP_CONFIG={source.path} {command}"


@dataclass(frozen=True)
class SynthStamp:
    fingerprint: str
    config: str | None  # the configuration file, None for the defaults
    outputs_fingerprint: str | None  # the configuration the stack outputs were deployed from, when they say
    digest: str | None = None  # content_digest of the file below the stamp and the generated line

    def line(self) -> str:
        data = {
            "fingerprint": self.fingerprint,
            "config": self.config,
            "outputs_fingerprint": self.outputs_fingerprint,
            "digest": self.digest,
        }
        return STAMP_PREFIX + json.dumps(data, sort_keys=True) + "\n"


def content_digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def stamped_body(text: str) -> str:
    """A chart file's content without the stamp and the generated line."""
    if text.startswith(STAMP_PREFIX):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    return text.removeprefix(GENERATED_LINE)


def stamp_files(files: list[Path], stamp: SynthStamp) -> None:
    """Start each chart file with the stamp, its content's digest in it, and the generated line (after cdk8s
    wrote them)."""
    for file in files:
        body = stamped_body(file.read_text(encoding="utf-8"))
        own = SynthStamp(stamp.fingerprint, stamp.config, stamp.outputs_fingerprint, content_digest(body))
        file.write_text(own.line() + GENERATED_LINE + body, encoding="utf-8")


def edited(file: Path, stamp: SynthStamp) -> bool:
    """The file's content is not what its stamp's digest says the synth wrote (or the stamp has no digest)."""
    try:
        body = stamped_body(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return True
    return stamp.digest != content_digest(body)


def read_stamp(file: Path) -> SynthStamp | None:
    """The stamp on a chart file's first line; None when it has none (or it cannot be read)."""
    try:
        with file.open(encoding="utf-8") as stream:
            first = stream.readline()
    except (OSError, UnicodeDecodeError):
        return None
    if not first.startswith(STAMP_PREFIX):
        return None
    try:
        data = json.loads(first[len(STAMP_PREFIX) :])
        return SynthStamp(
            str(data["fingerprint"]), data.get("config"), data.get("outputs_fingerprint"), data.get("digest")
        )
    except (ValueError, KeyError, TypeError):
        return None


def stamp_problems(
    files: list[Path], config: ProjectConfig, source: ConfigSource, *, prefix: str, required: bool = True
) -> list[str]:
    """One line when a synthesized file was made from another configuration than `config` (or, when `required`,
    carries no stamp at all): both configurations, both fingerprints and the command that synthesizes again."""
    current = config_fingerprint(config)
    ours = f"{source_name(source.path)} (fingerprint {current})"
    for file in files:
        stamp = read_stamp(file)
        if stamp is None:
            if required:
                return [
                    f"{prefix}: {file} does not say which configuration it was synthesized from (no "
                    f"'{STAMP_PREFIX.strip()}' first line): synthesize it again with this command's configuration, "
                    f"{ours}: {synth_k8s_command(source, file.parent)}"
                ]
            continue
        if stamp.fingerprint != current:
            return [
                f"{prefix}: {file} was synthesized from {source_name(stamp.config)} (fingerprint {stamp.fingerprint}), "
                f"this command reads {ours}: synthesize again with this configuration: {synth_k8s_command(source, file.parent)}"
            ]
        if stamp.digest is None:
            return [
                f"{prefix}: {file} carries no content digest (synthesized by an earlier skyrl-hp): synthesize it "
                f"again: {synth_k8s_command(source, file.parent)}"
            ]
        if edited(file, stamp):
            return [
                f"{prefix}: {file} was changed after it was synthesized (its content does not match the digest in "
                f"its first line): change the configuration instead and synthesize again: "
                f"{synth_k8s_command(source, file.parent)}"
            ]
    return []


def outputs_note(files: list[Path]) -> str | None:
    """A note when the manifests were synthesized from another configuration than the one the platform was
    deployed from (the stack outputs carry that one's fingerprint): not refused, since most changes (a knob, an
    experiment) need no deploy, but the GPU nodes the manifests ask for come from the deployed one."""
    for file in files:
        stamp = read_stamp(file)
        if stamp is not None and stamp.outputs_fingerprint and stamp.outputs_fingerprint != stamp.fingerprint:
            return (
                f"note: {file} is from configuration fingerprint {stamp.fingerprint}, the platform was deployed from "
                f"fingerprint {stamp.outputs_fingerprint} (outputs.json): if the node groups or names changed, "
                "cdk deploy this configuration first"
            )
    return None
