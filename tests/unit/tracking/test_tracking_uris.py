"""Tracker URIs and lazy imports (no MLflow store touched)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.tracking import Tracker, absolute_uri


def test_local_store_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    monkeypatch.delenv("KAPPA_MLFLOW_URI", raising=False)
    tracker = Tracker()
    assert tracker.uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert tracker.is_local and tracker.artifact_root == tmp_path / "mlartifacts"


def test_server_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_MLFLOW_URI", "http://mlflow.example:5000")
    tracker = Tracker()
    assert (tracker.uri, tracker.is_local, tracker.artifact_root) == (
        "http://mlflow.example:5000",
        False,
        None,
    )
    assert tracker.env_for_run("r1") == {
        "MLFLOW_TRACKING_URI": "http://mlflow.example:5000",
        "MLFLOW_RUN_ID": "r1",
    }


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert absolute_uri("sqlite:///rel/ml.db") == f"sqlite:///{tmp_path / 'rel' / 'ml.db'}"
    assert absolute_uri("mlruns") == (tmp_path / "mlruns").as_uri()
    assert absolute_uri("sqlite:////abs/ml.db") == "sqlite:////abs/ml.db"
    file_tracker = Tracker("mlruns")
    assert file_tracker.is_local
    assert file_tracker.env_for_run("r")["MLFLOW_ALLOW_FILE_STORE"] == "true"


def test_imports_stay_light() -> None:
    code = (
        "import sys, orchestrator.tracking, orchestrator.cli.db_cmd; "
        "heavy = {'mlflow', 'sqlalchemy', 'alembic'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
