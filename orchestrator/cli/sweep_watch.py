"""``kappa status SWEEP --watch``: the sweep's progress, live, from any terminal, until
the sweep ends: the bars ``kappa submit --wait`` draws (throttled lines in a log), and
each cell that fails as it does.

Light on the registry: each refresh is ONE SELECT (:func:`read_snapshot`): the counts
per state, the failed cells that will be retried, the sweep's lease, the running cells
and the newest failures, from one statement whose subqueries the database evaluates
once. On SQLite it runs on a read-only connection of its own that never takes the write
lock the registry's own transactions take (a watcher never makes a scheduler wait); on
PostgreSQL, outside any transaction.

The sweep has ended when no cell is pending, queued or running, none waits for a retry,
and no scheduler holds the sweep's lease (one finishing its bookkeeping still does). A
sweep whose cells wait with no scheduler is watched on, with a line saying so (a
``kappa resume`` elsewhere picks it up).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.console import Console
from sqlalchemy import Engine, Select, and_, create_engine, event, func, or_, select
from sqlalchemy.orm import aliased

from orchestrator.cli.sweep_views import counts_text, progress_display
from orchestrator.redact import redact
from orchestrator.registry import CellState, Registry
from orchestrator.registry.models import CellRow, LeaseRow, SweepRow, utcnow

DEFAULT_INTERVAL = 2.0
MIN_INTERVAL, MAX_INTERVAL = 0.2, 600.0
NEWEST_FAILURES = 3
UNFINISHED = (CellState.PENDING, CellState.QUEUED, CellState.RUNNING)


@dataclass(frozen=True)
class WatchedCell:
    """A running or failed cell, as much as the view shows of it."""

    cell_id: str
    index: int
    axes: Mapping[str, Any]
    state: CellState
    progress_step: int | None
    total_steps: int | None
    demand: Mapping[str, Any] | None
    attempts_count: int
    last_error: str | None
    stop_reason: str | None

    def failure_text(self) -> str:
        """``1a2b3c4d5e6f (seed=1): exit code 1 (`kappa logs 1a2b...`)``, masked."""
        why = self.stop_reason or next(
            (line for line in (self.last_error or "").splitlines() if line.strip()), "")
        axes = ", ".join(f"{k}={v}" for k, v in self.axes.items())
        return redact(f"{self.cell_id} ({axes}) failed: {why.strip()[:200]} "
                      f"(`kappa logs {self.cell_id}`)")


@dataclass(frozen=True)
class Snapshot:
    """One refresh's view of the sweep."""

    counts: dict[CellState, int]
    retrying: int  # failed cells with a retry left
    scheduler_live: bool
    running: list[WatchedCell] = field(default_factory=list)
    failures: list[WatchedCell] = field(default_factory=list)  # newest first

    @property
    def unfinished(self) -> int:
        """Cells pending, queued, running or waiting to be retried."""
        return sum(self.counts[s] for s in UNFINISHED) + self.retrying

    @property
    def ended(self) -> bool:
        """Nothing left to run and no scheduler (module docstring)."""
        return not self.unfinished and not self.scheduler_live


def snapshot_statement(sweep: str, failures: int = NEWEST_FAILURES,
                       server_clock: bool = False) -> Select[Any]:
    """The one SELECT of :func:`read_snapshot`: a row per running cell and per newest
    failure (one row with no cell when there is neither), each carrying the counts and the
    lease. ``server_clock``: also the database's ``now()`` (PostgreSQL's clock judges
    leases, as the registry's own code does)."""
    by_name = aliased(SweepRow)
    sweep_id = select(by_name.id).where(by_name.name == sweep).scalar_subquery()
    counted = aliased(CellRow)

    def count(*where: Any) -> Any:
        return (select(func.count()).select_from(counted)
                .where(counted.sweep_id == sweep_id, *where).scalar_subquery())

    failed = aliased(CellRow)
    newest_failed = (select(failed.id)
                     .where(failed.sweep_id == sweep_id, failed.state == CellState.FAILED.value)
                     .order_by(failed.finished_at.desc(), failed.id.desc()).limit(failures))
    shown = aliased(CellRow)
    columns: list[Any] = [
        *(count(counted.state == state.value).label(state.value) for state in CellState),
        count(counted.state == CellState.FAILED.value, counted.stop_reason.is_(None),
              counted.attempts_count <= counted.max_retries).label("retrying"),
        LeaseRow.owner, LeaseRow.expires_at,
        shown.cell_id, shown.index, shown.axes, shown.state, shown.progress_step,
        shown.total_steps, shown.demand, shown.attempts_count, shown.last_error,
        shown.stop_reason, shown.finished_at]
    if server_clock:
        columns.append(func.now().label("server_now"))
    return (select(*columns).select_from(SweepRow)
            .outerjoin(LeaseRow, LeaseRow.sweep_id == SweepRow.id)
            .outerjoin(shown, and_(shown.sweep_id == SweepRow.id, or_(
                shown.state == CellState.RUNNING.value, shown.id.in_(newest_failed))))
            .where(SweepRow.name == sweep).order_by(shown.index))


def read_engine(registry: Registry) -> Engine:
    """The engine the watch reads through: on SQLite a read-only one of its own (no
    ``BEGIN IMMEDIATE``: a plain SELECT holds no lock a writer waits on), else the
    registry's."""
    engine = registry.engine
    if engine.dialect.name != "sqlite":
        return engine
    reader = create_engine(engine.url, connect_args={"timeout": 30})

    @event.listens_for(reader, "connect")
    def _read_only(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA query_only = ON")
        cursor.close()

    return reader


def read_snapshot(engine: Engine, sweep: str, failures: int = NEWEST_FAILURES) -> Snapshot:
    """The sweep as it stands, in one SELECT (``engine``: :func:`read_engine`'s)."""
    server = engine.dialect.name == "postgresql"
    with engine.connect() as connection:
        if server:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        rows = connection.execute(snapshot_statement(sweep, failures, server)).all()
    if not rows:  # deleted while watched
        return Snapshot({s: 0 for s in CellState}, 0, False)
    first = rows[0]._mapping
    now: datetime = first["server_now"] if server else utcnow()
    expires = first["expires_at"]
    live = first["owner"] is not None and expires is not None and expires > now
    running: list[WatchedCell] = []
    failed: list[tuple[Any, WatchedCell]] = []
    for row in rows:
        m = row._mapping
        if m["cell_id"] is None:
            continue
        cell = WatchedCell(m["cell_id"], m["cell_index"], dict(m["axes"] or {}),
                           CellState(m["state"]), m["progress_step"], m["total_steps"],
                           m["demand"], m["attempts_count"], m["last_error"], m["stop_reason"])
        if cell.state is CellState.RUNNING:
            running.append(cell)
        else:
            failed.append((m["finished_at"], cell))
    failed.sort(key=lambda x: (x[0] is not None, x[0] or now), reverse=True)
    return Snapshot({s: int(first[s.value]) for s in CellState}, int(first["retrying"]), live,
                    running, [c for _, c in failed])


def watch(console: Console, registry: Registry, sweep: str,
          interval: float = DEFAULT_INTERVAL,
          sleep: Callable[[float], None] = time.sleep) -> Snapshot:
    """Draw ``sweep``'s progress every ``interval`` seconds until it has ended; the last
    snapshot. Each failure is printed once, as it is first seen."""
    engine = read_engine(registry)
    console.print(f"watching [bold]{sweep}[/] every {interval:g} s (Ctrl-C stops watching, "
                  "not the sweep)", highlight=False)
    display = progress_display(console)
    seen: set[tuple[str, int]] = set()
    orphaned = False
    try:
        while True:
            snap = read_snapshot(engine, sweep)
            for cell in reversed(snap.failures):
                if (cell.cell_id, cell.attempts_count) not in seen:
                    seen.add((cell.cell_id, cell.attempts_count))
                    console.print(f"[red]{cell.failure_text()}[/]", highlight=False,
                                  markup=True, soft_wrap=True)
            if snap.unfinished and not snap.scheduler_live and not orphaned:
                console.print(f"[yellow]no scheduler is running {sweep}[/] (`kappa resume "
                              f"{sweep}` runs what is left); still watching", highlight=False)
            orphaned = bool(snap.unfinished and not snap.scheduler_live)
            display.update(snap.counts, snap.running)
            if snap.ended:
                break
            sleep(interval)
    finally:
        display.close()
        if engine is not registry.engine:
            engine.dispose()
    console.print(f"[bold]{sweep}[/] ended: {counts_text(snap.counts)}", highlight=False)
    return snap
