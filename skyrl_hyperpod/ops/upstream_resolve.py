"""What each movable upstream name points at right now: `skyrl-hp image lock` writes it into upstream-lock.yaml and
`skyrl-hp image lock --check` compares it with what the file says (skyrl_hyperpod/config/upstream_lock.py).

- Images: the manifest digest a registry serves for `name:tag`, read as the OCI distribution spec describes
  (https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pulling-manifests): GET
  /v2/<name>/manifests/<tag> accepting image indexes and manifests, anonymous bearer tokens where the registry asks
  for one (https://distribution.github.io/distribution/spec/auth/token/), and the digest checked against the bytes
  received. Docker Hub names are normalised as Docker does (`name` -> registry-1.docker.io/library/name, no tag ->
  `latest`). Plain HTTP only for a registry on the loopback address, which Docker also treats as insecure by default
  (https://docs.docker.com/reference/cli/dockerd/#insecure-registries).
- Git tags: `git ls-remote`, the peeled commit of an annotated tag.
- Hugging Face: the commit of the model repository's default branch (huggingface_hub's model_info).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

import requests

from ..config.project import ProjectConfig
from ..config.upstream_lock import LockSection, Pin, UpstreamLock, required_pins
from ..plumbing.errors import ProjectError

DOCKER_HUB = "registry-1.docker.io"
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
TIMEOUT_S = 30
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class ResolveError(ProjectError):
    """One line: which name could not be resolved and why."""


@dataclass(frozen=True)
class ImageReference:
    registry: str
    repository: str
    tag: str

    @property
    def scheme(self) -> str:
        host = self.registry.rsplit(":", 1)[0] if self.registry.count(":") == 1 else self.registry
        try:
            loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
        except ValueError:
            loopback = host == "localhost"
        return "http" if loopback else "https"

    @property
    def manifest_url(self) -> str:
        return f"{self.scheme}://{self.registry}/v2/{self.repository}/manifests/{self.tag}"


def parse_image(reference: str) -> ImageReference:
    """`[registry/]path[:tag]` as Docker reads it: the first part is a registry when it has a '.' or ':' or is
    localhost; otherwise the image is on Docker Hub (single names under library/)."""
    if "@" in reference:
        raise ResolveError(f"{reference} is already pinned by digest")
    first, _, rest = reference.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = DOCKER_HUB, reference if "/" in reference else f"library/{reference}"
    last = path.rsplit("/", 1)[-1]
    repository, _, tag = path.rpartition(":") if ":" in last else (path, "", "latest")
    return ImageReference(registry, repository, tag)


def _bearer_token(session: requests.Session, challenge: str, reference: str) -> str:
    scheme, _, params = challenge.partition(" ")
    if scheme.lower() != "bearer":
        raise ResolveError(f"{reference}: the registry asks for {scheme} authentication; only anonymous pulls are read")
    fields = dict(_CHALLENGE_PARAM.findall(params))
    if "realm" not in fields:
        raise ResolveError(f"{reference}: the registry's bearer challenge names no realm")
    query = {key: fields[key] for key in ("service", "scope") if key in fields}
    response = session.get(fields["realm"], params=query, timeout=TIMEOUT_S)
    response.raise_for_status()
    body = response.json()
    token = body.get("token") or body.get("access_token")
    if not isinstance(token, str):
        raise ResolveError(f"{reference}: the token service answered without a token")
    return token


def resolve_image(reference: str, session: requests.Session | None = None) -> str:
    """The digest of the manifest (or image index) `reference` names on its registry now."""
    parsed = parse_image(reference)
    session = session or requests.Session()
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    try:
        response = session.get(parsed.manifest_url, headers=headers, timeout=TIMEOUT_S)
        if response.status_code == 401 and "WWW-Authenticate" in response.headers:
            token = _bearer_token(session, response.headers["WWW-Authenticate"], reference)
            headers["Authorization"] = f"Bearer {token}"
            response = session.get(parsed.manifest_url, headers=headers, timeout=TIMEOUT_S)
    except requests.ConnectionError:
        raise ResolveError(f"{reference}: cannot reach {parsed.registry}") from None
    except requests.RequestException as error:  # a timeout, a token service's HTTP error
        raise ResolveError(f"{reference}: {type(error).__name__} from {parsed.registry}") from None
    if response.status_code != 200:
        raise ResolveError(f"{reference}: {parsed.manifest_url} answered HTTP {response.status_code}")
    computed = "sha256:" + hashlib.sha256(response.content).hexdigest()
    announced = response.headers.get("Docker-Content-Digest")
    if announced is not None and announced != computed:
        raise ResolveError(f"{reference}: the registry announced {announced} for a manifest whose bytes are {computed}")
    return computed


def resolve_git_tag(repository: str, tag: str) -> str:
    """The commit `tag` points at in `repository` (peeled through an annotated tag)."""
    ref = f"refs/tags/{tag}"
    try:
        result = subprocess.run(
            ["git", "ls-remote", "--", repository, ref, f"{ref}^{{}}"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S * 2,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},  # never wait for a password
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ResolveError(f"{repository}@{tag}: git ls-remote: {error}") from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ResolveError(f"{repository}@{tag}: git ls-remote failed: {last}")
    refs: dict[str, str] = {}
    for line in result.stdout.splitlines():
        object_id, _, name = line.partition("\t")
        refs[name] = object_id
    # An annotated tag is an object of its own; `<ref>^{}` is the commit it points at.
    commit = refs.get(f"{ref}^{{}}") or refs.get(ref)
    if commit is None:
        raise ResolveError(f"{repository}@{tag}: no such tag")
    return commit


def resolve_hugging_face(repository: str) -> str:
    """The commit of the model repository's default branch."""
    from huggingface_hub import HfApi

    try:
        sha: str | None = HfApi().model_info(repository).sha
    except Exception as error:  # the hub client raises many types; one line
        raise ResolveError(f"{repository}: {type(error).__name__}: {error}") from None
    if not sha:
        raise ResolveError(f"{repository}: the hub named no commit")
    return sha


def _git_tag(key: str) -> str:
    repository, _, tag = key.rpartition("@")
    return resolve_git_tag(repository, tag)


Resolvers = dict[LockSection, Callable[[str], str]]
RESOLVERS: Resolvers = {"images": resolve_image, "git_tags": _git_tag, "huggingface": resolve_hugging_face}


def resolve_pins(pins: list[Pin], resolvers: Resolvers = RESOLVERS) -> tuple[list[tuple[Pin, str | None]], list[str]]:
    """Each pin with what it resolves to now (None when it could not be), and one line per failure."""
    resolved: list[tuple[Pin, str | None]] = []
    problems: list[str] = []
    for pin in pins:
        try:
            resolved.append((pin, resolvers[pin.section](pin.key)))
        except ResolveError as error:
            resolved.append((pin, None))
            problems.append(f"lock error: {pin.field}: {error}")
    return resolved, problems


def pins_to_lock(config: ProjectConfig, lock: UpstreamLock) -> list[Pin]:
    """The configuration's movable names (as configured, before the lock fills them), plus every entry already in
    the lock: `--check` re-resolves them all."""
    pins = {(pin.section, pin.key): pin for pin in required_pins(config)}
    for section, key in lock.entries():
        pins.setdefault((section, key), Pin(section, key, f"upstream-lock {section}"))
    return list(pins.values())


def drift(lock: UpstreamLock, resolved: list[tuple[Pin, str | None]]) -> list[str]:
    """One line per entry the lock does not hold as resolved now."""
    entries = lock.entries()
    lines: list[str] = []
    for pin, now in resolved:
        if (pin.section, pin.key) not in entries:
            lines.append(f"missing: {pin.describe()} is not in the lock (resolves to {now or 'nothing now'})")
            continue
        locked = entries[pin.section, pin.key]
        if locked is None:
            lines.append(f"unresolved: {pin.key} is null in the lock (resolves to {now or 'nothing now'})")
        elif now is not None and now != locked:
            lines.append(f"drift: {pin.key} is locked at {locked} and now resolves to {now}")
    return lines
