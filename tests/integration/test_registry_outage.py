"""The PostgreSQL registry goes away in the middle of a sweep (a crash, a restart, a network
cut) and comes back: no cell is lost, run twice or charged a retry.

A background scheduler runs two fake cells parked at step 2 on a server of this test's own.
The server is stopped as a crash stops it; while it is away the cells are let go, so they
finish and exit with no registry to tell; then it starts again on the same port and data.
Away for less than the lease, the scheduler waits and carries on by itself; away for
longer, it stops (another scheduler may have taken the sweep) and `kappa resume` finishes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kit.cli import process
from kit.fake_backend import write_spec
from kit.home import seed_mlflow_store
from kit.kappa_main import KAPPA_SCRIPT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "registry"))
from kappa_pg_server import PgServer, unavailable_reason

SAFETY = 240  # seconds; a guard against hangs, not a speed assertion
AWAY = 8  # seconds the server is down

pytestmark = [pytest.mark.postgres]


def _status(url: str) -> dict[str, Any] | None:
    proc = process("status", "outage", "--json", "--registry", url, code=None, timeout=SAFETY)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


@pytest.mark.parametrize("lease", [30, pytest.param(3, marks=pytest.mark.slow)])  # ~20 s each
def test_a_registry_that_goes_away_loses_no_cell_and_runs_none_twice(
        lease: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    server = PgServer().start()
    try:
        home = tmp_path / "home"
        seed_mlflow_store(home)
        monkeypatch.setenv("KAPPA_HOME", str(home))
        monkeypatch.setenv("KAPPA_POLL_INTERVAL", "0.05")
        monkeypatch.setenv("KAPPA_LEASE_SECONDS", str(lease))
        monkeypatch.setenv("KAPPA_CLI", f"{sys.executable} {KAPPA_SCRIPT}")
        url = server.create_database()
        spec = write_spec(tmp_path / "s.yaml", "outage", seeds=2, steps=4, hold_at=2)
        submitted = process("submit", str(spec), "--registry", url, timeout=SAFETY)
        assert "background" in submitted.stdout
        deadline = time.monotonic() + SAFETY
        while not ((status := _status(url)) and status["scheduler_pid"] and all(
                c["progress_step"] == 1 for c in status["cells"])):
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        cells = [c["cell_id"] for c in status["cells"]]
        watcher = subprocess.Popen(
            [sys.executable, KAPPA_SCRIPT, "status", "outage", "--watch", "--interval", "0.2",
             "--registry", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert watcher.stdout is not None and "watching" in watcher.stdout.readline()
        server.halt()
        _, said = watcher.communicate(timeout=SAFETY)  # it stops, saying why
        assert watcher.returncode == 2 and "Traceback" not in said, said
        assert "cannot connect to the registry" in said
        away = process("status", "outage", "--registry", url, code=None, timeout=SAFETY)
        assert away.returncode == 2 and "Traceback" not in away.stderr, away.stderr
        assert "cannot connect to the registry" in away.stderr
        for cell in cells:  # the cells finish while nobody can record it
            (home / "runs" / "outage" / cell / "go").touch()
        time.sleep(AWAY)
        server.start_again()
        resumed = False
        while not ((status := _status(url)) and status["counts"]["succeeded"] == 2):
            if status and not status["scheduler_pid"] and lease < AWAY:
                process("resume", "outage", "--registry", url, "--wait", timeout=SAFETY)
                resumed = True
            assert time.monotonic() < deadline, status
            time.sleep(0.5)
        for cell in status["cells"]:
            assert cell["attempts"] == 1, cell  # none ran twice, none was charged
        log = (home / "scheduler" / "outage.log").read_text()
        print(log)
        assert "Traceback" not in log
        if lease > AWAY:  # it waited, and carried on by itself
            assert "the registry answers again" in log and not resumed
        else:  # it stopped, saying why, and resume finished the sweep
            assert "lease was not renewed" in log and resumed
    finally:
        subprocess.run(["pkill", "-f", str(tmp_path)], check=False)
        server.stop()
