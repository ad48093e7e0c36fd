"""Compose every stack of the platform from the typed configuration.

Deploy order follows the references: network -> (storage, registry, eks) -> hyperpod ->
(observability, ray-endpoint). Stacks that do not reference each other deploy in parallel (`cdk deploy --all
--concurrency 4`).
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.names import PROJECT_TAG_KEY
from skyrl_hyperpod.values.stack_ownership import OWNERSHIP_OUTPUT_KEY, ownership_marker

from .eks_stack import EksStack
from .hyperpod_stack import HyperPodStack
from .image_build_stack import ImageBuildStack
from .network_stack import NetworkStack
from .observability_stack import ObservabilityStack
from .ray_endpoint_stack import RayEndpointStack
from .registry_stack import RegistryStack
from .storage_stack import StorageStack
from .studio_stack import StudioStack


@dataclass(frozen=True)
class PlatformStacks:
    network: NetworkStack
    storage: StorageStack
    registry: RegistryStack
    image_build: ImageBuildStack
    eks: EksStack
    hyperpod: HyperPodStack
    observability: ObservabilityStack | None
    studio: StudioStack | None
    ray_endpoint: RayEndpointStack | None


def build_platform(scope: Construct, config: ProjectConfig) -> PlatformStacks:
    env = cdk.Environment(account=config.env.account, region=config.env.region)
    names = config.names

    network = NetworkStack(scope, names.stack("network"), env=env, config=config)
    storage = StorageStack(
        scope,
        names.stack("storage"),
        env=env,
        config=config,
        hyperpod_subnet=network.hyperpod_subnet,
        hyperpod_security_group=network.hyperpod_security_group,
    )
    registry = RegistryStack(scope, names.stack("registry"), env=env, config=config)
    image_build = ImageBuildStack(
        scope, names.stack("image-build"), env=env, config=config, repository=registry.repository
    )
    eks = EksStack(
        scope,
        names.stack("eks"),
        env=env,
        config=config,
        vpc=network.vpc,
        hyperpod_security_group=network.hyperpod_security_group,
        artifacts_bucket=storage.artifacts_bucket,
        mlflow_app_arn=storage.mlflow_app_arn,
    )
    hyperpod = HyperPodStack(
        scope,
        names.stack("hyperpod"),
        env=env,
        config=config,
        eks_cluster=eks.cluster,
        vpc=network.vpc,
        hyperpod_subnet=network.hyperpod_subnet,
        hyperpod_security_group=network.hyperpod_security_group,
        lifecycle_bucket=storage.lifecycle_bucket,
    )
    # HyperPod's dependencies chart must be installed before the HyperPod cluster exists.
    hyperpod.add_stack_dependency(eks, "HyperPod dependencies Helm chart must precede the HyperPod cluster")

    observability = None
    if config.observability.enabled:
        observability = ObservabilityStack(
            scope,
            names.stack("observability"),
            env=env,
            config=config,
            eks_cluster=eks.cluster,
            failure_alerts=hyperpod.alerts,
        )
        # The add-on schedules collectors on HyperPod nodes: install it once they exist.
        observability.add_stack_dependency(hyperpod, "the observability add-on needs HyperPod nodes")

    ray_endpoint = None
    if config.ray_endpoint_operator.enabled:
        ray_endpoint = RayEndpointStack(
            scope,
            names.stack("ray-endpoint"),
            env=env,
            config=config,
            eks_cluster=eks.cluster,
            kubectl_layer=eks.eks.kubectl_layer,
            awscli_layer=eks.eks.awscli_layer,
        )
        # The Spaces add-on is Active only with nodes, and AWS installs the operator once it is.
        ray_endpoint.add_stack_dependency(
            hyperpod, "the Spaces add-on and the Ray endpoint operator need HyperPod nodes"
        )

    studio = None
    if config.studio.enabled:
        studio = StudioStack(
            scope,
            names.stack("studio"),
            env=env,
            config=config,
            vpc=network.vpc,
            hyperpod_subnet=network.hyperpod_subnet,
            eks_cluster_security_group=eks.cluster.cluster_security_group,
        )

    # cdk-nag v3 is a policy-validation plugin: any unacknowledged finding fails the synth.
    cdk.Validations.of(scope).add_plugins(AwsSolutionsChecks(scope, verbose=True))
    components: dict[str, cdk.Stack | None] = {
        "network": network,
        "storage": storage,
        "registry": registry,
        "image-build": image_build,
        "eks": eks,
        "hyperpod": hyperpod,
        "observability": observability,
        "studio": studio,
        "ray-endpoint": ray_endpoint,
    }
    for component, stack in components.items():
        if stack is None:
            continue
        # On the resources only: with @aws-cdk/core:explicitStackTags the stack itself carries no tag.
        cdk.Tags.of(stack).add(PROJECT_TAG_KEY, config.name_prefix)
        cdk.CfnOutput(
            stack,
            OWNERSHIP_OUTPUT_KEY,
            value=ownership_marker(config, component),
            description="The skyrl-hp deployment this stack belongs to: skyrl-hp teardown and preflight act only on "
            "stacks whose marker names their configuration",
        )
    return PlatformStacks(network, storage, registry, image_build, eks, hyperpod, observability, studio, ray_endpoint)
