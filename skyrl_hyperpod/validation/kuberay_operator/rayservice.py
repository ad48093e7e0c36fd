"""The operator's checks of a RayService: ValidateRayServiceMetadata, ValidateRayServiceSpec and what they call.

ray-operator/controllers/ray/utils/validation.go at v1.7.0. CHECKS is the kind's table: the metadata
(with validateInitializingTimeout on its annotation), the cluster the service creates (raycluster.py's
RayClusterSpec checks on spec.rayClusterConfig), then the service's upgrade strategy
(ValidateClusterUpgradeOptions behind the RayServiceIncrementalUpgrade gate).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from ...plumbing.json_types import JsonObject, JsonPath
from .kind_checks import Finding, KindCheck, annotations_of, autoscaling, mapping, spec_of, validate_metadata
from .raycluster import ClusterSpec, cluster_spec_findings, upgrade_strategy_findings

SOURCE = "ValidateRayServiceSpec"
INITIALIZING_TIMEOUT_ANNOTATION = "ray.io/initializing-timeout"
UPGRADE_TYPES = ("NewClusterWithIncrementalUpgrade", "NewCluster", "None")

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def go_duration_seconds(value: str) -> float | None:
    """Go's time.ParseDuration ("1h30m", "-5s", "0"), in seconds; None when Go would refuse it."""
    sign, text = (-1, value[1:]) if value[:1] == "-" else (1, value[1:] if value[:1] == "+" else value)
    if text == "0":
        return 0.0
    parts = _DURATION_PART.findall(text)
    if not text or "".join(number + unit for number, unit in parts) != text:
        return None
    return sign * sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def validate_initializing_timeout(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    """Part of ValidateRayServiceMetadata: a Go duration or whole seconds, positive."""
    timeout = annotations_of(doc).get(INITIALIZING_TIMEOUT_ANNOTATION)
    if not timeout:
        return
    value = str(timeout)
    at: JsonPath = ["metadata", "annotations", INITIALIZING_TIMEOUT_ANNOTATION]
    source = "validateInitializingTimeout"
    seconds = go_duration_seconds(value)
    if seconds is None and re.fullmatch(r"[-+]?\d+", value):
        seconds = int(value)
    if seconds is None:
        yield at, f"{value!r} is neither a Go duration (5m, 1h) nor whole seconds", source
    elif seconds <= 0:
        yield at, f"{value!r} must be a positive duration", source


def validate_ray_service_spec_ray_cluster_config(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    """ValidateRayServiceSpec on spec.rayClusterConfig: ValidateRayClusterSpec with the service's annotations,
    the rules the operator applies to the RayCluster it creates, and no head service name of its own."""
    cluster = mapping(spec_of(doc).get("rayClusterConfig"))
    at: JsonPath = ["spec", "rayClusterConfig"]
    if mapping(cluster.get("authOptions")).get("enableK8sTokenAuth") is True:
        yield (
            [*at, "authOptions", "enableK8sTokenAuth"],
            "Kubernetes token auth is not supported for RayService",
            SOURCE,
        )
    yield from cluster_spec_findings(ClusterSpec(cluster, annotations_of(doc), at, gates))
    yield from upgrade_strategy_findings(cluster, at, "RayService")
    head_service = mapping(mapping(cluster.get("headGroupSpec")).get("headService"))
    if mapping(head_service.get("metadata")).get("name"):
        yield [*at, "headGroupSpec", "headService", "metadata", "name"], "must not be set for a RayService", SOURCE


def validate_ray_service_spec_upgrade_strategy(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    spec = spec_of(doc)
    strategy = mapping(spec.get("upgradeStrategy"))
    kind = strategy.get("type")
    if kind is not None and kind not in UPGRADE_TYPES:
        yield ["spec", "upgradeStrategy", "type"], f"{kind!r} is not one of {', '.join(UPGRADE_TYPES)}", SOURCE
    # rayClusterDeletionDelaySeconds >= 0: the CRD's minimum already says so.
    if gates["RayServiceIncrementalUpgrade"] and kind == "NewClusterWithIncrementalUpgrade":
        yield from validate_cluster_upgrade_options(mapping(spec.get("rayClusterConfig")), strategy)


def validate_cluster_upgrade_options(cluster: JsonObject, strategy: JsonObject) -> Iterator[Finding]:
    source = "ValidateClusterUpgradeOptions"
    at: JsonPath = ["spec", "upgradeStrategy"]
    if not autoscaling(cluster):
        yield (
            ["spec", "rayClusterConfig", "enableInTreeAutoscaling"],
            "NewClusterWithIncrementalUpgrade needs the Ray autoscaler (enableInTreeAutoscaling: true)",
            source,
        )
        return
    if strategy.get("clusterUpgradeOptions") is None:
        yield [*at, "clusterUpgradeOptions"], "required for NewClusterWithIncrementalUpgrade", source
        return
    options, at = mapping(strategy.get("clusterUpgradeOptions")), [*at, "clusterUpgradeOptions"]
    surge, step, interval = (
        options.get("maxSurgePercent", 100),
        options.get("stepSizePercent"),
        options.get("intervalSeconds"),
    )
    # The operator stops at the first failing option, and so does this chain.
    if not 0 <= surge <= 100:
        yield [*at, "maxSurgePercent"], "must be between 0 and 100", source
    elif step is None or not 0 <= step <= 100:
        yield [*at, "stepSizePercent"], "must be between 0 and 100", source
    elif step > surge:
        yield [*at, "stepSizePercent"], f"{step} must not exceed maxSurgePercent {surge}", source
    elif interval is None or interval <= 0:
        yield [*at, "intervalSeconds"], "must be greater than 0", source
    elif not options.get("gatewayClassName"):
        yield [*at, "gatewayClassName"], "required for NewClusterWithIncrementalUpgrade", source


CHECKS: tuple[KindCheck, ...] = (
    validate_metadata,
    validate_initializing_timeout,
    validate_ray_service_spec_ray_cluster_config,
    validate_ray_service_spec_upgrade_strategy,
)
