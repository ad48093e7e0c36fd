"""ConfigError is for the configuration; a file the project reads besides it is an InputError, and the CLI prints
either as its lines (exit 2), never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.config import ConfigError
from skyrl_hyperpod.config import images as images_module
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.locations import CHECKOUT_ROOT
from skyrl_hyperpod.values.job_files import read_job_files

REPO_ROOT = CHECKOUT_ROOT


def test_a_missing_training_script_is_an_input_error_not_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        read_job_files(tmp_path)
    assert not isinstance(raised.value, ConfigError)
    [line] = raised.value.problems
    assert "train_job.py" in line and "missing" in line


def test_a_missing_training_package_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "train_job.py").write_text("print('stub')\n")
    with pytest.raises(InputError) as raised:
        read_job_files(tmp_path)
    [line] = raised.value.problems
    assert "skyrl_hp_job/__init__.py" in line and "missing" in line


def test_an_input_error_no_command_catches_is_one_line_from_the_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(*_args: object, **_kwargs: object) -> str:
        raise InputError(["image error: docker/Dockerfile is missing; the training image tag is computed from it"])

    # The tag property looks the function up when it runs: `skyrl-hp image tag` has no except of its own.
    monkeypatch.setattr(images_module, "training_image_tag", missing)
    with pytest.raises(SystemExit) as exited:
        cli.main(args=["image", "tag"], prog_name="skyrl-hp", standalone_mode=True)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "image error: docker/Dockerfile is missing; the training image tag is computed from it"
    )


# --- the configuration loader's limits (docs/configuring.md#limits) ----------------------------------------------

EXAMPLE = REPO_ROOT / "config" / "example.yaml"


def config_problems(file: Path) -> list[str]:
    from skyrl_hyperpod.config import load_config

    with pytest.raises(ConfigError) as raised:
        load_config(file)
    return raised.value.problems


def line_of(text: str, line: str, occurrence: int = 0) -> int:
    """1-based number of the `occurrence`-th line equal to `line`."""
    return [number for number, text_line in enumerate(text.splitlines(), 1) if text_line == line][occurrence]


def test_a_second_block_appended_below_the_example_is_refused_naming_both_lines(tmp_path: Path) -> None:
    # A section the example already has (training, eks, ...) written again below it: plain YAML loading keeps the
    # second block and drops the first without a word.
    text = EXAMPLE.read_text()
    section = [line for line in text.splitlines() if line[:1].isalpha() and line.endswith(":")][-1]
    text += f"\n{section}\n  job_active_deadline_seconds: 86400\n"
    file = tmp_path / "c.yaml"
    file.write_text(text)
    first, second = line_of(text, section), line_of(text, section, 1)
    [line] = config_problems(file)
    assert line.startswith(
        f"config error: {file} at line {second}: duplicate key {section[:-1]!r} (first at line {first}): YAML keeps "
        "only the last one"
    ), line


def test_two_worker_group_keys_are_refused_instead_of_losing_the_instance_type(tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(
        "hyperpod:\n  worker_group:\n    instance_type: ml.g7e.24xlarge\n  worker_group:\n    instance_count: 2\n"
    )
    [line] = config_problems(file)
    assert line.startswith(f"config error: {file} at line 4: duplicate key 'hyperpod.worker_group' (first at line 2)")


@pytest.mark.parametrize(
    ("text", "key", "first", "second"),
    [
        ("name_prefix: a\nname_prefix: b\n", "name_prefix", 1, 2),
        ("training:\n  data:\n    train_rows: 64\ntraining:\n  jobs:\n    job_backoff_limit: 1\n", "training", 1, 4),
        ("training:\n  experiments:\n    - name: a\n      name: b\n", "training.experiments[0].name", 3, 4),
        ("env: {region: us-west-2, region: us-east-1}\n", "env.region", 1, 1),
        # The same key written two ways is the same key once loaded.
        (
            "training:\n  jobs:\n    job_backoff_limit: 1\n    'job_backoff_limit': 2\n",
            "training.jobs.job_backoff_limit",
            3,
            4,
        ),
    ],
)
def test_a_duplicate_key_at_any_depth_is_refused(tmp_path: Path, text: str, key: str, first: int, second: int) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(text)
    [line] = config_problems(file)
    assert line.startswith(f"config error: {file} at line {second}: duplicate key {key!r} (first at line {first})")


def test_a_merge_key_may_restate_what_it_merges(tmp_path: Path) -> None:
    from skyrl_hyperpod.config import load_config

    file = tmp_path / "c.yaml"
    file.write_text(
        "training:\n  experiments:\n"
        "    - &base {name: lr-low, overrides: {trainer.policy.optimizer_config.lr: 1.0e-6}}\n"
        "    - <<: *base\n      name: lr-high\n"
    )
    experiments = load_config(file).training.experiments
    assert [e.name for e in experiments] == ["lr-low", "lr-high"]
    assert experiments[1].overrides == {"trainer.policy.optimizer_config.lr": 1.0e-6}


def billion_laughs(levels: int) -> str:
    """`levels` anchors, each a list of nine aliases to the one before: 9**levels values, a few hundred bytes."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + f"\nenv: {{region: *l{levels - 1}}}\n"


def test_an_alias_bomb_is_one_line_from_the_cli_not_a_hang(tmp_path: Path) -> None:
    file = tmp_path / "bomb.yaml"
    file.write_text(billion_laughs(9))  # 9**9 = 387 million values from 400 bytes
    assert file.stat().st_size < 1024
    # A bound, not a timing: the command starts in a few seconds, and the loader stops at the value budget (below).
    result = subprocess.run(
        [str(Path(sys.executable).parent / "skyrl-hp"), "--config", str(file), "cost"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("config error:")]
    assert line.startswith(f"config error: {file} at line ")
    assert "expands the document to more than 10,000 values" in line


def test_alias_expansion_counts_against_the_value_budget() -> None:
    from skyrl_hyperpod.plumbing import yaml_loading

    # Three levels expand to about 1,800 values and load; four levels are some 50 values as written and about
    # 15,700 as read: refused, at the alias that crosses the budget, before anything is expanded.
    assert yaml_loading.load_bounded(billion_laughs(3))["env"]["region"][0][0][0] == "lol"
    with pytest.raises(yaml_loading.YAMLLimitError) as raised:
        yaml_loading.load_bounded(billion_laughs(4))
    assert f"more than {yaml_loading.MAX_VALUES:,} values" in str(raised.value.problem)
    assert raised.value.problem_mark is not None and raised.value.problem_mark.line == 4  # env: {region: *l3}
    # Plain values count too: a list of 20,000 items is refused without aliases.
    with pytest.raises(yaml_loading.YAMLLimitError, match="holds more than 10,000 values"):
        yaml_loading.load_bounded("a: [" + ", ".join(["0"] * 20_000) + "]\n")


def test_synthesized_manifests_have_limits_of_their_own_and_a_budget_together() -> None:
    from skyrl_hyperpod.plumbing import yaml_loading

    limits = yaml_loading.MANIFEST_LIMITS
    # One document: its own limit, aliases counted in full; each document of a file starts from nothing.
    with pytest.raises(yaml_loading.YAMLLimitError, match="more than 100,000 values"):
        yaml_loading.load_all_bounded(billion_laughs(6), limits)
    many = "---\n".join(["a: [" + ", ".join(["0"] * 60_000) + "]\n"] * 2)
    assert [len(d["a"]) for d in yaml_loading.load_all_bounded(many, limits)] == [60_000, 60_000]
    # Several documents against one budget: what each may hold cannot add up past it.
    budget = yaml_loading.ValueBudget(100_000, "the manifests in 'dist'")
    with pytest.raises(yaml_loading.YAMLLimitError) as raised:
        yaml_loading.load_all_bounded(many, limits, budget)
    assert raised.value.problem == (
        "the manifests in 'dist' hold more than 100,000 values together (keys, values and list items, an alias counted "
        "in full at each use)"
    )


def test_a_manifest_directory_over_its_limits_is_one_line(tmp_path: Path) -> None:
    from skyrl_hyperpod.plumbing.errors import ProblemsError
    from skyrl_hyperpod.values import synthesized_manifests

    dist = tmp_path / "dist"
    dist.mkdir()
    big = dist / "01-big.k8s.yaml"
    big.write_text("kind: ConfigMap\nmetadata: {name: x}\ndata: {a: '" + "x" * (4 * 1024 * 1024) + "'}\n")
    with pytest.raises(ProblemsError) as raised:
        synthesized_manifests.read_manifest_documents(dist, prefix="review error")
    assert raised.value.problems == [
        f"review error: {big} has more than 4,194,304 bytes, the most a manifest file may have (4 MiB)"
    ]
    big.write_text("a: [" + ", ".join(["0"] * 200_000) + "]\n")
    with pytest.raises(ProblemsError) as raised:
        synthesized_manifests.read_manifest_documents(dist, prefix="review error")
    assert raised.value.problems == [
        f"review error: {big} at line 1: the document holds more than 100,000 values (keys, values and list items); "
        "the default synthesis writes fewer than 500 per file"
    ]


def test_a_recursive_alias_is_one_line(tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text("training:\n  cluster: &c\n    inner: *c\n")
    [line] = config_problems(file)
    assert line == (
        f"config error: {file} at line 3: alias *c is used inside the value &c names: a recursive structure never ends"
    )


@pytest.mark.parametrize(
    "text",
    [
        "training: " + "[" * 5000 + "]" * 5000 + "\n",
        "".join(f"{'  ' * depth}k{depth}:\n" for depth in range(200)) + "  " * 200 + "v\n",
    ],
    ids=["flow", "block"],
)
def test_nesting_5000_deep_is_one_line_not_a_recursion_error(tmp_path: Path, text: str) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(text)
    [line] = config_problems(file)
    assert line.startswith(f"config error: {file} at line ")
    assert line.endswith("is nested more than 32 levels deep; the configuration's deepest key is 5 levels down")


def test_a_file_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text('training:\n  jobs:\n    runtime_env_vars:\n      BIG: "' + "x" * 2_000_000 + '"\n')
    [line] = config_problems(file)
    assert line == (
        f"config error: {file} has {file.stat().st_size:,} bytes; a configuration file may have at most 262,144 "
        "(256 KiB): is it the right file?"
    )


def test_a_value_over_the_size_limit_is_refused_naming_its_key(tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text('training:\n  jobs:\n    runtime_env_vars:\n      BIG: "' + "x" * 20_000 + '"\n')
    [line] = config_problems(file)
    assert line == (
        f"config error: {file} at line 4: the value of training.jobs.runtime_env_vars.BIG has 20,000 characters; "
        "a value may have at most 16,384 (16 KiB)"
    )


def test_the_limits_are_the_documented_ones() -> None:
    from skyrl_hyperpod.plumbing import yaml_loading

    docs = (REPO_ROOT / "docs" / "configuring.md").read_text()
    limits = docs.split("\n## Limits\n", 1)[1]
    assert f"{yaml_loading.MAX_FILE_BYTES // 1024} KiB ({yaml_loading.MAX_FILE_BYTES:,} bytes)" in limits
    assert f"{yaml_loading.MAX_SCALAR_CHARS // 1024} KiB ({yaml_loading.MAX_SCALAR_CHARS:,} characters)" in limits
    assert f"more than {yaml_loading.MAX_DEPTH} levels deep" in limits
    assert f"more than {yaml_loading.MAX_VALUES:,} values" in limits


# --- another format than YAML --------------------------------------------------------------------------------------


def test_a_toml_file_says_it_is_toml_and_shows_it_in_yaml(tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text('[hyperpod.worker_group]\ninstance_type = "ml.g7e.24xlarge"\ninstance_count = 2\n')
    [line] = config_problems(file)
    assert line.startswith(f"config error: {file} is not valid YAML at line 2")
    assert line.endswith(
        "it is TOML, and the configuration is YAML ([table] headers become nested sections, key = value becomes "
        "key: value); in YAML: hyperpod: {worker_group: {instance_type: ml.g7e.24xlarge, instance_count: 2}}"
    )


def test_json_with_comments_says_so_and_how_to_make_it_yaml(tmp_path: Path) -> None:
    from skyrl_hyperpod.config import load_config

    text = '{\n  // the GPU workers\n  "hyperpod": {"worker_group": {"instance_count": 2}}\n}\n'
    file = tmp_path / "c.json"
    file.write_text(text)
    [line] = config_problems(file)
    assert line.startswith(f"config error: {file} is not valid YAML at line 3")
    assert line.endswith(
        "it looks like JSON with comments, and the configuration is YAML: JSON without comments is YAML too, so "
        "turn each // comment into a # comment (or remove the comments)"
    )
    file.write_text(text.replace("//", "#"))  # what the message says to do
    assert load_config(file).hyperpod.worker_group.instance_count == 2
