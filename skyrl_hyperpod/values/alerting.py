"""Alert rules and the alert manager definition of the Amazon Managed Service for Prometheus workspace.

Built from the typed configuration (namespace, RayJob names, stall thresholds), rendered as a Prometheus
rule file (AWS::APS::RuleGroupsNamespace `Data`) and an AMP alert manager definition that sends every alert
to the HyperPod failure topic. `promtool check rules` / `promtool test rules` and `amtool check-config` run
on exactly these texts in tests/test_alerting.py.

Metric names come from the exporters' own sources:
- KubeRay v1.7.0 operator (ray-operator/controllers/ray/metrics/ray_job_metrics.go):
  `kuberay_job_deployment_status{name, namespace, uid, deployment_status}` (1 for the RayJob's current
  JobDeploymentStatus, every scrape), `kuberay_job_info{name, namespace, uid}` and
  `kuberay_job_execution_duration_seconds{name, namespace, uid, job_deployment_status, retry_count}`, set when a
  job leaves a non-terminal state for Complete, Failed or Retrying (rayjob_controller.go emitRayJobMetrics), so
  each retry adds a series with job_deployment_status="Retrying". The operator serves them at /metrics
  (helm-chart/kuberay-operator values.yaml `metrics.enabled: true`; its ServiceMonitor is off).
- NVIDIA dcgm-exporter (etc/default-counters.csv): `DCGM_FI_DEV_GPU_UTIL` (gauge, %) and
  `DCGM_FI_DEV_XID_ERRORS` (gauge, the value of the last XID error).
- kube-state-metrics: `kube_node_status_condition{node, condition, status}`,
  `kube_pod_container_status_restarts_total{namespace, pod, container}`,
  `kube_pod_info{namespace, pod, created_by_kind, created_by_name}`.

Which of them reach the workspace: the HyperPod observability add-on's own preconfigured alerts query
DCGM_FI_DEV_* metrics, and its metrics reference names kube-state-metrics as a source
(https://docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-alerts.html,
https://docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-cluster-metrics.html). No source found
says it scrapes the KubeRay operator's /metrics: the RayJob rules depend on that, and the *MetricsMissing
rules fire when an exporter's metrics are absent, so a blind rule is reported instead of staying silent.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..config import ProjectConfig
from ..config.names import RAY_HEAD_CONTAINER
from ..plumbing.json_types import JsonObject

RULE_GROUP = "skyrl-hp"
# How long a retry alert stays firing: the alert manager sends it once (its group_wait), so an hour is only
# the window in which a new retry series is compared with the same series an hour earlier.
RETRY_WINDOW = "1h"
NODE_NOT_READY_FOR = "5m"
XID_WINDOW = "10m"
HEAD_RESTART_WINDOW = "15m"
METRICS_MISSING_FOR = "30m"
RECEIVER = "hyperpod-failures-topic"


def _selector(*, match: dict[str, str] | None = None, **equal: str) -> str:
    """A PromQL label selector: `equal` labels by =, `match` labels by =~ (a regular expression)."""
    terms = [f'{key}="{value}"' for key, value in equal.items()]
    terms += [f'{key}=~"{value}"' for key, value in (match or {}).items()]
    return "{" + ", ".join(terms) + "}"


def _rule(
    name: str, expr: str, severity: str, summary: str, description: str, duration: str | None = None
) -> JsonObject:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if duration:
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def alert_rules(config: ProjectConfig) -> list[JsonObject]:
    jobs = config.training.jobs
    namespace = config.workloads.namespace
    # The RayJobs this configuration generates (names are DNS labels: no regex metacharacter but '-').
    job_names = "|".join(run.job_name for run in config.derived.runs)
    failed = _selector(namespace=namespace, match={"name": job_names, "deployment_status": "Failed|ValidationFailed"})
    running = _selector(namespace=namespace, deployment_status="Running", match={"name": job_names})
    retried = "kuberay_job_execution_duration_seconds" + _selector(
        namespace=namespace, job_deployment_status="Retrying", match={"name": job_names}
    )
    submitters = _selector(namespace=namespace, created_by_kind="Job", match={"created_by_name": job_names})
    by_job = "max by (namespace, name)"
    stall = jobs.stall_gpu_utilization_percent
    return [
        _rule(
            "RayJobFailed",
            f"max by (namespace, name, deployment_status) (kuberay_job_deployment_status{failed}) == 1",
            "critical",
            "RayJob {{ $labels.name }} failed",
            "RayJob {{ $labels.namespace }}/{{ $labels.name }} is {{ $labels.deployment_status }} with no retry left: "
            "kubectl describe rayjob -n {{ $labels.namespace }} {{ $labels.name }}; docs/failures.md",
        ),
        _rule(
            "RayJobRetried",
            f"max by (namespace, name, retry_count) ({retried}) unless max by (namespace, name, retry_count) "
            f"({retried} offset {RETRY_WINDOW})",
            "warning",
            "RayJob {{ $labels.name }} is being retried",
            "Attempt {{ $labels.retry_count }} of RayJob {{ $labels.namespace }}/{{ $labels.name }} failed; KubeRay "
            "recreates its cluster and SkyRL resumes from the newest complete checkpoint (skyrl-hp status).",
        ),
        _rule(
            "RayJobStalled",
            f"({by_job} (kuberay_job_deployment_status{running}) == 1) "
            f"and on() (avg(DCGM_FI_DEV_GPU_UTIL) < {stall:g})",
            "critical",
            "RayJob {{ $labels.name }} stopped making progress",
            f"RayJob {{{{ $labels.namespace }}}}/{{{{ $labels.name }}}} has been Running for {jobs.stall_alert_minutes} "
            f"minutes while the GPUs averaged under {stall:g} % utilisation (waiting for GPUs, hung, or a dead worker).",
            f"{jobs.stall_alert_minutes}m",
        ),
        _rule(
            "GpuXidError",
            f"(DCGM_FI_DEV_XID_ERRORS > 0) and ((changes(DCGM_FI_DEV_XID_ERRORS[{XID_WINDOW}]) > 0) "
            f"or (DCGM_FI_DEV_XID_ERRORS unless DCGM_FI_DEV_XID_ERRORS offset {XID_WINDOW}))",
            "critical",
            "GPU XID error {{ $value }}",
            "A GPU reported XID {{ $value }} (NVIDIA's XID catalog says what it means); HyperPod's health agent may "
            "reboot or replace the node: skyrl-hp nodes.",
        ),
        _rule(
            "NodeNotReady",
            'kube_node_status_condition{condition="Ready", status="true"} == 0',
            "critical",
            "Node {{ $labels.node }} is NotReady",
            f"Kubernetes node {{{{ $labels.node }}}} has not been Ready for {NODE_NOT_READY_FOR}: skyrl-hp nodes shows "
            "its HyperPod health; skyrl-hp nodes reboot|replace acts on it.",
            NODE_NOT_READY_FOR,
        ),
        _rule(
            "RayHeadRestarted",
            f"increase(kube_pod_container_status_restarts_total{_selector(namespace=namespace, container=RAY_HEAD_CONTAINER)}"
            f"[{HEAD_RESTART_WINDOW}]) > 0",
            "critical",
            "Ray head {{ $labels.pod }} restarted",
            "The Ray head container of {{ $labels.namespace }}/{{ $labels.pod }} restarted: without GCS fault "
            "tolerance its cluster's jobs and actors are gone (docs/failures.md).",
        ),
        _rule(
            "GpuMetricsMissing",
            "absent(DCGM_FI_DEV_GPU_UTIL)",
            "warning",
            "No GPU metrics in the workspace",
            "No DCGM_FI_DEV_GPU_UTIL series: the GPU alerts (stall, XID) cannot fire.",
            METRICS_MISSING_FOR,
        ),
        _rule(
            "ClusterStateMetricsMissing",
            "absent(kube_node_status_condition)",
            "warning",
            "No kube-state-metrics in the workspace",
            "No kube_node_status_condition series: the node and head-restart alerts cannot fire.",
            METRICS_MISSING_FOR,
        ),
        _rule(
            "KubeRayMetricsMissing",
            f"absent(kuberay_job_info) and on() max(kube_pod_info{submitters})",
            "warning",
            "No KubeRay operator metrics in the workspace",
            "A RayJob's submitter pod exists but no kuberay_job_info series does: the KubeRay operator's /metrics is "
            "not scraped, so the RayJob failed/retried/stalled alerts cannot fire.",
            METRICS_MISSING_FOR,
        ),
    ]


def rule_file(config: ProjectConfig) -> JsonObject:
    return {"groups": [{"name": RULE_GROUP, "rules": alert_rules(config)}]}


def rules_yaml(config: ProjectConfig) -> str:
    return yaml.safe_dump(rule_file(config), sort_keys=False, width=1000)


def alertmanager_config(topic_arn: str, region: str) -> JsonObject:
    """The alert manager's own configuration: every alert to one SNS topic (AMP's only receiver type; SigV4 with
    a region is required, https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-receiver-config.html)."""
    return {
        "route": {
            "receiver": RECEIVER,
            "group_by": ["alertname", "namespace", "name", "node"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
        },
        "receivers": [
            {
                "name": RECEIVER,
                "sns_configs": [
                    {
                        "topic_arn": topic_arn,
                        "sigv4": {"region": region},
                        # The default subject lists every label and can pass SNS's 100-character limit.
                        "subject": "[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }}",
                        "attributes": {"severity": "{{ .CommonLabels.severity }}"},
                    }
                ],
            }
        ],
    }


def alertmanager_definition(topic_arn: str, region: str) -> str:
    """AMP's alert manager definition document: the configuration as a block under `alertmanager_config`
    (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-config.html)."""
    inner = yaml.safe_dump(alertmanager_config(topic_arn, region), sort_keys=False, width=1000)
    return "alertmanager_config: |\n" + "".join(f"  {line}\n" for line in inner.splitlines())
