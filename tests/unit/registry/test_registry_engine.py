"""Registry URLs and the SQLite connection settings."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import text

from orchestrator.errors import UserInputError
from orchestrator.registry import Registry
from orchestrator.registry.engine import BUSY_TIMEOUT_MS, display_url, normalize_url


@pytest.mark.parametrize(
    "url",
    ["postgresql://u:secret@db:5432/kappa", "postgres://u:secret@db:5432/kappa"],
)
def test_plain_postgres_urls_get_psycopg3(url: str) -> None:
    parsed = normalize_url(url)
    assert parsed.drivername == "postgresql+psycopg"
    assert "secret" not in display_url(parsed)
    assert display_url(parsed) == "postgresql+psycopg://u:***@db:5432/kappa"


def test_explicit_driver_is_kept() -> None:
    assert normalize_url("postgresql+psycopg://u@h/db").drivername == "postgresql+psycopg"


def test_sqlite_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    with Registry.open() as reg:  # the default location
        assert reg.url == f"sqlite:///{tmp_path / 'home' / 'registry.db'}"
        with reg.engine.connect() as conn:
            pragmas = {
                name: conn.execute(text(f"PRAGMA {name}")).scalar()
                for name in ("journal_mode", "foreign_keys", "busy_timeout")
            }
    assert pragmas == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": BUSY_TIMEOUT_MS}


def test_registry_env_var_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_REGISTRY", f"sqlite:///{tmp_path / 'env.db'}")
    with Registry.open() as reg:
        reg.upsert_sweep("s", backend="embedded", spec_text="")
    assert (tmp_path / "env.db").exists()


def test_unsupported_database(tmp_path: Path) -> None:
    with pytest.raises(UserInputError) as info:
        Registry.open("mysql+pymysql://u:pw@h/db")
    assert "pw" not in info.value.render()


def test_racing_first_opens_all_succeed(tmp_path: Path) -> None:
    # Switching a new file to WAL takes an exclusive lock, and SQLite refuses a racing
    # switch at once ("database is locked") instead of waiting; every racer must succeed.
    racers = 6
    for attempt in range(20):
        url = f"sqlite:///{tmp_path / f'race{attempt}.db'}"
        barrier = threading.Barrier(racers)

        def open_registry(_: int, url: str = url, barrier: threading.Barrier = barrier) -> str:
            barrier.wait()
            with Registry.open(url) as reg, reg.engine.connect() as conn:
                return str(conn.execute(text("PRAGMA journal_mode")).scalar())

        with ThreadPoolExecutor(racers) as pool:
            assert list(pool.map(open_registry, range(racers))) == ["wal"] * racers
