"""Cell rows: registering a sweep's cells, reading cells, attempts and counts, and writing them
(each write of a fenced registry only while its scheduler holds the sweep's lease)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVarTuple, cast

from sqlalchemy import Row, Select, Table, Text, bindparam, func, insert, or_, select, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Session

from orchestrator.registry.connection import (
    cell_row,
    check_fields,
    jsonable,
    of_sweep,
    sweep_row,
    updated_one,
)
from orchestrator.registry.leases import LeaseStore, check_fence
from orchestrator.registry.models import AttemptRow, CellRow, utcnow
from orchestrator.registry.snapshots import AttemptRecord, CellLike, CellRecord
from orchestrator.registry.states import TERMINAL_STATES, AttemptState, CellState, check_transition

_Ts = TypeVarTuple("_Ts")
CellRef = CellRecord | tuple[str, str]
"""A cell is named by its snapshot or by ``(sweep name, cell id)``."""

_IDS_PER_QUERY = 500  # ids per IN (...) list: far below any database's limit on bound parameters
# Fields a caller may set without changing state.
UPDATE_FIELDS = frozenset({"run_dir", "mlflow_run_id", "job_id", "max_retries", "last_error"})
# Fields a caller may set along with a state change (log_path goes to the new attempt).
TRANSITION_FIELDS = frozenset({"job_id", "exit_code", "last_error", "run_dir", "mlflow_run_id",
                               "final_metrics", "progress_step", "total_steps", "log_path",
                               "stop_reason", "provenance"})


def cell_key(cell: CellRef) -> tuple[str, str]:
    """``(sweep name, cell id)`` of a cell named either way."""
    return cell.key if isinstance(cell, CellRecord) else (str(cell[0]), str(cell[1]))


def apply_transition(session: Session, row: CellRow,
                     expected: CellState | str | Iterable[CellState | str], new: CellState | str,
                     fields: Mapping[str, Any]) -> tuple[bool, AttemptRecord | None]:
    """Compare-and-set ``row`` from ``expected`` to ``new``: (changed?, attempt opened/closed).
    The only place that sets derived fields (times, attempts; a cell back to pending forgets
    its last run)."""
    check_fields(fields, TRANSITION_FIELDS, "transition")
    sources, target = check_transition([expected] if isinstance(expected, str) else expected, new)
    values = {k: v for k, v in fields.items() if k != "log_path"}
    for name in ("final_metrics", "provenance"):
        if values.get(name) is not None:
            values[name] = jsonable(dict(values[name]), name)
    now = utcnow()
    values["state"] = target.value
    if target is CellState.QUEUED:
        values["queued_at"] = now
    elif target is CellState.RUNNING:
        values.update(started_at=now, finished_at=None, attempts_count=CellRow.attempts_count + 1)
    elif target in TERMINAL_STATES:
        values["finished_at"] = now
    elif target is CellState.PENDING:
        values.update(queued_at=None, started_at=None, finished_at=None, job_id=None,
                      exit_code=None, final_metrics=None, stop_reason=None, provenance=None)
    # One UPDATE ... WHERE state IN (expected): atomic on SQLite and PostgreSQL alike, so
    # of two processes racing for the same edge exactly one sees rowcount 1.
    if not updated_one(session, update(CellRow).values(**values).where(
            CellRow.id == row.id, CellRow.state.in_([s.value for s in sources]))):
        return False, None
    session.refresh(row)
    return True, _record_attempt(session, row, target, fields, now)


def _record_attempt(session: Session, row: CellRow, target: CellState,
                    fields: Mapping[str, Any], now: datetime) -> AttemptRecord | None:
    sweep_name = row.sweep.name
    if target is CellState.RUNNING:
        attempt = AttemptRow(cell_pk=row.id, number=row.attempts_count,
                             state=AttemptState.RUNNING.value, job_id=fields.get("job_id"),
                             started_at=now, log_path=fields.get("log_path"))
        session.add(attempt)
        session.flush()
        return AttemptRecord.of(attempt, sweep_name, row.cell_id)
    if target in TERMINAL_STATES:
        open_attempt = session.scalar(select(AttemptRow).where(
            AttemptRow.cell_pk == row.id, AttemptRow.state == AttemptState.RUNNING.value))
        if open_attempt is not None:
            open_attempt.state = AttemptState(target.value).value  # as its cell ended
            open_attempt.finished_at = now
            open_attempt.exit_code = fields.get("exit_code")
            open_attempt.provenance = row.provenance if fields.get("provenance") else None
            session.flush()
            return AttemptRecord.of(open_attempt, sweep_name, row.cell_id)
    return None


def _sweep_rows(session: Session, sweep: str, query: Select[*_Ts],
                states: Iterable[CellState | str] | None) -> Sequence[Row[*_Ts]]:
    """``query``'s rows of the sweep's cells (in ``states``), by index."""
    query = query.where(of_sweep(sweep))
    if states is not None:
        query = query.where(CellRow.state.in_([CellState(s).value for s in states]))
    rows = session.execute(query.order_by(CellRow.index, CellRow.cell_id)).all()
    if not rows:
        sweep_row(session, sweep)  # an unknown sweep is an error, not "no cells"
    return rows


class CellStore(LeaseStore):
    """The registry's cell methods (mixed into :class:`~orchestrator.registry.Registry`)."""

    def add_cells(self, sweep: str, cells: Iterable[CellLike], *, max_retries: int = 0,
                  demands: Mapping[str, Mapping[str, Any]] | None = None) -> list[CellRecord]:
        """Register ``cells`` as ``pending`` (those already there untouched), with
        ``demands`` (cell id -> ``Demand.to_json``) where given; the cells that were new.
        All or nothing: if any cell cannot be stored (settings not JSON), none is."""
        # Rows made before the transaction, snapshots after: on PostgreSQL the server ends
        # a transaction idle as long as a lease (leases.py), and making 100,000 ORM rows
        # inside it takes longer than that on a busy machine.
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
                    "demand": (demands or {}).get(cell.cell_id)}
        with self._tx() as session:
            # The row lock serialises concurrent add_cells on PostgreSQL (SQLite's
            # BEGIN IMMEDIATE already does).
            parent = sweep_row(session, sweep, lock=True)
            existing = set(session.scalars(
                select(CellRow.cell_id).where(CellRow.sweep_id == parent.id)))
            new = [row for cell_id, row in rows.items() if cell_id not in existing]
            if new:
                session.execute(insert(CellRow), [{**row, "sweep_id": parent.id} for row in new])
            if demands:
                # A cell without a demand (its settings did not validate at the registry's upgrade)
                # gets the one given; none is SQL NULL from the migration, JSON null from an insert.
                for row in session.scalars(select(CellRow).where(
                        CellRow.sweep_id == parent.id,
                        or_(CellRow.demand.is_(None), sql_cast(CellRow.demand, Text) == "null"))):
                    if row.cell_id in demands:
                        row.demand = dict(demands[row.cell_id])
        return [CellRecord.of(row, sweep) for row in new]

    def cells(self, sweep: str,
              states: Iterable[CellState | str] | None = None) -> list[CellRecord]:
        """The sweep's cells (optionally only those in ``states``), by index."""
        with self._read() as session:
            rows = _sweep_rows(session, sweep, select(CellRow), states)
            return [CellRecord.of(row, sweep) for (row,) in rows]

    def cell_keys(self, sweep: str,
                  states: Iterable[CellState | str] | None = None) -> list[tuple[str, int]]:
        """``(cell id, index)`` of the sweep's cells (in ``states``), by index: no settings."""
        with self._read() as session:
            rows = _sweep_rows(session, sweep, select(CellRow.cell_id, CellRow.index), states)
            return [(str(cell_id), int(index)) for cell_id, index in rows]

    def finished_numerics(self, sweep: str) -> tuple[list[tuple[str, int]],
                                                     list[dict[str, Any] | None]]:
        """The numerics the sweep's succeeded cells recorded, in one query: ``(cell id, k)``
        by index, ``k`` indexing the distinct recorded numerics (the second list; ``None``:
        none recorded), which a caller judges once each (100,000 cells hold a handful)."""
        made = sql_cast(CellRow.provenance["numerics"], Text)  # its JSON text: parsed once
        with self._read() as session:
            parent = sweep_row(session, sweep)
            rows = session.connection().execute(
                select(CellRow.cell_id, made)
                .where(CellRow.sweep_id == parent.id,
                       CellRow.state == CellState.SUCCEEDED.value)
                .order_by(CellRow.index, CellRow.cell_id)).all()
        distinct: dict[str | None, int] = {}
        cells = [(str(cell_id), distinct.setdefault(text, len(distinct))) for cell_id, text in rows]
        parsed = [json.loads(text) if text else None for text in distinct]
        return cells, [p if isinstance(p, dict) else None for p in parsed]

    def cells_by_id(self, sweep: str, cell_ids: Iterable[str]) -> list[CellRecord]:
        """The sweep's cells whose ids are in ``cell_ids`` (others skipped), by index."""
        wanted = list(dict.fromkeys(cell_ids))
        found: list[CellRecord] = []
        with self._read() as session:
            for start in range(0, len(wanted), _IDS_PER_QUERY):
                rows = session.scalars(select(CellRow).where(
                    of_sweep(sweep), CellRow.cell_id.in_(wanted[start:start + _IDS_PER_QUERY])))
                found.extend(CellRecord.of(row, sweep) for row in rows)
            if not found:
                sweep_row(session, sweep)
        return sorted(found, key=lambda c: (c.index, c.cell_id))

    def get_cell(self, sweep: str, ref: str) -> CellRecord:
        """The cell whose id is ``ref`` or starts with it (unique prefix)."""
        with self._read() as session:
            return CellRecord.of(cell_row(session, sweep, ref, prefix=True), sweep)

    def attempts(self, cell: CellRef) -> list[AttemptRecord]:
        """The cell's attempts, first first."""
        sweep, cell_id = cell_key(cell)
        with self._read() as session:
            row = cell_row(session, sweep, cell_id)
            return [AttemptRecord.of(a, sweep, cell_id) for a in row.attempts]

    def counts(self, sweep: str) -> dict[CellState, int]:
        """How many of the sweep's cells are in each state (every state present)."""
        with self._read() as session:
            rows = session.execute(select(CellRow.state, func.count())
                                   .where(of_sweep(sweep)).group_by(CellRow.state)).all()
            if not rows:
                sweep_row(session, sweep)
        found = {CellState(state): int(n) for state, n in rows}
        return {state: found.get(state, 0) for state in CellState}

    # -- writes ----------------------------------------------------------------------------
    def transition(self, cell: CellRef, expected: CellState | str | Iterable[CellState | str],
                   new: CellState | str, **fields: Any) -> bool:
        """Compare-and-set: move the cell to ``new`` iff it is in one of ``expected``;
        ``False`` (nothing changed) when another process got there first. An edge missing
        from ``states.TRANSITIONS`` raises ``IllegalTransition``. ``fields`` (see
        ``TRANSITION_FIELDS``) are written in the same transaction (:func:`apply_transition`)."""
        with self._fenced_row(cell) as (session, row):
            return apply_transition(session, row, expected, new, fields)[0]

    def start_attempt(self, cell: CellRef, *, job_id: str | None = None,
                      log_path: str | None = None,
                      expected: Iterable[CellState | str] = (CellState.QUEUED,),
                      ) -> AttemptRecord | None:
        """``queued -> running`` with a new attempt (numbered from 1); ``None`` if lost."""
        with self._fenced_row(cell) as (session, row):
            return apply_transition(session, row, expected, CellState.RUNNING,
                                    {"job_id": job_id, "log_path": log_path})[1]

    def finish_attempt(self, cell: CellRef, state: CellState | str, *,
                       exit_code: int | None = None, last_error: str | None = None,
                       final_metrics: Mapping[str, Any] | None = None,
                       stop_reason: str | None = None,
                       provenance: Mapping[str, Any] | None = None) -> bool:
        """``running -> state`` (terminal), closing the open attempt (``stop_reason``: why;
        ``provenance``: what made its numbers, kept with the attempt and the cell)."""
        given = {"last_error": last_error, "final_metrics": final_metrics,
                 "stop_reason": stop_reason, "provenance": provenance}
        return self.transition(cell, (CellState.RUNNING,), state, exit_code=exit_code,
                               **{k: v for k, v in given.items() if v is not None})

    @contextmanager
    def _fenced_row(self, cell: CellRef) -> Iterator[tuple[Session, CellRow]]:
        sweep, cell_id = cell_key(cell)
        with self._tx() as session:
            row = cell_row(session, sweep, cell_id)
            if self.fence is not None:
                check_fence(session, row.sweep_id, self.fence)
            yield session, row

    def update_cell(self, cell: CellRef, **fields: Any) -> None:
        """Set fields that are not state (``UPDATE_FIELDS``), e.g. the MLflow run id."""
        check_fields(fields, UPDATE_FIELDS, "update_cell")
        with self._fenced_row(cell) as (_, row):
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
        with self._fenced_row(cell) as (_, row):
            if row.state != CellState.RUNNING.value:
                return False
            row.job_id = job_id
            for attempt in row.attempts:
                if attempt.state == AttemptState.RUNNING.value:
                    attempt.job_id = job_id
            return True

    def update_progress(self, cell: CellRef, step: int, total_steps: int | None = None) -> bool:
        """Record training progress of a running cell (a heartbeat); ``False`` if not running."""
        sweep, cell_id = cell_key(cell)
        values: dict[str, Any] = {"progress_step": step, "progress_updated_at": utcnow()}
        if total_steps is not None:
            values["total_steps"] = total_steps
        with self._tx() as session:
            row = cell_row(session, sweep, cell_id)
            return updated_one(session, update(CellRow).values(**values).where(
                CellRow.id == row.id, CellRow.state == CellState.RUNNING.value))
