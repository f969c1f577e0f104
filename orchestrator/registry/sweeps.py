"""Sweep rows: create, find, list, delete, and the executor a sweep runs on.

Recording a sweep reads the registry, creates the MLflow experiment and parent run, then writes the
registry rows: two stores no one transaction covers. Two ``kappa submit`` of a spec interleaving
there would each make a parent run, and a failing one would undo the sweep the other just recorded.
:func:`sweep_record_lock` makes it exclusive: on PostgreSQL a session advisory lock keyed by the
sweep's name, on its own connection (across machines; it ends with a dead holder's session); on
SQLite a ``flock`` on ``<registry.db>.lock`` (one for all sweeps: recording is short and rare); an
in-memory database is one process's own."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select, text

from orchestrator import paths
from orchestrator.registry.connection import RegistryConnection, insert_missing, jsonable, sweep_row
from orchestrator.registry.models import SweepRow, utcnow
from orchestrator.registry.snapshots import SweepRecord
from orchestrator.runs.atomic import file_lock, lock_path


def spec_hash(spec_text: str) -> str:
    """The hash stored with a sweep: SHA-256 of its spec text."""
    return hashlib.sha256(spec_text.encode()).hexdigest()


class SweepStore(RegistryConnection):
    """The registry's sweep methods (mixed into :class:`~orchestrator.registry.Registry`)."""

    def upsert_sweep(self, name: str, *, backend: str, spec_text: str,
                     mlflow_experiment_id: str | None = None,
                     mlflow_parent_run_id: str | None = None,
                     plan: str | None = None) -> SweepRecord:
        """Create the sweep ``name`` or update it; MLflow ids and the plan (JSON of a ``SweepPlan``)
        are only overwritten when given. The name becomes folder names, so one that is not a single
        safe name (:func:`orchestrator.paths.check_name`) is refused."""
        paths.check_name(name)
        given = {"mlflow_experiment_id": mlflow_experiment_id,
                 "mlflow_parent_run_id": mlflow_parent_run_id, "plan": plan}
        with self._tx() as session:
            now = utcnow()
            values = {"backend": backend, "spec_text": spec_text, "spec_hash": spec_hash(spec_text),
                      "updated_at": now, **{k: v for k, v in given.items() if v is not None}}
            insert_missing(session, SweepRow, "name", name=name, created_at=now, **values)
            row = sweep_row(session, name)
            for column, value in values.items():
                setattr(row, column, value)
            session.flush()
            return SweepRecord.of(row)

    def find_sweep(self, name: str) -> SweepRecord | None:
        """The sweep ``name``, or ``None``."""
        with self._read() as session:
            row = session.scalar(select(SweepRow).where(SweepRow.name == name))
            return None if row is None else SweepRecord.of(row)

    def get_sweep(self, name: str) -> SweepRecord:
        """The sweep ``name``; an unknown name is a :class:`UserInputError` listing known ones."""
        with self._read() as session:
            return SweepRecord.of(sweep_row(session, name))

    def list_sweeps(self) -> list[SweepRecord]:
        """Every sweep, newest first."""
        with self._read() as session:
            rows = session.scalars(select(SweepRow).order_by(SweepRow.created_at.desc()))
            return [SweepRecord.of(row) for row in rows]

    def sweep_names(self) -> list[str]:
        """Every sweep's name, newest first (only the names are read)."""
        with self._read() as session:
            return list(session.scalars(select(SweepRow.name).order_by(
                SweepRow.created_at.desc())))

    def delete_sweep(self, name: str) -> bool:
        """Delete a sweep with its cells and attempts; ``False`` if there was none."""
        with self._tx() as session:
            row = session.scalar(select(SweepRow).where(SweepRow.name == name))
            if row is None:
                return False
            session.delete(row)
            return True

    def set_executor(self, sweep: str, name: str, options: Mapping[str, Any]) -> None:
        """Record the executor ``sweep`` runs on and its options (no passwords: it is shared)."""
        with self._tx() as session:
            row = sweep_row(session, sweep)
            row.executor_name = name
            row.executor_options = jsonable(dict(options), "executor options")

    def executor(self, sweep: str) -> tuple[str, dict[str, Any]] | None:
        """The executor recorded for ``sweep`` and its options, or ``None``."""
        with self._tx() as session:
            row = sweep_row(session, sweep)
            if row.executor_name is None:
                return None
            return row.executor_name, dict(row.executor_options or {})


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

