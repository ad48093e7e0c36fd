"""A Job that publishes one trained LoRA adapter to the S3 prefix the RayService reads.

It copies /shared/<runs>/<run_id>/global_step_<N>/policy to s3://<bucket>/<prefix>/<adapter>/
with the TRAINING service account: its Pod Identity role may write the adapters prefix, while
the serving identity is read-only by design. The folder name is the adapter's name in requests.
"""

from __future__ import annotations

import posixpath
import shlex

import cdk8s
import cdk8s_plus_33 as kplus
from constructs import Construct

from .inputs import ChartInputs


def publish_source_and_target(inputs: ChartInputs) -> tuple[str, str]:
    config = inputs.config
    publish = config.serving.publish
    run = config.derived.run(publish.experiment or config.training.experiments[0].name)
    source = posixpath.join(run.export_path, f"global_step_{publish.step}", "policy")
    target = f"{inputs.lora_loading_path}/{publish.adapter_name}/"
    return source, target


def publish_script(source: str, target: str) -> str:
    src, dst = shlex.quote(source), shlex.quote(target)
    return (
        f'test -f {src}/adapter_config.json || {{ echo "no adapter in {source}: is that step exported '
        f'(trainer.hf_save_interval) and LoRA on?" >&2; exit 1; }}\n'
        f"aws s3 sync {src} {dst} --only-show-errors\n"
        f"aws s3 ls {dst}\n"
    )


class PublishAdapterChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, *, inputs: ChartInputs) -> None:
        super().__init__(scope, construct_id, labels=inputs.labels, disable_resource_name_hashes=True)
        config = inputs.config
        publish, training, workloads = config.serving.publish, config.training, config.workloads
        source, target = publish_source_and_target(inputs)
        service_account = kplus.ServiceAccount.from_service_account_name(
            self, "TrainingServiceAccount", workloads.training_service_account
        )
        claim = kplus.PersistentVolumeClaim.from_claim_name(self, "SharedClaim", workloads.shared_pvc_name)
        shared = kplus.Volume.from_persistent_volume_claim(self, "Shared", claim, name="shared", read_only=True)
        scratch = kplus.Volume.from_empty_dir(self, "Scratch", "scratch")
        user = (training.cluster.run_as_user, training.cluster.run_as_group)
        self.job = kplus.Job(
            self,
            "Job",
            # Job specs are immutable: the step is in the name, so publishing another step is a new Job.
            metadata={"name": f"publish-{publish.adapter_name}-step-{publish.step}", "namespace": inputs.namespace},
            service_account=service_account,
            backoff_limit=2,
            active_deadline=cdk8s.Duration.hours(1),
            ttl_after_finished=cdk8s.Duration.days(1),
            security_context=kplus.PodSecurityContextProps(
                user=user[0],
                group=user[1],
                ensure_non_root=True,
                fs_group_change_policy=kplus.FsGroupChangePolicy.ON_ROOT_MISMATCH,
            ),
            # The Pod Identity agent injects its own token; the Kubernetes API token is not needed.
            automount_service_account_token=False,
            volumes=[shared, scratch],
            containers=[
                kplus.ContainerProps(
                    name="publish",
                    image=publish.image,
                    image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
                    command=["/bin/sh", "-ec", publish_script(source, target)],
                    env_variables={
                        "HOME": kplus.EnvValue.from_value("/tmp"),
                        "AWS_REGION": kplus.EnvValue.from_value(inputs.outputs.region),
                    },
                    resources=kplus.ContainerResources(
                        cpu=kplus.CpuResources(request=kplus.Cpu.millis(500), limit=kplus.Cpu.millis(1000)),
                        memory=kplus.MemoryResources(request=cdk8s.Size.gibibytes(1), limit=cdk8s.Size.gibibytes(1)),
                    ),
                    security_context=kplus.ContainerSecurityContextProps(
                        user=user[0], group=user[1], ensure_non_root=True, read_only_root_filesystem=True
                    ),
                    volume_mounts=[
                        kplus.VolumeMount(path=workloads.shared_mount_path, volume=shared, read_only=True),
                        kplus.VolumeMount(path="/tmp", volume=scratch),
                    ],
                )
            ],
        )
