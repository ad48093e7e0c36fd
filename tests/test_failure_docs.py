"""docs/failures.md and README.md carry the failure cost computed from the configuration and the price file."""

from __future__ import annotations

import re
from pathlib import Path

from skyrl_hyperpod.ops import failure_cost

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "make docs"


def block(text: str, begin: str, end: str) -> str:
    match = re.search(re.escape(begin) + r".*?" + re.escape(end), text, re.DOTALL)
    assert match, f"the {begin!r} block is missing"
    return match.group(0)


def test_the_failure_model_carries_the_computed_numbers():
    text = (ROOT / "docs" / "failures.md").read_text(encoding="utf-8")
    expected = failure_cost.render_table(failure_cost.default_costs())
    assert block(text, failure_cost.BEGIN, failure_cost.END) == expected, f"stale numbers: {REGENERATE}"


def test_the_readme_carries_the_computed_summary():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    expected = failure_cost.render_summary(failure_cost.default_costs())
    assert block(text, failure_cost.README_BEGIN, failure_cost.README_END) == expected, f"stale numbers: {REGENERATE}"


def test_the_numbers_follow_the_config_and_prices():
    (cost,) = failure_cost.default_costs()
    fc = cost.run.failure_cost
    worst_gpu, worst_all = cost.dollars(fc.worst_case_steps)
    # 8 steps x 540 s = 1.2 h of the 3 GPU nodes' hourly price (and of everything the platform bills).
    assert worst_gpu == 1.2 * cost.gpu_group_hourly and worst_all == 1.2 * cost.platform_hourly
    assert (
        f"| worst case (just before a save completes) | 8 | 1.20 | 7.20 | ${worst_gpu:,.2f} |"
        in failure_cost.render_table([cost])
    )


def test_a_changed_budget_changes_the_numbers():
    from skyrl_hyperpod.config import validate_config
    from skyrl_hyperpod.ops.cost import price_book_for

    config = validate_config({"training": {"data": {"train_rows": 2560}, "jobs": {"failure_budget_gpu_hours": 9}}})
    _, book = price_book_for("us-west-2", None)
    (cost,) = failure_cost.failure_costs(config, book, "prices")
    # 80-step epochs: the budget's 10-step interval is now the bound.
    assert cost.run.failure_cost.worst_case_steps == 10
    assert failure_cost.render_table([cost]) != failure_cost.render_table(failure_cost.default_costs())


def test_the_retry_start_is_the_measured_one_where_there_is_one_else_the_fsx_floor():
    from skyrl_hyperpod.config import validate_config
    from skyrl_hyperpod.ops.cost import price_book_for

    _, book = price_book_for("us-west-2", None)
    (assumed,) = failure_cost.default_costs()
    # 3 GPU nodes x 17.5 GB over 1200 GiB x 250 MB/s/TiB (293 MB/s): 179 s.
    assert assumed.start_s == 3 * 17.5 * 1000 / (1200 / 1024 * 250)
    assert assumed.start_source.startswith("assumed, a floor")
    assert "at least, an estimate on paper" in failure_cost.render_summary([assumed])
    faster = validate_config({"fsx": {"per_unit_storage_throughput": 1000}})
    (quicker,) = failure_cost.failure_costs(faster, book, "prices")
    assert quicker.start_s == assumed.start_s / 4
    measured = validate_config({"training": {"jobs": {"measured_start_seconds": 1800}}})
    (cost,) = failure_cost.failure_costs(measured, book, "prices")
    assert cost.start_s == 1800 and cost.start_source.startswith("measured with `skyrl-hp train timeline`")
    table = failure_cost.render_table([cost])
    gpu, whole = cost.dollars(0, 1800)
    assert (
        f"| the retry's start, to its first step (on top of each row above) | 0 | 0.50 | 3.00 | ${gpu:,.2f} |" in table
    )
    assert "30 minutes before its first step (measured;" in failure_cost.render_summary([cost])


def test_make_docs_rewrites_a_stale_block_and_nothing_else(tmp_path: Path) -> None:
    from tools.generate_docs import write_failure_costs

    copies = []
    for source, begin, end in [
        (ROOT / "docs" / "failures.md", failure_cost.BEGIN, failure_cost.END),
        (ROOT / "README.md", failure_cost.README_BEGIN, failure_cost.README_END),
    ]:
        text = source.read_text(encoding="utf-8")
        stale = text.replace(block(text, begin, end), f"{begin}\n| stale |\n{end}")
        copy = tmp_path / source.name
        copy.write_text(stale, encoding="utf-8")
        copies.append((copy, text))
    write_failure_costs([copy for copy, _ in copies])
    assert [copy.read_text(encoding="utf-8") for copy, _ in copies] == [text for _, text in copies]
