"""MLflow's local SQLite store: created and migrated once, safely, by many processes.

MLflow creates and migrates its schema on the first call, outside any transaction and unlocked. Two
processes doing so at once (four ``kappa submit`` on a fresh ``KAPPA_HOME``) trip over each other
("table _alembic_tmp_... already exists") and leave half-made tables that break the store for good.
So :func:`prepare_store` makes it under an exclusive ``flock`` on ``<mlflow.db>.lock``, taken only
when the store is not already current (a few-millisecond check), and switches it to write-ahead
logging last: a store in WAL mode at MLflow's newest revision is a finished one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from orchestrator.errors import Problem, UserInputError
from orchestrator.redact import one_line
from orchestrator.runs.atomic import file_lock, lock_path

LOG = logging.getLogger(__name__)
# Alembic's batch mode (SQLite's ALTER TABLE) copies a table into this, drops the
# original and renames the copy.
_ALEMBIC_TMP = "_alembic_tmp_"
NOT_A_STORE_FIX = ("point --mlflow / KAPPA_MLFLOW_URI at an MLflow store, or move the file "
                   "away (the first `kappa submit` makes a new one)")


def prepare_store(db: Path, create: Callable[[], object]) -> bool:
    """Make sure the SQLite store ``db`` exists at MLflow's newest schema, in WAL mode;
    whether this call had to do anything. ``create`` is the first MLflow call against the
    store. Working out the newest revision reads every migration (~50 ms), so the lock
    file keeps it, per MLflow version."""
    if store_is_current(db, _noted_head(db)):
        return False
    head = mlflow_head_revision()
    with file_lock(lock_path(db)) as fd:
        changed = not store_is_current(db, head)
        if changed:
            try:
                if schema_revision(db) != head:
                    repair_interrupted_migration(db)
                create()
            except Exception as exc:
                if not isinstance(getattr(exc, "orig", exc), sqlite3.DatabaseError):
                    raise
                raise not_a_store(db, exc) from None
            use_wal(db)
        if head is not None:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"mlflow {_mlflow_version()} {head}\n".encode(), 0)
    return changed


def not_a_store(db: Path, exc: BaseException) -> UserInputError:
    """The error for a file in the store's place that SQLite cannot read as a store."""
    return UserInputError(f"{db} is not an MLflow store", [Problem(
        "mlflow", one_line(str(getattr(exc, "orig", exc))[:300]), found=str(db),
        fix=NOT_A_STORE_FIX)])


def _mlflow_version() -> str:
    """The installed MLflow's version, read from its metadata (importing it takes seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlflow")
    except PackageNotFoundError:  # the client-only distribution
        return version("mlflow-skinny")


def newest_revision(db: Path) -> str | None:
    """The installed MLflow's schema revision: as ``db``'s lock file noted it, else asked
    of MLflow (``None``: cannot tell)."""
    return _noted_head(db) or mlflow_head_revision()


def _noted_head(db: Path) -> str | None:
    """The newest revision of this MLflow version as the lock file noted it, if it did."""
    try:
        words = lock_path(db).read_text().split()
    except OSError:
        return None
    return words[2] if len(words) == 3 and words[:2] == ["mlflow", _mlflow_version()] else None


def mlflow_head_revision() -> str | None:
    """The schema revision of this MLflow version (``None``: cannot tell)."""
    try:
        from mlflow.store.db.utils import _get_latest_schema_revision

        return str(_get_latest_schema_revision())
    except Exception:  # a private MLflow helper: without it, always take the lock
        return None


def _query(db: Path, sql: str, timeout: float = 30) -> str | None:
    """The first value ``sql`` reads from ``db``, as text (``None``: none, or an error)."""
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=timeout)) as conn:
            row = conn.execute(sql).fetchone()
    except sqlite3.Error:  # not a database, or no such table: nothing made yet
        return None
    return None if row is None else str(row[0])


def store_is_current(db: Path, head: str | None) -> bool:
    """Whether ``db`` is a finished store: at revision ``head`` and in WAL mode."""
    return (head is not None and db.is_file()
            and str(_query(db, "PRAGMA journal_mode")).lower() == "wal"
            and schema_revision(db) == head)


def schema_revision(db: Path) -> str | None:
    """The store's Alembic revision, or ``None`` (no store, or no stamp yet)."""
    return _query(db, "SELECT version_num FROM alembic_version") if db.is_file() else None


def repair_interrupted_migration(db: Path) -> list[str]:
    """Undo what a migration killed inside an Alembic batch operation left (under the
    store's lock); the leftover tables. A copy ``_alembic_tmp_T`` is dropped if ``T``
    still exists, else renamed back to ``T``; the migration then runs again from the
    stamped revision (MLflow stamps each step)."""
    if not db.is_file():
        return []
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        leftovers = sorted(t for t in tables if t.startswith(_ALEMBIC_TMP))
        for tmp in leftovers:
            original = tmp.removeprefix(_ALEMBIC_TMP)
            if original in tables:
                conn.execute(f'DROP TABLE "{tmp}"')
            else:
                conn.execute(f'ALTER TABLE "{tmp}" RENAME TO "{original}"')
            conn.commit()
    if leftovers:
        LOG.warning("repaired the MLflow store %s: an earlier schema migration had been "
                    "interrupted (left %s)", db, ", ".join(leftovers))
    return leftovers


def use_wal(db: Path) -> bool:
    """Switch a SQLite store to write-ahead logging (best effort; whether it is on): a commit is one
    append (twice as fast as a rollback journal), and readers (the UI) never block the scheduler."""
    mode = _query(db, "PRAGMA journal_mode", timeout=5)
    if mode is not None and mode.lower() != "wal":
        mode = _query(db, "PRAGMA journal_mode = WAL", timeout=5)
    return str(mode).lower() == "wal"
