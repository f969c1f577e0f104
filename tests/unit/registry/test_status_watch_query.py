"""``kappa status --watch`` reads a sweep in ONE statement per refresh, on SQLite and
PostgreSQL (:func:`orchestrator.registry.active.read_active`), and the status it makes."""

from __future__ import annotations

from typing import Any

from kit.cells import make_cells
from sqlalchemy import event

from orchestrator.registry import CellState, Registry, SweepRecord
from orchestrator.registry.active import read_active, read_engine
from orchestrator.registry.leases import Claimant
from orchestrator.sweeps.status import SweepStatus, active_status


def read_snapshot(engine: Any, record: SweepRecord) -> SweepStatus:
    """What ``--watch`` shows after one read."""
    return active_status(record, read_active(engine, record.name))


def _run(reg: Registry, cell_id: str) -> None:
    reg.transition(("toy", cell_id), CellState.PENDING, CellState.QUEUED)
    reg.start_attempt(("toy", cell_id), job_id=f"local:{cell_id}")


def _fail(reg: Registry, cell_id: str, why: str) -> None:
    _run(reg, cell_id)
    reg.finish_attempt(("toy", cell_id), CellState.FAILED, exit_code=1, last_error=why)


def test_one_statement_per_refresh_with_counts_running_failures_and_lease(
        registry: Registry) -> None:
    cells = make_cells(7)
    registry.add_cells("toy", cells[:6], max_retries=0)
    registry.add_cells("toy", cells[6:], max_retries=1)  # its failure will be retried
    ids = [c.cell_id for c in cells]
    _run(registry, ids[0])
    registry.update_progress(("toy", ids[0]), 3, 10)
    _run(registry, ids[1])
    _fail(registry, ids[2], "exit code 1\nTraceback ...")
    _fail(registry, ids[3], "exit code 2")
    _run(registry, ids[4])
    registry.finish_attempt(("toy", ids[4]), CellState.SUCCEEDED, exit_code=0)
    _fail(registry, ids[6], "exit code 3")  # one retry left
    engine = read_engine(registry.engine)
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    record = registry.get_sweep("toy")
    read_snapshot(engine, record)  # a new connection may set itself up first (pragmas)
    event.listen(engine, "before_cursor_execute", count)
    try:
        snap = read_snapshot(engine, record)
    finally:
        event.remove(engine, "before_cursor_execute", count)
        if engine is not registry.engine:
            engine.dispose()
    assert len(statements) == 1 and statements[0].lstrip().upper().startswith("SELECT")
    assert snap.counts == {"pending": 1, "queued": 0, "running": 2, "succeeded": 1,
                           "failed": 3, "cancelled": 0}
    assert snap.retrying == 1
    assert [c.cell_id for c in snap.running] == ids[:2]
    assert (snap.running[0].progress_step, snap.running[0].total_steps) == (3, 10)
    assert sorted(c.cell_id for c in snap.failures()) == sorted([ids[2], ids[3], ids[6]])
    assert "exit code" in snap.failures()[0].failure_text()
    assert not snap.driver.live and not snap.ended


def test_a_live_lease_keeps_an_ended_looking_sweep_watched(registry: Registry) -> None:
    cells = make_cells(1)
    registry.add_cells("toy", cells)
    _run(registry, cells[0].cell_id)
    registry.finish_attempt(("toy", cells[0].cell_id), CellState.SUCCEEDED, exit_code=0)
    engine = read_engine(registry.engine)
    try:
        assert read_snapshot(engine, registry.get_sweep("toy")).ended
        me = Claimant("a" * 32, "machine-a", "host-a", 111)
        registry.take_lease("toy", me, 60.0)
        snap = read_snapshot(engine, registry.get_sweep("toy"))
        assert snap.driver.live and not snap.ended
        registry.release_lease("toy", me.owner)
        assert read_snapshot(engine, registry.get_sweep("toy")).ended
    finally:
        if engine is not registry.engine:
            engine.dispose()
