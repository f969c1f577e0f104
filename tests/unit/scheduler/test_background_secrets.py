"""A background scheduler gets its stores through its environment, never its command line.

``KAPPA_CLI`` points the background start at a recorder that writes down the argv and
environment it was given, so this checks exactly what ``start_background`` hands over.
A scheduler that fails to reach its registry logs the URL masked (the real ``kappa``).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import uuid
from pathlib import Path

import pytest

from orchestrator.runs.layout import scheduler_log
from orchestrator.sweeps.detached import start_background
from orchestrator.sweeps.executor_choice import ExecutorChoice
from orchestrator.sweeps.stores import Stores

RECORDER = """
import json, os, sys
keys = ("KAPPA_REGISTRY", "KAPPA_MLFLOW_URI", "KAPPA_HOME", "KAPPA_EXECUTOR_OPTIONS")
json.dump({"argv": sys.argv, "env": {k: os.environ.get(k) for k in keys}},
          open(os.environ["RECORD_TO"], "w"))
"""


def _wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_store_urls_travel_in_the_environment(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"s3cret-{uuid.uuid4().hex[:8]}"
    registry = f"postgresql+psycopg://kappa:{secret}@db.example:5432/reg"
    mlflow = f"https://ml:{secret}@mlflow.example"
    record = tmp_path / "record.json"
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KAPPA_CLI", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    monkeypatch.setenv("RECORD_TO", str(record))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray = f"https://ray:{secret}@head.example:8265"
    pid = start_background("toy", Stores(registry, mlflow), max_parallel=2,
                           choice=ExecutorChoice("ray_jobs", {"address": ray}))
    assert _wait(pid) == 0
    seen = json.loads(record.read_text())
    assert seen["argv"][1:] == ["resume", "toy", "--wait", "--quiet", "--log-events",
                                "--max-parallel", "2", "--executor", "ray_jobs"]
    assert seen["env"] == {"KAPPA_REGISTRY": registry, "KAPPA_MLFLOW_URI": mlflow,
                           "KAPPA_HOME": str(tmp_path / "home"),
                           "KAPPA_EXECUTOR_OPTIONS": json.dumps({"address": ray})}


def test_default_stores_are_resolved_before_handing_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("KAPPA_HOME", str(home))
    monkeypatch.delenv("KAPPA_REGISTRY", raising=False)
    monkeypatch.delenv("KAPPA_MLFLOW_URI", raising=False)
    assert Stores().env() == {"KAPPA_REGISTRY": f"sqlite:///{home / 'registry.db'}",
                              "KAPPA_MLFLOW_URI": f"sqlite:///{home / 'mlflow.db'}"}


def test_a_scheduler_that_cannot_connect_logs_the_url_masked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"s3cret-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KAPPA_CLI", raising=False)
    # Port 1 on localhost: refused at once.
    bad = f"postgresql://kappa:{secret}@127.0.0.1:1/reg"
    pid = start_background("toy", Stores(bad, f"http://ml:{secret}@127.0.0.1:1"))
    assert _wait(pid) == 2
    log = scheduler_log("toy").read_text()
    assert "cannot connect to the registry at postgresql+psycopg://kappa:***@127.0.0.1:1/reg" \
        in log, log
    assert secret not in log and "Traceback" not in log
