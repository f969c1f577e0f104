"""MLflow's local SQLite store, tuned for a scheduler that writes to it all the time."""

from __future__ import annotations

import contextlib
from pathlib import Path


def use_wal(db: Path) -> bool:
    """Switch a local SQLite store to write-ahead logging (best effort; whether it is on).

    MLflow leaves its SQLite store in rollback-journal mode, where every write syncs the
    database and its journal; with WAL a commit is one append, about twice as fast here,
    and readers (the UI) never block the scheduler. The mode is stored in the file, so
    this is done once per store; a busy or odd file stays as it is.
    """
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            return str(mode).lower() == "wal"
    except sqlite3.Error:
        return False
