"""Throw-away local Ray clusters with the dashboard (the Jobs API), for integration tests.

:func:`local_ray_head` starts a head alone; :func:`local_ray_cluster` a head and worker
nodes on 127.0.0.1, each a ``ray start --block`` leading its own session, with free
ports and the cluster's own temp dir. They are stopped by signalling those process groups only —
never with ``ray stop``, which would stop every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _jobs_api_ready(address: str) -> bool:
    from ray.job_submission import JobSubmissionClient

    try:
        JobSubmissionClient(address).list_jobs()
    except Exception:
        return False
    return True


def _alive_nodes(address: str) -> int:
    from ray.util.state import list_nodes

    try:
        return len(list_nodes(address=address, filters=[("state", "=", "ALIVE")],
                              raise_on_missing_output=False))
    except Exception:
        return 0


@dataclass(frozen=True)
class WorkerNode:
    """A worker node to start: its CPUs and custom resources (e.g. ``{"node_a": 1}``)."""

    num_cpus: int = 2
    resources: Mapping[str, float] = field(default_factory=dict)


def _own_ports() -> list[str]:
    # Every fixed default port too, so nodes (and heads of pytest -n 2) never share one.
    return [f"--{name}={free_port()}" for name in (
        "dashboard-agent-listen-port", "dashboard-agent-grpc-port", "metrics-export-port",
        "runtime-env-agent-port", "node-manager-port", "object-manager-port")]


class _Nodes:
    """The ``ray start --block`` processes of one cluster, each in its own session."""

    def __init__(self, root: str) -> None:
        self.root = root
        # One temp dir for every node, as every host of a real cluster has the same path
        # (/tmp/ray): a node's agent reads a job's log from the session folder the GCS
        # names, so per-node temp dirs would hide the logs of jobs run on workers.
        self.temp_dir = tempfile.mkdtemp(prefix="t", dir=root)  # short socket paths
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        ray_bin = Path(sys.executable).with_name("ray")
        # ``ray start`` waits 30 s by default for its raylet to register, which a loaded
        # machine exceeds (seen with the slow suite on two workers): wait up to 2 minutes.
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONWARNINGS": "ignore",
               "RAY_raylet_start_wait_time_s": "120"}
        log_path = Path(self.root) / f"{name}.log"
        self.logs.append(log_path)
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [str(ray_bin), "start", "--block", f"--temp-dir={self.temp_dir}",
                 "--disable-usage-stats", *args],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.procs.append(proc)
        return proc

    def tails(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in self.logs
                         if p.exists())

    def stop(self) -> None:
        for proc in reversed(self.procs):  # workers first, the head last
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            with contextlib.suppress(ProcessLookupError):  # stragglers in the same group
                os.killpg(proc.pid, signal.SIGKILL)


def _start(nodes: _Nodes, head_cpus: int, workers: Sequence[WorkerNode],
           startup_s: float) -> str:
    """Start the head, then the workers; the Jobs API address once every node is alive."""
    dashboard_port, gcs_port = free_port(), free_port()
    address = f"http://127.0.0.1:{dashboard_port}"
    head = nodes.start("head", [
        "--head", f"--num-cpus={head_cpus}", "--num-gpus=0", f"--port={gcs_port}",
        "--include-dashboard=true", "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dashboard_port}", f"--ray-client-server-port={free_port()}",
        *_own_ports()])
    deadline = time.monotonic() + startup_s
    while not _jobs_api_ready(address):
        if head.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("local Ray head did not start:\n" + nodes.tails())
        time.sleep(2)
    for i, worker in enumerate(workers):
        nodes.start(f"worker{i}", [
            f"--address=127.0.0.1:{gcs_port}", f"--num-cpus={worker.num_cpus}",
            "--num-gpus=0", f"--resources={json.dumps(dict(worker.resources))}",
            # Workers of two raylets on one host must not draw from one port range.
            "--min-worker-port=0", "--max-worker-port=0", *_own_ports()])
    while workers and _alive_nodes(address) < 1 + len(workers):
        if any(p.poll() is not None for p in nodes.procs) or time.monotonic() > deadline:
            raise RuntimeError("local Ray workers did not join:\n" + nodes.tails())
        time.sleep(2)
    if head.poll() is not None:  # `ray start` gave up on the head after its API answered
        raise RuntimeError("local Ray head stopped during startup:\n" + nodes.tails())
    return address


@contextlib.contextmanager
def local_ray_cluster(head_cpus: int = 2, workers: Sequence[WorkerNode] = (),
                      startup_s: float = 240.0, attempts: int = 3) -> Iterator[str]:
    """Yield the Jobs API address of a fresh local Ray cluster (a head with ``head_cpus``
    CPUs, then ``workers``, no GPUs anywhere) once every node is alive; tear it down
    afterwards.

    A start that fails is retried from scratch (``attempts`` in all): a loaded machine can
    exceed even the longer raylet registration wait set in :meth:`_Nodes.start`.
    """
    # Ray >= 2.5x enables token auth by default; a throw-away loopback cluster opts out, and
    # so must this process's Jobs API client.
    previous_auth = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        for attempt in range(1, attempts + 1):
            root = tempfile.mkdtemp(prefix="/tmp/kr")  # short: Ray's socket paths are long
            nodes = _Nodes(root)
            try:
                address = _start(nodes, head_cpus, workers, startup_s)
            except RuntimeError as exc:
                nodes.stop()
                shutil.rmtree(root, ignore_errors=True)
                if attempt == attempts:
                    raise
                print(f"local Ray cluster: attempt {attempt} failed, retrying "
                      f"({str(exc).splitlines()[0]})", file=sys.stderr)
                continue
            try:
                yield address
            finally:
                nodes.stop()
                shutil.rmtree(root, ignore_errors=True)
            return
    finally:
        if previous_auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous_auth


@contextlib.contextmanager
def local_ray_head(num_cpus: int = 2, startup_s: float = 240.0) -> Iterator[str]:
    """Yield the Jobs API address of a fresh local Ray head; tear it down afterwards."""
    with local_ray_cluster(head_cpus=num_cpus, startup_s=startup_s) as address:
        yield address
