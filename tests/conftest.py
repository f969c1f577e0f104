"""Shared pytest configuration, and the throwaway PostgreSQL server fixture."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Keep tests hermetic: no MLflow run leaks in from the caller's environment, and torch
# stays on the two cores CI has.
for _var in ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "KAPPA_REGISTRY"):
    os.environ.pop(_var, None)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
# A sweep's end builds its report for MLflow (seconds, in every test that runs a sweep); the
# tests of that summary turn it back on.
os.environ.setdefault("KAPPA_MLFLOW_SUMMARY", "0")

# Helpers every test folder shares: the throwaway PostgreSQL server, the in-process CLI.
sys.path.insert(0, str(Path(__file__).resolve().parent / "unit" / "registry"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kappa_pg_server import PgServer, unavailable_reason  # noqa: E402


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL server for this test process, shared by every test that
    needs one (tests/unit/registry/kappa_pg_server.py); skips if impossible here."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = PgServer().start()
    try:
        yield server
    finally:
        server.stop()
