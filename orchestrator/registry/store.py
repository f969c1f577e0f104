"""The :class:`Registry`: sweeps, cells and attempts in one SQL database.

See the package docstring (``orchestrator/registry/__init__.py``) for the contract.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, Table, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from orchestrator import paths
from orchestrator.registry.engine import (
    display_url,
    make_engine,
    missing_sqlite_file,
    normalize_url,
    unreachable,
)
from orchestrator.registry.leases import (
    Claimant,
    Lease,
    check_fence,
    current_lease,
    release_lease,
    renew_lease,
    take_lease,
)
from orchestrator.registry.models import CellRow, SweepRow, utcnow
from orchestrator.registry.rows import cell_row, check_fields, jsonable, sweep_row
from orchestrator.registry.schema import RegistryMissing, ensure_schema
from orchestrator.registry.snapshots import AttemptRecord, CellLike, CellRecord, SweepRecord
from orchestrator.registry.states import (
    AttemptState,
    CellState,
)
from orchestrator.registry.transitions import apply_transition

CellRef = CellRecord | tuple[str, str]
"""A cell is named by its snapshot or by ``(sweep name, cell id)``."""

# Ids per IN (...) list: far below any database's limit on bound parameters.
_IDS_PER_QUERY = 500
# Fields a caller may set without changing state.
UPDATE_FIELDS = frozenset({"run_dir", "mlflow_run_id", "job_id", "max_retries", "last_error"})


def spec_hash(spec_text: str) -> str:
    """The hash stored with a sweep: SHA-256 of its spec text."""
    return hashlib.sha256(spec_text.encode()).hexdigest()


class Registry:
    """The SQL run registry. Open with :meth:`open`; every method is one transaction."""

    def __init__(self, engine: Engine, fence: str | None = None) -> None:
        """Wrap an engine whose schema is already current (use :meth:`open`)."""
        self.engine = engine
        self.fence = fence
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def fenced(self, owner: str) -> Registry:
        """This registry (same engine) for the scheduler holding the lease ``owner``:
        every cell write first checks, in its own transaction, that ``owner`` still holds
        the sweep's lease, else raises :class:`~.leases.LeaseLost` and writes nothing."""
        return Registry(self.engine, fence=owner)

    def _check_fence(self, session: Session, sweep_id: int) -> None:
        if self.fence is not None:
            check_fence(session, sweep_id, self.fence)

    # -- lifecycle ---------------------------------------------------------------------
    @classmethod
    def open(cls, url: str | None = None, *, create: bool = True) -> Registry:
        """Connect to ``url`` (default: :func:`orchestrator.paths.registry_url`).

        An empty database is initialised, or with ``create=False`` (commands that only
        read) refused: :class:`RegistryMissing`, and no file or folder is made. An
        outdated or unknown schema raises :class:`UserInputError` with the fix
        (``kappa db upgrade --registry URL``); so does a server that cannot be reached.
        """
        parsed = normalize_url(paths.registry_url(url))
        if not create and missing_sqlite_file(parsed):
            raise RegistryMissing(display_url(parsed))
        engine = make_engine(parsed)
        try:
            ensure_schema(engine, create=create)
        except OperationalError as exc:
            engine.dispose()
            if parsed.get_backend_name() == "sqlite":
                raise
            raise unreachable(parsed, exc) from None
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    @property
    def url(self) -> str:
        """The database URL, password masked."""
        return display_url(self.engine.url)

    def close(self) -> None:
        """Release every connection."""
        self.engine.dispose()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        with self._sessions.begin() as session:
            yield session

    @contextmanager
    def _read(self) -> Iterator[Session]:
        """A session for reads. On PostgreSQL it holds no transaction (autocommit): the
        server ends a transaction idle for as long as a lease (``engine.py``), and a
        client turning 100,000 rows into snapshots is that idle on a busy machine; a read
        of single SELECTs needs none. SQLite reads keep the ordinary transaction."""
        if self.engine.dialect.name != "postgresql":
            with self._tx() as session:
                yield session
            return
        with self.engine.connect() as connection:
            auto = connection.execution_options(isolation_level="AUTOCOMMIT")
            with Session(bind=auto, expire_on_commit=False) as session:
                yield session

    # -- sweeps ------------------------------------------------------------------------
    def upsert_sweep(
        self,
        name: str,
        *,
        backend: str,
        spec_text: str,
        mlflow_experiment_id: str | None = None,
        mlflow_parent_run_id: str | None = None,
    ) -> SweepRecord:
        """Create the sweep ``name`` or update it; MLflow ids are only overwritten when given.

        The name becomes folder names (run folders, logs): one that is not a single safe
        name (:func:`orchestrator.paths.check_name`) is refused.
        """
        paths.check_name(name)
        for attempt in range(2):
            try:
                with self._tx() as session:
                    now = utcnow()
                    row = session.scalar(select(SweepRow).where(SweepRow.name == name))
                    if row is None:
                        row = SweepRow(name=name, created_at=now)
                        session.add(row)
                    row.backend = backend
                    row.spec_text = spec_text
                    row.spec_hash = spec_hash(spec_text)
                    row.updated_at = now
                    if mlflow_experiment_id is not None:
                        row.mlflow_experiment_id = mlflow_experiment_id
                    if mlflow_parent_run_id is not None:
                        row.mlflow_parent_run_id = mlflow_parent_run_id
                    session.flush()
                    return SweepRecord.of(row)
            except IntegrityError:
                # Another process created the same sweep between our read and insert.
                if attempt:
                    raise
        raise AssertionError("unreachable")

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

    def delete_sweep(self, name: str) -> bool:
        """Delete a sweep with its cells and attempts; ``False`` if there was none."""
        with self._tx() as session:
            row = session.scalar(select(SweepRow).where(SweepRow.name == name))
            if row is None:
                return False
            session.delete(row)
            return True

    def set_executor(self, sweep: str, name: str, options: Mapping[str, Any]) -> None:
        """Record the executor ``sweep`` runs on and its options (JSON; the caller keeps
        passwords out of them: the registry is shared)."""
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

    # -- leases (see .leases) ------------------------------------------------------------
    def take_lease(self, sweep: str, me: Claimant, seconds: float,
                   holder_dead: Callable[[Lease], bool] | None = None
                   ) -> tuple[bool, Lease | None]:
        """Take the sweep's lease if free, ours, expired or its holder is dead;
        (taken?, the lease now)."""
        with self._tx() as session:
            return take_lease(session, sweep, me, seconds, holder_dead)

    def renew_lease(self, sweep: str, owner: str, seconds: float) -> bool:
        """The owner's heartbeat; ``False`` when the lease is no longer theirs."""
        with self._tx() as session:
            return renew_lease(session, sweep, owner, seconds)

    def release_lease(self, sweep: str, owner: str) -> bool:
        """The owner gives the lease up."""
        with self._tx() as session:
            return release_lease(session, sweep, owner)

    def lease(self, sweep: str) -> Lease | None:
        """Who drives ``sweep`` (the lease may have expired), or ``None``."""
        with self._tx() as session:
            return current_lease(session, sweep)

    # -- cells -------------------------------------------------------------------------
    def add_cells(
        self, sweep: str, cells: Iterable[CellLike], *, max_retries: int = 0
    ) -> list[CellRecord]:
        """Register ``cells`` as ``pending``; cells already there are left untouched.

        Returns the cells that were new. All or nothing: if any cell cannot be stored
        (e.g. settings that are not JSON), none is.
        """
        # Rows are made before the transaction and inserted in batches, snapshots made
        # after it: on PostgreSQL the server ends a transaction that idles between
        # statements as long as a lease (engine.py), and preparing 100,000 rows inside
        # it (ORM objects and their flush) takes longer than that on a busy machine.
        now = utcnow()
        rows: dict[str, dict[str, Any]] = {}
        for cell in cells:
            if cell.cell_id not in rows:
                rows[cell.cell_id] = {
                    "cell_id": cell.cell_id, "index": int(cell.index),
                    "axes": jsonable(dict(cell.axes), f"cell {cell.cell_id} axes"),
                    "settings": jsonable(cell.settings, f"cell {cell.cell_id} settings"),
                    "labels": jsonable(cell.labels, f"cell {cell.cell_id} labels"),
                    "state": CellState.PENDING.value, "attempts_count": 0,
                    "max_retries": max_retries, "created_at": now,
                }
        with self._tx() as session:
            # The row lock serialises concurrent add_cells on PostgreSQL (SQLite's
            # BEGIN IMMEDIATE already does).
            parent = sweep_row(session, sweep, lock=True)
            existing = set(
                session.scalars(select(CellRow.cell_id).where(CellRow.sweep_id == parent.id))
            )
            new = [row for cell_id, row in rows.items() if cell_id not in existing]
            if new:
                session.execute(insert(CellRow), [{**row, "sweep_id": parent.id} for row in new])
        return [CellRecord.pending(sweep, row) for row in new]

    def cells(
        self, sweep: str, states: Iterable[CellState | str] | None = None
    ) -> list[CellRecord]:
        """The sweep's cells (optionally only those in ``states``), by index."""
        with self._read() as session:
            parent = sweep_row(session, sweep)
            query = select(CellRow).where(CellRow.sweep_id == parent.id)
            if states is not None:
                query = query.where(CellRow.state.in_([CellState(s).value for s in states]))
            rows = session.scalars(query.order_by(CellRow.index, CellRow.cell_id))
            return [CellRecord.of(row, sweep) for row in rows]

    def cell_keys(
        self, sweep: str, states: Iterable[CellState | str] | None = None
    ) -> list[tuple[str, int]]:
        """``(cell id, index)`` of the sweep's cells (optionally only those in ``states``),
        by index: what a scheduler pass over many waiting cells reads (no settings)."""
        with self._read() as session:
            parent = sweep_row(session, sweep)
            query = select(CellRow.cell_id, CellRow.index).where(CellRow.sweep_id == parent.id)
            if states is not None:
                query = query.where(CellRow.state.in_([CellState(s).value for s in states]))
            rows = session.execute(query.order_by(CellRow.index, CellRow.cell_id)).all()
            return [(str(cell_id), int(index)) for cell_id, index in rows]

    def cells_by_id(self, sweep: str, cell_ids: Iterable[str]) -> list[CellRecord]:
        """The sweep's cells whose ids are in ``cell_ids`` (others skipped), by index."""
        wanted = list(dict.fromkeys(cell_ids))
        found: list[CellRecord] = []
        with self._read() as session:
            parent = sweep_row(session, sweep)
            for start in range(0, len(wanted), _IDS_PER_QUERY):
                rows = session.scalars(select(CellRow).where(
                    CellRow.sweep_id == parent.id,
                    CellRow.cell_id.in_(wanted[start:start + _IDS_PER_QUERY])))
                found.extend(CellRecord.of(row, sweep) for row in rows)
        return sorted(found, key=lambda c: (c.index, c.cell_id))

    def get_cell(self, sweep: str, ref: str) -> CellRecord:
        """The cell whose id is ``ref`` or starts with it (unique prefix)."""
        with self._read() as session:
            return CellRecord.of(cell_row(session, sweep, ref, prefix=True), sweep)

    def attempts(self, cell: CellRef) -> list[AttemptRecord]:
        """The cell's attempts, first first."""
        sweep, cell_id = _key(cell)
        with self._read() as session:
            row = cell_row(session, sweep, cell_id)
            return [AttemptRecord.of(a, sweep, cell_id) for a in row.attempts]

    def counts(self, sweep: str) -> dict[CellState, int]:
        """How many of the sweep's cells are in each state (every state present)."""
        with self._read() as session:
            parent = sweep_row(session, sweep)
            rows = session.execute(
                select(CellRow.state, func.count())
                .where(CellRow.sweep_id == parent.id)
                .group_by(CellRow.state)
            ).all()
        found = {CellState(state): int(n) for state, n in rows}
        return {state: found.get(state, 0) for state in CellState}

    # -- state changes -----------------------------------------------------------------
    def transition(
        self,
        cell: CellRef,
        expected: CellState | str | Iterable[CellState | str],
        new: CellState | str,
        **fields: Any,
    ) -> bool:
        """Compare-and-set: move the cell to ``new`` iff it is in one of ``expected``.

        Returns ``False`` (and changes nothing) when the cell is in another state, e.g.
        because another process got there first. An edge missing from
        ``states.TRANSITIONS`` raises ``IllegalTransition``. ``fields`` (see
        ``TRANSITION_FIELDS``) are written in the same transaction. Entering ``running``
        opens a new attempt; entering a terminal state closes the open one.
        """
        return self._change(cell, expected, new, fields)[0]

    def start_attempt(
        self,
        cell: CellRef,
        *,
        job_id: str | None = None,
        log_path: str | None = None,
        expected: Iterable[CellState | str] = (CellState.QUEUED,),
    ) -> AttemptRecord | None:
        """``queued -> running`` with a new attempt (numbered from 1); ``None`` if lost."""
        return self._change(
            cell, expected, CellState.RUNNING, {"job_id": job_id, "log_path": log_path}
        )[1]

    def finish_attempt(
        self,
        cell: CellRef,
        state: CellState | str,
        *,
        exit_code: int | None = None,
        last_error: str | None = None,
        final_metrics: Mapping[str, Any] | None = None,
        stop_reason: str | None = None,
    ) -> bool:
        """``running -> state`` (a terminal state), closing the open attempt;
        ``stop_reason`` when a stopping rule ended the cell."""
        fields: dict[str, Any] = {"exit_code": exit_code}
        if last_error is not None:
            fields["last_error"] = last_error
        if final_metrics is not None:
            fields["final_metrics"] = final_metrics
        if stop_reason is not None:
            fields["stop_reason"] = stop_reason
        return self._change(cell, (CellState.RUNNING,), state, fields)[0]

    def _change(
        self,
        cell: CellRef,
        expected: CellState | str | Iterable[CellState | str],
        new: CellState | str,
        fields: Mapping[str, Any],
    ) -> tuple[bool, AttemptRecord | None]:
        sweep, cell_id = _key(cell)
        with self._tx() as session:
            row = cell_row(session, sweep, cell_id)
            self._check_fence(session, row.sweep_id)
            return apply_transition(session, row, expected, new, fields)

    # -- other updates -----------------------------------------------------------------
    def update_cell(self, cell: CellRef, **fields: Any) -> None:
        """Set fields that are not state (``UPDATE_FIELDS``), e.g. the MLflow run id."""
        check_fields(fields, UPDATE_FIELDS, "update_cell")
        sweep, cell_id = _key(cell)
        with self._tx() as session:
            row = cell_row(session, sweep, cell_id)
            self._check_fence(session, row.sweep_id)
            for name, value in fields.items():
                setattr(row, name, value)

    def set_run_dirs(self, sweep: str, run_dirs: Mapping[str, str]) -> None:
        """Record the run folders of many cells (id -> folder) in one transaction."""
        if not run_dirs:
            return
        cells = cast(Table, CellRow.__table__)
        statement = (update(cells)
                     .where(cells.c.sweep_id == bindparam("sweep_pk"),
                            cells.c.cell_id == bindparam("cell"))
                     .values(run_dir=bindparam("folder")))
        with self._tx() as session:
            parent = sweep_row(session, sweep)
            session.execute(statement, [{"sweep_pk": parent.id, "cell": cell_id, "folder": folder}
                                        for cell_id, folder in run_dirs.items()])

    def attach_job(self, cell: CellRef, job_id: str) -> bool:
        """Record the executor's job id on a running cell and its open attempt."""
        sweep, cell_id = _key(cell)
        with self._tx() as session:
            row = cell_row(session, sweep, cell_id)
            self._check_fence(session, row.sweep_id)
            if row.state != CellState.RUNNING.value:
                return False
            row.job_id = job_id
            for attempt in row.attempts:
                if attempt.state == AttemptState.RUNNING.value:
                    attempt.job_id = job_id
            return True

    def update_progress(self, cell: CellRef, step: int, total_steps: int | None = None) -> bool:
        """Record training progress of a running cell (a heartbeat); ``False`` if not running."""
        sweep, cell_id = _key(cell)
        values: dict[str, Any] = {"progress_step": step, "progress_updated_at": utcnow()}
        if total_steps is not None:
            values["total_steps"] = total_steps
        with self._tx() as session:
            row = cell_row(session, sweep, cell_id)
            result = cast(
                CursorResult[Any],
                session.execute(
                    update(CellRow)
                    .where(CellRow.id == row.id, CellRow.state == CellState.RUNNING.value)
                    .values(**values)
                    .execution_options(synchronize_session=False)
                ),
            )
            return result.rowcount == 1


def _key(cell: CellRef) -> tuple[str, str]:
    if isinstance(cell, CellRecord):
        return cell.key
    sweep, cell_id = cell
    return str(sweep), str(cell_id)
