"""Cell writes: compare-and-set state changes, attempts, and fields that are not state.

Each write of a fenced registry (:meth:`~.connection.RegistryConnection.fenced`) first
checks that its scheduler still holds the sweep's lease.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from sqlalchemy import Table, bindparam, update

from orchestrator.registry.cells import CellRef, cell_key
from orchestrator.registry.connection import RegistryConnection
from orchestrator.registry.models import CellRow, utcnow
from orchestrator.registry.rows import cell_row, check_fields, sweep_row, updated_one
from orchestrator.registry.snapshots import AttemptRecord
from orchestrator.registry.states import AttemptState, CellState
from orchestrator.registry.transitions import apply_transition

# Fields a caller may set without changing state.
UPDATE_FIELDS = frozenset({"run_dir", "mlflow_run_id", "job_id", "max_retries", "last_error"})


class CellUpdates(RegistryConnection):
    """The registry's cell writes (mixed into :class:`~.store.Registry`)."""

    def transition(self, cell: CellRef, expected: CellState | str | Iterable[CellState | str],
                   new: CellState | str, **fields: Any) -> bool:
        """Compare-and-set: move the cell to ``new`` iff it is in one of ``expected``;
        ``False`` (nothing changed) when another process got there first. An edge missing
        from ``states.TRANSITIONS`` raises ``IllegalTransition``. ``fields`` (see
        ``TRANSITION_FIELDS``) are written in the same transaction (``transitions.py``)."""
        return self._change(cell, expected, new, fields)[0]

    def start_attempt(self, cell: CellRef, *, job_id: str | None = None,
                      log_path: str | None = None,
                      expected: Iterable[CellState | str] = (CellState.QUEUED,),
                      ) -> AttemptRecord | None:
        """``queued -> running`` with a new attempt (numbered from 1); ``None`` if lost."""
        return self._change(cell, expected, CellState.RUNNING,
                            {"job_id": job_id, "log_path": log_path})[1]

    def finish_attempt(self, cell: CellRef, state: CellState | str, *,
                       exit_code: int | None = None, last_error: str | None = None,
                       final_metrics: Mapping[str, Any] | None = None,
                       stop_reason: str | None = None) -> bool:
        """``running -> state`` (a terminal state), closing the open attempt;
        ``stop_reason`` when a stopping rule ended the cell."""
        given = {"last_error": last_error, "final_metrics": final_metrics,
                 "stop_reason": stop_reason}
        fields = {"exit_code": exit_code, **{k: v for k, v in given.items() if v is not None}}
        return self._change(cell, (CellState.RUNNING,), state, fields)[0]

    def _change(self, cell: CellRef, expected: CellState | str | Iterable[CellState | str],
                new: CellState | str,
                fields: Mapping[str, Any]) -> tuple[bool, AttemptRecord | None]:
        sweep, cell_id = cell_key(cell)
        with self._tx() as session:
            row = cell_row(session, sweep, cell_id)
            self._check_fence(session, row.sweep_id)
            return apply_transition(session, row, expected, new, fields)

    # -- other updates -----------------------------------------------------------------
    def update_cell(self, cell: CellRef, **fields: Any) -> None:
        """Set fields that are not state (``UPDATE_FIELDS``), e.g. the MLflow run id."""
        check_fields(fields, UPDATE_FIELDS, "update_cell")
        sweep, cell_id = cell_key(cell)
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
        sweep, cell_id = cell_key(cell)
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
        sweep, cell_id = cell_key(cell)
        values: dict[str, Any] = {"progress_step": step, "progress_updated_at": utcnow()}
        if total_steps is not None:
            values["total_steps"] = total_steps
        with self._tx() as session:
            row = cell_row(session, sweep, cell_id)
            return updated_one(session, update(CellRow).values(**values).where(
                CellRow.id == row.id, CellRow.state == CellState.RUNNING.value))
