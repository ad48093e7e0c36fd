"""One version lock (skyrl_hyperpod/config/version_lock.py): the Ray, SkyRL, torch and vLLM of the image, the manifests,
the offline validation and the drill come from the configuration; every place that cannot read it is checked here,
and every rule between them is a one-line configuration error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drill.training_cluster import VISGYM_COMMIT_FILE, DrillEnv, version_problems
from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.config.version_lock import SERVING_IMAGES, SKYRL_RELEASES
from skyrl_hyperpod.plumbing.upstream import VISGYM_COMMIT
from skyrl_hyperpod.validation import skyrl_overrides
from tools import skyrl_pins

REPO_ROOT = Path(__file__).resolve().parent.parent


def pinned(path: str, distribution: str) -> str:
    """The exact pin of `distribution` (extras ignored) in a requirements or constraints file."""
    text = (REPO_ROOT / path).read_text()
    (version,) = re.findall(rf"^{re.escape(distribution)}(?:\[[^\]]*\])?==(\S+)$", text, flags=re.MULTILINE | re.I)
    return version


def test_the_defaults_follow_the_skyrl_release(default_config):
    image = default_config.training_image
    release = SKYRL_RELEASES[image.skyrl_version]
    assert image.skyrl_release is release
    assert image.ray_version == release.ray
    assert image.build_args["TORCH_VERSION"] == release.torch and image.build_args["VLLM_VERSION"] == release.vllm
    assert default_config.serving_image.ray_version == SERVING_IMAGES[default_config.serving_image.image].ray
    assert default_config.serving_image.vllm_version == "0.26.0"


def test_offline_validation_runs_the_serving_images_ray(default_config):
    assert pinned("requirements-dev.txt", "ray") == default_config.serving_image.ray_version
    assert pinned("constraints.txt", "ray") == default_config.serving_image.ray_version


def test_drill_environment_pins_the_training_images_ray_and_the_torch_skyrl_pins(default_config):
    release = default_config.training_image.skyrl_release
    for path in ("requirements-drill.txt", "constraints-drill.txt"):
        assert pinned(path, "ray") == default_config.training_image.ray_version, path
        assert pinned(path, "torch") == release.torch, path


def test_the_tests_model_code_is_the_drills(default_config):
    # tests/config/test_lora_targets.py runs PEFT on transformers' Qwen3-VL in .venv; the drill trains with them.
    assert pinned("requirements-dev.txt", "torch") == default_config.training_image.skyrl_release.torch
    for distribution in ("torch", "transformers", "peft"):
        assert pinned("requirements-dev.txt", distribution) == pinned("constraints.txt", distribution)
        assert pinned("requirements-dev.txt", distribution) == pinned("requirements-drill.txt", distribution)


def test_skyrl_is_installed_at_the_configured_release(default_config, capsys):
    # The Makefile cannot import the configuration: it asks tools/skyrl_pins.py, for the validation venv and the
    # drill's environment.
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert makefile.count("$(PYTHON) -m tools.skyrl_pins)") == 2
    # and for pygame beside VisGym in the drill's environment, at the image's version (training_image.pygame_version).
    assert makefile.count("$(PYTHON) -m tools.skyrl_pins --visgym)") == 1
    assert not re.search(r"pygame==[0-9]", makefile)
    assert not re.search(r"skyrl(-gym)?==[0-9]", makefile)
    assert skyrl_pins.main([]) == 0
    release = default_config.training_image.skyrl_release
    assert capsys.readouterr().out.split() == [f"skyrl=={release.version}", f"skyrl-gym=={release.skyrl_gym}"]
    assert release.version == skyrl_overrides.SKYRL_VERSION


def test_the_manifests_ray_version_is_the_images(default_config):
    from chart_helpers import one, synth

    from drill.manifests import Manifests

    charts = synth(default_config)
    manifests = Manifests(tuple(doc for docs in charts.values() for doc in docs))
    for rayjob in manifests.rayjobs():  # its own cluster, or the shared one it selects
        assert manifests.cluster_of(rayjob)["rayVersion"] == default_config.training_image.ray_version
    assert (
        one(charts, "RayService")["spec"]["rayClusterConfig"]["rayVersion"] == default_config.serving_image.ray_version
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {
                "training_image": {
                    "base_image": "novaskyai/skyrl-train-ray-2.58.0-py3.12-cu13.0",
                    "ray_version": "2.58.0",
                }
            },
            "training_image: ray_version 2.58.0 differs from the Ray that skyrl_version 0.4.0 pins (ray==2.57.0)",
        ),
        (
            {"training_image": {"base_image": "novaskyai/skyrl-train-ray-2.58.0-py3.12-cu13.0"}},
            "training_image: ray_version 2.57.0 differs from the Ray 2.58.0 that base_image",
        ),
        (
            {"training_image": {"base_image": "novaskyai/skyrl-train-ray-2.57.0-py3.11-cu13.0"}},
            "carries Python 3.11; skyrl 0.4.0 requires Python >= 3.12",
        ),
        (
            {"training_image": {"base_image": "novaskyai/skyrl-train-ray-2.57.0-py3.12-cu12.8"}},
            "carries CUDA 12; skyrl 0.4.0 pins torch 2.13.0, built for CUDA 13",
        ),
        (
            {"training_image": {"skyrl_version": "0.3.0"}},
            "training_image.skyrl_version = '0.3.0': Input should be '0.4.0'",
        ),
        (
            {"serving_image": {"ray_version": "2.57.0"}},
            "serving_image: ray_version 2.57.0 differs from the Ray 2.58.0 that image public.ecr.aws/",
        ),
    ],
)
def test_a_version_mismatch_is_one_configuration_line(overrides, message):
    with pytest.raises(ConfigError) as caught:
        validate_config(overrides)
    (problem,) = caught.value.problems
    assert message in problem and "\n" not in problem


def test_an_unknown_serving_image_names_its_own_ray():
    config = validate_config({"serving_image": {"image": "registry.example/serve:1", "ray_version": "2.55.0"}})
    assert config.serving_image.vllm_version is None


def test_the_drill_refuses_an_environment_off_the_lock(default_config, monkeypatch, tmp_path):
    installed = {"ray": "2.57.0", "skyrl": "0.4.0", "skyrl-gym": "0.4.0", "torch": "2.13.0+cu130"}

    def versions(self, python, distributions):
        return {name: installed.get(name) for name in distributions} if python.name == "python" else {"ray": "2.58.0"}

    monkeypatch.setattr(DrillEnv, "versions", versions)
    env = DrillEnv(train_python=tmp_path / "drill" / "bin" / "python", serve_python=Path("/venv/bin/python3"))
    # The VisGym commit the Makefile installed (and recorded) must be the one upstream.py pins.
    [line] = version_problems(env, default_config)
    assert line.endswith(f"VisGym none installed, {VISGYM_COMMIT} pinned (rebuild it: make drill-env)")
    (tmp_path / "drill").mkdir()
    (tmp_path / "drill" / VISGYM_COMMIT_FILE).write_text(VISGYM_COMMIT + "\n")
    assert version_problems(env, default_config) == []
    installed.update({"ray": "2.56.0", "skyrl": None})
    problems = version_problems(env, default_config)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "ray 2.56.0, the version lock says 2.57.0 (rebuild it: make drill-env)",
        "skyrl is missing, the version lock says 0.4.0 (rebuild it: make drill-env)",
    ]


def test_the_image_carries_the_mlflow_client_train_metrics_reads_with(default_config):
    image = default_config.training_image
    assert (
        pinned("requirements.txt", "mlflow-skinny")
        == image.mlflow_version
        == pinned("constraints.txt", "mlflow-skinny")
    )
    assert (
        pinned("requirements.txt", "sagemaker-mlflow")
        == image.sagemaker_mlflow_version
        == pinned("constraints.txt", "sagemaker-mlflow")
    )
    assert image.build_args["MLFLOW_VERSION"] == image.mlflow_version
    assert image.build_args["SAGEMAKER_MLFLOW_VERSION"] == image.sagemaker_mlflow_version
