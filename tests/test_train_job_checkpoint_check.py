"""docker/skyrl_hp_job/checkpoint_check.py: the checkpoint as a vision-language model, and the query example."""

from __future__ import annotations

import importlib.util
import json
import sys

from fake_checkpoint import write_fake_vision_language
from train_job_stand_ins import FakeExec, argv_for, run

from skyrl_hp_job.checkpoint_check import CheckpointReport, check_checkpoint, write_query_example
from skyrl_hp_job.errors import PrepareError
from skyrl_hp_job.options import parse_args

# --- the checkpoint check ------------------------------------------------------------------------------------------


def test_a_checkpoint_that_fails_its_check_stops_the_job_before_the_run_is_claimed(shared, skyrl, capsys):
    seen = []

    def broken(options):
        seen.append(options.model_dir)
        raise PrepareError(f"checkpoint {options.model_dir} is not a vision-language checkpoint: it lacks x")

    execute = FakeExec()
    ckpt = shared / "runs" / "maze-grpo" / "ckpt"
    argv = argv_for(shared, skyrl, overrides=(f"trainer.ckpt_path={ckpt}", "trainer.run_name=maze-grpo"))
    assert run(argv, execute=execute, check=broken) == 1
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert (
        line
        == f"train_job: error: checkpoint {shared / 'models' / 'visgym-sft'} is not a vision-language checkpoint: it lacks x"
    )
    assert seen == [shared / "models" / "visgym-sft"]  # after preparation: the downloaded checkpoint
    assert execute.calls == [] and not ckpt.exists()  # SkyRL never started; the run's directory is not claimed


def test_the_query_example_holds_the_observation_and_the_runs_generation_settings(shared, skyrl, tmp_path):
    example = tmp_path / "runs" / "maze-grpo" / "query-example.json"
    options = parse_args(
        argv_for(
            shared, skyrl, "--query-example", str(example),
            overrides=("generator.sampling_params.max_generate_length=1024", "generator.sampling_params.temperature=0.7"),
        )
    )  # fmt: skip
    messages = [{"role": "user", "content": [{"type": "text", "text": "task"}]}]
    write_query_example(example, options, CheckpointReport("P", 452, 64, messages))
    assert json.loads(example.read_text()) == {
        "env_id": "maze_2d/easy",
        "seed": 42,
        "messages": messages,
        "prompt_tokens": 452,
        "image_tokens": 64,
        "max_tokens": 1024,
        "temperature": 0.7,
    }


def test_the_query_example_path_must_be_absolute(shared, skyrl, capsys):
    assert run(argv_for(shared, skyrl, "--query-example", "relative.json")) == 2
    assert "--query-example: 'relative.json' must be an absolute path" in capsys.readouterr().err


def test_the_check_leaves_the_observation_in_the_openai_form_the_engines_take(shared, skyrl, tmp_path, monkeypatch):
    packages = tmp_path / "site"
    write_fake_vision_language(packages, skyrl)
    spec = importlib.util.spec_from_file_location("transformers", packages / "transformers" / "__init__.py")
    transformers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(transformers)

    def rewriting(self, messages, **kwargs):  # what transformers does to the parts it loads
        messages[0]["content"][1] = {"type": "image", "url": "loaded"}
        return {"input_ids": [[1, 5, 2]]}

    transformers._Processor.apply_chat_template = rewriting
    # The stand-ins only for this test: the module table and the path the check extends are restored after it.
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("examples", "examples.train", "examples.train.visgym", "examples.train.visgym.env_sft"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    example = tmp_path / "query-example.json"
    options = parse_args(argv_for(shared, skyrl, "--query-example", str(example)))
    report = check_checkpoint(options)
    assert report.image_tokens == 1 and report.prompt_tokens == 3
    [message] = json.loads(example.read_text())["messages"]
    assert [part["type"] for part in message["content"]] == ["text", "image_url"]
