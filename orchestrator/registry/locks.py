"""A lock that spans several transactions: one process at a time records a sweep.

Recording a sweep reads the registry, creates the MLflow experiment and parent run, then
writes the registry rows: two stores no one transaction covers. Two ``kappa submit`` of a
spec interleaving there would each make a parent run, and a failing one would undo the
sweep the other just recorded. :func:`sweep_record_lock` makes it exclusive: on
PostgreSQL a session advisory lock keyed by the sweep's name, on its own connection
(across machines; it ends with a dead holder's session); on SQLite a ``flock`` on
``<registry.db>.lock`` (one for all sweeps: recording is short and rare); an in-memory
database is one process's own.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, text

from orchestrator.runs.atomic import file_lock, lock_path


def advisory_key(name: str) -> int:
    """A signed 64-bit PostgreSQL advisory-lock key for ``name``, the same in every process."""
    digest = hashlib.sha256(f"kappa-sweep:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def sqlite_lock_path(engine: Engine) -> Path | None:
    """The lock file beside a SQLite registry's database (``None``: in memory)."""
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        return None
    return lock_path(Path(database).expanduser().resolve())


@contextlib.contextmanager
def sweep_record_lock(engine: Engine, sweep: str) -> Iterator[None]:
    """Hold the exclusive right to record ``sweep`` (blocking until it is free)."""
    if engine.dialect.name == "postgresql":
        key = advisory_key(sweep)
        # AUTOCOMMIT: the lock belongs to the session; no transaction stays open with it.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
        return
    path = sqlite_lock_path(engine)
    with contextlib.nullcontext() if path is None else file_lock(path):
        yield

