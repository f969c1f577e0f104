"""A finished sweep served by ``kappa ui`` for tests: start it, wait for it, ask its REST
API, render its pages in headless Chromium, and stop it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

STARTUP_LIMIT = 180  # seconds; a guard against a server that never comes up

BROWSER_RECORDER = """#!/bin/sh
printf '%s' "$1" > "$(dirname "$0")/opened.txt"
"""


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(base: str, endpoint: str, **query: str) -> dict[str, Any]:
    """GET a REST endpoint of the server at ``base``, as JSON."""
    url = f"{base}{endpoint}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        return dict(json.loads(resp.read()))


def post(base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` as JSON to the server at ``base``; the answer as JSON."""
    req = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return dict(json.loads(resp.read()))


def artifact(base: str, run_id: str, path: str) -> str:
    """The text of one of a run's artifacts, as the UI's artifact view fetches it."""
    url = f"{base}/get-artifact?{urllib.parse.urlencode({'path': path, 'run_uuid': run_id})}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        return str(resp.read().decode("utf-8"))


def mlflow_server(
    store_uri: str, artifact_root: Path, port: int, log: Path
) -> subprocess.Popen[bytes]:
    """Start ``mlflow server`` (as ``kappa ui`` does) in its own process group."""
    argv = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store_uri,
            "--default-artifact-root", artifact_root.as_uri(),
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def wait_until_up(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``/health`` until it answers; fail (with the server's log) after the limit."""
    deadline = time.monotonic() + STARTUP_LIMIT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"mlflow server exited {proc.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"mlflow server not up after {STARTUP_LIMIT}s:\n{log.read_text()}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server's process group (it may have workers), then make sure."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


@dataclass(frozen=True)
class Served:
    """A sweep served by ``kappa ui``: the server's base URL, KAPPA_HOME, the URL ``kappa
    ui`` printed, the file its browser wrote the opened URL to, ``kappa ui``'s pid and
    the file its output went to."""

    base: str
    home: Path
    printed: str
    opened: Path
    pid: int
    log: Path


def kappa_ui(home: Path, port: int, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """``kappa ui ARGS --port PORT --open`` in its own process group; a recording browser."""
    recorder = home.parent / "browser.sh"
    recorder.write_text(BROWSER_RECORDER)
    recorder.chmod(0o755)
    env = {**os.environ, "KAPPA_HOME": str(home), "BROWSER": f"{recorder} %s",
           "MLFLOW_WORKERS": "1"}
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "orchestrator", "ui", *args,
                                 "--port", str(port), "--open"], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)


@contextmanager
def served(home: Path, sweep: str) -> Iterator[Served]:
    """``kappa ui SWEEP --open`` on a free port, up and printing its URL, until exit."""
    port = free_port()
    log = home.parent / "mlflow-server.log"
    proc = kappa_ui(home, port, log, sweep)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base, proc, log)
        deadline = time.monotonic() + STARTUP_LIMIT  # printed once the server answers
        while (printed := re.search(r"^MLflow UI: (\S+)$", log.read_text(), re.MULTILINE)) \
                is None:
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.2)
        yield Served(base, home, printed.group(1), home.parent / "opened.txt", proc.pid, log)
    finally:
        stop(proc)


def chromium() -> str:
    """The headless browser's executable; skips the test where none is installed."""
    found = next((b for b in ("chromium", "chromium-browser", "google-chrome")
                  if shutil.which(b)), None)
    if found is None:
        pytest.skip("chromium is not installed (make sysdeps / apt-get install -y chromium)")
    return found


def rendered(url: str, profile: Path) -> str:
    """The DOM a fresh headless Chromium (its own profile: nothing remembered) shows at
    ``url`` after its scripts ran (up to a minute of virtual time)."""
    return subprocess.run(
        [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
         "--window-size=1600,1000", f"--user-data-dir={profile}",
         "--virtual-time-budget=60000", "--dump-dom", url], capture_output=True,
        text=True, timeout=180, check=False).stdout


def rendered_until(url: str, profile: Path, wanted: list[str], attempts: int = 3) -> str:
    """Render ``url`` until its DOM holds every ``wanted`` text, a fresh browser each
    time: charts draw after the runs' metrics arrive, and on a busy machine a render may
    end before that. The last DOM either way (the caller asserts)."""
    dom = ""
    for attempt in range(attempts):
        dom = rendered(url, profile.with_name(f"{profile.name}-{attempt}"))
        if all(text in dom for text in wanted):
            break
    return dom
