"""What a synth is about to build, one line each: the configuration file, region, GPUs, price per hour and
each experiment's derived schedule. The CDK and cdk8s apps print it on stderr before they synthesize, so a
worker type change that moves the schedule (batch sizes, epochs) is seen, not discovered later."""

from __future__ import annotations

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.loader import ConfigSource
from skyrl_hyperpod.config.placeholders import placeholder_findings
from skyrl_hyperpod.config.training_runs import ResolvedRun

from . import cost as cost_module


def config_line(source: ConfigSource) -> str:
    return f"configuration: {source.describe()}"


def region_line(config: ProjectConfig) -> str:
    if config.env.region:
        return f"region: {config.env.region}"
    return "region: not set (env.region): the stacks take the region of the deploying credentials"


def gpu_line(config: ProjectConfig) -> str:
    worker = config.hyperpod.worker_group
    layout = config.derived.worker_layout
    return (
        f"GPUs: {worker.instance_count} x {worker.instance_type} = {worker.instance_count * worker.spec.gpus} "
        f"{worker.spec.gpu_model or 'GPU'}s; training uses {layout.replicas} worker pods x {layout.gpus_per_pod}"
    )


def scaling_line(config: ProjectConfig) -> str:
    """The GPU group's scaling mode and the trade it makes: on_demand gives up deep health checks for nodes that bill
    only while work holds them."""
    worker = config.hyperpod.worker_group
    if not worker.autoscaled:
        checks = ", ".join(worker.deep_health_checks) or "none"
        return (
            f"scaling: fixed: {worker.instance_count} GPU nodes bill from deploy to teardown; deep health checks: "
            f"{checks}"
        )
    return (
        f"scaling: on_demand: HyperPod's managed Karpenter starts 0 to {worker.instance_count} GPU nodes for pending "
        f"Ray pods and removes them {worker.scale_down_after_minutes} min after they empty; new nodes get no deep "
        "health checks (HyperPod's autoscaling does not take them)"
    )


def price_line(config: ProjectConfig) -> str:
    region = config.env.region or cost_module.DEFAULT_PRICE_REGION
    try:
        file, book = cost_module.price_book_for(region, None)
    except cost_module.PriceError:
        return f"price: no price file for {region} (skyrl-hp cost --prices FILE)"
    try:
        est = cost_module.estimate(
            config, book, price_file=cost_module.display_path(file), run_hours=cost_module.DEFAULT_RUN_HOURS
        )
    except cost_module.PriceError as error:
        # A price the file lacks (an instance type the catalog offers but nobody priced yet) is the same gap as
        # a region without a price file: the summary says so and the synth goes on.
        return f"price: not estimated: {error.problems[0].removeprefix('cost error: ')}"
    basis = "" if config.env.region else f" ({region} prices: env.region is not set)"
    return f"price: ${est.hourly_usd:,.2f} an hour, ${est.monthly_usd:,.0f} a month{basis} (skyrl-hp cost)"


def schedule_line(run: ResolvedRun) -> str:
    knobs = run.knobs
    return (
        f"experiment {run.experiment.name}: batch {knobs.train_batch_size} / mini {knobs.policy_mini_batch_size} / "
        f"micro {knobs.micro_train_batch_size_per_gpu} / {knobs.epochs} epochs / {run.total_steps} steps on "
        f"{knobs.policy_num_nodes} x {knobs.policy_num_gpus_per_node} GPUs; checkpoint every {knobs.ckpt_interval} "
        f"steps (at an estimated {run.step_seconds:g} s a step: training.jobs.estimated_step_seconds)"
    )


def placeholder_lines(config: ProjectConfig) -> list[str]:
    """The example's placeholders still in the configuration: synth goes on (it stays offline and needs no
    account), `skyrl-hp preflight` refuses to pass them."""
    return [f"warning: {finding}" for finding in placeholder_findings(config)]


def observability_lines(config: ProjectConfig) -> list[str]:
    """What turning observability off also turns off: the job alerts are Prometheus rules in its workspace."""
    if config.observability.enabled:
        return []
    return [
        "note: observability.enabled is false: no Prometheus workspace, so no alerts for a RayJob's retries, a "
        "failed job or one that stops making progress (HyperPod's node events still reach the alerts topic)"
    ]


def platform_summary(config: ProjectConfig, source: ConfigSource) -> list[str]:
    """The CDK app's lines."""
    return [
        config_line(source),
        region_line(config),
        gpu_line(config),
        scaling_line(config),
        price_line(config),
        *observability_lines(config),
        *placeholder_lines(config),
    ]


def workloads_summary(config: ProjectConfig, source: ConfigSource) -> list[str]:
    """The cdk8s app's lines: the schedules it writes into the RayJobs."""
    schedules = [schedule_line(run) for run in config.derived.runs]
    return [config_line(source), region_line(config), *schedules, *placeholder_lines(config)]
