"""Documentation that is generated or exemplified from code stays in sync with it, and every page is reachable:
the README stays a short path (at most 300 lines), and every relative link in README.md, docker/README.md and
docs/*.md resolves, to a file and, with a `#fragment`, to a heading of that file."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import click
import pytest
import yaml

from skyrl_hyperpod.cli.main import cli
from skyrl_hyperpod.config import load_config
from skyrl_hyperpod.config.reference import EXAMPLES, TOP_LEVEL, render
from tools import cli_reference

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"
README_MAX_LINES = 300


def test_configuration_reference_is_up_to_date():
    committed = (DOCS / "configuration.md").read_text()
    assert committed == render(), "regenerate: skyrl-hp config reference > docs/configuration.md"


def test_configuration_reference_lists_every_section():
    text = render()
    for section in ("env", "network", "eks", "fsx", "versions", "workloads"):
        assert f"\n## {section}\n" in text  # the anchor configuration errors point to
        assert f"\n- [{section}](#{section})\n" in text  # and the table of contents links it
    assert "**`hyperpod.worker_group`**" in text


def test_section_summaries_are_whole_sentences():
    # A docstring summary that wraps onto a second line is shown whole, not cut at the line break.
    text = render()
    assert (
        "| **`training.cluster`** | section | | The training RayCluster: its name, pod sizes and how its head is "
        "reached. Worker requests are the GPU group's allocatable figures (one pod per node). |"
    ) in text
    assert "deadlines, |" not in text


def _yaml_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```$", markdown, flags=re.S | re.M)


def _sections(markdown: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", markdown, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_configuration_section_has_an_example():
    sections = _sections((DOCS / "configuration.md").read_text())
    assert set(sections) == set(EXAMPLES)
    for name, body in sections.items():
        assert len(_yaml_blocks(body)) == 1, name


@pytest.mark.parametrize("section", sorted(EXAMPLES))
def test_configuration_examples_load_through_the_loader(section, tmp_path):
    # The example as the page shows it, read back from the page, loaded as a user's file would be.
    (block,) = _yaml_blocks(_sections((DOCS / "configuration.md").read_text())[section])
    data = yaml.safe_load(block)
    if section != TOP_LEVEL:
        assert list(data) == [section], "an example names only its own section"
    file = tmp_path / "example.yaml"
    file.write_text(block)
    config = load_config(file)
    # The example changed what it names (a default-valued example would show nothing).
    assert config.model_dump() != load_config(None).model_dump() or section in {"versions", "serving_image"}


def test_a_broken_example_is_refused_by_the_loader(tmp_path):
    # The check above can fail: the training example with a misspelt knob does not load.
    file = tmp_path / "example.yaml"
    file.write_text(EXAMPLES["training"].replace("lora_rank", "lora_rnak"))
    with pytest.raises(Exception, match="lora_rnak"):
        load_config(file)


def test_the_example_keeps_the_reference_runs_hardware_and_algorithm():
    # A starting point changes only what a user must set (region, API access, admin): the resolved runs, the
    # node groups and the storage are the defaults'.
    from skyrl_hyperpod.config.training_runs import resolve_runs

    example, defaults = load_config(REPO_ROOT / "config" / "example.yaml"), load_config(None)
    for section in ("hyperpod", "fsx", "training", "serving", "workloads", "versions"):
        assert getattr(example, section) == getattr(defaults, section), section

    def runs(config):
        return [r.overrides() for r in resolve_runs(config.training, config.hyperpod, config.workloads)]

    assert runs(example) == runs(defaults)


def test_the_larger_gpu_example_says_what_it_changes():
    # The header's figures are the configuration's own: schedule, engines, price.
    from skyrl_hyperpod.config.training_runs import resolve_runs
    from skyrl_hyperpod.ops.cost import estimate, price_book_for

    file = REPO_ROOT / "config" / "example-larger-gpu.yaml"
    text, larger, defaults = file.read_text(), load_config(file), load_config(None)

    def run_and_cost(config):
        (run,) = resolve_runs(config.training, config.hyperpod, config.workloads)
        source, book = price_book_for("us-west-2", None)
        return run.knobs, estimate(config, book, price_file=str(source), run_hours=24)

    (knobs, cost), (default_knobs, default_cost) = run_and_cost(larger), run_and_cost(defaults)
    gpus = knobs.policy_num_nodes * knobs.policy_num_gpus_per_node
    assert f"{gpus} GPUs instead of {default_knobs.policy_num_nodes * default_knobs.policy_num_gpus_per_node}" in text
    assert f"{knobs.num_engines} vLLM engines" in text
    assert f"still {knobs.train_batch_size} / {knobs.policy_mini_batch_size} prompts" in text
    assert (
        f"micro batch drops from {default_knobs.micro_train_batch_size_per_gpu} to {knobs.micro_train_batch_size_per_gpu}"
        in text
    )
    assert f"${cost.hourly_usd:,.2f}/h in all instead of ${default_cost.hourly_usd:,.2f}" in text
    assert larger.hyperpod.worker_group.instance_type != defaults.hyperpod.worker_group.instance_type


def test_every_documented_deploy_asks_before_broadening_permissions():
    # A copied `cdk deploy --all` without --require-approval broadening would widen IAM and security groups unasked.
    pages = [README, *sorted(DOCS.glob("*.md"))]
    deploys = [
        (page.name, line.strip())
        for page in pages
        for line in page.read_text().splitlines()
        if line.strip().startswith("cdk deploy --all")
    ]
    assert deploys, "the README shows the deploy command"
    assert [d for d in deploys if "--require-approval broadening" not in d[1]] == []


def test_the_documented_command_header_is_the_one_commands_print():
    from skyrl_hyperpod.cli.common import header_line

    class Source:
        def describe(self) -> str:
            return "<file>"

    config = load_config(None)
    line = header_line(config, Source(), "<region>")
    line = line.replace(config.names.eks_cluster, "<EKS cluster>").replace(
        config.names.hyperpod_cluster, "<HyperPod cluster>"
    )
    assert f"`{line}`" in (DOCS / "commands.md").read_text().replace("\n", " ")


def test_example_configuration_is_valid():
    config = load_config(REPO_ROOT / "config" / "example.yaml")
    assert config.eks.endpoint_public  # the example shows how to open the API to one CIDR
    # With env.account set, `cdk synth` looks the account's AZs up (credentials needed): the example stays
    # synthesizable offline, as its header promises, and says so next to the commented-out key.
    assert config.env.account is None
    assert "needs credentials" in (REPO_ROOT / "config" / "example.yaml").read_text()


# --- The command-line reference -----------------------------------------------------------------------------

REGENERATE_CLI = "regenerate: make docs"


def test_cli_reference_is_up_to_date():
    assert (DOCS / "cli.md").read_text() == cli_reference.render(), REGENERATE_CLI


def test_cli_reference_documents_every_command_and_option():
    text = (DOCS / "cli.md").read_text()
    paths = cli_reference.commands()
    assert {"skyrl-hp", "skyrl-hp train start", "skyrl-hp nodes replace", "skyrl-hp config reference"} <= set(paths)
    for path in paths:
        assert f"\n## `{path}`\n" in text, path
    # Every visible option of a leaf command, by its flag, in that command's section.
    sections = _sections(text)
    train_start = sections["`skyrl-hp train start`"]
    for flag in ("--experiment", "--wait", "--timeout", "--dist"):
        assert f"| `{flag}" in train_start, flag
    assert "[default: 1800.0; 1&lt;=x&lt;=2592000.0]" in train_start  # a finite bound: inf and nan are refused


def test_cli_reference_does_not_depend_on_what_ran_before():
    # click keeps the help option a command first ran with: run one command on its own (no `-h`, as a test that
    # invokes it directly does) and one through the group, then render again.
    from click.testing import CliRunner

    runner = CliRunner()
    assert runner.invoke(cli.commands["cost"], ["--help"]).exit_code == 0
    assert runner.invoke(cli, ["train", "start", "-h"]).exit_code == 0
    text = cli_reference.render()
    assert text == (DOCS / "cli.md").read_text(), REGENERATE_CLI
    assert "| `--help` |" not in text and "| `-h, --help` | Show this message and exit. |" in text


def _mutated_cli() -> click.Group:
    tree = copy.deepcopy(cli)
    hours = next(p for p in tree.commands["cost"].params if p.name == "run_hours")
    assert isinstance(hours, click.Option)
    hours.help = "Length of one training run in hours (changed)."
    tree.add_command(click.Command("extra", help="A command added after the reference was written."))
    return tree


def test_the_staleness_check_fails_on_a_changed_command_tree():
    # The same comparison test_cli_reference_is_up_to_date makes, against a tree with one option's help changed
    # and one command added: it must see both.
    committed = (DOCS / "cli.md").read_text()
    mutated = cli_reference.render(_mutated_cli())
    assert mutated != committed
    assert "## `skyrl-hp extra`" in mutated and "## `skyrl-hp extra`" not in committed
    assert "(changed)" in mutated and "(changed)" not in committed
    assert cli_reference.render(cli) == committed  # the real tree is untouched by the mutation


# --- The README and the links between pages -----------------------------------------------------------------


def pages() -> list[Path]:
    return [README, REPO_ROOT / "docker" / "README.md", *sorted(DOCS.glob("*.md"))]


def _outside_code(markdown: str) -> str:
    without_fences = re.sub(r"^```.*?^```$", "", markdown, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", without_fences)


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to hyphens, a repeated
    heading numbered (-1, -2, ...)."""
    anchors: set[str] = set()
    headings = re.findall(r"^#{1,6} (.+?)\s*#*$", re.sub(r"^```.*?^```$", "", markdown, flags=re.S | re.M), re.M)
    for heading in headings:
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors on its text
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in anchors:
            n += 1
            candidate = f"{slug}-{n}"
        anchors.add(candidate)
    return anchors


def relative_links(markdown: str) -> list[str]:
    targets = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", _outside_code(markdown))
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto:


def broken_links(page: Path) -> list[str]:
    problems = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path_part, _, fragment = target.partition("#")
        file = (page.parent / path_part).resolve() if path_part else page
        if not file.exists():
            problems.append(f"{page.name}: {target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in github_anchors(file.read_text(encoding="utf-8")):
            problems.append(f"{page.name}: {target}: no heading #{fragment} in {file.name}")
        elif fragment and file.is_dir():
            problems.append(f"{page.name}: {target}: a fragment on a directory")
    return problems


def test_readme_is_a_short_path():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_link_check_finds_a_missing_page_and_a_missing_heading(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## A heading\n\n## A heading\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-heading) [ok](other.md#a-heading-1) [self](#top) [web](https://example.com/x.md)\n"
        "[gone](missing.md) [no anchor](other.md#nowhere)\n\n# Top\n\n```\n[in code](ignored.md)\n```\n"
    )
    assert broken_links(page) == [
        "page.md: missing.md: no such file",
        "page.md: other.md#nowhere: no heading #nowhere in other.md",
    ]


def test_every_docs_page_is_in_the_index():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in relative_links(index)}
    for page in DOCS.glob("*.md"):
        if page.name != "README.md":
            assert page.name in linked, f"docs/README.md does not link {page.name}"


def test_readme_links_the_index_and_the_failure_model():
    links = {target.partition("#")[0] for target in relative_links(README.read_text(encoding="utf-8"))}
    assert {"docs/README.md", "docs/failures.md", "docs/runbook.md", "docs/teardown.md"} <= links


def test_readme_cost_figures_are_the_estimates():
    # The README's cost table quotes `skyrl-hp cost` for the defaults in us-west-2: recompute it.
    from skyrl_hyperpod.ops import cost as cost_module

    config = load_config(None)
    file, book = cost_module.price_book_for("us-west-2", None)
    estimate = cost_module.estimate(
        config, book, price_file=cost_module.display_path(file), run_hours=cost_module.DEFAULT_RUN_HOURS
    )
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("## What it costs") : readme.index("## Prerequisites")]
    groups = {item.component: item for item in estimate.items if item.component.startswith("HyperPod group")}
    gpu = next(i for name, i in groups.items() if config.hyperpod.worker_group.instance_type in name)
    head = next(i for name, i in groups.items() if config.hyperpod.head_group.instance_type in name)
    assert f"| per hour, everything running | ${estimate.hourly_usd:,.2f} |" in section
    assert f"| ${gpu.hourly_usd:,.2f} / ${head.hourly_usd:,.2f} |" in section
    assert f"| per month ({book.hours_per_month:.0f} h) | ${estimate.monthly_usd:,.2f} |" in section
    assert f"| ${estimate.idle_per_day_usd:,.2f} |" in section
    assert f"one training run of {estimate.run_hours:.0f} h" in section
    assert f"| ${estimate.run_usd:,.2f} |" in section
    assert f"prices as of {book.as_of}" in section
    # Both scaling modes of the GPU group (docs/autoscaling.md).
    from skyrl_hyperpod.ops.scaling_cost import scaling_comparison

    scaling = scaling_comparison(config, book, estimate)
    assert f"(the GPU nodes at zero) | ${scaling.on_demand.idle_day_usd:,.2f} |" in section
    assert f"the idle minutes before the nodes go) | ${scaling.on_demand.run_usd:,.2f} |" in section
