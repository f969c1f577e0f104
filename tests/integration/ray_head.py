"""A throw-away local Ray head with the dashboard (the Jobs API), for integration tests.

Started with ``ray start --head --block`` as the leader of its own session, with its own
temp dir and free ports, and stopped by signalling that process group only — never with
``ray stop``, which would stop every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


@contextlib.contextmanager
def local_ray_head(num_cpus: int = 2, startup_s: float = 240.0) -> Iterator[str]:
    """Yield the Jobs API address of a fresh local Ray head; tear it down afterwards."""
    ray_bin = Path(sys.executable).with_name("ray")
    temp_dir = tempfile.mkdtemp(prefix="/tmp/kr")  # short: Ray's socket paths are long
    dashboard_port = free_port()
    # Ray >= 2.5x enables token auth by default; a throw-away loopback cluster opts out, and
    # so must this process's Jobs API client.
    previous_auth = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONWARNINGS": "ignore"}
    log = open(Path(temp_dir) / "head.log", "w")  # noqa: SIM115 (closed in finally)
    proc = subprocess.Popen(
        [str(ray_bin), "start", "--head", "--block", f"--num-cpus={num_cpus}", "--num-gpus=0",
         f"--port={free_port()}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
         f"--dashboard-port={dashboard_port}", f"--temp-dir={temp_dir}", "--disable-usage-stats",
         # Every fixed default port too, so two heads (pytest -n 2) never share an agent.
         *(f"--{name}={free_port()}" for name in (
             "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
             "metrics-export-port", "runtime-env-agent-port", "ray-client-server-port",
             "node-manager-port", "object-manager-port"))],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    address = f"http://127.0.0.1:{dashboard_port}"
    try:
        deadline = time.monotonic() + startup_s
        while not _jobs_api_ready(address):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("local Ray head did not start:\n"
                                   + (Path(temp_dir) / "head.log").read_text()[-3000:])
            time.sleep(2)
        yield address
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):  # stragglers in the same group
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        if previous_auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous_auth
        shutil.rmtree(temp_dir, ignore_errors=True)
