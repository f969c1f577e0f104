"""What the MLflow UI shows, checked through a real ``mlflow server``'s REST API.

A tiny finished sweep (fake backend) is served by ``kappa ui SWEEP --open`` (which
becomes ``mlflow server``) on a free port; the UI's runs table, compare view, grouping
and parallel-coordinates chart read exactly these endpoints: runs/search (filter by
``tags.kappa.sweep``), runs/get and metrics/get-history. Child runs must carry a readable
name, the parent run id tag, ``axis.<name>`` tags (group by) AND params (parallel
coordinates plots params and metrics), and the final metrics as metrics. The URL
``kappa ui`` prints (and opens) must be the sweep's runs view, filtered to the sweep, in
a route and with query keys the served UI bundle knows.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kit.home import register_backends, seed_mlflow_store

from orchestrator.registry import Registry
from orchestrator.sweeps.driver import submit

SPEC = """\
name: ui-mini
backend: fake
base: {steps: 2, step_seconds: 0}
axes:
  baseline: [grpo, dapo]
  seed: [0, 1]
"""
STARTUP_LIMIT = 180  # seconds; a guard against a server that never comes up


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(base: str, path: str, **query: str) -> dict[str, Any]:
    url = f"{base}{path}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        return dict(json.loads(resp.read()))


def _post(base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return dict(json.loads(resp.read()))


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


BROWSER_RECORDER = """#!/bin/sh
printf '%s' "$1" > "$(dirname "$0")/opened.txt"
"""


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


@pytest.fixture(scope="module")
def served_sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A finished 4-cell sweep, served by ``kappa ui ui-mini --open``."""
    home = tmp_path_factory.mktemp("ui") / "home"
    seed_mlflow_store(home)
    spec = home.parent / "ui.yaml"
    spec.write_text(SPEC)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KAPPA_HOME", str(home))
        mp.setenv("KAPPA_POLL_INTERVAL", "0.05")
        register_backends(mp)
        submit(spec, wait=True, max_parallel=2)
    port = _free_port()
    log = home.parent / "mlflow-server.log"
    proc = kappa_ui(home, port, log, "ui-mini")
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


@pytest.mark.slow
def test_ui_endpoints_see_names_tags_params_and_metrics(served_sweep: Served) -> None:
    base, home = served_sweep.base, served_sweep.home
    with Registry.open(f"sqlite:///{home / 'registry.db'}") as reg:
        sweep = reg.get_sweep("ui-mini")
        cells = {c.mlflow_run_id: c for c in reg.cells("ui-mini")}
    found = _post(base, "/api/2.0/mlflow/runs/search", {
        "experiment_ids": [sweep.mlflow_experiment_id],
        "filter": "tags.`kappa.sweep` = 'ui-mini'", "max_results": 100})
    runs = {r["info"]["run_id"]: r for r in found["runs"]}
    assert set(runs) == {*cells, sweep.mlflow_parent_run_id}
    for run_id, cell in cells.items():
        run = _get(base, "/api/2.0/mlflow/runs/get", run_id=run_id or "")["run"]
        assert run == runs[run_id] or run["info"]["run_id"] == run_id
        tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
        params = {p["key"]: p["value"] for p in run["data"]["params"]}
        metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
        baseline, seed = cell.axes["baseline"], str(cell.axes["seed"])
        assert run["info"]["run_name"] == f"{baseline} · seed={seed}"
        assert run["info"]["status"] == "FINISHED"
        assert tags["mlflow.parentRunId"] == sweep.mlflow_parent_run_id
        assert (tags["axis.baseline"], tags["axis.seed"]) == (baseline, seed)
        assert (params["axis.baseline"], params["axis.seed"]) == (baseline, seed)
        assert metrics["eval/toy/mean_at_4"] == pytest.approx(
            cell.final_metrics["eval/toy/mean@4"])
        history = _get(base, "/api/2.0/mlflow/metrics/get-history", run_id=run_id or "",
                       metric_key="eval/toy/mean_at_4")["metrics"]
        assert [(h["step"], h["value"]) for h in history] == [
            (2, pytest.approx(cell.final_metrics["eval/toy/mean@4"]))]
    # Grouping by an axis in the UI is a filter on its tag, which the server answers.
    grpo = _post(base, "/api/2.0/mlflow/runs/search", {
        "experiment_ids": [sweep.mlflow_experiment_id],
        "filter": "tags.`axis.baseline` = 'grpo'"})
    assert len(grpo["runs"]) == 2


def _ui_bundle() -> str:
    """The installed MLflow UI's JavaScript (the one the server serves)."""
    import mlflow

    build = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"
    return "\n".join(p.read_text(errors="replace") for p in sorted(build.glob("*.js")))


@pytest.mark.slow
def test_kappa_ui_lands_on_the_sweeps_runs(served_sweep: Served) -> None:
    """The printed URL: this server, the sweep's experiment, its runs tab, a search that
    finds exactly the sweep's runs, Model training mode; ``--open`` opened the same URL."""
    base = served_sweep.base
    with Registry.open(f"sqlite:///{served_sweep.home / 'registry.db'}") as reg:
        sweep = reg.get_sweep("ui-mini")
        run_ids = {c.mlflow_run_id for c in reg.cells("ui-mini")} | {sweep.mlflow_parent_run_id}
    url = urllib.parse.urlsplit(served_sweep.printed)
    assert f"{url.scheme}://{url.netloc}" == base and url.path == "/"
    route, _, query = url.fragment.partition("?")
    assert route == f"/experiments/{sweep.mlflow_experiment_id}/runs"
    params = urllib.parse.parse_qs(query)
    assert params["workflowType"] == ["machine_learning"]
    [search] = params["searchFilter"]
    found = _post(base, "/api/2.0/mlflow/runs/search", {
        "experiment_ids": [sweep.mlflow_experiment_id], "filter": search})
    assert {r["info"]["run_id"] for r in found["runs"]} == run_ids
    # The route and the query keys are the served UI's own (a new MLflow may move them).
    bundle = _ui_bundle()
    for literal in ('"/experiments/:experimentId/runs"', '"searchFilter"',
                    'get("workflowType")', '"machine_learning"'):
        assert literal in bundle, literal
    deadline = time.monotonic() + STARTUP_LIMIT
    while not served_sweep.opened.exists():
        assert time.monotonic() < deadline, "--open never opened a browser"
        time.sleep(0.2)
    assert served_sweep.opened.read_text() == served_sweep.printed
    # The store reached the server through its environment, not its command line.
    import psutil

    [server] = [p.cmdline() for p in psutil.Process(served_sweep.pid).children()]
    assert "--backend-store-uri" not in server and "server" in server, server


@pytest.mark.slow
def test_kappa_ui_prints_the_url_last_without_the_servers_noise(served_sweep: Served) -> None:
    """Before, four Starlette deprecation warnings, "Registry store URI not provided" and
    uvicorn's start-up lines came after the URL and scrolled it away (issue 18, 7)."""
    lines = served_sweep.log.read_text().splitlines()
    assert lines[0].startswith("starting the MLflow UI on 127.0.0.1:"), lines
    assert lines[1] == f"MLflow UI: {served_sweep.printed}", lines
    assert lines[2].startswith("  the runs of sweep ui-mini") and "Ctrl-C" in lines[3], lines
    for noise in ("Warning", "Registry store URI", "INFO:", "Security middleware"):
        assert not any(noise in line for line in lines), (noise, lines)


@pytest.mark.slow
@pytest.mark.browser
def test_kappa_ui_url_renders_the_runs_in_chromium(served_sweep: Served, tmp_path: Path) -> None:
    """In a fresh headless browser (no remembered workflow type), the printed URL shows
    the sweep's runs table (its parent run and 4 cells), not the GenAI overview that the
    experiment's plain address shows (the control)."""
    import shutil

    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(b)), None)
    if browser is None:
        pytest.skip("chromium is not installed (make sysdeps / apt-get install -y chromium)")

    def rendered(url: str, profile: str) -> str:
        return subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={tmp_path / profile}", "--virtual-time-budget=20000",
             "--dump-dom", url], capture_output=True, text=True, timeout=180,
            check=False).stdout

    dom = rendered(served_sweep.printed, "printed")
    assert re.search(r"<strong>5</strong> matching runs", dom), dom[-3000:]
    plain = served_sweep.printed.split("/runs?", 1)[0]  # #/experiments/<id>
    assert "matching runs" not in rendered(plain, "plain")
