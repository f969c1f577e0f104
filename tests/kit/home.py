"""A test's ``KAPPA_HOME``, and what the fake trainer leaves in it."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import pytest

from kit.fake_backend import ENTRIES
from kit.kappa_main import KAPPA_SCRIPT


def seed_mlflow_store(home: Path) -> None:
    """Give ``home`` an initialised (empty) MLflow SQLite store.

    Creating an MLflow store runs its schema migrations (many seconds on a busy
    machine), so the first test builds a template once, in the system temp folder keyed
    by MLflow's version, and every test copies it (the rename makes that safe for
    parallel workers).
    """
    template = Path(tempfile.gettempdir()) / f"kappa-test-mlflow-{version('mlflow')}.db"
    if not template.exists():
        from mlflow import MlflowClient

        building = template.with_name(f"{template.name}.{os.getpid()}.tmp")
        MlflowClient(f"sqlite:///{building}").search_experiments()
        building.replace(template)
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, home / "mlflow.db")


def register_backends(monkeypatch: pytest.MonkeyPatch,
                      extra: dict[str, str] | None = None) -> None:
    """Register the kit's fake backends (and ``extra`` ones) in this process."""
    from orchestrator.backends import BACKENDS

    for name, entry in {**ENTRIES, **(extra or {})}.items():
        monkeypatch.setitem(BACKENDS, name, entry)


def use_home(home: Path, monkeypatch: pytest.MonkeyPatch, *, cli: bool = False,
             backends: dict[str, str] | None = None) -> Path:
    """Make ``home`` this test's ``KAPPA_HOME``: a seeded MLflow store, short poll and
    retry waits, the fake backends (and ``backends``) registered in this process and,
    with ``cli``, background schedulers started through :mod:`kit.kappa_main` (so they
    know the fake backends too)."""
    seed_mlflow_store(home)
    monkeypatch.setenv("KAPPA_HOME", str(home))
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "0.05")
    monkeypatch.setenv("KAPPA_RETRY_BACKOFF", "0.05")
    if cli:
        monkeypatch.setenv("KAPPA_CLI", f"{sys.executable} {KAPPA_SCRIPT}")
    register_backends(monkeypatch, backends)
    return home


def completions(home: Path) -> list[str]:
    """Cell ids in the order their fake trainer ran to completion (any sweep)."""
    path = home / "runs" / "completions.log"
    return path.read_text().split() if path.exists() else []


def launches(run_dir: Path) -> list[int]:
    """The checkpoint step each launch of the cell started from."""
    path = run_dir / "launches.log"
    return [int(x) for x in path.read_text().split()] if path.exists() else []
