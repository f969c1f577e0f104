"""The compare-and-set at the heart of every cell state change, and the only place that
sets derived fields (times, attempts; a cell back to pending forgets its last run)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from orchestrator.registry.connection import check_fields, jsonable, updated_one
from orchestrator.registry.models import AttemptRow, CellRow, utcnow
from orchestrator.registry.snapshots import AttemptRecord
from orchestrator.registry.states import (
    TERMINAL_STATES,
    AttemptState,
    CellState,
    check_transition,
)

# Fields a caller may set along with a state change (log_path goes to the new attempt).
TRANSITION_FIELDS = frozenset({"job_id", "exit_code", "last_error", "run_dir", "mlflow_run_id",
                               "final_metrics", "progress_step", "total_steps", "log_path",
                               "stop_reason"})


def apply_transition(session: Session, row: CellRow,
                     expected: CellState | str | Iterable[CellState | str],
                     new: CellState | str,
                     fields: Mapping[str, Any]) -> tuple[bool, AttemptRecord | None]:
    """Compare-and-set ``row`` from ``expected`` to ``new``: (changed?, attempt opened/closed)."""
    check_fields(fields, TRANSITION_FIELDS, "transition")
    sources, target = check_transition([expected] if isinstance(expected, str) else expected, new)
    values = {k: v for k, v in fields.items() if k != "log_path"}
    if values.get("final_metrics") is not None:
        values["final_metrics"] = jsonable(dict(values["final_metrics"]), "final_metrics")
    now = utcnow()
    values["state"] = target.value
    if target is CellState.QUEUED:
        values["queued_at"] = now
    elif target is CellState.RUNNING:
        values.update(started_at=now, finished_at=None,
                      attempts_count=CellRow.attempts_count + 1)
    elif target in TERMINAL_STATES:
        values["finished_at"] = now
    elif target is CellState.PENDING:
        values.update(queued_at=None, started_at=None, finished_at=None, job_id=None,
                      exit_code=None, final_metrics=None, stop_reason=None)
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
            session.flush()
            return AttemptRecord.of(open_attempt, sweep_name, row.cell_id)
    return None
