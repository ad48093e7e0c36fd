"""The Job that publishes one trained LoRA adapter (charts/publish_adapter.py writes one per experiment into
dist/; `skyrl-hp adapter publish` creates one for any exported step): a plain manifest, no cdk8s, so the CLI
builds it without starting jsii.

It copies /shared/<runs>/<run_id>/global_step_<N>/policy to s3://<bucket>/<prefix>/<adapter>/ with the
TRAINING service account: its Pod Identity role may write the adapters prefix, while the serving identity
is read-only by design. The folder name is the adapter's name in requests. The run's query example (its first
VisGym observation and generation settings, which train_job.py writes) goes into the same folder, where
`skyrl-hp serve query` reads it; vLLM loads only the adapter's own files from there.
"""

from __future__ import annotations

import posixpath
import shlex
from typing import Any

from ..config import ProjectConfig
from ..config.serving import Publication
from ..config.training_runs import QUERY_EXAMPLE_FILE
from .stack_outputs import StackOutputs


def lora_loading_path(config: ProjectConfig, outputs: StackOutputs) -> str:
    """Ray Serve LLM's dynamic_lora_loading_path: one S3 folder per adapter below it."""
    return (
        config.serving.lora_path_override or f"s3://{outputs.artifacts_bucket_name}/{config.workloads.adapters_prefix}"
    )


# Generous for a copy of a few hundred MB; the Job is deleted a day after it finishes (its log with it).
ACTIVE_DEADLINE_SECONDS = 3600
TTL_SECONDS_AFTER_FINISHED = 86400
BACKOFF_LIMIT = 2


def publish_source_and_target(config: ProjectConfig, outputs: StackOutputs, pub: Publication) -> tuple[str, str]:
    source = posixpath.join(pub.run.export_path, f"global_step_{pub.step}", "policy")
    target = f"{lora_loading_path(config, outputs)}/{pub.adapter_name}/"
    return source, target


def publish_script(source: str, target: str, query_example: str) -> str:
    src, dst, example = shlex.quote(source), shlex.quote(target), shlex.quote(query_example)
    example_target = shlex.quote(f"{target}{QUERY_EXAMPLE_FILE}")
    return (
        f'test -f {src}/adapter_config.json || {{ echo "no adapter in {source}: is that step exported '
        f'(trainer.hf_save_interval) and LoRA on?" >&2; exit 1; }}\n'
        f"aws s3 sync {src} {dst} --only-show-errors\n"
        f"if test -f {example}; then aws s3 cp {example} {example_target} --only-show-errors; "
        f'else echo "note: no query example at {query_example}: serve query needs --image and --prompt" >&2; fi\n'
        f"aws s3 ls {dst}\n"
    )


def publish_job(
    config: ProjectConfig, outputs: StackOutputs, pub: Publication, labels: dict[str, str]
) -> dict[str, Any]:
    """The batch/v1 Job that publishes `pub`."""
    publish, training, workloads = config.serving.publish, config.training, config.workloads
    source, target = publish_source_and_target(config, outputs, pub)
    user, group = training.cluster.run_as_user, training.cluster.run_as_group
    identity = {"runAsUser": user, "runAsGroup": group, "runAsNonRoot": True}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": pub.job_name,
            "namespace": workloads.namespace,
            "labels": {**labels, "skyrl-hp/experiment": pub.run.experiment.name, "skyrl-hp/adapter": pub.adapter_name},
        },
        "spec": {
            "activeDeadlineSeconds": ACTIVE_DEADLINE_SECONDS,
            "backoffLimit": BACKOFF_LIMIT,
            "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
            "template": {
                "metadata": {"labels": {"skyrl-hp/adapter": pub.adapter_name}},
                "spec": {
                    "serviceAccountName": workloads.training_service_account,
                    # The Pod Identity agent injects its own token; the Kubernetes API token is not needed.
                    "automountServiceAccountToken": False,
                    "restartPolicy": "Never",
                    "securityContext": {**identity, "fsGroupChangePolicy": "OnRootMismatch"},
                    "containers": [
                        {
                            "name": "publish",
                            "image": publish.image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/bin/sh", "-ec", publish_script(source, target, pub.run.query_example_path)],
                            "env": [
                                {"name": "HOME", "value": "/tmp"},
                                {"name": "AWS_REGION", "value": outputs.region},
                            ],
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "1Gi"},
                                "limits": {"cpu": "1", "memory": "1Gi"},
                            },
                            "securityContext": {
                                **identity,
                                "allowPrivilegeEscalation": False,
                                "privileged": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {"name": "shared", "mountPath": workloads.shared_mount_path, "readOnly": True},
                                {"name": "scratch", "mountPath": "/tmp"},
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "shared",
                            "persistentVolumeClaim": {"claimName": workloads.shared_pvc_name, "readOnly": True},
                        },
                        {"name": "scratch", "emptyDir": {}},
                    ],
                },
            },
        },
    }
