"""Resume after a failure, with SkyRL's own checkpoint discovery (the SkyRL release config/version_lock.py names, as installed by make setup).

SkyRL's `RayPPOTrainer.load_checkpoints` and the trainer_utils functions it calls
(`validate_consistency_for_latest_checkpoint`, `list_checkpoint_dirs`, `extract_step_from_path`, `ResumeMode`,
`GLOBAL_STEP_PREFIX`) are compiled from the installed package's source and run unchanged. Stand-ins, because
SkyRL is installed without its dependencies here: its `io` layer (fsspec, not installed; for a local path it is
os.path.exists/open/listdir), `torch.load` (the state files are small zip archives holding a pickle, the shape of
torch.save's format, not tensors), and the trainer's dataloader and model dispatch (recorded calls). The drill
(`make drill`, scenario resume-after-driver-loss) runs the same discovery with real torch through the RayJob's
entrypoint on Ray. The step training continues at is SkyRL's
`self.global_step += 1` after loading (trainer.py `train`), asserted on the source below.

Each case also runs docker/train_job.py's check first, as the RayJob's entrypoint does before SkyRL starts.
"""

from __future__ import annotations

import ast
import io
import os
import pickle
import types
import zipfile
from importlib import util
from pathlib import Path

import pytest

from skyrl_hp_job.attempts import ATTEMPTS_DIR, AttemptSuperseded, take_generation
from skyrl_hp_job.errors import PrepareError
from skyrl_hp_job.resume import RUN_MARKER, claim_checkpoint_dir
from skyrl_hp_job.trainer_guard import FencedIO

RUN = "maze-grpo"
INTERVAL = 20


def skyrl_source(module: str) -> tuple[Path, str]:
    package = util.find_spec("skyrl.train")
    assert package is not None and package.submodule_search_locations, "skyrl must be installed (make setup)"
    path = Path(package.submodule_search_locations[0], *module.split(".")).with_suffix(".py")
    return path, path.read_text(encoding="utf-8")


def _nodes(source: str, names: set[str]) -> list[ast.stmt]:
    def name(node: ast.stmt) -> str | None:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            return node.name
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
        return None

    found = [node for node in ast.parse(source).body if name(node) in names]
    assert {name(node) for node in found} == names
    return found


class LocalIO:
    """SkyRL's io functions, for local paths."""

    exists = staticmethod(os.path.exists)
    isdir = staticmethod(os.path.isdir)
    list_dir = staticmethod(os.listdir)

    @staticmethod
    def open_file(path: str, mode: str = "r"):
        return open(path, mode)


class Logger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> None:
        self.lines.append(message)

    warning = error = debug = info


@pytest.fixture(scope="module")
def skyrl() -> types.SimpleNamespace:
    """SkyRL's discovery code, compiled from the installed package into one namespace."""
    logger = Logger()
    namespace: dict = {
        "os": os,
        "Path": Path,
        "io": LocalIO,
        "logger": logger,
        "torch": types.SimpleNamespace(load=lambda f, **_: torch_load(f)),
        "Tuple": tuple,
    }
    utils_path, utils_source = skyrl_source("utils.trainer_utils")
    names = {"GLOBAL_STEP_PREFIX", "ResumeMode", "extract_step_from_path", "list_checkpoint_dirs",
             "validate_consistency_for_latest_checkpoint"}  # fmt: skip
    exec("from enum import Enum", namespace)
    exec(compile(ast.Module(body=_nodes(utils_source, names), type_ignores=[]), str(utils_path), "exec"), namespace)
    trainer_path, trainer_source = skyrl_source("trainer")
    (trainer_class,) = [
        n for n in ast.parse(trainer_source).body if isinstance(n, ast.ClassDef) and n.name == "RayPPOTrainer"
    ]
    (method,) = [n for n in trainer_class.body if isinstance(n, ast.FunctionDef) and n.name == "load_checkpoints"]
    method.returns = None
    exec(compile(ast.Module(body=[method], type_ignores=[]), str(trainer_path), "exec"), namespace)
    # The step training continues at: load_checkpoints' step + 1 (trainer.py `train`).
    assert "self.global_step, _ = self.load_checkpoints()" in trainer_source
    assert "self.global_step += 1  # start training at global_step 1" in trainer_source
    return types.SimpleNamespace(
        load_checkpoints=namespace["load_checkpoints"], ResumeMode=namespace["ResumeMode"], logger=logger
    )


class Trainer:
    """What load_checkpoints reads from `self`."""

    def __init__(self, skyrl: types.SimpleNamespace, ckpt_path: Path) -> None:
        trainer = types.SimpleNamespace(ckpt_path=str(ckpt_path), ckpt_interval=INTERVAL, resume_path=None)
        self.cfg = types.SimpleNamespace(trainer=trainer)
        self.resume_mode = skyrl.ResumeMode("latest")
        self.has_critic = False
        self.loaded: list[tuple[str, str]] = []
        self.dataloader_state = None
        self.train_dataloader = types.SimpleNamespace(
            load_state_dict=lambda state: setattr(self, "dataloader_state", state)
        )
        self.dispatch = types.SimpleNamespace(
            load_checkpoint=lambda model, path, **_: self.loaded.append((model, path))
        )


def resume_step(skyrl: types.SimpleNamespace, ckpt: Path) -> int:
    """The step a retry trains first: SkyRL's load_checkpoints, then its += 1."""
    trainer = Trainer(skyrl, ckpt)
    step, path = skyrl.load_checkpoints(trainer)
    if path is not None:
        assert trainer.loaded == [("policy", os.path.join(path, "policy"))]
        assert trainer.dataloader_state == {"consumed": step}
    return step + 1


def torch_file(state: dict) -> bytes:
    """A stand-in for torch.save's output: a zip archive with the pickled state (no tensors to store)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(state))
    return buffer.getvalue()


def torch_load(handle) -> dict:
    with zipfile.ZipFile(handle) as archive:
        return pickle.loads(archive.read("archive/data.pkl"))


def save(ckpt: Path, step: int, *, complete: bool = True) -> None:
    """A checkpoint in SkyRL's order (save_checkpoints): policy/, data.pt, trainer_state.pt, then the step file.
    An incomplete one stops before trainer_state.pt, as a crash during the policy save does."""
    folder = ckpt / f"global_step_{step}"
    (folder / "policy").mkdir(parents=True)
    (folder / "policy" / "model.bin").write_bytes(b"weights")
    if not complete:
        return
    (folder / "data.pt").write_bytes(torch_file({"consumed": step}))
    (folder / "trainer_state.pt").write_bytes(torch_file({"global_step": step}))
    (ckpt / "latest_ckpt_global_step.txt").write_text(str(step))


def test_a_first_attempt_starts_at_step_one(skyrl, tmp_path):
    ckpt = tmp_path / "runs" / RUN / "ckpt"
    assert claim_checkpoint_dir(ckpt, RUN) is None
    assert (ckpt / RUN_MARKER).is_file()
    assert resume_step(skyrl, ckpt) == 1


def test_a_retry_resumes_after_the_newest_complete_checkpoint_not_a_half_written_one(skyrl, tmp_path):
    ckpt = tmp_path / "ckpt"
    claim_checkpoint_dir(ckpt, RUN)
    save(ckpt, 16)
    save(ckpt, 20)
    save(ckpt, 24, complete=False)  # the driver died while writing step 24
    assert claim_checkpoint_dir(ckpt, RUN) == 20
    assert resume_step(skyrl, ckpt) == 21


def test_a_step_file_truncated_by_a_crash_is_repaired_to_the_newest_complete_checkpoint(skyrl, tmp_path):
    ckpt = tmp_path / "ckpt"
    claim_checkpoint_dir(ckpt, RUN)
    save(ckpt, 16)
    save(ckpt, 20)
    (ckpt / "latest_ckpt_global_step.txt").write_text("")  # SkyRL's open("w") truncated it, then the node died
    with pytest.raises(ValueError):  # what SkyRL alone does on every retry
        resume_step(skyrl, ckpt)
    assert claim_checkpoint_dir(ckpt, RUN) == 20
    assert resume_step(skyrl, ckpt) == 21


@pytest.mark.parametrize("damage", ["missing", "cut short"])
def test_a_step_file_naming_an_incomplete_checkpoint_is_pointed_back_at_the_newest_complete_one(
    skyrl, tmp_path, damage
):
    # SkyRL writes the step file after trainer_state.pt, but a node lost before its page cache reached the shared
    # file system can leave the step file without the state it names.
    ckpt = tmp_path / "ckpt"
    claim_checkpoint_dir(ckpt, RUN)
    save(ckpt, 16)
    save(ckpt, 20)
    state = ckpt / "global_step_20" / "trainer_state.pt"
    if damage == "missing":
        state.unlink()
    else:
        state.write_bytes(state.read_bytes()[:-30])
    with pytest.raises((FileNotFoundError, zipfile.BadZipFile)):  # what SkyRL alone does on every retry
        resume_step(skyrl, ckpt)
    assert claim_checkpoint_dir(ckpt, RUN) == 16
    assert (ckpt / "latest_ckpt_global_step.txt").read_text() == "16"
    assert resume_step(skyrl, ckpt) == 17


def test_a_step_file_with_no_complete_checkpoint_left_is_removed(skyrl, tmp_path):
    ckpt = tmp_path / "ckpt"
    claim_checkpoint_dir(ckpt, RUN)
    save(ckpt, 20)
    (ckpt / "global_step_20" / "trainer_state.pt").unlink()
    assert claim_checkpoint_dir(ckpt, RUN) is None
    assert not (ckpt / "latest_ckpt_global_step.txt").exists()
    assert resume_step(skyrl, ckpt) == 1


def test_another_runs_checkpoint_directory_is_refused_in_one_line(tmp_path):
    ckpt = tmp_path / "ckpt"
    claim_checkpoint_dir(ckpt, "other-run")
    save(ckpt, 40)
    with pytest.raises(PrepareError) as refused:
        claim_checkpoint_dir(ckpt, RUN)
    message = str(refused.value)
    assert "\n" not in message
    assert "belongs to run 'other-run'" in message and f"not {RUN!r}" in message


def test_checkpoints_without_a_marker_are_refused(tmp_path):
    ckpt = tmp_path / "ckpt"
    save(ckpt, 40)
    with pytest.raises(PrepareError, match="holds checkpoints .global_step_40. of a run it does not name"):
        claim_checkpoint_dir(ckpt, RUN)


def test_skyrl_itself_would_resume_from_another_runs_checkpoint(skyrl, tmp_path):
    # Why the marker: SkyRL's own consistency check accepts another run's directory when its steps are
    # no more than one interval apart, and would continue that run's training.
    ckpt = tmp_path / "ckpt"
    save(ckpt, 40)
    assert resume_step(skyrl, ckpt) == 41


def test_a_superseded_attempt_cannot_move_the_step_file_and_its_attempt_records_do_not_disturb_skyrl(skyrl, tmp_path):
    # Attempt 1 is still alive (its node was lost to the API server, not to FSx) while the retry, attempt 2, trains
    # on and saves global_step_20. Attempt 1's late write of the step file is refused by the fence, and SkyRL's own
    # discovery resumes after attempt 2's checkpoint with the attempt records beside the checkpoints.
    ckpt = tmp_path / "ckpt"
    claim_checkpoint_dir(ckpt, RUN)
    older = take_generation(ckpt, {"submission_id": "maze-grpo-aaaaa"})
    save(ckpt, 16)
    take_generation(ckpt, {"submission_id": "maze-grpo-bbbbb"})
    save(ckpt, 20)
    late = FencedIO(LocalIO, older)
    with pytest.raises(AttemptSuperseded, match="superseded by generation 2 .submission maze-grpo-bbbbb"):
        late.open_file(str(ckpt / "latest_ckpt_global_step.txt"), "w")
    assert (ckpt / ATTEMPTS_DIR / "generation-2").is_file()
    assert resume_step(skyrl, ckpt) == 21
