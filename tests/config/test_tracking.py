"""tracking: console (the reference run) or MLflow, a URI of the user's own or the managed App's ARN, and what the
RayJobs get from it: SkyRL's trainer.logger, MLFLOW_TRACKING_URI on the entrypoint, the run's tags."""

from __future__ import annotations

import shlex

import pytest
from chart_helpers import objects, synth

from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.values.stack_outputs import StackOutputs
from skyrl_hyperpod.values.synthesized_manifests import config_fingerprint

APP_ARN = "arn:aws:sagemaker:us-west-2:111111111111:mlflow-app/app-abc123"


def problems_for(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_config(data)
    return caught.value.problems


def entrypoints(config, outputs: StackOutputs | None = None) -> list[list[str]]:
    return [shlex.split(job["spec"]["entrypoint"]) for job in objects(synth(config, outputs), "RayJob")]


def test_console_is_the_default_and_sets_no_tracking_server(default_config):
    assert default_config.tracking.backend == "console"
    for argv in entrypoints(default_config):
        assert "trainer.logger=console" in argv
        assert not any(item.startswith(("MLFLOW_TRACKING_URI=", "--mlflow-tag")) for item in argv)


def test_a_self_hosted_server_is_the_jobs_tracking_uri_with_the_runs_tags():
    uri = "https://mlflow.example.com:5000/tracking"
    config = validate_config(
        {
            "tracking": {"backend": "mlflow", "tracking_uri": uri},
            "training": {"experiments": [{"name": "a"}, {"name": "b"}]},
        }
    )
    for argv, run in zip(entrypoints(config), config.derived.runs, strict=True):
        assert argv[0] == "env" and f"MLFLOW_TRACKING_URI={uri}" in argv[: argv.index("python")]
        assert "trainer.logger=mlflow" in argv
        assert f"trainer.project_name={config.training.knobs.project_name}" in argv
        tags = [item.removeprefix("--mlflow-tag=") for item in argv if item.startswith("--mlflow-tag=")]
        assert tags == [
            f"skyrl_hp.rayjob={run.job_name}",
            f"skyrl_hp.config_fingerprint={config_fingerprint(config)}",
            f"skyrl_hp.image_tag={config.training_image.tag}",
            f"skyrl_hp.skyrl_release={config.training_image.skyrl_release.version}",
        ]


def test_the_managed_apps_arn_comes_from_the_stack_outputs():
    config = validate_config({"tracking": {"backend": "mlflow"}})
    deployed = StackOutputs.placeholder(config).model_copy(update={"mlflow_app_arn": APP_ARN})
    for argv in entrypoints(config, deployed):
        assert f"MLFLOW_TRACKING_URI={APP_ARN}" in argv
    without = deployed.model_copy(update={"mlflow_app_arn": None})
    with pytest.raises(InputError) as refused:
        synth(config, without)
    assert refused.value.problems == [
        "outputs error: tracking.backend is mlflow without a tracking_uri, and the outputs lack MlflowAppArn: deploy "
        "the storage stack with this configuration (cdk deploy --outputs-file)"
    ]


@pytest.mark.parametrize(
    ("tracking", "problem"),
    [
        (
            {"backend": "console", "tracking_uri": "https://mlflow.example.com"},
            "config error: tracking: tracking_uri = 'https://mlflow.example.com' with backend = "
            "'console': the URI is for backend: mlflow",
        ),
        (
            {"backend": "mlflow", "tracking_uri": "mlflow.example.com"},
            "config error: tracking.tracking_uri = 'mlflow.example.com': allowed are "
            "http(s)://host[:port][/path] (no query string) or a SageMaker MLflow App ARN "
            "(arn:aws:sagemaker:REGION:ACCOUNT:mlflow-app/ID)",
        ),
        (
            {"backend": "mlflow", "tracking_uri": "https://mlflow.example.com/?token=x&y=z"},
            "config error: tracking.tracking_uri = 'https://mlflow.example.com/?token=x&y=z': "
            "allowed are http(s)://host[:port][/path] (no query string) "
            "or a SageMaker MLflow App ARN (arn:aws:sagemaker:REGION:ACCOUNT:mlflow-app/ID)",
        ),
        ({"backend": "wandb"}, None),
    ],
)
def test_bad_tracking_is_one_line(tracking, problem):
    problems = problems_for({"tracking": tracking})
    assert len(problems) == 1
    if problem is not None:
        assert problems == [problem]
    else:
        assert (
            problems[0].startswith("config error: tracking.backend = 'wandb'")
            and "'console' or 'mlflow'" in problems[0]
        )


def test_a_credential_in_the_uri_is_refused_without_showing_it():
    (problem,) = problems_for(
        {"tracking": {"backend": "mlflow", "tracking_uri": "https://me:s3cret@mlflow.example.com"}}
    )
    assert "s3cret" not in problem
    assert "holds a credential" in problem and "training.jobs.secret_env" in problem


def test_an_app_arn_is_accepted_as_the_uri():
    config = validate_config({"tracking": {"backend": "mlflow", "tracking_uri": APP_ARN}})
    assert not config.tracking.managed_app


def test_the_apps_artifacts_stay_out_of_the_adapters_the_serving_pods_read():
    problems = problems_for({"tracking": {"backend": "mlflow", "artifacts_prefix": "adapters/mlflow"}})
    assert problems == [
        "config error: tracking: artifacts_prefix = 'adapters/mlflow': inside workloads.adapters_prefix "
        "('adapters'), which the serving pods read; choose a prefix of its own"
    ]
