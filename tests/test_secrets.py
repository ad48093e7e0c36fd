"""Credentials for the training job: training.jobs.secret_env names Secret keys, the Ray containers read them through
secretKeyRef, `skyrl-hp secrets set` writes them (against a fake API server), and runtime_env_vars refuses a name
that looks like a credential or a value that holds one. The value itself never enters the configuration, so the end-to-end test sets a
sentinel through the command and looks for it in everything the CDK and cdk8s apps synthesize.
"""

from __future__ import annotations

import base64
import json
import secrets as random_source
import subprocess
import sys
from pathlib import Path

import cdk8s
import pytest
import yaml
from click.testing import CliRunner
from conftest import shared_platform
from fake_kube import FakeKube

from charts import ChartInputs, build_charts
from charts.constructs.ray_pods import RayPodProps, ray_pod_template
from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import CliState
from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME
from skyrl_hyperpod.values.stack_outputs import StackOutputs

REPO_ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "skyrl"
SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"
SECRET_ENV = {
    "WANDB_API_KEY": {"secret": "wandb", "key": "api-key"},
    "HF_TOKEN": {"secret": "hugging-face", "key": "token"},
    "MLFLOW_TRACKING_TOKEN": {"secret": "mlflow", "key": "token"},
}
WITH_SECRETS = {"training": {"jobs": {"secret_env": SECRET_ENV}}}


def synth(overrides: dict) -> dict[str, list[dict]]:
    config = validate_config(overrides)
    inputs = ChartInputs(
        config=config, outputs=StackOutputs.placeholder(config), job_files={JOB_SCRIPT_NAME: "print('stub')\n"}
    )
    return {chart.node.id: chart.to_json() for chart in build_charts(cdk8s.App(), inputs)}


def of_kind(charts: dict[str, list[dict]], kind: str) -> list[dict]:
    return [doc for docs in charts.values() for doc in docs if doc["kind"] == kind]


def secret_refs(container: dict) -> dict[str, dict]:
    return {
        entry["name"]: entry["valueFrom"]["secretKeyRef"]
        for entry in container.get("env") or []
        if "secretKeyRef" in entry.get("valueFrom", {})
    }


def ray_containers(cluster_spec: dict) -> dict[str, dict]:
    groups = {"head": cluster_spec["headGroupSpec"], **{g["groupName"]: g for g in cluster_spec["workerGroupSpecs"]}}
    return {name: group["template"]["spec"]["containers"][0] for name, group in groups.items()}


EXPECTED_REFS = {name: {"name": ref["secret"], "key": ref["key"]} for name, ref in SECRET_ENV.items()}


# --- the configuration ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["WANDB_API_KEY", "HF_TOKEN", "MLFLOW_TRACKING_TOKEN", "DB_PASSWORD", "MY_SECRET_THING", "AWS_SECRET_ACCESS_KEY",
     "AWS_REGION", "hf_token",
     # The wider patterns: *APIKEY*, *_PAT, *CREDENTIAL*, *AUTH*, *PASS*, DATABASE_URL.
     "OPENAI_APIKEY", "GH_PAT", "GOOGLE_APPLICATION_CREDENTIALS", "HTTP_AUTH_HEADER", "SMTP_PASS", "DATABASE_URL",
     "database_url", "RedisPassphrase"],
)  # fmt: skip
def test_runtime_env_vars_refuses_a_credential_name_in_one_line_naming_the_secrets_path(name):
    with pytest.raises(ConfigError) as caught:
        validate_config({"training": {"jobs": {"runtime_env_vars": {name: "value"}}}})
    [line] = caught.value.problems
    assert line.startswith(f"config error: training.jobs.runtime_env_vars: {name!r} looks like a credential")
    assert "skyrl-hp secrets set SECRET KEY" in line and f"training.jobs.secret_env: {{{name}: " in line
    assert "value" not in line.split("looks like")[1].replace("its value", "")  # the value is never quoted


# Made-up credentials of each well-known format (none is a real key): a token prefix, a password in a URL, a long
# random string. Built from pieces so that no complete token stands in the source.
RANDOM_43 = "Xk4" + "pQ9vT2mL7rW1sZ8nB5cY3hJ6dF0gA-eUoIuKwEqRt"
CREDENTIAL_VALUES = {
    "openai": "sk-" + "proj-" + "a8Fq2Lx9Vt4Rm7Wc1Zp6Nb3Yk5Hd0Gs",
    "github-classic": "ghp" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "github-fine-grained": "github_pat" + "_11ABCDEFG0" + "aBcDeFgHiJkLmNoPqRsTuV",
    "url-password": "https://admin:" + "password@mlflow.example.com",
    "database-password": "postgresql://app:" + "s3cret@db.internal:5432/runs",
    "aws-access-key": "AKIA" + "IOSFODNN7EXAMPLE",
    "aws-session-key": "ASIA" + "Y34FZKBOKMUTVV7A",
    "slack-bot": "xoxb" + "-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack-any": "xoxe" + "-1-AbCdEfGhIjKlMnOp",
    "hugging-face": "hf" + "_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "random": RANDOM_43,
}


@pytest.mark.parametrize("value", CREDENTIAL_VALUES.values(), ids=CREDENTIAL_VALUES.keys())
def test_runtime_env_vars_refuses_a_credential_by_its_value_without_quoting_it(value):
    # The names say nothing: only the value gives the credential away.
    for name in ("MLFLOW_TRACKING_URI", "EXTRA_SETTING"):
        with pytest.raises(ConfigError) as caught:
            validate_config({"training": {"jobs": {"runtime_env_vars": {"NCCL_DEBUG": "INFO", name: value}}}})
        [line] = caught.value.problems
        assert line.startswith(
            f"config error: training.jobs.runtime_env_vars: the value of {name!r} holds a credential ("
        )
        assert "store it with `skyrl-hp secrets set SECRET KEY` and name it in training.jobs.secret_env: " in line
        assert f"{{{name}: {{secret: SECRET, key: KEY}}}}" in line
        # Nothing of the value is quoted: not the whole, not its secret part.
        assert value not in line and value[-12:] not in line


@pytest.mark.parametrize(
    "value",
    ["INFO", "INIT,NET", "expandable_segments:True", "https://mlflow.internal.example.com/api/2.0",
     "https://user@mlflow.example.com", "s3://skyrl-hp-artifacts-111111111111/runs/maze-grpo",
     "/shared/models/Qwen3-VL-8B-Instruct-visgym-sft", "Qwen/Qwen3-VL-8B-Instruct",
     "/fsx/shared/checkpoints/run-2026-01-17T10-22-33Z/global_step_160/policy", "wandb/QuickStartProjectName_v2-final",
     # A commit id, a digest and a UUID are hex: ordinary values, never taken for a credential.
     "2f1e3a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f", "sha256:" + "0a1b2c3d" * 8, "550e8400-e29b-41d4-a716-446655440000",
     "task-sk-short", "--a --b", "0,1,2,3", "x" * 16_000],
)  # fmt: skip
def test_runtime_env_vars_takes_ordinary_values(value):
    jobs = validate_config({"training": {"jobs": {"runtime_env_vars": {"EXTRA_SETTING": value}}}}).training.jobs
    assert jobs.runtime_env_vars == {"EXTRA_SETTING": value}


@pytest.mark.parametrize("name", ["NCCL_DEBUG", "MODAL_TOKEN_ID", "KEYRING_BACKEND", "SKYRL_X"])
def test_runtime_env_vars_still_takes_names_that_are_not_credentials(name):
    jobs = validate_config({"training": {"jobs": {"runtime_env_vars": {name: "1"}}}}).training.jobs
    assert jobs.runtime_env_vars == {name: "1"}


@pytest.mark.parametrize(
    ("secret_env", "problem"),
    [
        ({"1X": {"secret": "a", "key": "b"}}, "training.jobs.secret_env: '1X': an environment variable name"),
        ({"HF_HOME": {"secret": "a", "key": "b"}}, "'HF_HOME': the charts or KubeRay set it"),
        ({"RAY_AUTH_TOKEN": {"secret": "a", "key": "b"}}, "'RAY_AUTH_TOKEN': the charts or KubeRay set it"),
        ({"X": {"secret": "Wandb", "key": "b"}}, "training.jobs.secret_env.X.secret = 'Wandb': must be a Kubernetes"),
        ({"X": {"secret": "a", "key": "a/b"}}, "training.jobs.secret_env.X.key = 'a/b': must be letters, digits"),
        ({"X": {"secret": "a"}}, "training.jobs.secret_env.X.key"),
        ({"X": "the-token-itself"}, "training.jobs.secret_env.X = 'the-token-itself': must be a section"),
    ],
    ids=["name", "chart-name", "kuberay-name", "secret", "key", "no-key", "a-value"],
)
def test_secret_env_names_only_a_secret_key_and_says_what_is_wrong_in_one_line(secret_env, problem):
    with pytest.raises(ConfigError) as caught:
        validate_config({"training": {"jobs": {"secret_env": secret_env}}})
    [line] = caught.value.problems
    assert problem in line, line


def test_every_variable_the_charts_set_on_the_training_pods_is_refused_as_a_secret():
    [job] = of_kind(synth({}), "RayJob")
    names = {entry["name"] for c in ray_containers(job["spec"]["rayClusterSpec"]).values() for entry in c["env"]}
    assert {"HF_HOME", "VLLM_CACHE_ROOT", "FI_PROVIDER"} <= names  # the EFA variables of the default GPU type too
    for name in names:
        with pytest.raises(ConfigError, match="the charts or KubeRay set it on the Ray containers themselves"):
            validate_config({"training": {"jobs": {"secret_env": {name: {"secret": "a", "key": "b"}}}}})


def test_a_name_is_either_a_secret_or_a_plain_variable():
    jobs = {"secret_env": {"NCCL_DEBUG": {"secret": "a", "key": "b"}}, "runtime_env_vars": {"NCCL_DEBUG": "INFO"}}
    with pytest.raises(ConfigError) as caught:
        validate_config({"training": {"jobs": jobs}})
    assert caught.value.problems == [
        "config error: training.jobs: secret_env and runtime_env_vars both set NCCL_DEBUG: keep each name in one of "
        "them (credentials in secret_env)"
    ]


# --- the charts ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secret_charts() -> dict[str, list[dict]]:
    return synth(WITH_SECRETS)


def test_the_self_contained_jobs_head_and_workers_read_each_secret_through_secret_key_ref(secret_charts):
    [job] = of_kind(secret_charts, "RayJob")
    containers = ray_containers(job["spec"]["rayClusterSpec"])
    assert len(containers) == 2
    for name, container in containers.items():
        assert secret_refs(container) == EXPECTED_REFS, name
    # Nothing of them on the submission path: the entrypoint (the submitter's command line) and runtimeEnvYAML.
    for name in SECRET_ENV:
        assert name not in job["spec"]["entrypoint"]
        assert name not in job["spec"].get("runtimeEnvYAML", "")


def test_the_shared_raycluster_reads_them_too():
    charts = synth({"training": {"jobs": {"secret_env": SECRET_ENV, "self_contained_jobs": False}}})
    [cluster] = of_kind(charts, "RayCluster")
    for container in ray_containers(cluster["spec"]).values():
        assert secret_refs(container) == EXPECTED_REFS


def test_serving_gets_no_training_secret(secret_charts):
    [service] = of_kind(secret_charts, "RayService")
    for container in ray_containers(service["spec"]["rayClusterConfig"]).values():
        assert secret_refs(container) == {}


def test_without_secret_env_no_manifest_references_a_secret():
    assert "secretKeyRef" not in json.dumps(synth({}))


def test_the_pods_service_accounts_get_no_secret_permission(secret_charts):
    # The kubelet resolves secretKeyRef with its own node identity (Node authorizer): the charts add no RBAC, and the
    # training service account mounts no API token its pods could read Secrets with.
    kinds = {doc["kind"] for docs in secret_charts.values() for doc in docs}
    assert kinds.isdisjoint({"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"})
    for account in of_kind(secret_charts, "ServiceAccount"):
        assert account["automountServiceAccountToken"] is False, account["metadata"]["name"]


def test_a_secret_cannot_silently_replace_a_variable_the_chart_sets():
    props = RayPodProps(
        container_name="ray-head", image="i", service_account="sa", instance_type="t", cpus=1, memory_gib=1,
        shm_gib=1, env=(("X", "1"),), secret_env=(("X", "s", "k"),),
    )  # fmt: skip
    with pytest.raises(ValueError, match="ray-head: environment variable\\(s\\) X set twice"):
        ray_pod_template(props)


# --- skyrl-hp secrets set ------------------------------------------------------------------------------------


@pytest.fixture
def isolated(monkeypatch, tmp_path, fake_aws_env):
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "skyrl-hp.yaml").write_text(yaml.safe_dump(WITH_SECRETS))


def run(kube: FakeKube, *args: str, input: bytes | str | None = None, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), obj=CliState(kube=kube.api_client()), input=input, env=env)


def stored(kube: FakeKube, name: str) -> dict:
    return kube.objects[f"{SECRETS}/{name}"]


def decoded(secret: dict) -> dict[str, bytes]:
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


@pytest.mark.usefixtures("isolated")
def test_set_creates_the_namespace_and_the_secret_from_standard_input(kube):
    result = run(kube, "secrets", "set", "wandb", "api-key", input="s3cr3t-value\n")
    assert result.exit_code == 0, result.output
    assert kube.applied() == [f"/api/v1/namespaces/{NAMESPACE}", f"{SECRETS}/wandb"]
    secret = stored(kube, "wandb")
    assert secret["type"] == "Opaque" and decoded(secret) == {"api-key": b"s3cr3t-value"}  # the final newline goes
    assert secret["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "skyrl-hp",
        "app.kubernetes.io/managed-by": "skyrl-hp",
    }
    assert "created Secret skyrl/wandb: key api-key set (12 bytes); keys: api-key" in result.stdout
    assert "training.jobs.secret_env reads it as WANDB_API_KEY" in result.stdout
    assert "s3cr3t" not in result.output


@pytest.mark.usefixtures("isolated")
def test_set_updates_one_key_keeps_the_others_and_guards_against_a_concurrent_change(kube):
    kube.put(f"/api/v1/namespaces/{NAMESPACE}", {"metadata": {"name": NAMESPACE}})
    kube.put(f"{SECRETS}/mlflow", {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "mlflow", "resourceVersion": "41", "labels": {"app.kubernetes.io/managed-by": "skyrl-hp"}},
        "data": {"uri": base64.b64encode(b"https://mlflow.example").decode()},
    })  # fmt: skip
    # --from-env wins over standard input.
    result = run(kube, "secrets", "set", "mlflow", "token", "--from-env", "T", env={"T": "tok-2"}, input="ignored")
    assert result.exit_code == 0, result.output
    assert kube.applied() == [f"{SECRETS}/mlflow"]
    secret = stored(kube, "mlflow")
    assert decoded(secret) == {"uri": b"https://mlflow.example", "token": b"tok-2"}
    assert secret["metadata"]["resourceVersion"] == "41"  # server-side apply's precondition
    assert "updated Secret skyrl/mlflow: key token set (5 bytes); keys: token, uri" in result.stdout
    assert "already running keep the value they started with" in result.stderr


@pytest.mark.usefixtures("isolated")
def test_set_refuses_a_secret_it_did_not_make(kube):
    # One an operator made with kubectl: its other keys and their owner are unknown to skyrl-hp.
    kube.put(f"/api/v1/namespaces/{NAMESPACE}", {"metadata": {"name": NAMESPACE}})
    kube.put(f"{SECRETS}/team-tokens", {"metadata": {"name": "team-tokens"}, "data": {"token": "eA=="}})
    result = run(kube, "secrets", "set", "team-tokens", "token", input="x")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "secrets error: Secret skyrl/team-tokens exists and was not made by skyrl-hp secrets set (no label "
        "app.kubernetes.io/managed-by=skyrl-hp): refused, choose another name"
    )
    assert kube.applied() == []


@pytest.mark.usefixtures("isolated")
@pytest.mark.parametrize(
    ("args", "stdin", "line"),
    [
        (["wandb", "api-key", "the-value"], None, "skyrl-hp secrets set: Got unexpected extra argument (the-value)"),
        (["wandb", "api-key", "--value", "v"], None, "skyrl-hp secrets set: No such option '--value'"),
        (["wandb", "api-key"], "", "secrets error: the value is empty"),
        (["wandb", "api-key", "--from-env", "NOT_SET_HERE"], None, "--from-env NOT_SET_HERE: the environment variable"),
        (["Wandb", "api-key"], "v", "secrets error: Secret name 'Wandb': must be a Kubernetes name"),
        (["wandb", "a/b"], "v", "secrets error: key 'a/b': must be letters, digits"),
        # KubeRay's token Secret of a RayJob's cluster (<RayJob>-<suffix>), before KubeRay made it.
        (
            ["skyrl-visgym-maze-grpo-x7k2p", "auth_token"],
            "v",
            "secrets error: Secret name 'skyrl-visgym-maze-grpo-x7k2p': KubeRay names the token Secrets of 'skyrl-visgym'",
        ),
    ],
    ids=["argv", "value-option", "empty", "unset-env", "bad-name", "bad-key", "kuberay-name"],
)
def test_set_takes_no_value_from_the_command_line_and_refuses_bad_input_in_one_line(kube, args, stdin, line):
    result = CliRunner().invoke(cli, ["secrets", "set", *args], obj=CliState(kube=kube.api_client()), input=stdin,
                                prog_name="skyrl-hp")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1].startswith(line), result.stderr
    assert kube.requests == []


@pytest.mark.usefixtures("isolated")
def test_set_says_when_no_configuration_entry_reads_the_key(kube):
    result = run(kube, "secrets", "set", "other", "token", input="v")
    assert result.exit_code == 0, result.output
    assert "note: no training.jobs.secret_env entry reads it yet: add {ENV_NAME: {secret: other, key: token}}" in (
        result.stderr
    )


@pytest.mark.usefixtures("isolated")
def test_check_names_each_missing_secret_key_and_fails(kube):
    assert run(kube, "secrets", "set", "wandb", "api-key", input="v").exit_code == 0
    assert run(kube, "secrets", "set", "mlflow", "uri", input="https://mlflow.example").exit_code == 0
    result = run(kube, "secrets", "check")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "FAIL HF_TOKEN: Secret skyrl/hugging-face does not exist (skyrl-hp secrets set hugging-face token)",
        "FAIL MLFLOW_TRACKING_TOKEN: Secret skyrl/mlflow has no key token (skyrl-hp secrets set mlflow token)",
        "ok   WANDB_API_KEY: Secret wandb, key api-key",
    ]
    assert result.stderr.splitlines()[-1] == (
        "secrets error: 2 of 3 secret key(s) missing: the Ray pods would not start"
    )
    assert run(kube, "secrets", "set", "hugging-face", "token", input="v").exit_code == 0
    assert run(kube, "secrets", "set", "mlflow", "token", input="v").exit_code == 0
    assert run(kube, "secrets", "check").exit_code == 0


def test_check_without_secret_env_asks_nothing_of_the_cluster(kube, tmp_path, monkeypatch, fake_aws_env):
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    result = run(kube, "secrets", "check")
    assert result.exit_code == 0 and "names no Secret: nothing to check" in result.stdout
    assert kube.requests == []


# --- end to end: the value reaches no synthesized file -------------------------------------------------------


def test_a_secret_set_in_the_cluster_reaches_no_synthesized_file(kube, tmp_path, monkeypatch, fake_aws_env):
    sentinel = f"sentinel-{random_source.token_hex(16)}"
    config_file = tmp_path / "skyrl-hp.yaml"
    config_file.write_text(yaml.safe_dump(WITH_SECRETS))
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    for env_name, ref in SECRET_ENV.items():
        result = run(kube, "secrets", "set", ref["secret"], ref["key"], "--from-env", "VALUE",
                     env={"VALUE": f"{sentinel}-{env_name}"})  # fmt: skip
        assert result.exit_code == 0, result.output
        assert sentinel not in result.output
    assert decoded(stored(kube, "wandb")) == {"api-key": f"{sentinel}-WANDB_API_KEY".encode()}

    # dist/: the cdk8s app as `make synth-k8s` runs it (its offline validation included).
    dist = tmp_path / "dist"
    k8s = subprocess.run(
        [sys.executable, str(REPO_ROOT / "k8s_app.py")], cwd=tmp_path, capture_output=True, text=True, check=False,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "SKYRL_HP_CONFIG": str(config_file),
             "SKYRL_HP_OUTPUTS": str(tmp_path / "none.json"), "CDK8S_OUTDIR": str(dist)},
    )  # fmt: skip
    assert k8s.returncode == 0, k8s.stderr
    # cdk.out: the whole CDK app for the same configuration.
    cdk_out = Path(shared_platform(validate_config(WITH_SECRETS)).directory)

    encodings = [sentinel, base64.b64encode(sentinel.encode()).decode()[:24]]
    files = [path for root in (dist, cdk_out) for path in root.rglob("*") if path.is_file()]
    assert len([f for f in files if f.is_relative_to(dist)]) >= 4 and any(
        f.name.endswith(".template.json") for f in files
    )
    leaks = [str(path) for path in files for text in encodings if text.encode() in path.read_bytes()]
    assert leaks == []
    # What the manifests do carry: the Secret's names and keys, as secretKeyRefs of the job's head and workers.
    jobs = [
        doc for doc in yaml.safe_load_all((dist / "03-rayjobs.k8s.yaml").read_text()) if doc and doc["kind"] == "RayJob"
    ]
    assert jobs and all(
        secret_refs(container) == EXPECTED_REFS
        for job in jobs for container in ray_containers(job["spec"]["rayClusterSpec"]).values()
    )  # fmt: skip


def test_the_secrets_are_envelope_encrypted_with_the_projects_kms_key():
    # EKS encrypts Secrets in etcd with a customer managed KMS key of the eks stack (rotation on), for the same
    # configuration the end-to-end test synthesizes (one synthesis per run: shared_platform).
    assembly = shared_platform(validate_config(WITH_SECRETS))
    [eks] = [stack.template for stack in assembly.stacks if stack.stack_name.endswith("-eks")]
    [cluster] = [r for r in eks["Resources"].values() if r["Type"] == "AWS::EKS::Cluster"]
    [encryption] = cluster["Properties"]["EncryptionConfig"]
    assert encryption["Resources"] == ["secrets"]
    key_id, attribute = encryption["Provider"]["KeyArn"]["Fn::GetAtt"]
    key = eks["Resources"][key_id]
    assert attribute == "Arn" and key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
