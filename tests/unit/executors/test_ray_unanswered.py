"""A Ray dashboard that accepts connections and never answers must not hold kappa.

No cluster: a local socket that listens and never reads (and, for a client that must
first be made, a server that answers only Ray's version check). Every Jobs API call the
executor makes gives up after ``request_timeout_s`` (0.3 s here) and becomes a clear
error, or, where the scheduler asks, "unknown" (a poll: still running; capacity: none).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.job_submission")

from orchestrator.errors import UserInputError
from orchestrator.executors import get_executor, ray_jobs
from orchestrator.executors.base import JobResources
from orchestrator.executors.ray_client import RayUnreachableError
from orchestrator.executors.ray_jobs import RayJobsExecutor
from orchestrator.tracking.retry import is_unreachable

TIMEOUT_S = 0.3
GUARD_S = 30.0  # a call that outlives this hung: the test fails instead of hanging


def bounded(call: Callable[[], Any]) -> Any:
    """``call()``'s result (or its exception, raised), failing if it does not return."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(GUARD_S)
    assert not worker.is_alive(), f"the call did not return within {GUARD_S:g} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture
def silent_address() -> Iterator[str]:
    """A TCP port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def hung_dashboard() -> Iterator[str]:
    """A dashboard that answers Ray's version check, then hangs on every Jobs API call."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/api/version":
                body = json.dumps({"ray_version": "2.60.0", "version": "0"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            release.wait()

        do_POST = do_GET

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_a_silent_dashboard_is_a_user_error_naming_the_address(silent_address: str) -> None:
    with pytest.raises(UserInputError) as caught:
        bounded(lambda: get_executor("ray_jobs", address=silent_address,
                                     request_timeout_s=TIMEOUT_S))
    assert caught.value.exit_code == 2
    text = caught.value.render()
    assert silent_address in text and f"no answer within {TIMEOUT_S:g} s" in text, text
    assert "fix:" in text and "request_timeout_s" in text, text


def test_every_jobs_api_call_gives_up_and_the_scheduler_sees_unknown(
        hung_dashboard: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_jobs, "SUBMIT_RETRY_INTERVAL_S", 0.05)
    executor = bounded(lambda: get_executor("ray_jobs", address=hung_dashboard,
                                            request_timeout_s=TIMEOUT_S))
    assert isinstance(executor, RayJobsExecutor)
    # The scheduler's questions: no room while it does not answer, the job still running.
    assert bounded(lambda: executor.capacity(0)) == 0
    job = executor._handle("kappa-cell-0001-abcd", tmp_path / "run.log")
    assert bounded(job.poll) is None
    assert bounded(lambda: job.wait(timeout=0.1)) is None
    # The commands' requests: a clear error naming the cluster, which the scheduler and
    # the tracking-store retries recognise as "unreachable", not a verdict on a job.
    calls: list[Callable[[], Any]] = [
        lambda: executor.submit(("true",), {}, tmp_path, tmp_path / "run.log",
                                JobResources()),
        lambda: executor.reattach("ray-jobs:kappa-cell-0001-abcd"),
        job.cancel,
        job.sync_logs,  # get_job_logs
    ]
    for call in calls:
        with pytest.raises(RayUnreachableError, match=hung_dashboard) as caught:
            bounded(call)
        assert is_unreachable(caught.value)
        assert f"within {TIMEOUT_S:g} s" in str(caught.value)


@pytest.mark.parametrize("port", [True, False])
def test_an_address_without_scheme_keeps_its_password_masked(silent_address: str,
                                                             port: bool) -> None:
    """Ray takes ``user:pw@head[:port]``; the executor's errors quote it as a URL, masked
    (port 80 on this machine: nothing listens, or something that is no dashboard)."""
    host = silent_address.removeprefix("http://") if port else "127.0.0.1"
    with pytest.raises(UserInputError) as caught:
        bounded(lambda: get_executor("ray_jobs", address=f"u:pa55word@{host}",
                                     request_timeout_s=TIMEOUT_S))
    text = caught.value.render()
    assert "pa55word" not in text and f"http://u:***@{host}" in text, text


@pytest.mark.parametrize("variable", ["RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"])
def test_the_environment_cannot_redirect_an_explicit_address(
        hung_dashboard: str, silent_address: str, variable: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray lets RAY_ADDRESS / RAY_API_SERVER_ADDRESS replace the address its client is
    given; kappa's client talks to the address kappa checked, and leaves the variable as
    it was."""
    from orchestrator.executors.ray_client import bounded_client

    monkeypatch.setenv(variable, silent_address)  # would hang the version check
    client = bounded(lambda: bounded_client(hung_dashboard, TIMEOUT_S))
    assert client._address == hung_dashboard
    import os

    assert os.environ[variable] == silent_address
