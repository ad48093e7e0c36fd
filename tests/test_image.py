"""docker/Dockerfile static checks, the image configuration, the tag and the build-command helper."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_helpers import skyrl_hp

from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.config.images import image_input_files, training_image_tag
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.locations import DOCKER_DIR
from skyrl_hyperpod.values.stack_outputs import OutputKey

DOCKERFILE = DOCKER_DIR / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text())


def arg_defaults(dockerfile) -> dict[str, str | None]:
    defaults: dict[str, str | None] = {}
    for keyword, rest in dockerfile:
        if keyword == "ARG":
            name, sep, value = rest.partition("=")
            defaults.setdefault(name, value if sep else None)
    return defaults


def test_arg_defaults_equal_the_configuration(dockerfile, default_config):
    # The configuration is the source of truth; a plain `docker build docker/` must agree with it.
    # The one exception is the base digest, which has no default so that such a build cannot pull
    # a moving tag (test_no_build_can_pull_the_base_by_a_moving_tag).
    defaults = arg_defaults(dockerfile)
    configured = dict(default_config.training_image.build_args)
    assert "BASE_IMAGE_DIGEST" in defaults and defaults.pop("BASE_IMAGE_DIGEST") is None
    configured.pop("BASE_IMAGE_DIGEST")
    assert defaults == configured


def test_every_build_arg_is_declared_and_used(dockerfile, default_config):
    text = DOCKERFILE.read_text()
    for name in default_config.training_image.build_args:
        assert re.search(rf"\$\{{{name}\}}", text), f"ARG {name} is declared but never used"


def test_base_image_comes_from_the_arg_and_carries_the_configured_ray(dockerfile, default_config):
    froms = [rest for keyword, rest in dockerfile if keyword == "FROM"]
    assert froms == ["${BASE_IMAGE}@${BASE_IMAGE_DIGEST}"]
    base = arg_defaults(dockerfile)["BASE_IMAGE"]
    assert re.search(r"ray-([0-9.]+)-", base).group(1) == default_config.training_image.ray_version


def test_refs_are_full_commit_ids(dockerfile):
    defaults = arg_defaults(dockerfile)
    assert re.fullmatch(r"[0-9a-f]{40}", defaults["VISGYM_REF"])
    # SkyRL: its release tag by default, or the tag's commit when pinned.
    assert defaults["SKYRL_REF"] == "" and defaults["SKYRL_TAG"] == f"skyrl-v{defaults['SKYRL_VERSION']}"


def test_skyrl_checkout_is_the_configured_release(dockerfile):
    run_text = " ".join(rest for keyword, rest in dockerfile if keyword == "RUN")
    assert 'fetch_tag "${SKYRL_REPOSITORY}" "${SKYRL_DIR}" "${SKYRL_TAG}"' in run_text
    assert 'fetch_commit "${SKYRL_REPOSITORY}" "${SKYRL_DIR}" "${SKYRL_REF}"' in run_text
    # the checkout's own version must be the configured one, whichever way it was fetched
    assert '"${SKYRL_DIR}/skyrl/__init__.py"' in run_text and '!= "${SKYRL_VERSION}"' in run_text


def test_image_check_compares_the_installed_pins_with_the_build_args():
    text = (DOCKER_DIR / "image_check.py").read_text()
    for name in ("RAY_VERSION", "SKYRL_VERSION", "TORCH_VERSION", "VLLM_VERSION"):
        assert f'os.environ["{name}"]' in text, name


# --- the base image is only ever pulled by digest ------------------------------------------------------
#
# Docker pulls `name` as `name:latest` and `name:tag` as whatever the tag points at today; only
# `name[:tag]@sha256:...` is fixed. These tests expand the Dockerfile's image references the way
# Docker does and classify what would be pulled.

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?"
)
A_DIGEST = "sha256:" + "0123456789abcdef" * 4


def pulled_as(reference: str) -> str:
    """'digest' (fixed), 'tag' (moves), 'latest' (untagged = :latest), or 'invalid' (Docker refuses)."""
    match = _REFERENCE.fullmatch(reference)
    if not match:
        return "invalid"
    if match["digest"]:
        return "digest"
    return "latest" if match["tag"] in (None, "latest") else "tag"


def expand(text: str, args: dict[str, str | None]) -> str:
    """Docker's ARG substitution (${A}, $A, ${A:-word}, ${A:+word}); an unset ARG expands to ''."""

    def value(match: re.Match) -> str:
        name = match["braced"] or match["bare"]
        current = args.get(name) or ""
        if match["op"] == "-":
            return current or match["word"]
        if match["op"] == "+":
            return match["word"] if current else ""
        return current

    return re.sub(r"\$\{(?P<braced>\w+)(?::(?P<op>[-+])(?P<word>[^}]*))?\}|\$(?P<bare>\w+)", value, text)


def image_references(dockerfile: list[tuple[str, str]]) -> list[str]:
    """Every image a build pulls: FROM operands and --from= values that are not earlier stages."""
    stages: set[str] = set()
    references: list[str] = []
    for keyword, rest in dockerfile:
        words = [w for w in rest.split() if not w.startswith("--platform=")]
        if keyword == "FROM":
            references.append(words[0])
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])
        for word in words:
            # COPY --from=<image|stage> and RUN --mount=...,from=<image|stage>,...
            options = dict(kv.partition("=")[::2] for kv in word.removeprefix("--mount=").split(","))
            source = word.removeprefix("--from=") if word.startswith("--from=") else None
            if word.startswith("--mount="):
                source = options.get("from")
            if source and source not in stages and not source.isdigit():
                references.append(source)
    return references


def test_pulled_as_classifies_references_like_docker():
    assert pulled_as("novaskyai/skyrl-train-ray-2.57.0-py3.12-cu13.0") == "latest"
    assert pulled_as("novaskyai/skyrl-train-ray-2.57.0-py3.12-cu13.0:latest") == "latest"
    assert pulled_as("registry.example.com:5000/team/base:v1") == "tag"
    assert pulled_as(f"registry.example.com:5000/team/base:v1@{A_DIGEST}") == "digest"
    assert pulled_as(f"novaskyai/base@{A_DIGEST}") == "digest"
    assert pulled_as("novaskyai/base@") == "invalid"
    assert expand("${A}@${B}", {"A": "x"}) == "x@"


def test_no_build_can_pull_the_base_by_a_moving_tag(dockerfile, default_config):
    references = image_references(dockerfile)
    assert references, "the Dockerfile pulls no image?"
    defaults = arg_defaults(dockerfile)
    mirror = "111111111111.dkr.ecr.us-west-2.amazonaws.com/mirror/skyrl-train-ray-2.57.0-py3.12-cu13.0:v1"
    tagged = validate_config({"training_image": {"base_image": mirror}})
    for build_args in (default_config.training_image.build_args, tagged.training_image.build_args):
        for reference in references:
            # A bare `docker build docker/` and a build path that failed to set the digest: Docker
            # refuses the reference rather than pulling a tag.
            assert pulled_as(expand(reference, defaults)) == "invalid", reference
            assert pulled_as(expand(reference, {**build_args, "BASE_IMAGE_DIGEST": ""})) == "invalid", reference
            # With the digest the build paths pass: pulled by that digest.
            resolved = expand(reference, {**build_args, "BASE_IMAGE_DIGEST": A_DIGEST})
            assert pulled_as(resolved) == "digest" and resolved.endswith(f"@{A_DIGEST}"), reference


def test_final_user_is_the_non_root_ray_user(dockerfile):
    users = [rest for keyword, rest in dockerfile if keyword == "USER"]
    assert users and users[-1] == "ray"
    assert "root" not in users and "0" not in users


def test_training_environment_and_labels(dockerfile, default_config):
    env_text = " ".join(rest for keyword, rest in dockerfile if keyword == "ENV")
    assert "HF_HUB_ENABLE_HF_TRANSFER=1" in env_text
    assert "DEFAULT_MODEL_ID=${DEFAULT_MODEL_ID}" in env_text
    run_text = " ".join(rest for keyword, rest in dockerfile if keyword == "RUN")
    # SkyRL's dependencies exactly as the release's uv.lock pins them (versions and hashes), never re-resolved.
    assert "uv sync --active --frozen --extra fsdp" in run_text
    # The rest from the hashed lock only (tests/test_upstream_lock.py checks its pins); VisGym without its deps.
    assert "--require-hashes -r /home/ray/.requirements-image.txt" in run_text
    assert 'uv pip install --python "${SKYRL_VENV}/bin/python" --no-deps -e "${VISGYM_DIR}"' in run_text
    assert not re.search(r"(pygame|ray\[default\])==", run_text)
    labels = " ".join(rest for keyword, rest in dockerfile if keyword == "LABEL")
    for label in (
        "org.opencontainers.image.title",
        'org.opencontainers.image.base.name="${BASE_IMAGE}"',
        'org.opencontainers.image.base.digest="${BASE_IMAGE_DIGEST}"',
        'skyrl-hyperpod.skyrl.version="${SKYRL_VERSION}"',
        'skyrl-hyperpod.skyrl.ref="${SKYRL_REF}"',
        'skyrl-hyperpod.visgym.ref="${VISGYM_REF}"',
        'skyrl-hyperpod.ray.version="${RAY_VERSION}"',
    ):
        assert label in labels


def test_copied_files_are_exactly_the_ones_the_dockerignore_readmits(dockerfile):
    copied = {shlex.split(rest)[-2] for keyword, rest in dockerfile if keyword in ("COPY", "ADD")}
    readmitted = {p.name for p in image_input_files()} - {"Dockerfile", ".dockerignore"}
    assert copied == readmitted
    assert all((DOCKER_DIR / name).is_file() for name in readmitted)
    assert "train_job.py" not in readmitted  # mounted from a ConfigMap, never baked in


# --- configuration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"skyrl_ref": "main"}, "training_image.skyrl_ref = 'main': must be a full 40-character"),
        (
            {"base_image": "novaskyai/skyrl-train-ray-2.57.0-py3.12-cu13.0:latest"},
            "must not use the moving 'latest' tag",
        ),
        ({"base_image": "novaskyai/skyrl-train-ray-2.58.0-py3.12-cu13.0"}, "differs from the Ray 2.58.0"),
        ({"base_image_digest": "sha256:abc"}, "training_image.base_image_digest"),
        ({"build_log_retention_days": 31}, "CloudWatch Logs accepts only"),
        ({"skyrl_repository": "git@github.com:NovaSky-AI/SkyRL"}, "must be an https git URL"),
    ],
)
def test_bad_image_configuration_is_rejected(overrides, message):
    with pytest.raises(ConfigError) as error:
        validate_config({"training_image": overrides})
    assert any(message in problem for problem in error.value.problems), error.value.problems


def test_digest_pins_the_base_image(default_config):
    config = validate_config({"training_image": {"base_image_digest": A_DIGEST}})
    assert config.training_image.base_image_pinned and not default_config.training_image.base_image_pinned
    assert config.training_image.build_args["BASE_IMAGE_DIGEST"] == A_DIGEST
    assert config.training_image.tag != default_config.training_image.tag  # a pin is an image input


# --- the tag -------------------------------------------------------------------------------------------


def test_tag_names_the_pins_and_is_a_valid_ecr_tag(default_config):
    image = default_config.training_image
    tag = image.tag
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag)
    assert tag.startswith(f"ray{image.ray_version}-skyrl-v{image.skyrl_version}-visgym-{image.visgym_ref[:12]}-")
    assert tag == image.tag  # deterministic
    pinned = validate_config({"training_image": {"skyrl_ref": "a" * 40}}).training_image.tag
    assert pinned.startswith(f"ray{image.ray_version}-skyrl-{'a' * 12}-visgym-")


def copy_context(tmp_path: Path) -> Path:
    context = tmp_path / "docker"
    shutil.copytree(DOCKER_DIR, context, ignore=shutil.ignore_patterns("__pycache__"))
    return context


def test_tag_changes_with_the_image_inputs_only(tmp_path, default_config):
    image = default_config.training_image
    context = copy_context(tmp_path)
    baseline = training_image_tag(image, context)
    assert baseline == image.tag

    (context / "train_job.py").write_text("# a training knob changed\n")
    (context / "README.md").write_text("docs\n")
    assert training_image_tag(image, context) == baseline  # no rebuild for script or docs edits

    (context / "image_check.py").write_text((context / "image_check.py").read_text() + "\n# changed\n")
    changed_copy = training_image_tag(image, context)
    assert changed_copy != baseline

    (context / "Dockerfile").write_text((context / "Dockerfile").read_text() + "\n# changed\n")
    assert training_image_tag(image, context) not in (baseline, changed_copy)


def test_tag_changes_with_any_build_argument(default_config):
    other = validate_config({"training_image": {"pygame_version": "2.6.0"}}).training_image
    assert other.tag != default_config.training_image.tag


def test_missing_dockerfile_is_a_clear_error(tmp_path, default_config):
    with pytest.raises(InputError, match="Dockerfile is missing"):
        training_image_tag(default_config.training_image, tmp_path)


# --- the helper that prints build commands -------------------------------------------------------------


def test_build_args_command_lists_every_configured_value(default_config, capsys):
    assert skyrl_hp("image", "build-args") == 0
    captured = capsys.readouterr()
    expected = {**default_config.training_image.build_args, "BASE_IMAGE_DIGEST": "$BASE_IMAGE_DIGEST"}
    assert [shlex.split(line) for line in captured.out.splitlines()] == [
        ["--build-arg", f"{k}={v}"] for k, v in expected.items()
    ]
    # ...and how to set the digest (the default base is not pinned: resolve it).
    assert "docker buildx imagetools inspect" in captured.err


def stub_tools(tmp_path: Path, resolved_digest: str | None) -> tuple[dict[str, str], Path]:
    """PATH with recording stand-ins for aws and docker; `docker buildx imagetools inspect` prints
    resolved_digest, or fails when it is None (registry unreachable)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "calls"
    record.touch()
    resolve = f"echo {resolved_digest}" if resolved_digest else "exit 1"
    (bin_dir / "docker").write_text(
        f'#!/bin/bash\nprintf "%s\\n" "docker $*" >> {record}\n'
        f'if [ "$1 $2 $3" = "buildx imagetools inspect" ]; then {resolve}; fi\nexit 0\n'
    )
    (bin_dir / "aws").write_text(f'#!/bin/bash\nprintf "%s\\n" "aws $*" >> {record}\nexit 0\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}, record


@pytest.mark.parametrize("registry_answers", [True, False])
def test_buildx_command_builds_from_the_digest_it_resolves(tmp_path, default_config, capsys, registry_answers):
    image = default_config.training_image
    assert not image.base_image_pinned  # upstream publishes the base untagged only (docker/README.md)
    assert (
        skyrl_hp("image", "buildx-command", "--repository-uri", "111111111111.dkr.ecr.us-west-2.amazonaws.com/r") == 0
    )
    env, record = stub_tools(tmp_path, A_DIGEST if registry_answers else None)
    result = subprocess.run(["bash", "-c", capsys.readouterr().out], env=env, capture_output=True, text=True)
    calls = record.read_text().splitlines()
    assert f"docker buildx imagetools inspect --format {{{{.Manifest.Digest}}}} {image.base_image}" in calls
    builds = [shlex.split(c) for c in calls if c.startswith("docker buildx build")]
    if registry_answers:
        assert result.returncode == 0, result.stderr
        [build] = builds
        assert f"BASE_IMAGE_DIGEST={A_DIGEST}" in build and f"BASE_IMAGE={image.base_image}" in build
        [notice] = [line for line in result.stdout.splitlines() if line.startswith("notice:")]
        assert f"training_image.base_image_digest: {A_DIGEST}" in notice
        assert calls[-1].startswith("docker push ")
    else:
        # Nothing is built or pushed from an unresolved (moving) base.
        assert result.returncode != 0 and builds == [] and not any(c.startswith("docker push") for c in calls)
        assert f"could not resolve the digest of {image.base_image}" in result.stderr


def test_buildx_command_uses_the_pinned_digest_without_asking_the_registry(tmp_path, capsys):
    config_file = tmp_path / "pinned.yaml"
    config_file.write_text(f"training_image:\n  base_image_digest: '{A_DIGEST}'\n")
    uri = "111111111111.dkr.ecr.us-west-2.amazonaws.com/r"
    args = ["buildx-command", "--config", str(config_file), "--repository-uri", uri]
    assert skyrl_hp("image", *args) == 0
    env, record = stub_tools(tmp_path, None)
    result = subprocess.run(["bash", "-c", capsys.readouterr().out], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    calls = record.read_text().splitlines()
    assert not any("imagetools" in c for c in calls) and "notice:" not in result.stdout
    [build] = [shlex.split(c) for c in calls if c.startswith("docker buildx build")]
    assert f"BASE_IMAGE_DIGEST={A_DIGEST}" in build


def test_buildx_command_targets_the_configured_tag(default_config, capsys):
    uri = "111111111111.dkr.ecr.us-west-2.amazonaws.com/skyrl-hp/skyrl-train"
    assert skyrl_hp("image", "buildx-command", "--repository-uri", uri) == 0
    out = capsys.readouterr().out
    image_uri = f"{uri}:{default_config.training_image.tag}"
    build_line = next(line for line in out.splitlines() if "buildx build" in line)
    words = shlex.split(build_line.rstrip("\\").strip().removeprefix("&& "))
    assert words[:4] == ["docker", "buildx", "build", "--load"]
    assert words[words.index("--platform") + 1] == "linux/amd64"
    assert words[words.index("--tag") + 1] == image_uri
    expected = {**default_config.training_image.build_args, "BASE_IMAGE_DIGEST": "$BASE_IMAGE_DIGEST"}
    for name, value in expected.items():
        assert f"{name}={value}" in words
    assert f"docker push {image_uri}" in out
    assert "--region us-west-2" in out


def test_buildx_command_reads_the_deploy_outputs(tmp_path, default_config, capsys):
    outputs = tmp_path / "outputs.json"
    uri = "222222222222.dkr.ecr.eu-west-1.amazonaws.com/skyrl-hp/skyrl-train"
    outputs.write_text(f'{{"skyrl-hp-registry": {{"EcrRepositoryUri": "{uri}"}}}}')
    assert skyrl_hp("image", "buildx-command", "--outputs-file", str(outputs)) == 0
    assert f"{uri}:{default_config.training_image.tag}" in capsys.readouterr().out


def test_start_build_command_reads_the_stack_output(default_config, capsys):
    assert skyrl_hp("image", "start-build-command") == 0
    out = capsys.readouterr().out
    assert f"--stack-name {default_config.names.stack('image-build')}" in out
    assert OutputKey.IMAGE_BUILD_PROJECT_NAME.value in out
    assert 'aws codebuild start-build --project-name "$PROJECT"' in out


def test_the_image_installs_the_efa_stack_nccl_needs_from_a_verified_download(dockerfile, default_config):
    # Pods that request EFA rely on this image for libfabric and the aws-ofi-nccl plugin (tests/charts/test_charts.py).
    from skyrl_hyperpod.config.efa import EFA_INSTALLER_KEY_FINGERPRINT, NCCL_NET_PLUGIN, OFI_NCCL_PLUGIN_LIBRARY

    args = arg_defaults(dockerfile)
    assert args["EFA_INSTALLER_VERSION"] == default_config.training_image.efa_installer_version
    assert args["EFA_INSTALLER_KEY_FINGERPRINT"] == EFA_INSTALLER_KEY_FINGERPRINT
    (efa_step,) = [rest for keyword, rest in dockerfile if keyword == "RUN" and "efa_installer.sh" in rest]
    # Pinned download, signature made by AWS's published key (not merely any key shipped next to the tarball).
    assert 'tarball="aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz"' in efa_step
    assert "--verify" in efa_step and "VALIDSIG .* ${EFA_INSTALLER_KEY_FINGERPRINT}" in efa_step
    assert efa_step.index("--verify") < efa_step.index("efa_installer.sh")
    assert "--skip-kmod" in efa_step and "latest" not in efa_step
    # The build stops when the plugin is missing, and the loader finds it by the name NCCL asks for.
    assert f"-name {OFI_NCCL_PLUGIN_LIBRARY}" in efa_step and "exit 1" in efa_step and "ldconfig" in efa_step
    env_text = " ".join(rest for keyword, rest in dockerfile if keyword == "ENV")
    assert f"NCCL_NET_PLUGIN={NCCL_NET_PLUGIN}" in env_text
    assert f"libnccl-net-{NCCL_NET_PLUGIN}.so" == OFI_NCCL_PLUGIN_LIBRARY
    # image_check.py (run by the build) fails it when the plugin or libfabric does not resolve.
    check = (DOCKER_DIR / "image_check.py").read_text()
    assert "find_library(library)" in check and '("nccl-net-ofi", "fabric")' in check
    assert 'os.environ.get("NCCL_NET_PLUGIN") != "ofi"' in check
    (check_step,) = [rest for keyword, rest in dockerfile if keyword == "RUN" and ".image_check.py" in rest]
    runs = [rest for keyword, rest in dockerfile if keyword == "RUN"]
    assert runs.index(efa_step) < runs.index(check_step)
