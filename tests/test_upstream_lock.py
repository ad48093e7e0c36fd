"""upstream-lock.yaml (skyrl_hyperpod/config/upstream_lock.py) and `skyrl-hp image lock` (ops/upstream_resolve.py):
every movable upstream name the manifests, the stacks and the image pull is taken by digest or commit once locked,
refused when the lock lacks it, and failed by preflight while unresolved. The resolver is tested against the CNCF
distribution registry (Debian's docker-registry, `make registry`) on 127.0.0.1 and against real git repositories."""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlparse

import pytest
import requests
import yaml
from chart_helpers import objects, one, synth
from cli_helpers import skyrl_hp
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.config.loader import read_lock
from skyrl_hyperpod.config.upstream_lock import (
    LOCK_COMMAND,
    LOCK_FILE,
    UpstreamLock,
    apply_lock,
    lock_status,
    merged,
    render_lock,
    required_pins,
)
from skyrl_hyperpod.ops.preflight import check_upstream_lock
from skyrl_hyperpod.ops.upstream_resolve import ResolveError, parse_image, resolve_git_tag, resolve_image
from skyrl_hyperpod.plumbing.locations import CHECKOUT_ROOT, DOCKER_DIR
from skyrl_hyperpod.values.image_commands import base_digest_steps

SERVING_DIGEST = "sha256:" + "1" * 64
PUBLISH_DIGEST = "sha256:" + "2" * 64
BASE_DIGEST = "sha256:" + "3" * 64
SKYRL_COMMIT = "4" * 40
MODEL_COMMIT = "5" * 40


def resolved_lock(config) -> UpstreamLock:
    image, data = config.training_image, config.training.data
    return UpstreamLock(
        images={
            config.serving_image.image: SERVING_DIGEST,
            config.serving.publish.image: PUBLISH_DIGEST,
            image.base_image: BASE_DIGEST,
        },
        git_tags={f"{image.skyrl_repository}@{image.skyrl_tag}": SKYRL_COMMIT},
        huggingface={data.model_repo: MODEL_COMMIT},
    )


def write(path: Path, lock: UpstreamLock) -> Path:
    path.write_text(render_lock(lock), encoding="utf-8")
    return path


# --- the lock file and what synthesis does with it -------------------------------------------------------


def test_the_repository_lock_names_every_movable_name_the_defaults_pull():
    status = lock_status(validate_config({}), read_lock())
    assert status.missing == ()
    # The file is exactly what `skyrl-hp image lock` writes: a rerun that resolves nothing new changes no byte.
    assert LOCK_FILE.read_text(encoding="utf-8") == render_lock(read_lock())


def test_resolved_entries_pin_every_pull_of_the_manifests_and_the_image_build():
    unlocked = validate_config({})
    config = apply_lock(unlocked, resolved_lock(unlocked))
    charts = synth(config)
    service_images = {
        container["image"]
        for group in [
            one(charts, "RayService")["spec"]["rayClusterConfig"]["headGroupSpec"],
            *one(charts, "RayService")["spec"]["rayClusterConfig"]["workerGroupSpecs"],
        ]
        for container in group["template"]["spec"]["containers"]
    }
    assert service_images == {f"{unlocked.serving_image.image}@{SERVING_DIGEST}"}
    publish_images = {
        container["image"]
        for job in objects(charts, "Job")
        for container in job["spec"]["template"]["spec"]["containers"]
    }
    assert publish_images == {f"{unlocked.serving.publish.image}@{PUBLISH_DIGEST}"}
    for rayjob in objects(charts, "RayJob"):
        entrypoint = rayjob["spec"]["entrypoint"]
        assert f"--model-revision {MODEL_COMMIT}" in entrypoint
    # The image builds FROM the locked base digest and fetches SkyRL by the locked commit; both are in its tag.
    build_args = config.training_image.build_args
    assert (build_args["BASE_IMAGE_DIGEST"], build_args["SKYRL_REF"]) == (BASE_DIGEST, SKYRL_COMMIT)
    assert base_digest_steps(config.training_image) == [f"BASE_IMAGE_DIGEST={BASE_DIGEST}"]
    assert config.training_image.tag != unlocked.training_image.tag
    # The digest form is still the known serving image (its Ray and vLLM).
    assert config.serving_image.vllm_version == unlocked.serving_image.vllm_version is not None
    assert lock_status(config, resolved_lock(unlocked)).unresolved == ()


def test_the_configurations_own_pins_win_over_the_lock():
    pinned_digest = "sha256:" + "9" * 64
    config = validate_config(
        {"serving_image": {"image": f"public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda-v1.0@{pinned_digest}"}}
    )
    locked = apply_lock(config, resolved_lock(validate_config({})))
    assert locked.serving_image.image.endswith(f"@{pinned_digest}")
    assert "serving_image.image" not in {pin.field for pin in lock_status(config, UpstreamLock()).missing}


def test_unresolved_entries_keep_the_names_with_one_warning_line_and_fail_preflight(tmp_path):
    config = validate_config({})
    lock = resolved_lock(config)
    lock = lock.model_copy(update={"images": dict.fromkeys(lock.images), "huggingface": {"VisGym/visgym_model": None}})
    path = write(tmp_path / "upstream-lock.yaml", lock)
    assert apply_lock(config, lock).serving_image.image == config.serving_image.image
    warning = lock_status(config, read_lock(path), path).synth_warning()
    assert warning is not None and "\n" not in warning and LOCK_COMMAND in warning
    assert warning.startswith("warning: 4 upstream name(s) unresolved in upstream-lock.yaml")
    assert [line for line in check_upstream_lock(config, path) if config.serving_image.image in line.detail]
    results = check_upstream_lock(config, path)
    assert [result.status for result in results] == ["FAIL"] * 4  # three images and the checkpoint; SkyRL resolved
    assert all(LOCK_COMMAND in result.hint for result in results)
    resolved = write(tmp_path / "resolved.yaml", resolved_lock(config))
    assert lock_status(config, read_lock(resolved), resolved).synth_warning() is None
    assert [result.status for result in check_upstream_lock(config, resolved)] == ["PASS"]


def test_a_name_missing_from_the_lock_is_refused_with_the_command(tmp_path):
    config = validate_config({"serving": {"publish": {"image": "registry.example/tools/aws-cli:2.40.0"}}})
    path = write(tmp_path / "upstream-lock.yaml", resolved_lock(validate_config({})))
    with pytest.raises(ConfigError) as error:
        lock_status(config, read_lock(path), path).synth_warning()
    [line] = error.value.problems
    assert line == (
        "lock error: serving.publish.image registry.example/tools/aws-cli:2.40.0 is not in upstream-lock.yaml: run "
        f"`{LOCK_COMMAND}` with registry access and commit the file (or pin it in the configuration)"
    )


@pytest.mark.parametrize("app", ["k8s_app.py", "app.py"])
def test_synthesis_refuses_an_unlocked_image_before_writing_anything(tmp_path, app):
    config_file = tmp_path / "skyrl-hp.yaml"
    config_file.write_text("serving:\n  publish:\n    image: registry.example/tools/aws-cli:2.40.0\n", encoding="utf-8")
    env = {**os.environ, "SKYRL_HP_CONFIG": str(config_file), "CDK8S_OUTDIR": str(tmp_path / "dist")}
    env.pop("CDK_CONTEXT_JSON", None)
    result = subprocess.run(
        [sys.executable, str(CHECKOUT_ROOT / app)], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "lock error: serving.publish.image registry.example/tools/aws-cli:2.40.0 is not in upstream-lock.yaml"
        )
    )
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "dist").exists() and not (tmp_path / "cdk.out").exists()


def test_a_rerun_that_cannot_resolve_keeps_what_was_resolved_before():
    config = validate_config({})
    before = resolved_lock(config)
    pins = {pin.key: pin for pin in required_pins(config)}
    after = merged(before, [(pins[config.serving_image.image], None), (pins["VisGym/visgym_model"], "6" * 40)])
    assert after.images == before.images  # null never overwrites a digest
    assert after.huggingface == {"VisGym/visgym_model": "6" * 40}
    new = merged(UpstreamLock(), [(pins[config.serving_image.image], None)])
    assert new.images == {config.serving_image.image: None}  # known, not resolved yet


def test_a_malformed_lock_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "upstream-lock.yaml"
    path.write_text("images:\n  public.ecr.aws/aws-cli/aws-cli:2.32.9: sha256:abc\n", encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        read_lock(path)
    [line] = error.value.problems
    assert line.startswith(f"lock error: {path}: images.public.ecr.aws/aws-cli/aws-cli:2.32.9: String should match")


# --- the image's hashed requirements ------------------------------------------------------------------------


def requirement_pins(text: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^ \\\n]+)", text, flags=re.MULTILINE))


def test_the_image_installs_hashed_requirements_at_the_configured_versions():
    text = (DOCKER_DIR / "requirements-image.txt").read_text(encoding="utf-8")
    requirements = [block for block in re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text) if "==" in block]
    assert requirements and all("--hash=sha256:" in block for block in requirements)
    pins = {name.lower().replace("_", "-"): version for name, version in requirement_pins(text).items()}
    image = validate_config({}).training_image
    assert (pins["ray"], pins["pygame"]) == (image.ray_version, image.pygame_version)
    wanted = (DOCKER_DIR / "requirements-image.in").read_text(encoding="utf-8")
    for line in wanted.splitlines():
        if line and not line.startswith("#"):
            assert re.sub(r"\[.*\]", "", line).lower() in pins
    # The build context carries it (the tag hashes it).
    assert "!requirements-image.txt" in (DOCKER_DIR / ".dockerignore").read_text(encoding="utf-8").splitlines()


# --- the resolvers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("ubuntu", ("registry-1.docker.io", "library/ubuntu", "latest")),
        ("novaskyai/skyrl-train-ray-2.57.0-py3.12-cu13.0", ("registry-1.docker.io", "novaskyai/skyrl-train-ray-2.57.0-py3.12-cu13.0", "latest")),
        ("public.ecr.aws/aws-cli/aws-cli:2.32.9", ("public.ecr.aws", "aws-cli/aws-cli", "2.32.9")),
        ("127.0.0.1:5000/serve:1", ("127.0.0.1:5000", "serve", "1")),
        ("localhost/a/b:c", ("localhost", "a/b", "c")),
    ],
)  # fmt: skip
def test_image_references_are_read_as_docker_reads_them(reference, expected):
    parsed = parse_image(reference)
    assert (parsed.registry, parsed.repository, parsed.tag) == expected
    assert parsed.scheme == ("http" if expected[0].split(":")[0] in {"127.0.0.1", "localhost"} else "https")


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_git_tags_resolve_to_their_commits(tmp_path):
    git("init", "--quiet", "-b", "main", cwd=tmp_path)
    git("commit", "--quiet", "--allow-empty", "-m", "one", cwd=tmp_path)
    first = git("rev-parse", "HEAD", cwd=tmp_path)
    git("tag", "-a", "skyrl-v0.4.0", "-m", "release", cwd=tmp_path)  # annotated: its own object, peeled to the commit
    git("commit", "--quiet", "--allow-empty", "-m", "two", cwd=tmp_path)
    git("tag", "light", cwd=tmp_path)
    assert resolve_git_tag(str(tmp_path), "skyrl-v0.4.0") == first
    assert resolve_git_tag(str(tmp_path), "light") == git("rev-parse", "HEAD", cwd=tmp_path)
    with pytest.raises(ResolveError, match="no such tag"):
        resolve_git_tag(str(tmp_path), "skyrl-v9.9.9")


# --- against a real OCI registry on 127.0.0.1 ---------------------------------------------------------------

REGISTRY_BIN = Path(
    os.environ.get("DOCKER_REGISTRY_BIN") or CHECKOUT_ROOT / ".build/docker-registry/usr/bin/docker-registry"
)
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@contextlib.contextmanager
def running_registry(directory: Path, storage: Path, auth: dict | None = None) -> Iterator[str]:
    """The CNCF distribution server on a free loopback port, storing in `storage`; its address."""
    if not os.access(REGISTRY_BIN, os.X_OK):
        pytest.skip(f"no OCI registry at {REGISTRY_BIN}: `make registry` unpacks Debian's docker-registry package")
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = {
        "version": 0.1,
        "log": {"level": "error"},
        "storage": {"filesystem": {"rootdirectory": str(storage)}},
        "http": {"addr": f"127.0.0.1:{port}"},
        **({"auth": auth} if auth else {}),
    }
    (directory / "registry.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    log = directory / "registry.log"
    with log.open("wb") as stderr:
        server = subprocess.Popen([str(REGISTRY_BIN), "serve", str(directory / "registry.yml")], stderr=stderr)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if requests.get(f"http://{address}/v2/", timeout=1).status_code in (200, 401):
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                pytest.fail(f"registry did not start: {log.read_text(errors='replace')}")
            time.sleep(0.1)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def registry(tmp_path):
    with running_registry(tmp_path / "open", tmp_path / "storage") as address:
        yield address


def push_blob(address: str, repository: str, data: bytes) -> dict:
    """The OCI distribution spec's POST-then-PUT upload; the blob's descriptor."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    started = requests.post(f"http://{address}/v2/{repository}/blobs/uploads/", timeout=10)
    assert started.status_code == 202, started.text
    location = urljoin(f"http://{address}/", started.headers["Location"])
    separator = "&" if "?" in location else "?"
    done = requests.put(
        f"{location}{separator}digest={digest}",
        data=data,
        headers={"Content-Type": "application/octet-stream"},
        timeout=10,
    )
    assert done.status_code == 201, done.text
    return {"digest": digest, "size": len(data)}


def push_image(address: str, repository: str, tag: str, layer: bytes) -> str:
    """A one-layer image under `tag`; the digest the registry announces for its manifest."""
    config = push_blob(address, repository, json.dumps({"architecture": "amd64", "os": "linux"}).encode())
    blob = push_blob(address, repository, layer)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **blob}],
    }
    body = json.dumps(manifest).encode()
    response = requests.put(
        f"http://{address}/v2/{repository}/manifests/{tag}",
        data=body,
        headers={"Content-Type": OCI_MANIFEST},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    assert response.headers["Docker-Content-Digest"] == "sha256:" + hashlib.sha256(body).hexdigest()
    return response.headers["Docker-Content-Digest"]


def test_the_resolver_reads_a_tags_manifest_digest_from_a_real_registry(registry):
    pushed = push_image(registry, "team/serve", "v1", b"layer one")
    assert resolve_image(f"{registry}/team/serve:v1") == pushed
    moved = push_image(registry, "team/serve", "v1", b"layer two")
    assert moved != pushed and resolve_image(f"{registry}/team/serve:v1") == moved
    with pytest.raises(ResolveError, match="answered HTTP 404"):
        resolve_image(f"{registry}/team/serve:v2")
    closed = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(ResolveError, match=f"^{closed}/team/serve:v1: cannot reach {closed}$"):
        resolve_image(f"{closed}/team/serve:v1")


def test_image_lock_records_the_digests_and_check_reports_drift(registry, tmp_path, capsys):
    serving, publish = f"{registry}/team/serve:v1", f"{registry}/tools/aws-cli:2.40.0"
    serving_digest = push_image(registry, "team/serve", "v1", b"serve")
    publish_digest = push_image(registry, "tools/aws-cli", "2.40.0", b"cli")
    config = {
        "serving_image": {"image": serving},
        "serving": {"publish": {"image": publish}},
        "training_image": {"base_image_digest": BASE_DIGEST, "skyrl_ref": SKYRL_COMMIT},
        "training": {"data": {"model_revision": MODEL_COMMIT}},
    }
    config_file = tmp_path / "skyrl-hp.yaml"
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    lock_file = tmp_path / "upstream-lock.yaml"

    assert skyrl_hp("image", "lock", "--config", str(config_file), "--lock-file", str(lock_file)) == 0
    assert read_lock(lock_file).images == {serving: serving_digest, publish: publish_digest}
    written = lock_file.read_bytes()
    assert skyrl_hp("image", "lock", "--check", "--config", str(config_file), "--lock-file", str(lock_file)) == 0
    capsys.readouterr()

    moved = push_image(registry, "team/serve", "v1", b"serve, rebuilt")
    assert skyrl_hp("image", "lock", "--check", "--config", str(config_file), "--lock-file", str(lock_file)) == 1
    out = capsys.readouterr().out
    assert f"drift: {serving} is locked at {serving_digest} and now resolves to {moved}" in out
    assert publish not in out
    assert lock_file.read_bytes() == written  # --check writes nothing


# --- the bearer-token flow (Docker Hub's and public.ecr.aws's anonymous pulls) --------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenService:
    """A token service as the distribution auth spec describes it (https://distribution.github.io/distribution/spec/auth/token/):
    an RS256 JWT whose x5c header carries a certificate from the registry's rootcertbundle, granting what the scope asks."""

    def __init__(self, directory: Path):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test token issuer")])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .sign(self.key, hashes.SHA256())
        )
        self.bundle = directory / "token-root.pem"
        self.bundle.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))
        self.requests: list[dict[str, list[str]]] = []

    def token(self, scope: str) -> str:
        kind, name, actions = scope.split(":")
        header = {
            "typ": "JWT",
            "alg": "RS256",
            "x5c": [base64.b64encode(self.certificate.public_bytes(serialization.Encoding.DER)).decode()],
        }
        now = int(time.time())
        claims = {
            "iss": "test-issuer",
            "sub": "",
            "aud": "test-registry",
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": str(now),
            "access": [{"type": kind, "name": name, "actions": actions.split(",")}],
        }
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{b64url(signature)}"

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query)
                service.requests.append(query)
                body = json.dumps({"token": service.token(query["scope"][0])}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/token"
        finally:
            server.shutdown()
            server.server_close()


def test_a_registry_that_asks_for_a_bearer_token_is_read_with_an_anonymous_one(registry, tmp_path):
    pushed = push_image(registry, "team/serve", "v1", b"layer one")
    tokens = TokenService(tmp_path)
    with tokens.serving() as realm:
        auth = {
            "token": {
                "realm": realm,
                "service": "test-registry",
                "issuer": "test-issuer",
                "rootcertbundle": str(tokens.bundle),
            }
        }
        # The same storage behind a registry that answers 401 with a Bearer challenge until it sees a token.
        with running_registry(tmp_path / "token", tmp_path / "storage", auth) as guarded:
            assert requests.get(f"http://{guarded}/v2/team/serve/manifests/v1", timeout=10).status_code == 401
            assert resolve_image(f"{guarded}/team/serve:v1") == pushed
    assert tokens.requests == [{"service": ["test-registry"], "scope": ["repository:team/serve:pull"]}]
