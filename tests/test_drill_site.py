"""The drill's site package (drill/site/drill_site), one test or more per module, each on what the module says it
does: the stop points and their reports, the stand-ins for the GPU, the behaviour changes, and the import hook
`sitecustomize` installs. tests/test_drill.py and tests/test_drill_attempts.py hold the ones that pin the site to the
drill's side (the stop points, the resume stand-in workers, the reward shaping, the hang and the freeze)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from drill_site_modules import site_module

from drill.training_cluster import SITE_DIR


def fake_module(monkeypatch, name: str, **attributes) -> types.ModuleType:
    """A stand-in module `name` in sys.modules for this test."""
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def fake_callbacks(monkeypatch) -> None:
    """SkyRL's callback base class as a plain object (SkyRL's trainer side does not import in the project's venv)."""
    fake_module(monkeypatch, "skyrl.train.utils.callbacks", TrainingCallback=object)


def cfg() -> types.SimpleNamespace:
    return types.SimpleNamespace(
        trainer=types.SimpleNamespace(
            placement=types.SimpleNamespace(policy_num_nodes=3, policy_num_gpus_per_node=2),
            export_path="/x/export",
            ckpt_path="/x/ckpt",
            ckpt_interval=2,
            policy=types.SimpleNamespace(model=types.SimpleNamespace(lora=types.SimpleNamespace(lora_sync_path="/l"))),
            train_batch_size=30,
            policy_mini_batch_size=15,
        ),
        generator=types.SimpleNamespace(
            inference_engine=types.SimpleNamespace(num_engines=1),
            n_samples_per_prompt=8,
            vision_language_generator=True,
        ),
    )


def marker_lines(out: str, marker: str) -> list[dict]:
    return [json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith(f"{marker} ")]


# --- sitecustomize and the import hook -----------------------------------------------------------------------------

FAKE_SKYRL = {
    "skyrl/__init__.py": "",
    "skyrl/train/__init__.py": "",
    "skyrl/train/entrypoints/__init__.py": "",
    "skyrl/train/entrypoints/main_base.py": (
        "class BasePPOExp:\n    def _setup_trainer(self):\n        return 'GPU work'\n\n"
        "class PromptDataset:\n    pass\n"
    ),
    "skyrl/backends/__init__.py": "",
    "skyrl/backends/skyrl_train/__init__.py": "",
    "skyrl/backends/skyrl_train/weight_sync/__init__.py": "",
    "skyrl/backends/skyrl_train/weight_sync/weight_senders.py": "def build_trainer_engine():\n    return 'NCCL engine'\n",
    "examples/__init__.py": "",
    "examples/train/__init__.py": "",
    "examples/train/visgym/__init__.py": "",
    "examples/train/visgym/env_sft.py": "class VisGymEnv:\n    def step(self, action):\n        return {}\n",
}
# Run with the drill's PYTHONPATH, so Python's `site` imports sitecustomize at start-up as in the drill's processes.
PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])  # the stand-in SkyRL and VisGym example, ahead of any installed one
import skyrl.train.entrypoints.main_base as main_base
import skyrl.backends.skyrl_train.weight_sync.weight_senders as weight_senders
import examples.train.visgym.env_sft as env_sft
print(json.dumps({
    "hook": [type(finder).__module__ for finder in sys.meta_path if "drill_site" in type(finder).__module__],
    "setup_trainer": main_base.BasePPOExp._setup_trainer.__module__,
    "prompt_dataset": main_base.PromptDataset.__module__,
    "engine": weight_senders.build_trainer_engine(),
    "env_step": env_sft.VisGymEnv.step.__module__,
}))
"""


def probe(tmp_path: Path, *, boundary: bool, stop_at: str | None) -> dict:
    fake = tmp_path / "fake"
    for name, text in FAKE_SKYRL.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(text)
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    if stop_at:
        (run_dir / "stop-at").write_text(f"{stop_at}\n")
    env = {**os.environ, "PYTHONPATH": str(SITE_DIR), "HP_DRILL_DIR": str(run_dir)}
    env.pop("HP_DRILL_BOUNDARY", None)
    if boundary:
        env["HP_DRILL_BOUNDARY"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(fake)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_sitecustomize_installs_the_hook_only_in_the_drill(tmp_path):
    untouched = {
        "hook": [],
        "setup_trainer": "skyrl.train.entrypoints.main_base",
        "prompt_dataset": "skyrl.train.entrypoints.main_base",
        "engine": "NCCL engine",
        "env_step": "examples.train.visgym.env_sft",
    }
    assert probe(tmp_path, boundary=False, stop_at="train-on-cpu") == untouched


def test_the_import_hook_patches_main_base_at_every_stop_point_and_the_rest_in_train_on_cpu_only(tmp_path):
    # The GPU boundary (the default stop point): SkyRL's main_base is routed, nothing else is touched.
    assert probe(tmp_path, boundary=True, stop_at=None) == {
        "hook": ["drill_site.import_hook"],
        "setup_trainer": "drill_site.main_base_patch",
        "prompt_dataset": "skyrl.train.entrypoints.main_base",
        "engine": "NCCL engine",
        "env_step": "examples.train.visgym.env_sft",
    }
    # train-on-cpu: the in-process filter, the skipped NCCL weight-sync engine and the reward shaping as well.
    assert probe(tmp_path, boundary=True, stop_at="train-on-cpu") == {
        "hook": ["drill_site.import_hook"],
        "setup_trainer": "drill_site.main_base_patch",
        "prompt_dataset": "drill_site.dataset_filter",
        "engine": None,
        "env_step": "drill_site.reward_shaping",
    }


# --- stop_points ---------------------------------------------------------------------------------------------------


def test_the_stop_point_and_the_plans_come_from_the_run_directory(tmp_path, monkeypatch):
    stop_points = site_module("stop_points")
    monkeypatch.setenv("HP_DRILL_DIR", str(tmp_path))
    assert stop_points.stop_at() == stop_points.GPU_BOUNDARY
    (tmp_path / "stop-at").write_text("\n")
    assert stop_points.stop_at() == stop_points.GPU_BOUNDARY
    (tmp_path / "stop-at").write_text(f"{stop_points.RESUME}\n")
    assert stop_points.stop_at() == stop_points.RESUME
    assert stop_points.plan(stop_points.TRAIN_PLAN) == {}
    (tmp_path / stop_points.TRAIN_PLAN).write_text('{"hang_at_step": 2}')
    assert stop_points.plan(stop_points.TRAIN_PLAN) == {"hang_at_step": 2}
    assert stop_points.marker_line({"b": 1, "a": 2}) == f'{stop_points.MARKER} {{"a": 2, "b": 1}}'


def test_every_report_names_the_versions_the_placement_and_the_variables_asked_about(tmp_path, monkeypatch):
    stop_points = site_module("stop_points")
    env_vars = fake_module(monkeypatch, "skyrl.env_vars", SKYRL_RAY_PG_TIMEOUT_IN_S=60)
    fake_module(monkeypatch, "skyrl", __version__="0.4.0", env_vars=env_vars)
    fake_module(monkeypatch, "ray", __version__="2.57.0")
    fake_module(monkeypatch, "torch", __version__="2.9.0", cuda=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setenv("HP_DRILL_DIR", str(tmp_path))
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.delenv("NCCL_DEBUG_SUBSYS", raising=False)
    assert "env" not in stop_points.common(cfg(), "x")
    (tmp_path / "report-env-names").write_text("NCCL_DEBUG\nNCCL_DEBUG_SUBSYS\n\n")
    report = stop_points.common(cfg(), stop_points.TRAINER_START)
    assert report == {
        **report,
        "at": "trainer-start",
        "skyrl": "0.4.0",
        "ray": "2.57.0",
        "cuda_available": False,
        "pg_timeout_s": 60,
        "placement": {"policy_num_nodes": 3, "policy_num_gpus_per_node": 2, "num_engines": 1},
        "env": {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": None},
    }


# --- gpu_boundary --------------------------------------------------------------------------------------------------


def test_the_gpu_boundary_reports_what_ran_and_stops(monkeypatch, capsys):
    gpu_boundary = site_module("gpu_boundary")
    table = {
        "state": "CREATED",
        "strategy": "PACK",
        "bundles_to_node_id": {0: "a", 1: "a", 2: "b", 3: "c", 4: "c", 5: "c"},
    }
    util = fake_module(monkeypatch, "ray.util", placement_group_table=lambda pg: table)
    fake_module(monkeypatch, "ray", util=util)
    monkeypatch.setattr(gpu_boundary, "common", lambda cfg, at: {"at": at})
    experiment = types.SimpleNamespace(
        cfg=cfg(),
        train_dataset=[1, 2, 3],
        eval_dataset=None,
        tokenizer=types.SimpleNamespace(),
        colocate_pg=types.SimpleNamespace(pg=types.SimpleNamespace(bundle_specs=[{"GPU": 1, "CPU": 1}] * 6)),
    )
    with pytest.raises(gpu_boundary.GPUBoundaryReached, match="need CUDA"):
        gpu_boundary.boundary(experiment)
    [report] = marker_lines(capsys.readouterr().out, "SKYRL_HP_DRILL_STOP")
    assert report == {
        "at": "gpu-boundary",
        "train_rows": 3,
        "eval_rows": 0,
        "tokenizer": "SimpleNamespace",
        "next": gpu_boundary.NEXT_STEP,
        "placement_group": {
            "state": "CREATED",
            "strategy": "PACK",
            "bundles": [{"GPU": 1, "CPU": 1}] * 6,
            "bundles_per_node": [3, 2, 1],
        },
    }


# --- main_base_patch -----------------------------------------------------------------------------------------------


def test_train_on_cpu_runs_skyrls_own_setup_with_the_observer_and_the_planned_faults(tmp_path, monkeypatch):
    main_base_patch = site_module("main_base_patch")
    faults, train_report = site_module("fault_standins"), site_module("train_report")
    monkeypatch.setenv("HP_DRILL_DIR", str(tmp_path))
    (tmp_path / "stop-at").write_text("train-on-cpu\n")
    hung = []
    monkeypatch.setattr(train_report, "train_report_callback", lambda: "observer")
    monkeypatch.setattr(faults, "freeze_callback", lambda step: f"freeze at {step}")
    monkeypatch.setattr(faults, "hang_in_generation", lambda trainer, step: hung.append(step))

    class Trainer:
        def __init__(self):
            self.callbacks = []

        def add_callback(self, callback):
            self.callbacks.append(callback)

    class BasePPOExp:
        def __init__(self, cfg):
            self.cfg = cfg

        def _setup_trainer(self):
            return Trainer()

    class PromptDataset:
        def __init__(self, num_workers=8):
            self.num_workers = num_workers

    module = types.SimpleNamespace(BasePPOExp=BasePPOExp, PromptDataset=PromptDataset)
    main_base_patch.patch(module)
    assert module.PromptDataset().num_workers == 1
    assert BasePPOExp("cfg")._setup_trainer().callbacks == ["observer"] and hung == []
    (tmp_path / "train-plan.json").write_text('{"hang_at_step": 2, "freeze_at_step": 1}')
    assert BasePPOExp("cfg")._setup_trainer().callbacks == ["observer", "freeze at 1"] and hung == [2]


# --- resume_standins -----------------------------------------------------------------------------------------------


def test_the_stand_in_policy_save_hangs_with_half_its_shards_written(tmp_path, monkeypatch):
    resume_standins, stop_points = site_module("resume_standins"), site_module("stop_points")
    monkeypatch.setattr(resume_standins, "HANG_SECONDS", 0)
    dispatch = resume_standins.StandInDispatch(hang_in_save=True)
    with pytest.raises(stop_points.DrillStop, match="did not kill the driver"):
        dispatch.save_checkpoint("policy", str(tmp_path / "policy"))
    assert [path.name for path in (tmp_path / "policy").iterdir()] == [f"{resume_standins.STANDIN_STATE}.partial"]


def test_the_resume_trainer_saves_the_planned_checkpoints_then_hangs_in_the_next(tmp_path, monkeypatch, capsys):
    resume_standins, stop_points = site_module("resume_standins"), site_module("stop_points")
    fake_callbacks(monkeypatch)
    monkeypatch.setattr(resume_standins, "HANG_SECONDS", 0)
    monkeypatch.setattr(resume_standins, "common", lambda cfg, at: {"at": at})
    monkeypatch.setenv("HP_DRILL_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / stop_points.RESUME_PLAN).write_text('{"complete_saves": 2}')
    config = cfg()
    config.trainer.export_path, config.trainer.ckpt_path = str(tmp_path / "export"), str(tmp_path / "ckpt")

    class Trainer:
        def __init__(self, **kwargs):
            self.cfg, self.kwargs, self.callbacks, self.global_step = kwargs["cfg"], kwargs, [], 1
            self.resume_mode = types.SimpleNamespace(value="latest")

        def add_callback(self, callback):
            self.callbacks.append(callback)

        def save_checkpoints(self):  # SkyRL's writes global_step_<n>/policy through the dispatch
            self.dispatch.save_checkpoint(
                "policy", f"{self.cfg.trainer.ckpt_path}/global_step_{self.global_step}/policy"
            )

    experiment = types.SimpleNamespace(
        cfg=config,
        get_trainer=Trainer,
        get_tracker=lambda: "tracker",
        get_trajectory_logger=lambda: "trajectories",
        tokenizer="tok",
        train_dataset="train",
        eval_dataset=None,
        colocate_pg="pg",
    )
    trainer = resume_standins.resume_trainer(experiment)
    assert experiment.trainer is trainer and (tmp_path / "export").is_dir()
    assert trainer.kwargs["inference_engine_client"] is None and trainer.kwargs["generator"] is None
    [first_step] = trainer.callbacks
    # Every 2 steps and at each epoch's end (5 steps): saves after 2 and 4, then the save of step 5 hangs.
    with pytest.raises(stop_points.DrillStop, match="did not kill the driver"):
        first_step.on_step_start(trainer, types.SimpleNamespace(epoch=0, steps_per_epoch=5), None)
    [report] = marker_lines(capsys.readouterr().out, stop_points.MARKER)
    assert report == {**report, "at": "resume", "first_step": 1, "saved": [2, 4], "dying_in_save_of": 5}
    assert "FSDP workers" in report["standins"] and "vLLM engines" in report["standins"]
    saved = sorted(path.relative_to(tmp_path / "ckpt").as_posix() for path in (tmp_path / "ckpt").rglob("*.txt*"))
    state = resume_standins.STANDIN_STATE
    assert saved == [
        f"global_step_2/policy/{state}",
        f"global_step_4/policy/{state}",
        f"global_step_5/policy/{state}.partial",
    ]


# --- train_report --------------------------------------------------------------------------------------------------


def test_the_train_report_prints_what_skyrl_runs_with_and_one_line_per_step(monkeypatch, capsys):
    train_report, stop_points = site_module("train_report"), site_module("stop_points")
    fake_callbacks(monkeypatch)
    monkeypatch.setattr(train_report, "common", lambda cfg, at: {"at": at})
    observer = train_report.train_report_callback()
    trainer = types.SimpleNamespace(cfg=cfg(), global_step=0, generator=types.SimpleNamespace())
    observer.on_train_start(trainer, None, None)
    logs = {"trainer/global_step": 1, "reward/avg_raw_reward": 0.5, "loss/policy": 2, "timing/step": 9.0, "x": "y"}
    observer.on_log(trainer, types.SimpleNamespace(logs=logs), None)
    observer.on_log(trainer, types.SimpleNamespace(logs={"reward/avg_raw_reward": 0.1}), None)  # no step: no line
    out = capsys.readouterr().out
    [start] = marker_lines(out, stop_points.MARKER)
    assert start == {**start, "at": "train-on-cpu", "train_batch_size": 30, "n_samples_per_prompt": 8}
    assert marker_lines(out, stop_points.STEP_MARKER) == [{"step": 1, "reward/avg_raw_reward": 0.5, "loss/policy": 2.0}]


# --- fault_standins ------------------------------------------------------------------------------------------------


def test_an_event_is_a_file_in_the_run_directory_and_a_line(tmp_path, monkeypatch, capsys):
    faults = site_module("fault_standins")
    monkeypatch.setenv("HP_DRILL_DIR", str(tmp_path))
    (tmp_path / "train-plan.json").write_text('{"freeze_at_step": 3}')
    assert faults.train_plan() == {"freeze_at_step": 3}
    faults.event(faults.FROZEN, 3, first_step=2)
    record = json.loads((tmp_path / "frozen.json").read_text())
    assert record == {**record, "pid": os.getpid(), "step": 3, "first_step": 2}
    assert capsys.readouterr().out == f"SKYRL_HP_DRILL_EVENT frozen {json.dumps(record, sort_keys=True)}\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["frozen.json", "train-plan.json"]


# --- cuda_standins --------------------------------------------------------------------------------------------------

TORCH_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import torch, torch.distributed
from drill_site import cuda_standins
cuda_standins.patch_torch_for_cpu()
assert torch.cuda.current_device() == torch.device("cpu")
torch.cuda.set_device(0); torch.cuda.synchronize(); torch.cuda.empty_cache()
free, total = torch.cuda.mem_get_info()
assert 0 < free <= total
assert torch.ones(2).cuda().device.type == "cpu"
with torch.autocast("cuda", dtype=torch.bfloat16):
    assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
torch.distributed.init_process_group(
    backend="cpu:gloo,cuda:nccl", init_method="file://" + sys.argv[2], rank=0, world_size=1
)
assert torch.distributed.get_backend() == "gloo"
from torch.distributed.device_mesh import init_device_mesh
assert init_device_mesh("cuda", (1,)).device_type == "cpu"
torch.distributed.destroy_process_group()
print("on cpu")
"""


def test_torchs_cuda_entry_points_run_on_the_cpu_and_nccl_becomes_gloo(tmp_path):
    # In a child process: the patch is for the whole process's torch.
    env = {key: value for key, value in os.environ.items() if key != "HP_DRILL_BOUNDARY"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    done = subprocess.run(
        [sys.executable, "-c", TORCH_PROBE, str(SITE_DIR), str(tmp_path / "store")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "on cpu", done.stderr


def test_a_modules_torch_creates_cuda_tensors_on_the_cpu():
    cuda_standins = site_module("cuda_standins")
    made = []
    torch = types.SimpleNamespace(zeros=lambda *args, **kwargs: made.append(kwargs) or "tensor", float32="float32")
    factories = cuda_standins.CpuFactories(torch)
    assert factories.zeros(4, device="cuda:0") == "tensor" and factories.float32 == "float32"
    factories.zeros(4, device="meta")
    factories.zeros(4)
    assert made == [{"device": "cpu"}, {"device": "meta"}, {}]


# --- flash_attn_standin --------------------------------------------------------------------------------------------


def test_the_flash_attn_stand_in_exists_only_while_the_model_wrapper_binds_it_and_refuses_to_run(monkeypatch):
    flash_attn_standin = site_module("flash_attn_standin")
    monkeypatch.delitem(sys.modules, "flash_attn", raising=False)
    monkeypatch.setitem(sys.modules, "flash_attn.bert_padding", "a module of its own")

    class Loader:
        def exec_module(self, module):
            exec("from flash_attn.bert_padding import pad_input, unpad_input", module.__dict__)

    wrapper = types.ModuleType(flash_attn_standin.MODEL_WRAPPER)
    flash_attn_standin.exec_with_standin(Loader(), wrapper)
    with pytest.raises(flash_attn_standin.StandInUsed, match="flash-attn stand-in called"):
        wrapper.pad_input()
    assert "flash_attn" not in sys.modules and sys.modules["flash_attn.bert_padding"] == "a module of its own"


# --- weight_sync_skip ----------------------------------------------------------------------------------------------


def test_the_nccl_weight_sync_engine_is_not_built():
    weight_sync_skip = site_module("weight_sync_skip")

    def build_trainer_engine(*args, **kwargs):
        return "NCCL engine"

    module = types.SimpleNamespace(build_trainer_engine=build_trainer_engine)
    weight_sync_skip.patch_weight_senders(module)
    assert module.build_trainer_engine("cfg", rank=0) is None
    assert module.build_trainer_engine.__wrapped__ is build_trainer_engine


def test_the_site_modules_are_listed_in_the_packages_docstring():
    listed = sys.modules[site_module("import_hook").__package__].__doc__ or ""
    modules = sorted(path.stem for path in (SITE_DIR / "drill_site").glob("*.py") if path.stem != "__init__")
    assert sorted(line[2:].split(":")[0] for line in listed.splitlines() if line.startswith("- ")) == modules
