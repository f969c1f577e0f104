"""A sweep's active part in ONE SELECT: the counts per state, the failed cells that will be
retried, the sweep's lease, the running cells and the newest failures, from one statement
whose subqueries the database evaluates once. What ``kappa status --watch`` and
``submit --wait``'s bars refresh every few seconds; a full status reads every cell instead."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Select, and_, create_engine, event, func, or_, select
from sqlalchemy.orm import aliased

from orchestrator.registry.engine import server_away, unreachable, unusable_sqlite
from orchestrator.registry.leases import LEASE_COLUMNS, Lease
from orchestrator.registry.models import CellRow, LeaseRow, SweepRow, utcnow
from orchestrator.registry.states import CellState

NEWEST_FAILURES = 3
#: The cell columns read, named as :class:`~orchestrator.registry.CellRecord`'s fields.
CELL_COLUMNS = ("cell_id", "index", "axes", "state", "progress_step", "total_steps",
                "demand", "attempts_count", "max_retries", "exit_code", "last_error",
                "stop_reason", "final_metrics", "run_dir", "mlflow_run_id", "finished_at",
                "provenance")


@dataclass(frozen=True)
class ActiveCells:
    """One read of a sweep's active part: ``cells`` are mappings keyed by
    :data:`CELL_COLUMNS` (running cells and the newest failures, by index)."""

    counts: dict[CellState, int]
    retrying: int  # failed cells with a retry left
    lease: Lease | None
    cells: tuple[Mapping[str, Any], ...]


def active_statement(sweep: str, failures: int = NEWEST_FAILURES,
                     server_clock: bool = False) -> Select[Any]:
    """The one SELECT of :func:`read_active`: a row per running cell and per newest
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
        *(getattr(LeaseRow, name).label(f"lease_{name}") for name in LEASE_COLUMNS),
        *(getattr(shown, name).label(name) for name in CELL_COLUMNS)]
    if server_clock:
        columns.append(func.now().label("server_now"))
    return (select(*columns).select_from(SweepRow)
            .outerjoin(LeaseRow, LeaseRow.sweep_id == SweepRow.id)
            .outerjoin(shown, and_(shown.sweep_id == SweepRow.id, or_(
                shown.state == CellState.RUNNING.value, shown.id.in_(newest_failed))))
            .where(SweepRow.name == sweep).order_by(shown.index))


def read_engine(engine: Engine) -> Engine:
    """The engine to read through: on SQLite a read-only one of its own (no ``BEGIN
    IMMEDIATE``: a watcher never makes a scheduler wait for the write lock), else ``engine``."""
    if engine.dialect.name != "sqlite":
        return engine
    reader = create_engine(engine.url, connect_args={"timeout": 30})

    @event.listens_for(reader, "connect")
    def _read_only(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA query_only = ON")
        cursor.close()

    return reader


def read_active(engine: Engine, sweep: str, failures: int = NEWEST_FAILURES) -> ActiveCells:
    """``sweep``'s active part as it stands, in one SELECT (``engine``: :func:`read_engine`'s;
    on PostgreSQL outside any transaction)."""
    server = engine.dialect.name == "postgresql"
    try:
        with engine.connect() as connection:
            if server:
                connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            rows = connection.execute(active_statement(sweep, failures, server)).all()
    except Exception as exc:  # a watcher says why it stops, without a traceback
        if (error := unreachable(engine.url, exc) if server_away(exc)
                else unusable_sqlite(engine.url, exc)) is None:
            raise
        raise error from None
    if not rows:  # deleted while watched
        return ActiveCells({s: 0 for s in CellState}, 0, None, ())
    first = rows[0]._mapping
    now = first["server_now"] if server else utcnow()
    lease = Lease.of(sweep, {name: first[f"lease_{name}"] for name in LEASE_COLUMNS}, now)
    cells = tuple({name: row._mapping[name] for name in CELL_COLUMNS}
                  for row in rows if row._mapping["cell_id"] is not None)
    return ActiveCells({s: int(first[s.value]) for s in CellState}, int(first["retrying"]),
                       lease, cells)
