"""`python -m drill`: run the synthesized manifests on real Ray and SkyRL, offline, on 127.0.0.1.

The drill runs inside its own network, PID and mount namespaces (`unshare --net --pid --mount-proc`, as root):
the only network is a loopback interface, so nothing it starts can reach or be reached from another address;
every process it starts ends with it, whatever happens. Its files go to one run directory, /tmp/hpd-*
(short: Ray's Unix socket paths live under it), kept when a check fails (its path is printed) and removed
otherwise; the cluster's TMPDIR is inside it, and SkyRL's fixed log directory /tmp/skyrl-logs is a bind mount of
one of its directories inside the namespace. PID 1 of the namespace is this module's small init, which reaps the
Ray daemons and exits with the drill's status.

One line per check (`drill: ...`); exit 1 if any fails, 2 when the drill cannot run. See docs/drill.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from skyrl_hyperpod.config import ConfigError, load_config
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.validation import fetch_visgym

from .manifests import Manifests
from .scenarios import SCENARIOS, Scenario
from .session import Drill
from .training_cluster import DrillEnv, Outcome, version_problems

IN_NAMESPACE = "HP_DRILL_NAMESPACE"
RUN_DIR_ENV = "HP_DRILL_RUN_DIR"
# trainer.log_path's default in SkyRL 0.4.0 (skyrl/train/config/config.py), which initialize_ray writes into.
SKYRL_LOG_DIR = Path("/tmp/skyrl-logs")


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(None)
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return 2
    env = DrillEnv(
        train_python=Path(args.env) / "bin" / "python",
        serve_python=Path(sys.executable),
        serve_llm_env=Path(args.serve_env).resolve() if args.serve_env else None,
        mlflow_env=Path(args.mlflow_env).resolve() if args.mlflow_env else None,
    )
    if not env.train_python.is_file():
        print(f"drill: no drill environment at {args.env} (make drill-env builds it)", file=sys.stderr)
        return 2
    if problems := version_problems(env, config):
        for problem in problems:
            print(f"drill: {problem}", file=sys.stderr)
        return 2
    try:
        copies = {copy.name: fetch_visgym.verified_copy(copy) for copy in fetch_visgym.COPIES}
    except InputError as error:
        for problem in error.problems:
            print(f"drill: {problem}", file=sys.stderr)
        return 2
    manifests = Manifests.load(Path(args.manifests))
    run_dir = Path(os.environ[RUN_DIR_ENV])
    logs = str(run_dir)
    used = ", ".join(f"{copy.repository} at {copy.commit}" for copy in fetch_visgym.COPIES)
    print(f"drill: upstream: VisGym's environments and SkyRL's VisGym example: {used} (every file checked against "
          "this project's sha256 lists; VisGym installed in the drill's environment from that copy)", flush=True)  # fmt: skip
    drill = Drill(
        config=config,
        manifests=manifests,
        env=env,
        run_dir=run_dir,
        example_dir=copies[fetch_visgym.SKYRL_VISGYM_EXAMPLE.name],
    )
    named = set(args.scenario or ())
    selected = [s for s in SCENARIOS.values() if s.name in named] if named else default_scenarios()
    outcomes: list[Outcome] = []
    try:
        # Each cluster is started only for the scenarios that need it, and stopped whatever they do.
        for cluster, start, stop in (
            ("training", drill.start_training, drill.stop_training),
            ("cpu-training", drill.start_cpu_training, drill.stop_training),
            ("serving", drill.start_serving, drill.stop_serving),
            # Its clusters (moto's S3 server, the RayService's on Ray Serve LLM) are started by the scenario itself.
            ("publish-and-serve", drill.describe_publish_and_serve, lambda: None),
        ):
            scenarios = [scenario for scenario in selected if scenario.cluster == cluster]
            if not scenarios:
                continue
            print(f"drill: {cluster} cluster: {start()}", flush=True)
            try:
                for scenario in scenarios:
                    for outcome in scenario.run(drill):
                        outcomes.append(outcome)
                        print(outcome.line, flush=True)
            finally:
                stop()
    except (RuntimeError, ValueError, OSError, ConfigError) as error:
        print(f"drill: {error} (logs: {logs})", file=sys.stderr)
        return 1
    failed = sum(not outcome.ok for outcome in outcomes)
    print(f"drill: {len(outcomes) - failed} passed, {failed} failed" + (f" (logs: {logs})" if failed else ""))
    return 1 if failed else 0


def default_scenarios() -> list[Scenario]:
    """What `make drill` runs: every registered scenario but those marked to run only when named."""
    return [scenario for scenario in SCENARIOS.values() if scenario.default]


def init(argv: list[str]) -> int:
    """PID 1 of the drill's namespaces: loopback up, SkyRL's log directory onto the run directory, the drill as a
    child, and every orphaned Ray daemon reaped until the drill exits (the kernel then ends whatever is left)."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    logs = Path(os.environ[RUN_DIR_ENV]) / "skyrl-logs"
    logs.mkdir()
    subprocess.run(["mount", "--bind", str(logs), str(SKYRL_LOG_DIR)], check=True)
    child = subprocess.Popen([sys.executable, "-m", "drill", *argv], env={**os.environ, IN_NAMESPACE: "1"})
    while True:
        pid, status = os.wait()
        if pid == child.pid:
            return os.waitstatus_to_exitcode(status)


def new_run_dir() -> Path:
    """A new /tmp/hpd-*: Ray's Unix socket paths (<temp dir>/session_<time>_<pid>/sockets/<name>) must stay under 108
    bytes."""
    return Path(tempfile.mkdtemp(prefix="hpd-", dir="/tmp"))


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m drill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True, help="the drill environment (make drill-env prints it)")
    parser.add_argument("--manifests", default="dist", help="synthesized manifests (default: dist)")
    named_only = ", ".join(sorted(name for name, scenario in SCENARIOS.items() if not scenario.default))
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        help=f"run only these, in registry order (repeatable; default: all but {named_only or 'none'})",
    )
    parser.add_argument("--keep", action="store_true", help="keep the run directory after a passing drill")
    parser.add_argument(
        "--serve-env",
        help="the serving environment, for publishing and serving the trained adapter (make drill-serve-env prints it)",
    )
    parser.add_argument(
        "--mlflow-env",
        help="the MLflow server's environment, for the first RayJob's tracked training (make drill-mlflow-env prints it)",
    )
    return parser


def sudo_command(argv: list[str]) -> list[str] | None:
    """The drill again as root through passwordless sudo (a CI runner's user, e.g. GitHub's), or None where sudo
    would ask for a password. PATH is passed on explicitly: sudo's secure_path would replace it."""
    sudo = shutil.which("sudo")
    if sudo is None or subprocess.run([sudo, "-n", "true"], capture_output=True, check=False).returncode != 0:
        return None
    return [sudo, "-n", "--preserve-env", "env", f"PATH={os.environ.get('PATH', '')}", sys.executable, "-m",
            "drill", *argv]  # fmt: skip


def main() -> int:
    args = parser().parse_args()
    if os.environ.get(IN_NAMESPACE) == "1":
        return run(args)
    if os.getpid() == 1:
        return init(sys.argv[1:])
    unshare = shutil.which("unshare")
    if unshare is not None and os.geteuid() != 0:
        elevated = sudo_command(sys.argv[1:])
        if elevated is not None:
            return subprocess.run(elevated, check=False).returncode
    if unshare is None or os.geteuid() != 0:
        print("drill: runs as root with `unshare` (util-linux), in namespaces of its own", file=sys.stderr)
        return 2
    # The mount point of SkyRL's log directory, created empty on the machine if missing and removed after.
    created = not SKYRL_LOG_DIR.exists()
    SKYRL_LOG_DIR.mkdir(exist_ok=True)
    try:
        return in_namespaces(unshare, sys.argv[1:], keep=args.keep)
    finally:
        if created:
            SKYRL_LOG_DIR.rmdir()


def in_namespaces(unshare: str, argv: list[str], *, keep: bool) -> int:
    """The drill with `argv` in network, PID and mount namespaces of its own, in a new run directory, removed when
    the drill passes (unless `keep`)."""
    run_dir = new_run_dir()
    command = [unshare, "--net", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-m",
               "drill", *argv]  # fmt: skip
    code = subprocess.run(command, env={**os.environ, RUN_DIR_ENV: str(run_dir)}, check=False).returncode
    if code == 0 and not keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
