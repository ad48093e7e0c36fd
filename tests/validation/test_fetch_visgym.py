"""`skyrl-hp fetch visgym`: VisGym's environments and SkyRL's VisGym example at the drill's commits, kept only when
every file matches this project's sha256 lists (skyrl_hyperpod/validation/fetch_visgym.py, verified_archive.py).
The archives are built here from the verified copies beside the checkout (the Makefile's UPSTREAM_SOURCES_DIR)."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.validation import fetch_visgym, verified_archive


def sources_dir() -> Path:
    return fetch_visgym.resolve_sources_dir()


def archive_of(copy: fetch_visgym.UpstreamCopy, root: Path, extra: dict[str, bytes] | None = None) -> bytes:
    """GitHub's archive layout (one top folder, <name>-<commit>/) of the files at `root`, plus `extra`."""
    buffer = io.BytesIO()
    top = f"{copy.repository.split('/')[1]}-{copy.commit}"
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.name != "SOURCE.md":
                tar.add(path, arcname=f"{top}/{path.relative_to(root)}")
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Opener:
    def __init__(self, archives: dict[str, bytes]):
        self.archives, self.urls = archives, list[str]()

    def open(self, url, timeout=None):
        self.urls.append(url)
        return io.BytesIO(self.archives[url])


@pytest.fixture
def verified() -> dict[str, Path]:
    return {copy.name: fetch_visgym.verified_copy(copy, sources_dir()) for copy in fetch_visgym.COPIES}


def test_the_copies_beside_the_checkout_are_the_listed_files(verified):
    for copy in fetch_visgym.COPIES:
        sums = copy.archive().sums
        listed = {path.relative_to(verified[copy.name]).as_posix() for path in verified[copy.name].rglob("*")
                  if path.is_file() and path.name != "SOURCE.md" and "__pycache__" not in path.parts}  # fmt: skip
        assert listed == set(sums)


def test_fetch_writes_both_verified_copies(verified, monkeypatch, tmp_path):
    opener = Opener({copy.archive().url: archive_of(copy, verified[copy.name]) for copy in fetch_visgym.COPIES})
    monkeypatch.setattr(verified_archive, "opener", opener)
    result = CliRunner().invoke(cli, ["fetch", "visgym", "--dest", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert opener.urls == [
        "https://codeload.github.com/visgym/VisGym/tar.gz/0289034b0cefa6fbbad27f7dd8c01545df324afd",
        "https://codeload.github.com/NovaSky-AI/SkyRL/tar.gz/a9564572eb8e91076be43c1bd5e4615e3de17265",
    ]
    for copy in fetch_visgym.COPIES:
        assert fetch_visgym.verified_copy(copy, tmp_path) == tmp_path / copy.name / copy.commit
    # What VisGym's archive holds besides the package (its notebooks, other folders) is left out.
    assert (
        tmp_path / "visgym" / fetch_visgym.VISGYM.commit / "gymnasium" / "envs" / "maze_2d" / "maze_2d.py"
    ).is_file()
    # Again with --if-missing: verified, nothing downloaded.
    result = CliRunner().invoke(cli, ["fetch", "visgym", "--if-missing", "--dest", str(tmp_path)])
    assert result.exit_code == 0 and len(opener.urls) == 2


def test_a_tampered_or_grown_example_folder_is_refused_and_nothing_is_written(verified, monkeypatch, tmp_path):
    example = fetch_visgym.SKYRL_VISGYM_EXAMPLE
    source = tmp_path / "source"
    shutil.copytree(verified[example.name], source)
    (source / "examples/train/visgym/env_sft.py").write_text("# tampered\n")
    archives = {
        fetch_visgym.VISGYM.archive().url: archive_of(fetch_visgym.VISGYM, verified["visgym"]),
        example.archive().url: archive_of(example, source, {"examples/train/visgym/extra.py": b"x = 1\n"}),
    }
    monkeypatch.setattr(verified_archive, "opener", Opener(archives))
    result = CliRunner().invoke(cli, ["fetch", "visgym", "--dest", str(tmp_path / "out")])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert any("examples/train/visgym/env_sft.py has sha256" in line and "refused" in line for line in lines)
    assert any("examples/train/visgym/extra.py is not in the sha256 list: refused" in line for line in lines)
    assert not (tmp_path / "out" / example.name).exists()


def test_a_changed_copy_on_disk_is_refused_in_one_line(verified, tmp_path):
    copy = fetch_visgym.VISGYM
    shutil.copytree(verified["visgym"], tmp_path / copy.name / copy.commit)
    changed = tmp_path / copy.name / copy.commit / "gymnasium" / "envs" / "maze_2d" / "maze_2d.py"
    changed.write_text(changed.read_text() + "\n# changed\n")
    with pytest.raises(InputError) as error:
        fetch_visgym.verified_copy(copy, tmp_path)
    [line] = error.value.problems
    assert line == f"{changed} is missing or its sha256 differs from the list for commit {copy.commit}: refused"


def test_no_copy_says_how_to_get_one(tmp_path):
    with pytest.raises(InputError) as error:
        fetch_visgym.verified_copy(fetch_visgym.VISGYM, tmp_path)
    [line] = error.value.problems
    assert "no copy of visgym/VisGym at 0289034b0cefa6fbbad27f7dd8c01545df324afd" in line
    assert "skyrl-hp fetch visgym --dest DIR" in line
