"""Load the configuration from defaults + an optional YAML file, and report errors in one line each.

Which file: `--config FILE` (the CLI) or `path`, else $SKYRL_HP_CONFIG, else `skyrl-hp.yaml` in the working
directory, else none (the built-in defaults). The CDK app, the cdk8s app and every `skyrl-hp` command
resolve it the same way (`resolve_config_source`).
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from yaml.reader import ReaderError

from ..plumbing.errors import ConfigError
from ..plumbing.upstream import DNS1035_LABEL_PATTERN, DNS1123_LABEL_PATTERN
from ..plumbing.yaml_loading import MAX_FILE_BYTES, SAFE_DUMPER, YAMLLimitError, load_bounded
from .base import GITHUB_REPOSITORY_PATTERN
from .project import ProjectConfig
from .upstream_lock import LOCK_COMMAND, LOCK_FILE, UpstreamLock, apply_lock

CONFIG_ENV_VAR = "SKYRL_HP_CONFIG"
# Picked up from the working directory when neither --config nor $SKYRL_HP_CONFIG names a file.
DEFAULT_CONFIG_FILE = "skyrl-hp.yaml"
# Where every key is documented: one `## <section>` heading per top-level section (config/reference.py).
REFERENCE_DOC = "docs/configuration.md"


@dataclass(frozen=True)
class ConfigSource:
    """The file a configuration came from (None: the built-in defaults) and how it was chosen."""

    path: Path | None
    origin: str  # "--config", "$SKYRL_HP_CONFIG", "./skyrl-hp.yaml" or "defaults"

    def describe(self) -> str:
        if self.path is None:
            return "built-in defaults (no --config, $SKYRL_HP_CONFIG or ./skyrl-hp.yaml)"
        return f"{self.path} ({self.origin})"


def resolve_config_source(
    path: str | os.PathLike[str] | None = None, *, explicit_origin: str = "--config"
) -> ConfigSource:
    """`path`, else $SKYRL_HP_CONFIG, else ./skyrl-hp.yaml when it exists, else the defaults."""
    if path is not None:
        return ConfigSource(Path(path), explicit_origin)
    from_env = os.environ.get(CONFIG_ENV_VAR)
    if from_env:
        return ConfigSource(Path(from_env), f"${CONFIG_ENV_VAR}")
    local = Path(DEFAULT_CONFIG_FILE)
    # Anything by that name, a directory or a broken link too, is read and reported, never passed over for the defaults.
    if os.path.lexists(local):
        return ConfigSource(local, f"./{DEFAULT_CONFIG_FILE}")
    return ConfigSource(None, "defaults")


# Patterns the models use, each as the sentence a user reads instead of the regular expression.
# tests/config/test_config.py checks that every pattern in the configuration has one.
PATTERN_SENTENCES: dict[str, str] = {
    DNS1123_LABEL_PATTERN: "must be a Kubernetes name: lowercase letters, digits and '-', starting and ending with a "
    "letter or digit",
    DNS1035_LABEL_PATTERN: "must be a Kubernetes service name: lowercase letters, digits and '-', starting with a "
    "letter and ending with a letter or digit",
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$": "must be a Kubernetes name: at most 63 lowercase letters, digits and "
    "'-', starting and ending with a letter or digit",
    r"^[a-z][a-z0-9-]*[a-z0-9]$": "must be lowercase letters, digits and '-', starting with a letter and ending with "
    "a letter or digit",
    r"^[a-z0-9][a-z0-9._-]*$": "must be lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
    r"^[0-9]{12}$": 'must be a 12-digit AWS account id, in quotes ("111111111111")',
    GITHUB_REPOSITORY_PATTERN: "must be a GitHub repository URL such as https://github.com/ray-project/kuberay",
    r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]$": "must be an AWS region name such as us-west-2",
    r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/.+$": "must be a SageMaker training plan ARN "
    "(arn:aws:sagemaker:<region>:<account>:training-plan/<name>)",
    r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$": "must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)",
    r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?|https://\S+)$": "must be s3://bucket/prefix or an https:// URL",
    r"^[0-9]+\.[0-9]+\.[0-9]+$": "must be an exact version such as 2.57.0",
    r"^sha256:[0-9a-f]{64}$": "must be an image digest: sha256: and 64 lowercase hex characters",
    r"^[0-9]+(\.[0-9]+)*$": "must be a version number such as 2.6.1",
    r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$": "must be a Hugging Face model id such as Qwen/Qwen3-VL-8B-Instruct",
    r"^/[A-Za-z0-9_./-]+$": "must be an absolute path of letters, digits, '_', '.', '/' and '-'",
    r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$": "must be letters, digits, '_' and '-', starting with a letter or digit",
    r"^[a-zA-Z0-9][a-zA-Z0-9._-]*$": "must be letters, digits, '.', '_' and '-', starting with a letter or digit",
    r"^[a-zA-Z0-9][a-zA-Z0-9_./-]*[a-zA-Z0-9]$": "must be a relative path of letters, digits, '_', '.', '/' and '-'",
    r"^/[a-zA-Z0-9_./-]*[a-zA-Z0-9]$": "must be an absolute path of letters, digits, '_', '.', '/' and '-'",
}


# pydantic's type errors, as what to write instead.
TYPE_SENTENCES: dict[str, str] = {
    "list_type": "must be a list: one '- item' line per entry (or [a, b])",
    "dict_type": "must be a section of 'key: value' lines indented below it",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
}


def _location(loc: tuple[Any, ...]) -> str:
    # pydantic appends the validator kind ("function-after[...]") to some locations; drop it.
    text = ""
    for part in loc:
        if isinstance(part, str) and "[" in part and part.endswith("]"):
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _model_at(path: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class whose fields sit at `path` (the parent of an error's field), following nested sections."""
    model: type[BaseModel] = ProjectConfig
    for part in path:
        if isinstance(part, int) or (isinstance(part, str) and part.endswith("]")):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        found = _submodel(field.annotation)
        if found is None:
            return None
        model = found
    return model


def _submodel(annotation: Any) -> type[BaseModel] | None:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _submodel(arg)
        if found is not None:
            return found
    return None


def reference_anchor(section: str) -> str:
    """`docs/configuration.md#<section>`: the heading config/reference.py writes for each top-level section."""
    return f"{REFERENCE_DOC}#{re.sub(r'[^a-z0-9_-]', '', section.lower())}"


def flow_yaml(value: Any) -> str:
    """`value` as one line of YAML (a mapping without its outer braces: `a: {b: 1}`)."""
    text = yaml.dump(value, Dumper=SAFE_DUMPER, default_flow_style=True, sort_keys=False, width=10**6).strip()
    text = text.removesuffix("\n...").strip()
    return text[1:-1] if isinstance(value, dict) and text.startswith("{") else text


def _unknown_field(loc: tuple[Any, ...], value: Any = None) -> str:
    where = _location(loc)
    parent = tuple(p for p in loc[:-1] if not (isinstance(p, str) and p.endswith("]")))
    name = str(loc[-1])
    model = _model_at(parent)
    known = list(model.model_fields) if model is not None else []
    head = name.split(".", 1)[0]
    if "." in name and head in known:
        # The docs name a key by its dotted path (hyperpod.worker_group.instance_count); YAML reads such a key as
        # one name, not a path.
        nested: Any = value
        for part in reversed(name.split(".")):
            nested = {part: nested}
        for part in reversed(parent):
            if isinstance(part, str):
                nested = {part: nested}
        return (
            f"config error: {where}: YAML does not split a key at its dots, so this is one unknown key; nest it: "
            f"{flow_yaml(nested)} (one key per indented line)"
        )
    guess = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean {'.'.join([*map(str, parent), guess[0]])!r}? " if guess else ""
    kind = "section" if not parent else "key"
    section = str(parent[0]) if parent else (guess[0] if guess else "")
    if not section:
        return (
            f"config error: {where}: unknown {kind}; the sections are {', '.join(ProjectConfig.model_fields)} "
            f"(see {REFERENCE_DOC})"
        )
    return f"config error: {where}: unknown {kind}; {hint}see {reference_anchor(section)}"


# Longest value an error line repeats as written; a longer one (a list of 5,000 CIDRs) is named by its size.
_SHOWN_VALUE_CHARS = 200


def _shown(value: Any) -> str:
    text = repr(value)
    if len(text) <= _SHOWN_VALUE_CHARS:
        return text
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value):,} items"
    return f"{text[:_SHOWN_VALUE_CHARS]}... ({len(text):,} characters)"


def _describe(error: dict[str, Any], model: type = ProjectConfig) -> str:
    loc = _location(error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return _unknown_field(tuple(error["loc"]), error.get("input"))
    if error["type"] == "missing":
        return f"config error: {loc}: required field is missing"
    value = error.get("input")
    if error["type"] == "string_type" and isinstance(value, (int, float)) and not isinstance(value, bool):
        # YAML reads 111111111111 or 2.10 as a number (and drops leading zeros): the user meant text.
        return f'config error: {loc} = {value!r}: YAML read a number; quote it: {loc.rsplit(".", 1)[-1]}: "{value}"'
    if error["type"] in TYPE_SENTENCES and not isinstance(value, (dict, BaseModel)):
        return f"config error: {loc} = {_shown(value)}: {TYPE_SENTENCES[error['type']]}"
    if error["type"] == "list_type" and isinstance(value, dict):
        return f"config error: {loc}: {_list_not_mapping(tuple(error['loc']), value)}"
    if error["type"] in ("model_type", "dict_type"):
        return f"config error: {loc} = {_shown(value)}: {TYPE_SENTENCES['dict_type']}"
    if error["type"] == "string_pattern_mismatch":
        pattern = (error.get("ctx") or {}).get("pattern", "")
        sentence = PATTERN_SENTENCES.get(
            pattern, f"is not in the allowed form (see {reference_anchor(loc.split('.')[0])})"
        )
        return f"config error: {loc} = {_shown(value)}: {sentence}"
    # A section-level rule (its input is the whole section, a mapping or an already-built model) names
    # the field and value in its own message.
    if isinstance(value, (dict, BaseModel)):
        return f"config error: {loc}: {message}"
    return f"config error: {loc} = {_shown(value)}: {message}"


def _list_not_mapping(loc: tuple[Any, ...], value: dict[Any, Any]) -> str:
    """A mapping given for a list: the list it likely meant, when its items are named sections (experiments)."""
    parent = tuple(p for p in loc[:-1] if isinstance(p, str) and not p.endswith("]"))
    model = _model_at(parent)
    field = model.model_fields.get(str(loc[-1])) if model is not None else None
    item = _submodel(field.annotation) if field is not None else None
    if item is not None and "name" in item.model_fields and value:
        # {maze-grpo: {overrides: ...}}: each key is the name of one item.
        shown = [
            flow_yaml([{"name": name, **(fields if isinstance(fields, dict) else {})}])[1:-1]
            for name, fields in list(value.items())[:3]
        ]
        while len(shown) > 1 and len(", ".join(shown)) > 160:
            shown.pop()
        more = ", ..." if len(shown) < len(value) else ""
        example = f"{loc[-1]}: [{', '.join(shown)}{more}]"
        return (
            f"must be a list, one '- name: ...' entry per item, not a mapping keyed by name: write {example} "
            "(or one '- name: ...' line per item)"
        )
    return "must be a list: one '- item' line per entry (or [a, b]), not a mapping"


def merge_onto_defaults(model: type[BaseModel], data: Any, default: BaseModel | None = None) -> Any:
    """`data` with every nested section completed from its default, so a YAML file names only what it changes.

    pydantic builds a nested section from the given mapping alone: `hyperpod.worker_group: {instance_type: X}`
    would lose the default group's name and count. Here a mapping given for a section whose default is a
    model is laid over that default (recursively); what the default itself was built with is kept unless
    the file overrides it. Lists and scalars replace the default whole. Unknown keys pass through, so
    pydantic still reports them.
    """
    if not isinstance(data, dict):
        return data
    merged: dict[str, Any] = {}
    if default is not None:
        merged = {name: getattr(default, name) for name in default.model_fields_set}
    for name, value in data.items():
        field = model.model_fields.get(name) if isinstance(name, str) else None
        if field is None:
            merged[name] = value
            continue
        base = getattr(default, name) if default is not None else field.get_default(call_default_factory=True)
        if isinstance(base, BaseModel) and isinstance(value, dict):
            value = merge_onto_defaults(type(base), value, base)
        merged[name] = value
    return merged


def validate_config(data: dict[str, Any], base: ProjectConfig | None = None) -> ProjectConfig:
    """Build the typed configuration (`data` laid over `base`, by default over the defaults) or raise ConfigError
    listing every problem."""
    try:
        return ProjectConfig.model_validate(merge_onto_defaults(ProjectConfig, data, base))
    except ValidationError as exc:
        raise ConfigError([_describe(dict(e)) for e in exc.errors(include_url=False)]) from None


def _refused_character(file: Path, text: str, character: int, position: int) -> str:
    """The reader refuses a character before any YAML is parsed; `position` counts characters of `text`."""
    before = text[:position]
    line, column = before.count("\n") + 1, position - (before.rfind("\n") + 1) + 1
    name = unicodedata.name(chr(character), "") or _CONTROL_NAMES.get(character, "a control character")
    return (
        f"config error: {file} at line {line}, column {column}: character U+{character:04X} ({name}) is not allowed "
        "in YAML (control characters other than tab and line breaks): remove it, or write it as an escape such as "
        '"\\x00" in a double-quoted value'
    )


def _yaml_error(file: Path, text: str, exc: yaml.YAMLError) -> str:
    """One line for a YAML error: where, what, and the likely fix (another format, tabs, indentation)."""
    if isinstance(exc, YAMLLimitError) and exc.problem_mark is not None:
        return f"config error: {file} at line {exc.problem_mark.line + 1}: {exc.problem}"
    if isinstance(exc, ReaderError) and isinstance(exc.character, int):
        return _refused_character(file, text, exc.character, exc.position)
    mark = getattr(exc, "problem_mark", None)
    where = ""
    if mark is not None:
        # libyaml marks a problem found at the end of the text below its last line.
        last = len(text.rstrip().splitlines())
        where = (
            f" at line {last or 1} (the end of the file)"
            if mark.line >= last
            else f" at line {mark.line + 1}, column {mark.column + 1}"
        )
    reason = getattr(exc, "problem", None)
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and context_mark is not None and mark is not None and context_mark.line != mark.line:
        context += f" that started at line {context_mark.line + 1}, column {context_mark.column + 1}"
    because = f": {reason}" + (f" ({context})" if context else "") if reason else ""
    lines = text.splitlines()
    line = lines[mark.line] if mark is not None and mark.line < len(lines) else ""
    other = _other_format(text)
    if other:
        hint = f"; {other}"
    elif reason and ("\t" in line[: len(line) - len(line.lstrip())] or "tab" in reason):
        hint = "; indent with spaces, never tabs"
    elif reason:
        hint = "; check the indentation and the ':' after each key"
    else:
        hint = ""
    return f"config error: {file} is not valid YAML{where}{because}{hint}"


# unicodedata names no control character; these are the ones a stray byte most often is.
_CONTROL_NAMES = {0x00: "NUL", 0x07: "BEL", 0x08: "BACKSPACE", 0x0B: "VERTICAL TAB", 0x0C: "FORM FEED", 0x1B: "ESC",
                  0x7F: "DELETE"}  # fmt: skip


# A // or /* comment where JSON has a value, a key or the space between them.
_JSON_COMMENT = re.compile(r"(^|[\s,\[{])(//|/\*)", re.MULTILINE)


def _other_format(text: str) -> str | None:
    """What to do when `text` is another configuration format, or None."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        pass
    else:
        if data:
            as_yaml = flow_yaml(data)
            example = f"; in YAML: {as_yaml}" if len(as_yaml) <= 200 else ""
            return (
                "it is TOML, and the configuration is YAML ([table] headers become nested sections, key = value "
                f"becomes key: value){example}"
            )
    if text.lstrip("\ufeff \t\r\n")[:1] == "{" and _JSON_COMMENT.search(text):
        return (
            "it looks like JSON with comments, and the configuration is YAML: JSON without comments is YAML too, "
            "so turn each // comment into a # comment (or remove the comments)"
        )
    return None


def read_yaml(path: str | os.PathLike[str], *, empty_ok: bool = False) -> dict[str, Any]:
    """The mapping in a YAML file, or one line naming the file, the line and the reason. An empty configuration
    file is refused (it is almost always the wrong file); `empty_ok` reads it as an empty mapping.

    Every reader of the configuration (the CDK app, the cdk8s app, every `skyrl-hp` command) and of a price file
    comes here: the file and what it holds are bounded (yaml_loading: MAX_FILE_BYTES, MAX_SCALAR_CHARS, MAX_DEPTH,
    MAX_VALUES, documented in docs/configuring.md#limits) and a duplicate key is refused, not dropped."""
    file = Path(path)
    problem = _not_a_regular_file(file)
    if problem:
        raise ConfigError([f"config error: {problem}"])
    try:
        with file.open("rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            size = file.stat().st_size
            raise ConfigError(
                [
                    f"config error: {file} has {size:,} bytes; a configuration file may have at most "
                    f"{MAX_FILE_BYTES:,} ({MAX_FILE_BYTES // 1024} KiB): is it the right file?"
                ]
            )
        text = raw.decode("utf-8")
        data = load_bounded(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"config error: {file} is not UTF-8 text (byte {exc.start} cannot be decoded): save it as UTF-8 YAML"]
        ) from None
    except OSError as exc:
        raise ConfigError([f"config error: cannot read {file}: {exc.strerror or exc}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_error(file, text, exc)]) from None
    if data is None and empty_ok:
        return {}
    if data is None:
        raise ConfigError(
            [
                f"config error: {file} is empty: name at least one key (see config/example.yaml), or leave the file "
                "out to use the defaults"
            ]
        )
    if not isinstance(data, dict):
        other = _other_format(text)
        hint = f": {other}" if other else ""
        raise ConfigError(
            [f"config error: {file} must hold a mapping at the top level, not {type(data).__name__}{hint}"]
        )
    return data


def _not_a_regular_file(file: Path) -> str | None:
    """Why `file` cannot be read as a configuration file, or None: checked before it is opened, since opening a FIFO
    waits for a writer that may never come."""
    try:
        mode = file.stat().st_mode
    except FileNotFoundError:
        if file.is_symlink():
            return f"file {str(file)!r} is a symbolic link to {os.readlink(file)!r}, which does not exist"
        where = "" if file.is_absolute() else f" (looked for in {Path.cwd()}, the current directory)"
        return f"file {str(file)!r} does not exist{where}"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"file {str(file)!r} is a symbolic link that leads back to itself (a loop): point it at a file"
        return f"cannot read {str(file)!r}: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return f"{str(file)!r} is a directory, not a configuration file: name the YAML file inside it"
    if not stat.S_ISREG(mode):
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "not a regular file (a socket or a device)"
        return f"{str(file)!r} is {kind}: a configuration must be a regular YAML file"
    return None


def read_lock(path: Path = LOCK_FILE) -> UpstreamLock:
    """The lock, an empty one when the file does not exist, or ConfigError with one line per problem."""
    if not path.exists():
        return UpstreamLock()
    data = read_yaml(path, empty_ok=True)
    try:
        return UpstreamLock.model_validate(data)
    except ValidationError as error:
        raise ConfigError(
            [
                f"lock error: {path}: {'.'.join(map(str, issue['loc'])) or 'top level'}: {issue['msg']}; rewrite it "
                f"with `{LOCK_COMMAND}`"
                for issue in error.errors(include_url=False)
            ]
        ) from None


def load_config_with_source(path: str | os.PathLike[str] | None = None) -> tuple[ProjectConfig, ConfigSource]:
    """The configuration and the file it came from (see `resolve_config_source`), its movable upstream names
    pinned from the repository's upstream lock (config/upstream_lock.py)."""
    source = resolve_config_source(path)
    config = validate_config(read_yaml(source.path) if source.path else {})
    return apply_lock(config, read_lock()), source


def load_config(path: str | os.PathLike[str] | None = None) -> ProjectConfig:
    """Defaults, overridden by the YAML file at `path` (else $SKYRL_HP_CONFIG, else ./skyrl-hp.yaml)."""
    return load_config_with_source(path)[0]
