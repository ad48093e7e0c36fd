"""YAML read with libyaml's parser when PyYAML has it (PyPI's wheels do): the same documents as
`yaml.safe_load`/`yaml.safe_load_all`, parsed in C. The large files this project reads (Helm's render of the
HyperPod chart, the KubeRay CRDs, synthesized manifests) spend most of their time in the pure-Python parser.

`load_bounded` reads what a person writes (the configuration, a price file) and `load_all_bounded` what another
party's tool wrote (a pull request's synthesized manifests, which the review gate reads): the same YAML, with limits
that refuse a document no configuration or synthesis needs before it costs time or memory, and duplicate keys, which
plain YAML loading resolves silently by keeping the last one, keys YAML 1.1 reads as booleans or null (`on:` is the
key True), and the tagged values (`!!binary`, `!!set`, `!!omap`, `!!pairs`) that load as Python types no
configuration value has (docs/configuring.md#limits, docs/review-gate.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from .errors import ProjectError

SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# libyaml's emitter when PyYAML has it: the same YAML as SafeDumper's, written in C.
SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def safe_load(text: str | bytes) -> Any:
    return yaml.load(text, Loader=SAFE_LOADER)


def safe_load_all(text: str | bytes) -> list[Any]:
    return list(yaml.load_all(text, Loader=SAFE_LOADER))


@dataclass(frozen=True)
class YAMLLimits:
    """What one document may hold, and the sentences that say what the documents it is for need."""

    max_file_bytes: int
    max_scalar_chars: int
    max_depth: int
    # Keys, values and list items, an alias counted in full at each use. An alias is a reference in the parsed
    # document, but everything after the loader (the merge onto the defaults, validation, the review's diff and
    # its comment) walks it as a tree: without a bound, a kilobyte of nested aliases ("billion laughs",
    # https://en.wikipedia.org/wiki/Billion_laughs_attack) expands to billions of values.
    max_values: int
    values_needed: str
    depth_needed: str


# The configuration. The whole default configuration, every key written out, is about 6 KB, 441 values and 5 levels
# deep, and its longest value has 63 characters: each limit is far above what a configuration needs and far below
# what takes the loader a noticeable time.
CONFIGURATION_LIMITS = YAMLLimits(
    max_file_bytes=256 * 1024,
    max_scalar_chars=16 * 1024,
    max_depth=32,
    max_values=10_000,
    values_needed="a configuration needs a few hundred",
    depth_needed="the configuration's deepest key is 5 levels down",
)
MAX_FILE_BYTES = CONFIGURATION_LIMITS.max_file_bytes
MAX_SCALAR_CHARS = CONFIGURATION_LIMITS.max_scalar_chars
MAX_DEPTH = CONFIGURATION_LIMITS.max_depth
MAX_VALUES = CONFIGURATION_LIMITS.max_values

# A synthesized manifest file (cdk8s writes one per chart) and a YAML document inside one (a RayJob's runtimeEnvYAML,
# a RayService's serveConfigV2). The default synthesis writes at most 64 KB, 463 values and 15 levels per file; its
# longest value is the 55 KB job script in a ConfigMap, which Kubernetes caps at 1 MiB
# (https://kubernetes.io/docs/concepts/configuration/configmap/#motivation).
MANIFEST_LIMITS = YAMLLimits(
    max_file_bytes=4 * 1024 * 1024,
    max_scalar_chars=1024 * 1024,
    max_depth=64,
    max_values=100_000,
    values_needed="the default synthesis writes fewer than 500 per file",
    depth_needed="the default synthesis nests 15 levels",
)


class ValueBudget:
    """Values several documents may hold together (one side of a review: every manifest file and the YAML inside
    them), so that many small documents cannot add up to what one may not hold."""

    def __init__(self, values: int, what: str) -> None:
        self.remaining = values
        self.total = values
        self.what = what

    def spend(self, values: int) -> bool:
        self.remaining -= values
        return self.remaining >= 0


# The tag PyYAML gives a `<<` merge key (https://yaml.org/type/merge.html): a mapping may restate a merged key.
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Keys that load as something other than a name: YAML 1.1 (PyYAML's resolver) reads on/off/yes/no/true/false as a
# boolean and ~/null as None (https://yaml.org/type/bool.html, https://yaml.org/type/null.html).
_NON_NAME_KEY_TAGS = {
    "tag:yaml.org,2002:bool": "the boolean {value} (YAML 1.1 reads on/off/yes/no/true/false as booleans)",
    "tag:yaml.org,2002:null": "null (YAML reads ~, null and an empty key as no value)",
}
# Tags whose values load as bytes, sets or lists of pairs (https://yaml.org/type/): accepted by pydantic as text or
# lists in places, so `name: !!binary ...` would become the base64-decoded bytes' text.
_REFUSED_TAGS = {
    f"tag:yaml.org,2002:{name}": what
    for name, what in (("binary", "bytes"), ("set", "a set"), ("omap", "an ordered map"), ("pairs", "pairs"))
}

# YAML 1.1 (PyYAML's) reads digits after a leading 0 as an octal number: `account: 012345670123` loads as 1402433619,
# and every message about it would show digits nobody typed (https://yaml.org/type/int.html).
_INT_TAG = "tag:yaml.org,2002:int"
_OCTAL_LOOKING = re.compile(r"^[-+]?0[0-7_]+$")


class YAMLLimitError(yaml.MarkedYAMLError, ProjectError):
    """Valid YAML that `load_bounded` refuses: `problem` is one sentence, `problem_mark` where it starts."""


class _PythonEvents(Reader, Scanner, Parser):
    """PyYAML's own parser, where its libyaml binding is missing."""

    def __init__(self, stream: str | bytes) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)


# libyaml's parser (CParser) produces the events, in C; PyYAML's Composer builds the nodes from them, so the
# checks below can stop a document while it is being read.
try:
    from yaml._yaml import CParser as _EVENT_SOURCE
except ImportError:  # PyYAML built without libyaml
    _EVENT_SOURCE = _PythonEvents  # type: ignore[assignment,misc]


def _dotted(path: list[str]) -> str:
    return "".join(part if part.startswith("[") or not index else f".{part}" for index, part in enumerate(path))


class _BoundedComposer(Composer):
    """PyYAML's Composer, counting what it builds: refuses duplicate keys, deep nesting, long scalars and more
    than MAX_VALUES values (aliases counted in full at each use) before building further."""

    if TYPE_CHECKING:  # from the parser and the constructor the loader mixes in

        def check_event(self, *choices: Any) -> bool: ...
        def peek_event(self) -> Any: ...
        def construct_object(self, node: Node, deep: bool = False) -> Any: ...

    def __init__(self, limits: YAMLLimits, budget: ValueBudget | None) -> None:
        super().__init__()
        self._limits = limits
        self._budget = budget
        self._path: list[str] = []  # keys and [index]es down to the node being composed
        self._expanded: dict[int, int] = {}  # id(node) -> its value count with aliases expanded, once complete
        self._values = 0

    def start_document(self) -> None:
        """Each document of a stream has its own `max_values` (the budget counts them all)."""
        self._values = 0
        self._expanded.clear()

    def _count(self, values: int, mark: Any, alias: str | None = None) -> None:
        self._values += values
        limit = self._limits.max_values
        if self._budget is not None and not self._budget.spend(values):
            problem = (
                f"{self._budget.what} hold more than {self._budget.total:,} values together (keys, values and list "
                "items, an alias counted in full at each use)"
            )
        elif self._values <= limit:
            return
        elif alias is not None:
            problem = (
                f"alias *{alias} expands the document to more than {limit:,} values (keys, values and list "
                f"items, an alias counted in full at each use); {self._limits.values_needed}"
            )
        else:
            problem = (
                f"the document holds more than {limit:,} values (keys, values and list items); "
                f"{self._limits.values_needed}"
            )
        raise YAMLLimitError(problem=problem, problem_mark=mark)

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None:  # else PyYAML reports the undefined alias
                size = self._expanded.get(id(target))
                if size is None:
                    raise YAMLLimitError(
                        problem=f"alias *{event.anchor} is used inside the value &{event.anchor} names: a recursive "
                        "structure never ends",
                        problem_mark=event.start_mark,
                    )
                self._count(size, event.start_mark, alias=event.anchor)
            return cast(Node, super().compose_node(parent, index))
        if isinstance(index, ScalarNode):
            self._path.append(str(index.value))
        elif isinstance(index, int):
            self._path.append(f"[{index}]")
        else:  # a mapping key: reported at its mapping's path
            self._path.append("")
        try:
            depth, chars = self._limits.max_depth, self._limits.max_scalar_chars
            if len(self._path) > depth:
                raise YAMLLimitError(
                    problem=f"{_dotted([part for part in self._path[:4] if part])}... is nested more than {depth} "
                    f"levels deep; {self._limits.depth_needed}",
                    problem_mark=self.peek_event().start_mark,
                )
            node = cast(Node, super().compose_node(parent, index))
            if node.tag in _REFUSED_TAGS:
                where = _dotted([part for part in self._path if part]) or "a value"
                raise YAMLLimitError(
                    problem=f"the value of {where} is tagged !!{node.tag.rsplit(':', 1)[1]}, which YAML loads as "
                    f"{_REFUSED_TAGS[node.tag]}; a configuration holds text, numbers, true/false, lists and "
                    "mappings: write the value itself",
                    problem_mark=node.start_mark,
                )
            if isinstance(node, ScalarNode) and node.tag == _INT_TAG and _OCTAL_LOOKING.match(node.value):
                where = _dotted([part for part in self._path if part]) or "a value"
                key = next((part for part in reversed(self._path) if part and not part.startswith("[")), "value")
                raise YAMLLimitError(
                    problem=f"{where} = {node.value} is read as the octal number {self.construct_object(node)} (YAML "
                    f'reads digits after a leading 0 that way); quote it: {key}: "{node.value}"',
                    problem_mark=node.start_mark,
                )
            if isinstance(node, ScalarNode) and len(node.value) > chars:
                where = _dotted([part for part in self._path if part]) or "a key"
                raise YAMLLimitError(
                    problem=f"the value of {where} has {len(node.value):,} characters; a value may have at most "
                    f"{chars:,} ({_size(chars)})",
                    problem_mark=node.start_mark,
                )
            if isinstance(node, MappingNode):
                self._check_keys(node)
        finally:
            self._path.pop()
        self._expanded[id(node)] = 1 + sum(self._expanded[id(child)] for child in _children(node))
        self._count(1, node.start_mark)
        return node

    def _check_keys(self, node: MappingNode) -> None:
        """Refuse a key YAML reads as a boolean or null, and a key given twice."""
        seen: dict[Any, ScalarNode] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            if key_node.tag in _NON_NAME_KEY_TAGS:
                written = key_node.value or "~"
                name = _dotted([part for part in self._path if part] + [written])
                read_as = _NON_NAME_KEY_TAGS[key_node.tag].format(value=self.construct_object(key_node))
                raise YAMLLimitError(
                    problem=f'key {name!r} is read as {read_as}, not as a name; quote it ("{written}": ...) if you '
                    "mean the word",
                    problem_mark=key_node.start_mark,
                )
            key = self._key(key_node)
            first = seen.setdefault(key, key_node)
            if first is not key_node:
                name = _dotted([part for part in self._path if part] + [str(key_node.value)])
                raise YAMLLimitError(
                    problem=f"duplicate key {name!r} (first at line {first.start_mark.line + 1}): YAML keeps only "
                    "the last one and drops the first without a word; merge the two into one",
                    problem_mark=key_node.start_mark,
                )

    def _key(self, key_node: ScalarNode) -> Any:
        # The key as loaded (0x10 and 16 are the same int key); as written when it does not load.
        try:
            key = self.construct_object(key_node)
            hash(key)
        except (yaml.YAMLError, ValueError, TypeError):
            return (key_node.tag, key_node.value)
        return key


def _size(chars: int) -> str:
    return f"{chars // (1024 * 1024)} MiB" if chars >= 1024 * 1024 else f"{chars // 1024} KiB"


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class BoundedSafeLoader(_BoundedComposer, _EVENT_SOURCE, SafeConstructor, Resolver):
    """yaml.SafeLoader's documents, within the limits above."""

    def __init__(
        self, stream: str | bytes, limits: YAMLLimits = CONFIGURATION_LIMITS, budget: ValueBudget | None = None
    ) -> None:
        _EVENT_SOURCE.__init__(self, stream)
        _BoundedComposer.__init__(self, limits, budget)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


def load_bounded(text: str, limits: YAMLLimits = CONFIGURATION_LIMITS, budget: ValueBudget | None = None) -> Any:
    """`yaml.safe_load(text)`, or YAMLLimitError for a duplicate key, nesting deeper than `limits.max_depth`, a
    scalar longer than `limits.max_scalar_chars`, more than `limits.max_values` values or more than `budget` has
    left. The caller bounds the text itself (`limits.max_file_bytes`)."""
    loader = BoundedSafeLoader(text, limits, budget)  # what yaml.load(text, Loader=...) does
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_all_bounded(text: str, limits: YAMLLimits = MANIFEST_LIMITS, budget: ValueBudget | None = None) -> list[Any]:
    """`yaml.safe_load_all(text)` within the limits of `load_bounded`, each document on its own and all of them
    against `budget`."""
    documents = []
    loader = BoundedSafeLoader(text, limits, budget)
    try:
        while loader.check_node():
            loader.start_document()
            node = loader.get_node()
            documents.append(None if node is None else loader.construct_document(node))
    finally:
        loader.dispose()
    return documents
