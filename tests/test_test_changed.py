"""`make test-changed` (tools/test_changed.py) on a small checkout of its own, with real pytest-testmon data: the
first run records, an edit to a module selects the tests that ran it (and a broken edit fails them), and a change
testmon cannot see (not Python, or Python no test ran in-process) runs the whole fast loop."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tools import test_changed

# Each test starts pytest in a child process two or three times: seconds each, not the edit loop's kind of test.
pytestmark = pytest.mark.long_running

MODULE = "def area(width, height):\n    return width * height\n"
OTHER = "def greet(name):\n    return 'hello ' + name\n"
TESTS = {
    "tests/test_area.py": "from pkg.shapes import area\n\n\ndef test_area():\n    assert area(2, 3) == 6\n",
    "tests/test_greet.py": "from pkg.words import greet\n\n\ndef test_greet():\n    assert greet('x') == 'hello x'\n",
}


def write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def touch_after_data(root: Path, name: str) -> None:
    """The file's time after the data's, whatever the file system's clock resolution."""
    recorded = (root / test_changed.DEFAULT_DATAFILE).stat().st_mtime
    os.utime(root / name, (recorded + 5, recorded + 5))


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/shapes.py", MODULE)
    write(tmp_path, "pkg/words.py", OTHER)
    write(tmp_path, "config/defaults.yaml", "size: 1\n")
    for name, text in TESTS.items():
        write(tmp_path, name, text)
    # Its own rootdir and settings: none of this repository's addopts (xdist workers) or conftest.
    write(tmp_path, "pytest.ini", "[pytest]\npythonpath = .\nmarkers =\n    long_running: slow\n")
    write(tmp_path, ".gitignore", ".pytest_cache/\n__pycache__/\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    return tmp_path


def run(root: Path, capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    environ = {key: value for key, value in os.environ.items() if key != "TESTMON_DATAFILE"}
    environ["PYTHONDONTWRITEBYTECODE"] = "1"
    code = test_changed.run(root, ["-p", "no:xdist"], environ)
    out, err = capfd.readouterr()
    return code, out + err


def test_first_run_records_everything(checkout, capfd):
    code, output = run(checkout, capfd)
    assert code == 0
    assert "no dependency data yet" in output and "2 passed" in output
    assert (checkout / test_changed.DEFAULT_DATAFILE).is_file()


def test_an_edited_module_selects_only_its_tests_and_a_broken_edit_fails_them(checkout, capfd):
    run(checkout, capfd)
    write(checkout, "pkg/shapes.py", MODULE.replace("width * height", "height * width"))
    touch_after_data(checkout, "pkg/shapes.py")
    code, output = run(checkout, capfd)
    assert code == 0 and "the tests that ran them" in output
    assert "test_area.py ." in output or "1 passed" in output
    assert "test_greet" not in output and "2 passed" not in output

    write(checkout, "pkg/shapes.py", MODULE.replace("width * height", "width + height"))
    touch_after_data(checkout, "pkg/shapes.py")
    code, output = run(checkout, capfd)
    assert code == 1 and "1 failed" in output and "test_greet" not in output


def test_no_change_runs_nothing_and_passes(checkout, capfd):
    run(checkout, capfd)
    code, output = run(checkout, capfd)
    assert code == 0 and "0 changed Python file(s)" in output and "no tests ran" in output


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("config/defaults.yaml", "size: 2\n", "config/defaults.yaml changed and is not Python"),
        ("pkg/script.py", "print('run in a child process')\n", "pkg/script.py changed and no test ran it in-process"),
    ],
)
def test_what_testmon_cannot_see_runs_the_whole_loop(checkout, capfd, name, text, reason):
    run(checkout, capfd)
    write(checkout, name, text)
    touch_after_data(checkout, name)
    code, output = run(checkout, capfd)
    assert code == 0 and reason in output and "2 passed" in output


def test_a_deleted_input_runs_the_whole_loop(checkout, capfd):
    subprocess.run(["git", "add", "-A"], cwd=checkout, check=True)
    run(checkout, capfd)
    (checkout / "config/defaults.yaml").unlink()
    code, output = run(checkout, capfd)
    assert "config/defaults.yaml was deleted" in output and "2 passed" in output


def test_unreadable_data_runs_the_whole_loop(checkout, capfd):
    run(checkout, capfd)
    for leftover in checkout.glob(f"{test_changed.DEFAULT_DATAFILE}-*"):  # SQLite's write-ahead log holds data too
        leftover.unlink()
    (checkout / test_changed.DEFAULT_DATAFILE).write_bytes(b"not a database" * 100)
    touch_after_data(checkout, "pkg/shapes.py")
    chosen = test_changed.plan(checkout, checkout / test_changed.DEFAULT_DATAFILE, ["pkg/shapes.py"], [])
    assert not chosen.select and "unreadable" in chosen.reason


def test_the_makefile_target_runs_the_tool():
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    target = makefile.split("\ntest-changed:", 1)[1].split("\n\n", 1)[0]
    assert f"-m tools.{Path(test_changed.__file__).stem}" in target
