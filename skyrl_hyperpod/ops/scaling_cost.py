"""`cost`: the GPU group's two scaling modes side by side (hyperpod.worker_group.scaling, docs/autoscaling.md): fixed
nodes that bill from deploy to teardown against HyperPod's managed Karpenter starting them for the jobs, priced from the
same estimate as the rest of `skyrl-hp cost` (cost.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from skyrl_hyperpod.config import ProjectConfig

from .cost import Estimate, PriceBook
from .failure_cost import checkpoint_load_seconds


def money(value: float) -> str:
    return f"${value:,.2f}"


@dataclass(frozen=True)
class ScaleUpAssumptions:
    """What one scale-up of the GPU group adds before a job's first step (scaling on_demand), from stated assumptions,
    not measurements: no public figure for a HyperPod node's provisioning time without deep health checks was found,
    the image size is the order of the training image (CUDA, torch, vLLM); the model load is the checkpoint
    (training.data.checkpoint_gb) read by every node from FSx at its baseline throughput (failure_cost.py)."""

    node_provisioning_minutes: float = 10.0
    image_gb: float = 15.0
    image_pull_mb_per_s: float = 100.0

    def image_pull_minutes(self) -> float:
        return self.image_gb * 1000 / self.image_pull_mb_per_s / 60


SCALE_UP = ScaleUpAssumptions()


@dataclass(frozen=True)
class ModeCost:
    idle_day_usd: float
    run_usd: float
    sweep_usd: float


@dataclass(frozen=True)
class ScalingComparison:
    """The GPU group fixed (billing from deploy to teardown) against on_demand (billing while a job holds its nodes,
    plus each scale-up's start and the empty time before a node goes)."""

    configured: str
    group: str
    nodes: int
    runs: int
    run_hours: float
    node_provisioning_minutes: float
    image_pull_minutes: float
    model_load_minutes: float
    scale_down_minutes: float
    # A self-contained job's cluster, and so its GPU nodes, stays this long after the job succeeded
    # (training.jobs.job_ttl_seconds_after_finished); the next job of a sweep starts once it is gone.
    cluster_ttl_minutes: float
    fixed: ModeCost
    on_demand: ModeCost

    @property
    def scale_up_minutes(self) -> float:
        return self.node_provisioning_minutes + self.image_pull_minutes + self.model_load_minutes

    def to_json(self) -> dict[str, Any]:
        def mode(cost: ModeCost) -> dict[str, float]:
            return {k: round(v, 2) for k, v in asdict(cost).items()}

        return {
            "configured": self.configured,
            "group": self.group,
            "nodes": self.nodes,
            "sweep_runs": self.runs,
            "scale_up_minutes": {
                "node_provisioning": self.node_provisioning_minutes,
                "image_pull": round(self.image_pull_minutes, 2),
                "model_load": round(self.model_load_minutes, 2),
                "total": round(self.scale_up_minutes, 2),
            },
            "scale_down_minutes": self.scale_down_minutes,
            "cluster_ttl_minutes": self.cluster_ttl_minutes,
            "fixed": mode(self.fixed),
            "on_demand": mode(self.on_demand),
        }


def scaling_comparison(config: ProjectConfig, book: PriceBook, est: Estimate) -> ScalingComparison:
    """Both scaling modes of the GPU group at this configuration's prices; the group's nodes and their EBS volumes are
    what on_demand stops billing while no job holds them. A run holds them for its hours and then while its
    finished cluster stays (job_ttl_seconds_after_finished). A sweep is every configured experiment back to back:
    its RayJobs queue for the group's nodes, each starting once the previous one's cluster is gone, so on_demand pays
    one scale-up and one scale-down per sweep, and fixed nodes bill the gaps too."""
    group = config.hyperpod.worker_group
    platform_hourly, run_hours = est.hourly_usd, est.run_hours
    # `estimate` priced this group already: its instance price is in the book.
    node_hourly = book.hyperpod_instance_hour[group.instance_type].usd
    ebs_hourly = group.ebs_volume_gb * book.hyperpod_ebs_gb_month.usd / book.hours_per_month
    gpu_nodes_hourly = group.instance_count * (node_hourly + ebs_hourly)
    rest_hourly = platform_hourly - gpu_nodes_hourly
    model_load_minutes = checkpoint_load_seconds(config) / 60
    scale_up = SCALE_UP.node_provisioning_minutes + SCALE_UP.image_pull_minutes() + model_load_minutes
    overhead_hours = (scale_up + group.scale_down_after_minutes) / 60
    ttl_hours = est.sweep_gap_hours
    runs = len(config.derived.runs)
    sweep_hours = est.sweep_hours
    fixed = ModeCost(
        idle_day_usd=platform_hourly * 24,
        run_usd=platform_hourly * run_hours,
        sweep_usd=platform_hourly * sweep_hours,
    )
    on_demand = ModeCost(
        idle_day_usd=rest_hourly * 24,
        run_usd=platform_hourly * run_hours + gpu_nodes_hourly * (ttl_hours + overhead_hours),
        sweep_usd=rest_hourly * sweep_hours + gpu_nodes_hourly * (runs * (run_hours + ttl_hours) + overhead_hours),
    )
    return ScalingComparison(
        configured=group.scaling,
        group=group.name,
        nodes=group.instance_count,
        runs=runs,
        run_hours=run_hours,
        node_provisioning_minutes=SCALE_UP.node_provisioning_minutes,
        image_pull_minutes=SCALE_UP.image_pull_minutes(),
        model_load_minutes=model_load_minutes,
        scale_down_minutes=group.scale_down_after_minutes,
        cluster_ttl_minutes=ttl_hours * 60,
        fixed=fixed,
        on_demand=on_demand,
    )


def render_scaling(cmp: ScalingComparison) -> list[str]:
    rows = [
        ("Idle day (no job)", cmp.fixed.idle_day_usd, cmp.on_demand.idle_day_usd),
        (f"One training run of {cmp.run_hours:g} h", cmp.fixed.run_usd, cmp.on_demand.run_usd),
        (f"A sweep of the {cmp.runs} configured experiment(s)", cmp.fixed.sweep_usd, cmp.on_demand.sweep_usd),
    ]
    width = max(len(r[0]) for r in rows)
    return [
        "",
        f"GPU group {cmp.group} ({cmp.nodes} nodes), hyperpod.worker_group.scaling (configured: {cmp.configured}):",
        f"{'':{width}}  {'fixed':>12}  {'on_demand':>12}",
        *[f"{label:{width}}  {money(a):>12}  {money(b):>12}" for label, a, b in rows],
        f"on_demand starts the nodes for each scale-up about {cmp.scale_up_minutes:.0f} min before the first step "
        f"(assumed: node provisioning without deep health checks {cmp.node_provisioning_minutes:g} min, image pull "
        f"{cmp.image_pull_minutes:.1f} min, model load from FSx {cmp.model_load_minutes:.1f} min) and bills each node "
        f"while a finished job's cluster stays ({cmp.cluster_ttl_minutes:g} min, job_ttl_seconds_after_finished) and "
        f"{cmp.scale_down_minutes:g} min after it empties (scale_down_after_minutes); fixed nodes passed their deep "
        "health checks once, at deploy.",
    ]
