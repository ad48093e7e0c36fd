"""The SkyRL VisGym GRPO RayJob's job (runs on the Ray head, inside the training image).

1. Prepares shared storage once: downloads the SFT checkpoint subfolder to --model-dir and
   generates the train and eval datasets with SkyRL's examples/train/visgym/dataset.py into
   --data-dir (train.parquet, eval.parquet). Each artifact gets a completion marker
   (.prepared.json, written atomically after success) recording the inputs that produced it, so
   a rerun with the same inputs skips the work and a rerun with different inputs redoes it.
   An exclusive fcntl.flock lock under --shared-dir serialises pods that start at the same time
   (FSx for Lustre honours it when mounted with the `flock` option).
2. Checks the checkpoint is a vision-language checkpoint the engines can run, before any GPU work: its processor
   (image processor, tokenizer with the vision tokens, chat template) turns the first observation of SkyRL's VisGym
   environment (examples/train/visgym/env_sft.py: VisGym's task and a rendered maze frame) into a prompt with image
   tokens; a checkpoint that cannot is refused in one line naming what is missing. That observation, with the
   training's generation settings, is written to --query-example (the charts: the run's directory), where the publish
   Job takes it to S3 with the adapter and `skyrl-hp serve query` finds it.
3. Claims the run's checkpoint directory (trainer.ckpt_path) with a run marker (.skyrl-hp-run.json naming
   trainer.run_name): a retry of the same run finds its own marker and SkyRL resumes (resume_mode=latest);
   a directory that holds another run's checkpoints, or checkpoints without a marker, is refused in one
   line instead of being resumed from or overwritten. A latest_ckpt_global_step.txt left empty by a crash
   during SkyRL's write of it, or naming a checkpoint whose trainer state is missing or cut short, is pointed
   back at the newest complete checkpoint.
4. Takes the next attempt generation of that directory (.skyrl-hp-attempts/generation-<n>, created exclusively):
   the newest attempt owns the run's checkpoints. An older attempt that is still alive (a pod on a partitioned
   node, a second RayJob on the same run) is stopped, in one line, before its next checkpoint write; nothing waits
   on a lock, so a newer attempt never waits on a dead one.
5. With trainer.logger=mlflow: one MLflow run per attempt chain. The first attempt creates the run (in the
   experiment named trainer.project_name, named trainer.run_name, tagged with every --mlflow-tag) and keeps its id
   beside the checkpoints (.skyrl-hp-attempts/mlflow-run.json); a retry resumes that run (MLFLOW_RUN_ID in the
   trainer's process), so its steps continue the same curves. A superseded attempt logs nothing to it.
6. Runs `examples/train/visgym/entrypoint.py --env_variant sft <overrides>` from --skyrl-dir in this process
   (as `python` would run it: SkyRL's exit code, or its exception, is the job's), with a stall watchdog: when
   SkyRL's trainer finishes no step within --stall-timeout-first-step seconds of the start, or within
   --stall-timeout-step seconds of the previous step, the driver ends in one line with exit code 124, so the
   attempt fails and KubeRay retries it on a fresh cluster (it resumes from the newest checkpoint).

Overrides follow `--` as dotted `key=value` pairs. Unless given explicitly, the script adds
trainer.policy.model.path, data.train_data and data.val_data pointing at what it prepared.

The RayJob runs it as `python <mount>/train_job.py [options] -- key=value ...`: train_job.py, the entry script, sits
beside this package, so the package is importable from the script's directory (sys.path[0]). The charts ship both in
one ConfigMap, mounted on the Ray head (a knob change never needs an image rebuild); it also runs as
`ray job submit --working-dir docker/ -- python train_job.py ...`. One module per step above (options, prepare,
checkpoint_check, resume, attempts, tracking, trainer_guard with progress, watchdog and monitor, runner, main).
Standard library only at import; huggingface_hub (in the image) is imported when a download is needed, transformers
and SkyRL's VisGym environment for the checkpoint check, ray when SkyRL starts.
"""
