"""docker/Dockerfile static checks, the image configuration, the tag and the build-command helper."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from skyrl_hyperpod import image as image_cli
from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.config.images import DOCKER_CONTEXT_DIR, image_input_files, training_image_tag

DOCKERFILE = DOCKER_CONTEXT_DIR / "Dockerfile"


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
    assert arg_defaults(dockerfile) == default_config.training_image.build_args


def test_every_build_arg_is_declared_and_used(dockerfile, default_config):
    text = DOCKERFILE.read_text()
    for name in default_config.training_image.build_args:
        assert re.search(rf"\$\{{{name}\}}", text), f"ARG {name} is declared but never used"


def test_base_image_comes_from_the_arg_and_carries_the_configured_ray(dockerfile, default_config):
    froms = [rest for keyword, rest in dockerfile if keyword == "FROM"]
    assert froms == ["${BASE_IMAGE}"]
    base = arg_defaults(dockerfile)["BASE_IMAGE"]
    assert re.search(r"ray-([0-9.]+)-", base).group(1) == default_config.training_image.ray_version


def test_refs_are_full_commit_ids(dockerfile):
    defaults = arg_defaults(dockerfile)
    for name in ("SKYRL_REF", "VISGYM_REF"):
        assert re.fullmatch(r"[0-9a-f]{40}", defaults[name]), name


def test_no_latest_anywhere():
    assert not re.search(r"\blatest\b", DOCKERFILE.read_text(), re.IGNORECASE)


def test_final_user_is_the_non_root_ray_user(dockerfile):
    users = [rest for keyword, rest in dockerfile if keyword == "USER"]
    assert users and users[-1] == "ray"
    assert "root" not in users and "0" not in users


def test_training_environment_and_labels(dockerfile, default_config):
    env_text = " ".join(rest for keyword, rest in dockerfile if keyword == "ENV")
    assert "HF_HUB_ENABLE_HF_TRANSFER=1" in env_text
    assert "DEFAULT_MODEL_ID=${DEFAULT_MODEL_ID}" in env_text
    run_text = " ".join(rest for keyword, rest in dockerfile if keyword == "RUN")
    assert "uv sync --active --extra fsdp" in run_text
    assert '"pygame==${PYGAME_VERSION}"' in run_text
    labels = " ".join(rest for keyword, rest in dockerfile if keyword == "LABEL")
    for label in (
        "org.opencontainers.image.title",
        'org.opencontainers.image.base.name="${BASE_IMAGE}"',
        'skyrl-hyperpod.skyrl.ref="${SKYRL_REF}"',
        'skyrl-hyperpod.visgym.ref="${VISGYM_REF}"',
        'skyrl-hyperpod.ray.version="${RAY_VERSION}"',
    ):
        assert label in labels


def test_copied_files_are_exactly_the_ones_the_dockerignore_readmits(dockerfile):
    copied = {shlex.split(rest)[-2] for keyword, rest in dockerfile if keyword in ("COPY", "ADD")}
    readmitted = {p.name for p in image_input_files()} - {"Dockerfile", ".dockerignore"}
    assert copied == readmitted
    assert all((DOCKER_CONTEXT_DIR / name).is_file() for name in readmitted)
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


def test_digest_pins_the_base_image():
    digest = "sha256:" + "a" * 64
    config = validate_config({"training_image": {"base_image_digest": digest}})
    assert config.training_image.build_args["BASE_IMAGE"].endswith(f"@{digest}")


# --- the tag -------------------------------------------------------------------------------------------


def test_tag_names_the_pins_and_is_a_valid_ecr_tag(default_config):
    image = default_config.training_image
    tag = image.tag
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag)
    assert tag.startswith(f"ray{image.ray_version}-skyrl-{image.skyrl_ref[:12]}-visgym-{image.visgym_ref[:12]}-")
    assert tag == image.tag  # deterministic


def copy_context(tmp_path: Path) -> Path:
    context = tmp_path / "docker"
    shutil.copytree(DOCKER_CONTEXT_DIR, context, ignore=shutil.ignore_patterns("__pycache__"))
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
    with pytest.raises(ConfigError, match="Dockerfile is missing"):
        training_image_tag(default_config.training_image, tmp_path)


# --- the helper that prints build commands -------------------------------------------------------------


def test_build_args_command_lists_every_configured_value(default_config, capsys):
    assert image_cli.main(["build-args"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        shlex.join(["--build-arg", f"{k}={v}"]) for k, v in default_config.training_image.build_args.items()
    ]


def test_buildx_command_targets_the_configured_tag(default_config, capsys):
    uri = "111111111111.dkr.ecr.us-west-2.amazonaws.com/skyrl-hp/skyrl-train"
    assert image_cli.main(["buildx-command", "--repository-uri", uri]) == 0
    out = capsys.readouterr().out
    image_uri = f"{uri}:{default_config.training_image.tag}"
    build_line = next(line for line in out.splitlines() if "buildx build" in line)
    words = shlex.split(build_line.rstrip("\\"))
    assert words[:4] == ["docker", "buildx", "build", "--load"]
    assert words[words.index("--platform") + 1] == "linux/amd64"
    assert words[words.index("--tag") + 1] == image_uri
    for name, value in default_config.training_image.build_args.items():
        assert f"{name}={value}" in words
    assert f"docker push {image_uri}" in out
    assert "--region us-west-2" in out


def test_buildx_command_reads_the_deploy_outputs(tmp_path, default_config, capsys):
    outputs = tmp_path / "outputs.json"
    uri = "222222222222.dkr.ecr.eu-west-1.amazonaws.com/skyrl-hp/skyrl-train"
    outputs.write_text(f'{{"skyrl-hp-registry": {{"EcrRepositoryUri": "{uri}"}}}}')
    assert image_cli.main(["buildx-command", "--outputs-file", str(outputs)]) == 0
    assert f"{uri}:{default_config.training_image.tag}" in capsys.readouterr().out


def test_start_build_command_reads_the_stack_output(default_config, capsys):
    assert image_cli.main(["start-build-command"]) == 0
    out = capsys.readouterr().out
    assert f"--stack-name {default_config.names.stack('image-build')}" in out
    assert image_cli.BUILD_PROJECT_OUTPUT in out
    assert 'aws codebuild start-build --project-name "$PROJECT"' in out
