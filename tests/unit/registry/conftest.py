"""Fixtures of the registry tests: one suite, run against SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kappa_pg_server import PgServer

from orchestrator.grid.plan import SweepPlan
from orchestrator.registry import Registry


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def registry_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A URL of an empty registry database, on each backend in turn."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
        return
    server: PgServer = request.getfixturevalue("pg_server")
    url = server.create_database()
    try:
        yield url
    finally:
        server.drop_database(url)


@pytest.fixture
def registry(registry_url: str) -> Iterator[Registry]:
    """An open registry with one sweep, ``toy`` (planned, empty), and no cells."""
    reg = Registry.open(registry_url)
    reg.upsert_sweep("toy", backend="embedded", spec_text="name: toy\n",
                     plan=SweepPlan(name="toy", backend="embedded").to_json())
    try:
        yield reg
    finally:
        reg.close()
