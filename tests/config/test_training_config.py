"""Training/serving configuration: reference defaults, derived placement, and every cross-check rule."""

from __future__ import annotations

import pytest

from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.config.serving import VLLM_LORA_RANKS, effective_max_lora_rank, publications, training_head_size
from skyrl_hyperpod.config.training import DERIVED_KEYS, OVERRIDABLE_KEYS
from skyrl_hyperpod.config.training_runs import resolve_runs
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME


def problems_for(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_config(data)
    return caught.value.problems


def only_problem(data: dict) -> str:
    problems = problems_for(data)
    assert len(problems) == 1, problems
    assert "\n" not in problems[0]
    return problems[0]


def runs_of(config):
    return resolve_runs(config.training, config.hyperpod, config.workloads)


def experiment(name: str = "exp", **overrides) -> dict:
    return {"training": {"experiments": [{"name": name, "overrides": overrides}]}}


def test_defaults_are_the_reference_knobs(default_config):
    knobs = default_config.training.knobs
    assert (knobs.lora_rank, knobs.lora_alpha) == (32, 32)
    assert knobs.learning_rate == 3e-5  # the LoRA recipe, not the full fine-tune's 1e-6
    assert knobs.colocate_all and knobs.tensor_parallel_size == 1
    assert knobs.gpu_memory_utilization == 0.45
    assert (knobs.n_samples_per_prompt, knobs.max_turns) == (8, 15)
    # The intervals are derived from the failure budget (test_checkpoint_budget.py); the resolved run has 20.
    assert (knobs.ckpt_interval, knobs.hf_save_interval, knobs.eval_interval) == (None, None, 10)
    (run,) = default_config.derived.runs
    assert (run.knobs.ckpt_interval, run.knobs.hf_save_interval) == (20, 20)
    assert knobs.resume_mode == "latest"
    assert (knobs.max_prompt_length, knobs.max_input_length, knobs.max_generate_length) == (2048, 8192, 1024)
    assert (knobs.temperature, knobs.max_model_len) == (0.7, 60000)
    assert knobs.vision_language_generator and not knobs.remove_microbatch_padding
    assert [e.name for e in default_config.training.experiments] == ["maze-grpo"]


def test_reference_run_places_one_engine_per_gpu(default_config):
    (run,) = runs_of(default_config)
    group = default_config.hyperpod.worker_group
    gpus = group.instance_count * group.spec.gpus
    assert gpus == 6  # FACTS: FSDP over 6 GPUs, 6 colocated engines
    assert run.knobs.policy_num_nodes * run.knobs.policy_num_gpus_per_node == gpus
    assert run.knobs.num_engines == gpus
    assert run.export_path == "/shared/runs/maze-grpo"
    assert run.ckpt_path.startswith(run.export_path + "/") and run.ckpt_path != run.export_path
    assert run.lora_sync_path.startswith("/shared/")
    # The published step exists: the run's last step, which is also a multiple of hf_save_interval.
    [pub] = publications(default_config.serving, default_config.derived.runs)
    assert pub.step == run.total_steps == 160
    assert pub.step % run.knobs.hf_save_interval == 0
    assert pub.adapter_name == "maze-grpo"


def test_default_schedule_is_the_closest_to_the_reference_run_that_skyrl_can_step(default_config):
    # SkyRL's run_visgym_from_sft.sh: train 32 / mini 16 / micro 4, 20 epochs on 256 rows = 160 steps. On 6 ranks
    # with 8 samples SkyRL keeps a multiple of 3 prompts per step, so 32 crashes at step 1; 30 / 15 keeps two
    # mini-batches per step, 8 steps an epoch (160 steps) and the recipe's micro batch 4 (15 x 8 // 6 = 20 per GPU).
    (run,) = runs_of(default_config)
    assert (run.knobs.train_batch_size, run.knobs.policy_mini_batch_size) == (30, 15)
    assert run.knobs.epochs == 20 and run.total_steps == 160
    assert run.knobs.micro_train_batch_size_per_gpu == 4
    assert run.knobs.micro_forward_batch_size_per_gpu == 4
    overrides = run.overrides()
    assert overrides["trainer.train_batch_size"] == "30" and overrides["trainer.policy_mini_batch_size"] == "15"
    assert overrides["trainer.epochs"] == "20"


def _worker_group(instance_type: str, count: int) -> dict:
    group = {"name": "gpu-workers", "instance_type": instance_type, "instance_count": count}
    return {"hyperpod": {"worker_group": group}}


# (worker group, data-parallel GPUs, expected train / mini / micro / steps). Where 8 samples x 32 prompts divide
# among the ranks (stride dp / gcd(dp, 8) divides 32) the recipe stays: 8 x g7e.48xlarge, 16 nodes, one node. On 6
# and 12 ranks the stride is 3: 30 / 15, the nearest pair with two mini-batches; micro 4 divides 15 x 8 // 6 = 20,
# on 12 ranks 15 x 8 // 12 = 10 admits 2.
LAYOUTS = [
    (("ml.g7e.12xlarge", 3), 6, (30, 15, 4, 160)),
    (("ml.g7e.48xlarge", 8), 64, (32, 16, 2, 160)),
    (("ml.g7e.12xlarge", 16), 32, (32, 16, 4, 160)),
    (("ml.g7e.48xlarge", 16), 128, (32, 16, 1, 160)),
    (("ml.g7e.12xlarge", 1), 2, (32, 16, 4, 160)),
    (("ml.g7e.48xlarge", 1), 8, (32, 16, 4, 160)),
    (("ml.g7e.12xlarge", 6), 12, (30, 15, 2, 160)),
]


@pytest.mark.parametrize(("group", "data_parallel", "expected"), LAYOUTS, ids=lambda v: str(v))
def test_derived_sizes_for_each_layout_pass_skyrls_own_classes(group, data_parallel, expected):
    from skyrl_hyperpod.validation import skyrl_overrides

    assert skyrl_overrides.unavailable_reason() is None, "SkyRL's config classes must be installed for this check"
    config = validate_config(_worker_group(*group))
    (run,) = runs_of(config)
    knobs = run.knobs
    assert knobs.policy_num_nodes * knobs.policy_num_gpus_per_node == data_parallel
    got = (knobs.train_batch_size, knobs.policy_mini_batch_size, knobs.micro_train_batch_size_per_gpu, run.total_steps)
    assert got == expected
    problems, skipped = skyrl_overrides.skyrl_override_problems([f"{k}={v}" for k, v in run.overrides().items()])
    assert (problems, skipped) == ([], None)


def test_recipe_sizes_are_kept_wherever_skyrl_accepts_them():
    # Whenever SkyRL accepts 32 / 16 on a layout, the derivation keeps them (and the recipe's 160 steps); elsewhere
    # it takes the accepted pair with two mini-batches nearest 32, and no accepted pair is nearer.
    from skyrl_hyperpod.config.training import SkyRLKnobs
    from skyrl_hyperpod.config.training_runs import BatchSizes, derive_batches

    for data_parallel in range(1, 129):
        derived = derive_batches(SkyRLKnobs(), data_parallel, None)
        assert derived.problem() is None and derived.micro_train <= 4, data_parallel
        if BatchSizes(32, 16, 1, 8, data_parallel).problem() is None:
            assert (derived.train, derived.mini) == (32, 16), data_parallel
            continue
        assert derived.train == 2 * derived.mini, data_parallel
        nearer = [
            m
            for m in range(1, 16 + abs(derived.mini - 16))
            if abs(2 * m - 32) < abs(derived.train - 32) and BatchSizes(2 * m, m, 1, 8, data_parallel).problem() is None
        ]
        assert nearer == [], (data_parallel, derived)


def _skyrl_accepts(sizes) -> bool:
    from skyrl_hyperpod.validation import skyrl_overrides

    overrides = [
        f"trainer.train_batch_size={sizes.train}",
        f"trainer.policy_mini_batch_size={sizes.mini}",
        f"trainer.micro_train_batch_size_per_gpu={sizes.micro_train}",
        f"generator.n_samples_per_prompt={sizes.n_samples_per_prompt}",
        "trainer.placement.policy_num_nodes=1",
        f"trainer.placement.policy_num_gpus_per_node={sizes.policy_data_parallel}",
    ]
    problems, skipped = skyrl_overrides.skyrl_override_problems(overrides)
    assert skipped is None, skipped
    return problems == []


def test_our_batch_rule_agrees_with_skyrls_validate_batch_sizes_everywhere():
    # Our one-line check must refuse exactly what SkyRL's own function refuses.
    from skyrl_hyperpod.config.training_runs import BatchSizes

    cases = [
        BatchSizes(train, mini, micro, n, dp)
        for dp in (1, 2, 6, 8, 12, 64)
        for n in (1, 8)
        for mini in (1, 4, 15, 16, 17)
        for train in (mini, 2 * mini, 32, 48)
        for micro in (1, 3, 4)
    ]
    disagreements = [c for c in cases if (c.problem() is None) != _skyrl_accepts(c)]
    assert disagreements == []
    assert any(c.problem() for c in cases) and any(c.problem() is None for c in cases)
    # Both rules are exercised: some schedules pass validate_batch_sizes and crash only at step 1.
    assert any(c.validate_batch_sizes_problem() is None and c.first_step_problem() for c in cases)


def test_skyrls_own_step_functions_crash_on_the_recipe_schedule_on_six_ranks():
    # 32 prompts x 8 samples on 6 ranks: _remove_tail_data keeps 30, compute_prompt_mini_batch_boundaries asserts.
    from skyrl_hyperpod.validation import skyrl_overrides

    placement = ["trainer.placement.policy_num_nodes=3", "trainer.placement.policy_num_gpus_per_node=2"]
    recipe = ["trainer.train_batch_size=32", "trainer.policy_mini_batch_size=16", "generator.n_samples_per_prompt=8"]
    problems, skipped = skyrl_overrides.skyrl_override_problems(
        [*placement, *recipe, "trainer.micro_train_batch_size_per_gpu=3"]
    )
    assert skipped is None
    assert len(problems) == 1 and "step 1" in problems[0] and "trimmed to 30" in problems[0], problems
    derived = ["trainer.train_batch_size=30", "trainer.policy_mini_batch_size=15", "generator.n_samples_per_prompt=8"]
    problems, _ = skyrl_overrides.skyrl_override_problems(
        [*placement, *derived, "trainer.micro_train_batch_size_per_gpu=4"]
    )
    assert problems == []


def test_a_schedule_skyrl_trims_at_step_1_is_refused_in_one_line_with_the_accepted_values():
    recipe = {"trainer.train_batch_size": 32, "trainer.policy_mini_batch_size": 16}
    message = only_problem(experiment(**recipe, **{"trainer.micro_train_batch_size_per_gpu": 1}))
    assert (
        "experiment 'exp': trainer.train_batch_size = 32: SkyRL trims each step to a multiple of 3 prompts" in message
    )
    assert "32 -> 30" in message and "_remove_tail_data" in message
    assert message.endswith("accepted train/mini with micro batch 1 and 2 mini-batches per step: 30/15, 36/18")


def test_a_micro_batch_skyrl_rejects_is_refused_in_one_line():
    # The upstream recipe's 32 / 16 / micro 4 (written for 8 GPUs) on the reference 6 GPUs.
    recipe = {"trainer.train_batch_size": 32, "trainer.policy_mini_batch_size": 16}
    message = only_problem(experiment(**recipe, **{"trainer.micro_train_batch_size_per_gpu": 4}))
    assert "trainer.micro_train_batch_size_per_gpu = 4" in message and "6 data-parallel GPUs = 21" in message
    assert "accepted: 1, 3, 7, 21" in message and "validate_batch_sizes" in message


def test_derived_batches_with_a_micro_batch_skyrl_accepts_are_not_refused():
    for micro in (1, 2, 4, 5, 10, 20):
        config = validate_config(experiment(**{"trainer.micro_train_batch_size_per_gpu": micro}))
        (run,) = runs_of(config)
        assert (run.knobs.train_batch_size, run.knobs.policy_mini_batch_size) == (30, 15)
        assert run.knobs.micro_train_batch_size_per_gpu == micro


def test_a_micro_batch_alone_never_changes_the_derived_batches():
    # Micro 3 does not divide 30 / 15's 20 per GPU: refused with the accepted micro batches, not answered by
    # silently moving to a train / mini pair that admits it.
    message = only_problem(experiment(**{"trainer.micro_train_batch_size_per_gpu": 3}))
    assert "trainer.micro_train_batch_size_per_gpu = 3" in message and "policy_mini_batch_size 15" in message
    assert "accepted: 1, 2, 4, 5, 10, 20" in message


def test_mismatched_colocation_gpus_are_rejected():
    message = only_problem(experiment(**{"generator.inference_engine.num_engines": 4}))
    assert "num_engines = 4" in message and "colocate_all" in message and "6" in message


def test_tensor_parallel_changes_engine_count_consistently():
    config = validate_config(experiment(**{"generator.inference_engine.tensor_parallel_size": 2}))
    (run,) = runs_of(config)
    assert run.knobs.num_engines * run.knobs.tensor_parallel_size == 6


def test_train_batch_not_a_multiple_of_mini_batch_is_rejected():
    message = only_problem(experiment(**{"trainer.train_batch_size": 54, "trainer.policy_mini_batch_size": 36}))
    assert "trainer.train_batch_size = 54" in message and "multiple" in message


def test_too_many_gpus_per_pod_are_rejected():
    message = only_problem({"training": {"cluster": {"worker_gpus": 4}}})
    assert "worker_gpus = 4" in message and "ml.g7e.12xlarge has 2 GPUs" in message


def test_policy_gpus_per_node_above_the_pod_are_rejected():
    message = only_problem(experiment(**{"trainer.placement.policy_num_gpus_per_node": 3}))
    assert "policy_num_gpus_per_node = 3" in message


def test_worker_replicas_beyond_the_instance_count_are_rejected():
    message = only_problem({"training": {"cluster": {"worker_replicas": 4}}})
    assert "worker_replicas = 4" in message and "3 instances" in message
    message = only_problem({"serving": {"worker_replicas": 5}})
    assert "serving" in message and "worker_replicas = 5" in message


def test_shm_that_does_not_fit_the_pod_is_rejected():
    message = only_problem({"training": {"cluster": {"worker_shm_gib": 400}}})
    assert "worker_shm_gib = 400" in message
    message = only_problem({"training": {"cluster": {"head_memory_gib": 64, "head_shm_gib": 40}}})
    assert "training.cluster.head_shm_gib = 40" in message and "64 GiB" in message


def test_training_head_leaves_room_for_the_serving_head(default_config):
    training, serving, hyperpod = default_config.training, default_config.serving, default_config.hyperpod
    head = hyperpod.head_group
    cpus, memory = training_head_size(training, serving, hyperpod)
    assert cpus + serving.head_cpus == head.allocatable_vcpus
    assert memory + serving.head_memory_gib == head.allocatable_memory_gib
    # The Ray head keeps most of the node: GCS and the object store need memory.
    assert memory >= head.allocatable_memory_gib // 2 and memory >= 2 * training.cluster.head_shm_gib


def test_explicit_training_head_is_used_as_given():
    config = validate_config({"training": {"cluster": {"head_cpus": 16, "head_memory_gib": 128}}})
    assert training_head_size(config.training, config.serving, config.hyperpod) == (16, 128)


@pytest.mark.parametrize(
    ("data", "fields"),
    [
        ({"training": {"cluster": {"head_cpus": 58}}}, "training.cluster.head_cpus + serving.head_cpus = 58 + 8"),
        ({"serving": {"head_cpus": 56}}, "training.cluster.head_cpus + serving.head_cpus = 0 + 56"),
        (
            {"training": {"cluster": {"head_memory_gib": 450}}},
            "training.cluster.head_memory_gib + serving.head_memory_gib = 450 + 32",
        ),
        (
            {
                "hyperpod": {
                    "head_group": {
                        "name": "head",
                        "instance_type": "ml.r5d.16xlarge",
                        "instance_count": 1,
                        "threads_per_core": 1,
                    }
                },
                "training": {"cluster": {"head_cpus": 24}},
            },
            "training.cluster.head_cpus + serving.head_cpus = 24 + 8",
        ),
    ],
)
def test_heads_that_cannot_share_the_head_node_are_rejected(data, fields):
    message = only_problem(data)
    assert fields in message and "ml.r5d.16xlarge" in message


SHARED = {"self_contained_jobs": False}


def test_retries_are_set_only_for_jobs_that_own_their_cluster(default_config):
    # By default every job owns its cluster and is retried twice (a node replacement, then one more failure).
    assert default_config.training.jobs.self_contained_jobs is True
    assert default_config.training.jobs.job_backoff_limit is None
    assert default_config.training.jobs.effective_job_backoff_limit == 2
    no_retry = validate_config({"training": {"jobs": {"job_backoff_limit": 0}}}).training.jobs
    assert no_retry.effective_job_backoff_limit == 0
    shared = validate_config({"training": {"jobs": SHARED | {"job_backoff_limit": 0}}}).training.jobs
    assert shared.effective_job_backoff_limit is None


def test_retries_on_the_shared_cluster_are_rejected():
    # KubeRay rejects backoffLimit > 0 with clusterSelector (a retry recreates the job's cluster).
    message = only_problem({"training": {"jobs": SHARED | {"job_backoff_limit": 2}}})
    assert "training.jobs: job_backoff_limit = 2" in message and "self_contained_jobs" in message


def test_a_failed_head_kept_shorter_than_its_workers_is_refused():
    # KubeRay v1.7.0 validateTTLConsistency: DeleteCluster's TTL must be at least DeleteWorkers'.
    message = only_problem(
        {"training": {"jobs": {"job_ttl_seconds_after_finished": 7200, "failed_head_ttl_seconds": 600}}}
    )
    assert message.startswith("config error: training.jobs: failed_head_ttl_seconds = 600: shorter than")


def test_lora_rank_above_max_lora_rank_is_rejected():
    message = only_problem({"serving": {"max_lora_rank": 16}, **experiment(**{"trainer.policy.model.lora.rank": 32})})
    assert "max_lora_rank = 16" in message and "rank 32" in message


def test_max_lora_rank_follows_the_largest_experiment_rank():
    config = validate_config(
        {
            "training": {
                "experiments": [
                    {"name": "r8", "overrides": {"trainer.policy.model.lora.rank": 8}},
                    {"name": "r48", "overrides": {"trainer.policy.model.lora.rank": 48}},
                ]
            }
        }
    )
    rank = effective_max_lora_rank(config.serving, config.derived.runs)
    assert rank == 64 and rank in VLLM_LORA_RANKS


def test_unsupported_max_lora_rank_is_rejected():
    assert "max_lora_rank = 24" in only_problem({"serving": {"max_lora_rank": 24}})


def test_non_s3_lora_path_is_rejected():
    message = only_problem({"serving": {"lora_path_override": "/shared/adapters"}})
    assert "lora_path_override = '/shared/adapters'" in message and "s3://" in message
    assert validate_config({"serving": {"lora_path_override": "s3://bucket/adapters"}})


def test_long_names_are_rejected():
    message = only_problem({"training": {"cluster": {"raycluster_name": "r" * 54}}})
    assert "training.cluster.raycluster_name" in message and "53" in message
    message = only_problem(
        {"training": {"experiments": [{"name": "maze-grpo"}], "cluster": {"raycluster_name": "r" * 40}}}
    )
    assert "RayJob name" in message and "47" in message
    message = only_problem({"serving": {"rayservice_name": "s" * 48}})
    assert "serving.rayservice_name" in message and "47" in message


def test_unknown_override_key_is_rejected_with_a_suggestion():
    message = only_problem(experiment(**{"trainer.policy.optimizer_config.learning_rate": 1e-5}))
    assert "unknown SkyRL key 'trainer.policy.optimizer_config.learning_rate'" in message
    assert "trainer.policy.optimizer_config.lr" in message


def test_plus_prefixed_and_derived_keys_are_rejected():
    assert "'+' prefix" in only_problem(experiment(**{"+trainer.epochs": 3}))
    for key in DERIVED_KEYS:
        assert "not overridable" in only_problem(experiment(**{key: "/elsewhere"}))


def test_override_values_are_type_checked():
    message = only_problem(experiment(**{"trainer.policy.model.lora.rank": "large"}))
    assert "trainer.policy.model.lora.rank" in message and "'large'" in message


def test_duplicate_experiment_names_are_rejected():
    message = only_problem({"training": {"experiments": [{"name": "a"}, {"name": "a"}]}})
    assert "experiments[1].name = 'a'" in message and "duplicate" in message


def test_experiments_sharing_a_run_directory_are_rejected():
    message = only_problem({"training": {"experiments": [{"name": "a", "run_id": "x"}, {"name": "b", "run_id": "x"}]}})
    assert "run_id = 'x'" in message


def test_every_overridable_key_is_a_documented_skyrl_key():
    assert len(set(OVERRIDABLE_KEYS)) == len(OVERRIDABLE_KEYS)
    assert all(key.split(".")[0] in {"trainer", "generator", "environment", "data"} for key in OVERRIDABLE_KEYS)


def test_publish_step_must_be_an_exported_step():
    assert "publish.step = 150" in only_problem({"serving": {"publish": {"step": 150}}})
    assert "publish.step = 2000" in only_problem({"serving": {"publish": {"step": 2000}}})
    assert "publish.experiment = 'nope'" in only_problem({"serving": {"publish": {"experiment": "nope"}}})


def test_full_fine_tune_cannot_be_published():
    message = only_problem(experiment("full", **{"trainer.policy.model.lora.rank": 0}))
    assert "LoRA rank 0" in message


def test_publish_image_must_be_pinned():
    assert "serving.publish.image" in only_problem({"serving": {"publish": {"image": "amazon/aws-cli"}}})


def test_one_max_model_len_sequence_fits_each_engines_gpu_by_default(default_config):
    # vLLM refuses to start when its KV cache cannot hold one max_model_len sequence; check the arithmetic
    # with the model's figures (Qwen3-VL-8B: 36 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 bytes a token).
    from skyrl_hyperpod.config.serving import effective_max_lora_rank, effective_max_model_len
    from skyrl_hyperpod.config.vllm_memory import GIB, QWEN3_VL_8B, engine_memory

    assert QWEN3_VL_8B.kv_bytes_per_token() == 36 * 8 * 128 * 2 * 2 == 144 * 1024
    knobs, serving = default_config.training.knobs, default_config.serving
    gpu_gb = default_config.hyperpod.worker_group.spec.gpu_memory_gib
    training = engine_memory(
        gpu_memory_gb=gpu_gb, gpu_memory_utilization=knobs.gpu_memory_utilization, tensor_parallel=1,
        max_loras=1, max_lora_rank=knobs.lora_rank,
    )  # fmt: skip
    serving_memory = engine_memory(
        gpu_memory_gb=gpu_gb, gpu_memory_utilization=serving.gpu_memory_utilization, tensor_parallel=1,
        max_loras=serving.max_num_adapters_per_replica,
        max_lora_rank=effective_max_lora_rank(serving, default_config.derived.runs),
    )  # fmt: skip
    # 96 GB x 0.45 = 40.2 GiB - 16.3 GiB weights - 0.2 GiB adapter - 6 GiB reserve = 17.7 GiB: ~129k tokens.
    assert training.max_tokens >= knobs.max_model_len == 60000
    assert 17 * GIB < training.kv_available < 18.5 * GIB
    assert serving_memory.max_tokens >= effective_max_model_len(serving, default_config.training)


def test_a_max_model_len_that_does_not_fit_the_gpu_is_refused():
    message = only_problem({"serving": {"gpu_memory_utilization": 0.3, "max_model_len": 262144}})
    assert message.startswith("config error: serving: max_model_len = 262144: one sequence needs 36.0 GiB")
    assert "gpu_memory_utilization 0.3" in message and "lower max_model_len" in message
    message = only_problem({"training": {"knobs": {"generator.inference_engine.gpu_memory_utilization": 0.25}}})
    assert "engine_init_kwargs.max_model_len = 60000" in message and "gpu_memory_utilization 0.25" in message
    message = only_problem({"serving": {"max_model_len": 300000}})
    assert "262144 positions" in message
    # The same length fits once the engine may use more of the GPU.
    validate_config({"serving": {"gpu_memory_utilization": 0.9, "max_model_len": 262144}})


def test_lora_target_modules_must_be_ones_vllm_serves():
    attention_only = ["q_proj", "k_proj", "v_proj", "o_proj"]
    validate_config({"training": {"knobs": {"trainer.policy.model.lora.target_modules": attention_only}}})
    message = only_problem(experiment(**{"trainer.policy.model.lora.target_modules": "[q_proj,visual.merger]"}))
    assert "trainer.policy.model.lora.target_modules = [q_proj,visual.merger]" in message
    assert "visual.merger would not be applied" in message


def test_serving_lora_settings_match_every_trained_adapter():
    config = validate_config(
        {"training": {"experiments": [
            {"name": "rank-16", "overrides": {"trainer.policy.model.lora.rank": 16}},
            {"name": "rank-64", "overrides": {"trainer.policy.model.lora.rank": 64}},
        ]}}
    )  # fmt: skip
    from charts import serve_config
    from skyrl_hyperpod.values.stack_outputs import StackOutputs

    engine = serve_config(config, StackOutputs.placeholder(config))["applications"][0]["args"]["llm_configs"][0]
    kwargs = engine["engine_kwargs"]
    assert kwargs["enable_lora"] is True and kwargs["max_lora_rank"] >= 64
    assert kwargs["max_loras"] == engine["lora_config"]["max_num_adapters_per_replica"]
    assert kwargs["max_model_len"] == config.training.knobs.max_model_len


@pytest.mark.parametrize("instance_type", ["ml.g7e.2xlarge", "ml.g7e.4xlarge", "ml.g7e.8xlarge"])
def test_a_smaller_gpu_node_gets_shared_memory_that_fits_it(instance_type):
    """A 1-GPU trial needs the instance type and the replica count it can hold; /dev/shm follows the node."""
    config = validate_config(
        {"hyperpod": {"worker_group": {"instance_type": instance_type}}, "serving": {"max_replicas": 1}}
    )
    allocatable = config.hyperpod.worker_group.allocatable_memory_gib
    assert config.derived.worker_layout.shm_gib == min(64, allocatable // 2)
    import cdk8s
    from deployed_cluster import deployed_outputs

    from charts import ChartInputs, build_charts

    inputs = ChartInputs(
        config=config, outputs=deployed_outputs(config), job_files={JOB_SCRIPT_NAME: "print('stub')\n"}
    )
    limits = {
        chart.node.id: [
            volume["emptyDir"]["sizeLimit"]
            for obj in chart.to_json()
            for volume in _pod_volumes(obj)
            if (volume.get("emptyDir") or {}).get("medium") == "Memory"
        ]
        for chart in build_charts(cdk8s.App(), inputs)
    }
    assert f"{min(64, allocatable // 2)}Gi" in limits["03-rayjobs"]
    assert f"{min(32, allocatable // 2)}Gi" in limits["05-rayservice"]


def _pod_volumes(obj) -> list[dict]:
    found: list[dict] = []
    if isinstance(obj, dict):
        if isinstance(obj.get("volumes"), list):
            found += [v for v in obj["volumes"] if isinstance(v, dict)]
        for value in obj.values():
            found += _pod_volumes(value)
    elif isinstance(obj, list):
        for value in obj:
            found += _pod_volumes(value)
    return found


def test_the_default_shared_memory_of_the_reference_node_is_unchanged():
    config = validate_config({})
    assert config.derived.worker_layout.shm_gib == 64


def test_max_replicas_beyond_the_gpus_says_what_to_set():
    message = only_problem({"hyperpod": {"worker_group": {"instance_type": "ml.g7e.2xlarge"}}})
    assert message.endswith(
        "max_replicas = 2: 1 worker pod(s) x 1 GPUs hold 1 replica(s) of 1 GPU(s): set serving.max_replicas to at "
        "most 1 or serving.worker_replicas to 2 (the GPU group has 3 nodes)"
    )
