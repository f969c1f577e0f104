"""The local MLflow store is switched to write-ahead logging, best effort."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.tracking.sqlite_store import use_wal


def test_use_wal_switches_a_database_once(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    sqlite3.connect(db).close()
    assert use_wal(db) and use_wal(db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_use_wal_leaves_a_non_database_alone(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all, just bytes" * 10)
    assert not use_wal(junk)
    assert junk.read_bytes().startswith(b"not a database")
