"""Cell rows: registering a sweep's cells and reading cells, attempts and counts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Text, cast, func, insert, or_, select
from sqlalchemy.orm import Session

from orchestrator.registry.connection import RegistryConnection
from orchestrator.registry.models import CellRow, utcnow
from orchestrator.registry.rows import cell_row, jsonable, sweep_row
from orchestrator.registry.snapshots import AttemptRecord, CellLike, CellRecord
from orchestrator.registry.states import CellState

CellRef = CellRecord | tuple[str, str]
"""A cell is named by its snapshot or by ``(sweep name, cell id)``."""

# Ids per IN (...) list: far below any database's limit on bound parameters.
_IDS_PER_QUERY = 500


def cell_key(cell: CellRef) -> tuple[str, str]:
    """``(sweep name, cell id)`` of a cell named either way."""
    if isinstance(cell, CellRecord):
        return cell.key
    sweep, cell_id = cell
    return str(sweep), str(cell_id)


class CellStore(RegistryConnection):
    """The registry's cell reads and ``add_cells`` (mixed into :class:`~.store.Registry`)."""

    def add_cells(self, sweep: str, cells: Iterable[CellLike], *, max_retries: int = 0,
                  demands: Mapping[str, Mapping[str, Any]] | None = None) -> list[CellRecord]:
        """Register ``cells`` as ``pending``; cells already there are left untouched.
        ``demands`` maps cell ids to what the scheduler needs of them (``Demand.to_json``,
        judged where they were validated); a cell without one is stored without.

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
                    "demand": (demands or {}).get(cell.cell_id),
                }
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
                self._fill_missing_demands(session, parent.id, demands)
        return [CellRecord.pending(sweep, row) for row in new]

    @staticmethod
    def _fill_missing_demands(session: Session, sweep_id: int,
                              demands: Mapping[str, Mapping[str, Any]]) -> None:
        """Give a demand to the sweep's cells that have none and are given one: a cell
        whose settings did not validate when the registry was upgraded gets it when its
        spec is submitted again (what its launch error tells the user to do)."""
        # None is stored as SQL NULL by the migration and as JSON null by an insert.
        missing = session.scalars(select(CellRow).where(
            CellRow.sweep_id == sweep_id,
            or_(CellRow.demand.is_(None), cast(CellRow.demand, Text) == "null")))
        for row in missing:
            if row.cell_id in demands:
                row.demand = dict(demands[row.cell_id])

    def cells(self, sweep: str,
              states: Iterable[CellState | str] | None = None) -> list[CellRecord]:
        """The sweep's cells (optionally only those in ``states``), by index."""
        with self._read() as session:
            parent = sweep_row(session, sweep)
            query = select(CellRow).where(CellRow.sweep_id == parent.id)
            if states is not None:
                query = query.where(CellRow.state.in_([CellState(s).value for s in states]))
            rows = session.scalars(query.order_by(CellRow.index, CellRow.cell_id))
            return [CellRecord.of(row, sweep) for row in rows]

    def cell_keys(self, sweep: str,
                  states: Iterable[CellState | str] | None = None) -> list[tuple[str, int]]:
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
        sweep, cell_id = cell_key(cell)
        with self._read() as session:
            row = cell_row(session, sweep, cell_id)
            return [AttemptRecord.of(a, sweep, cell_id) for a in row.attempts]

    def counts(self, sweep: str) -> dict[CellState, int]:
        """How many of the sweep's cells are in each state (every state present)."""
        with self._read() as session:
            parent = sweep_row(session, sweep)
            rows = session.execute(select(CellRow.state, func.count())
                                   .where(CellRow.sweep_id == parent.id)
                                   .group_by(CellRow.state)).all()
        found = {CellState(state): int(n) for state, n in rows}
        return {state: found.get(state, 0) for state in CellState}
