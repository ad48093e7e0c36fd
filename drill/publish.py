"""The publish Job on the drill machine: its own container command against an S3 server on 127.0.0.1.

The Job (dist/04-publish-adapter.k8s.yaml, built by skyrl_hyperpod/values/publish_job.py) runs `/bin/sh -ec <script>`:
the adapter check, `aws s3 sync` of <export_path>/global_step_<N>/policy to the adapters prefix, `aws s3 ls`. The
drill runs that command word for word, its paths mapped like the other pods' (layout.PathMap: /shared is the
PVC's drill directory), for the step SkyRL last exported in the drill's run. When that step is not the one the
manifest names (the drill trains a few steps, the manifest publishes the configured run's last), the script is
rebuilt by `publish_script`, the function that wrote the manifest's, as `skyrl-hp adapter publish --step N` does;
the manifest's own script must first come out of that function unchanged.

Stand-ins, named in the output: moto's S3 server (PyPI `moto[server]`) for the artifacts bucket, created here as
the storage stack creates it; fixed dummy credentials for the training service account's Pod Identity; the AWS CLI
v1 from PyPI for the image's v2 (docs/drill.md, "Publish and serve on CPU", says what differs).
"""

from __future__ import annotations

import posixpath
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyrl_hyperpod.config.training_runs import QUERY_EXAMPLE_FILE
from skyrl_hyperpod.values.publish_job import publish_script

from .layout import PathMap, pod_mounts
from .manifests import Manifests

LOOPBACK = "127.0.0.1"
# Where moto listens; any free port works, this one is KubeRay's and Ray's unused neighbour range.
S3_PORT = 9300
S3_START_TIMEOUT_SECONDS = 60
PUBLISH_TIMEOUT_SECONDS = 300
# Not secrets: moto accepts any key; they stand in for the Pod Identity agent's credentials.
STANDIN_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "drill-standin", "AWS_SECRET_ACCESS_KEY": "drill-standin"}
_STEP_DIR = re.compile(r"^global_step_(\d+)$")
# The script publish_script writes: `test -f <source>/adapter_config.json || ...`, `aws s3 sync <source> <target> ...`.
_SYNC_LINE = re.compile(r"^aws s3 sync (\S+) (\S+) ", re.MULTILINE)


@dataclass
class S3Server:
    """moto's S3 server on 127.0.0.1, for as long as the drill needs the bucket (publish, then serve)."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def client_env(self, region: str) -> dict[str, str]:
        """What an AWS client needs to reach it: the endpoint (AWS_ENDPOINT_URL, read by botocore for every
        service), the region, the stand-in credentials."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": region, **STANDIN_CREDENTIALS}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_s3(serve_bin: Path, run_dir: Path, port: int = S3_PORT) -> S3Server:
    """`moto_server` from the serving environment, listening on 127.0.0.1 only."""
    log = run_dir / "moto-s3.log"
    out = log.open("w", encoding="utf-8")
    process = subprocess.Popen(
        [str(serve_bin / "moto_server"), "-H", LOOPBACK, "-p", str(port)],
        stdout=out,
        stderr=subprocess.STDOUT,
        env={"PATH": f"{serve_bin}:/usr/bin:/bin", "HOME": str(run_dir), "LANG": "C.UTF-8"},
    )
    out.close()
    server = S3Server(process, port, log)
    deadline = time.monotonic() + S3_START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto's S3 server exited ({process.returncode}; see {log})")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1):
                return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"moto's S3 server did not listen on {LOOPBACK}:{port} within {S3_START_TIMEOUT_SECONDS} s")


def last_exported_step(export_dir: Path) -> int:
    """The highest global_step_<N> under the run's export path that holds an exported model (policy/)."""
    steps = [
        int(match.group(1))
        for child in export_dir.iterdir()
        if (match := _STEP_DIR.match(child.name)) and (child / "policy").is_dir()
    ] if export_dir.is_dir() else []  # fmt: skip
    if not steps:
        raise ValueError(f"{export_dir}: no global_step_<N>/policy; SkyRL exported nothing (trainer.hf_save_interval)")
    return max(steps)


@dataclass(frozen=True)
class PublishPlan:
    job: dict[str, Any]
    experiment: str
    step: int
    manifest_step: int
    # Container paths, as in the Job.
    source: str
    target: str
    command: list[str]
    paths: PathMap

    @property
    def bucket(self) -> str:
        return self.target.removeprefix("s3://").split("/", 1)[0]

    @property
    def rebuilt(self) -> bool:
        return self.step != self.manifest_step


def plan_publish(manifests: Manifests, export_dir: Path, run_dir: Path) -> PublishPlan:
    """The publish Job whose source lies under `export_dir` (a drill directory), and its command for the last step
    SkyRL exported there, paths mapped."""
    export_dir = export_dir.resolve()
    step = last_exported_step(export_dir)
    found = []
    for job in manifests.of_kind("Job"):
        container = job["spec"]["template"]["spec"]["containers"][0]
        command = container.get("command") or []
        match = _SYNC_LINE.search(command[-1]) if len(command) == 3 else None
        if match is None:
            continue
        paths = PathMap(pod_mounts(job["spec"]["template"], run_dir, manifests))
        source, target = match.group(1), match.group(2)
        run_export = posixpath.dirname(posixpath.dirname(source))
        try:
            mapped = paths.path(run_export).resolve()
        except ValueError:
            continue
        if mapped == export_dir:
            found.append((job, command, source, target, run_export, paths))
    if len(found) != 1:
        raise ValueError(
            f"{len(found)} publish Jobs in the manifests copy from {export_dir} (expected one; is it a run's "
            "trainer.export_path, mapped like the pods' /shared?)"
        )
    job, command, source, target, run_export, paths = found[0]
    query_example = posixpath.join(run_export, QUERY_EXAMPLE_FILE)
    if publish_script(source, target, query_example) != command[-1]:
        raise ValueError(
            f"Job {job['metadata']['name']}: its script is not publish_script's; the drill cannot rebuild it"
        )
    manifest_step = int(_STEP_DIR.match(posixpath.basename(posixpath.dirname(source))).group(1))  # type: ignore[union-attr]
    step_source = posixpath.join(run_export, f"global_step_{step}", "policy")
    script = publish_script(step_source, target, query_example)
    return PublishPlan(
        job=job,
        experiment=job["metadata"]["labels"]["skyrl-hp/experiment"],
        step=step,
        manifest_step=manifest_step,
        source=step_source,
        target=target,
        command=[*command[:-1], paths.text(script)],
        paths=paths,
    )


@dataclass(frozen=True)
class Published:
    plan: PublishPlan
    listing: str
    files: tuple[str, ...]
    seconds: float
    aws_version: str

    @property
    def line(self) -> str:
        plan = self.plan
        how = (
            f"the Job's command rebuilt by publish_script for step {plan.step} (the manifest publishes step "
            f"{plan.manifest_step}, the configured run's last)"
            if plan.rebuilt
            else "the Job's command as synthesized"
        )
        return (
            f"published {plan.experiment} to {plan.target} ({how}: global_step_{plan.step}/policy, "
            f"{', '.join(self.files)}; {self.aws_version}; stand-ins: moto's S3 server on {LOOPBACK}, dummy credentials "
            f"for Pod Identity; {self.seconds:.1f} s)"
        )


def create_bucket(serve_bin: Path, s3: S3Server, bucket: str, region: str, log: Path) -> None:
    """The artifacts bucket, as the storage stack creates it (in the deployment's region)."""
    env = {"PATH": f"{serve_bin}:/usr/bin:/bin", "HOME": str(log.parent), **s3.client_env(region)}
    command = [str(serve_bin / "aws"), "s3api", "create-bucket", "--bucket", bucket,
               "--create-bucket-configuration", f"LocationConstraint={region}"]  # fmt: skip
    with log.open("a", encoding="utf-8") as out:
        result = subprocess.run(command, env=env, stdout=out, stderr=out, check=False, timeout=PUBLISH_TIMEOUT_SECONDS)
    if result.returncode != 0:
        raise RuntimeError(
            f"creating the stand-in bucket {bucket} on moto failed (exit {result.returncode}; see {log})"
        )


def run_publish(plan: PublishPlan, serve_bin: Path, s3: S3Server, run_dir: Path) -> Published:
    """The Job's container command with the Job's env (paths mapped), the stand-in credentials and the endpoint;
    `aws` is the serving environment's."""
    container = plan.job["spec"]["template"]["spec"]["containers"][0]
    job_env = {
        item["name"]: plan.paths.text(str(item["value"])) for item in container.get("env", []) if "value" in item
    }
    region = job_env.get("AWS_REGION") or "us-west-2"
    log = run_dir / f"publish-{plan.experiment}.log"
    create_bucket(serve_bin, s3, plan.bucket, region, log)
    env = {"PATH": f"{serve_bin}:/usr/bin:/bin", "LANG": "C.UTF-8", **job_env, **s3.client_env(region)}
    Path(env.get("HOME", str(run_dir))).mkdir(parents=True, exist_ok=True)
    version = subprocess.run(
        [str(serve_bin / "aws"), "--version"], env=env, capture_output=True, text=True, check=False
    )
    aws_version = (version.stdout or version.stderr).split()[0] if (version.stdout or version.stderr) else "aws ?"
    started = time.monotonic()
    result = subprocess.run(
        plan.command, env=env, capture_output=True, text=True, check=False, timeout=PUBLISH_TIMEOUT_SECONDS
    )
    seconds = time.monotonic() - started
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {plan.command!r}\n{result.stdout}{result.stderr}(exit {result.returncode})\n")
    if result.returncode != 0:
        detail = " ".join((result.stderr or result.stdout).split())[:300]
        raise RuntimeError(f"Job {plan.job['metadata']['name']}'s command failed (exit {result.returncode}): {detail}")
    files = tuple(sorted(line.split()[-1] for line in result.stdout.splitlines() if line.strip()))
    for wanted in ("adapter_config.json", QUERY_EXAMPLE_FILE):
        if wanted not in files:
            raise RuntimeError(f"{plan.target}: `aws s3 ls` lists no {wanted} after the Job's copy: {files}")
    return Published(plan=plan, listing=result.stdout, files=files, seconds=seconds, aws_version=aws_version)


def upload_folder(serve_bin: Path, s3: S3Server, region: str, source: Path, target: str, log: Path) -> None:
    """`aws s3 sync` of a local folder to moto (the drill's own uploads, e.g. a mutated adapter)."""
    env = {"PATH": f"{serve_bin}:/usr/bin:/bin", "HOME": str(log.parent), **s3.client_env(region)}
    with log.open("a", encoding="utf-8") as out:
        result = subprocess.run([str(serve_bin / "aws"), "s3", "sync", str(source), target, "--only-show-errors"],
                                env=env, stdout=out, stderr=out, check=False, timeout=PUBLISH_TIMEOUT_SECONDS)  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"uploading {source} to {target} failed (exit {result.returncode}; see {log})")


def publish(manifests: Manifests, export_dir: Path, run_dir: Path, serve_bin: Path, s3: S3Server) -> Published:
    return run_publish(plan_publish(manifests, export_dir, run_dir), serve_bin, s3, run_dir)
