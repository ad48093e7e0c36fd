"""The drill's site package: what `sitecustomize` installs in every Python process of the drill's Ray nodes (the
nodes' PYTHONPATH holds drill/site/, so this package is `drill_site` there). One module per concern:

- stop_points: the stop points a scenario names in the run directory's `stop-at` file, the marker lines and
  files the drill reads, and the report every stop point starts from.
- gpu_boundary: the default stop point, where the first step needing a CUDA device would run.
- main_base_patch: SkyRL's `BasePPOExp` (skyrl/train/entrypoints/main_base.py) routed to the scenario's stop point.
- resume_standins: the stand-in FSDP workers and the trainer the `resume` scenarios build around them.
- train_report: the observer of `train-on-cpu`'s real training (step lines, what SkyRL runs with).
- fault_standins: the hang and freeze stand-ins the drill's attempt scenarios plan (`train-plan.json`).
- dataset_filter: SkyRL's prompt-length filter run in-process (a size cut, not a stand-in).
- cuda_standins: stand-ins for the GPU in torch's CUDA entry points (CPU devices, gloo instead of NCCL).
- flash_attn_standin: the stand-in flash-attn modules SkyRL's model wrapper binds.
- weight_sync_skip: the skipped NCCL weight-sync engine (a behaviour change, not a hardware stand-in).
- reward_shaping: the shaping stand-in on VisGym's reward (a behaviour change, not a hardware stand-in).
- import_hook: the meta path finder that applies each of them as SkyRL's modules are imported.
"""
