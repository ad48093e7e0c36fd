"""`skyrl-hp kubeconfig`: write kubectl's context for the cluster and make it current
(skyrl_hyperpod/ops/kubeconfig.py)."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.ops import kubeconfig as kubeconfig_module
from skyrl_hyperpod.ops.kube import describe_eks_cluster
from skyrl_hyperpod.plumbing.runtime import fail

from .common import (
    EXIT_BAD_INPUT,
    aws_errors,
    clients_from_context,
    cluster_region,
    config_option,
    echo,
    json_option,
    load_project_config,
    print_json,
    profile_option,
    region_option,
)


@click.command()
@config_option
@region_option
@profile_option
@click.option(
    "--kubeconfig",
    "kubeconfig_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write (default: the first file of $KUBECONFIG, else ~/.kube/config).",
)
@json_option
@click.pass_context
def kubeconfig(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    kubeconfig_file: Path | None,
    as_json: bool,
) -> None:
    """Write kubectl's context for the cluster and make it current, as `hyp set-cluster-context` does.

    The HyperPod cluster's EKS orchestrator comes from sagemaker:DescribeCluster, its endpoint and CA from
    eks:DescribeCluster; the context's namespace is workloads.namespace. Other entries of the file are kept.
    """
    config = load_project_config(config_path, region=region)
    chosen = cluster_region(ctx, region, config, profile)
    clients = clients_from_context(ctx, profile, chosen)
    with aws_errors(f"kubeconfig error: HyperPod cluster {config.names.hyperpod_cluster} in {chosen}"):
        target = kubeconfig_module.eks_of_hyperpod(clients("sagemaker", chosen), config.names.hyperpod_cluster)
        endpoint = describe_eks_cluster(clients("eks", chosen), target.eks_cluster_name)
    path = kubeconfig_module.kubeconfig_path(kubeconfig_file)
    try:
        existing = kubeconfig_module.read_kubeconfig(path)
    except (ValueError, OSError) as error:
        fail([f"kubeconfig error: {error}"], EXIT_BAD_INPUT)
    namespace = config.workloads.namespace
    data = kubeconfig_module.merged_kubeconfig(existing, endpoint, chosen, namespace, profile)
    kubeconfig_module.write_kubeconfig(path, data)
    if as_json:
        print_json({"file": str(path), "context": endpoint.arn, "namespace": namespace, "server": endpoint.endpoint})
        return
    echo(f"wrote context {endpoint.arn} (namespace {namespace}) to {path} and made it current")
    if not endpoint.public_access:
        echo(
            "note: the API endpoint is private: kubectl works from inside the VPC (Studio, a VPN), "
            "or list your CIDR in eks.public_access_cidrs",
            err=True,
        )
