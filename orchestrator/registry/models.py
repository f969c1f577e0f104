"""The registry's tables as a typed SQLAlchemy 2 ORM: what the newest migration builds (a test
checks they agree). Callers get frozen snapshots of these rows, never the rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    """Now, timezone-aware in UTC (the only kind of time the registry stores)."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and read back timezone-aware (SQLite returns naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("registry timestamps must be timezone-aware")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base of the registry tables."""

    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime(),
                                                      dict[str, Any]: JSON()}


class SweepRow(Base):
    """One sweep: the spec it was submitted from and its MLflow parent run."""

    __tablename__ = "sweeps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    backend: Mapped[str] = mapped_column(String(64))
    spec_text: Mapped[str] = mapped_column(Text)
    spec_hash: Mapped[str] = mapped_column(String(64))
    mlflow_experiment_id: Mapped[str | None] = mapped_column(String(64))
    mlflow_parent_run_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # The executor the sweep's cells run on, and its options (migration 0004).
    executor_name: Mapped[str | None] = mapped_column(String(64))
    executor_options: Mapped[dict[str, Any] | None]
    # The sweep's plan as JSON (orchestrator.grid.plan.SweepPlan), made at submit (0005).
    plan: Mapped[str | None] = mapped_column(Text)

    cells: Mapped[list[CellRow]] = relationship(
        back_populates="sweep", cascade="all, delete-orphan", passive_deletes=True)


class CellRow(Base):
    """One cell of a sweep: a fully resolved configuration and where its run stands."""

    __tablename__ = "cells"
    __table_args__ = (
        UniqueConstraint("sweep_id", "cell_id", name="uq_cells_sweep_cell"),
        Index("ix_cells_sweep_state", "sweep_id", "state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"))
    cell_id: Mapped[str] = mapped_column(String(64))
    # "index" is an SQL keyword; the column is named for what it is.
    index: Mapped[int] = mapped_column("cell_index", Integer)
    axes: Mapped[dict[str, Any]]
    settings: Mapped[dict[str, Any]]
    labels: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16))
    attempts_count: Mapped[int] = mapped_column(Integer, default=0)
    max_retries: Mapped[int] = mapped_column(Integer, default=0)
    run_dir: Mapped[str | None] = mapped_column(Text)
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64))
    job_id: Mapped[str | None] = mapped_column(String(200))
    exit_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    progress_step: Mapped[int | None] = mapped_column(Integer)
    total_steps: Mapped[int | None] = mapped_column(Integer)
    progress_updated_at: Mapped[datetime | None]
    final_metrics: Mapped[dict[str, Any] | None]
    stop_reason: Mapped[str | None] = mapped_column(Text)
    # What the scheduler needs of the cell (orchestrator.backends.base.Demand, as JSON),
    # judged from its validated settings when it was added (0005); NULL: never judged.
    demand: Mapped[dict[str, Any] | None]
    # What made the latest ended attempt's numbers (orchestrator.runs.provenance; 0006).
    provenance: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime]
    queued_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]

    sweep: Mapped[SweepRow] = relationship(back_populates="cells")
    attempts: Mapped[list[AttemptRow]] = relationship(
        back_populates="cell", cascade="all, delete-orphan", passive_deletes=True,
        order_by="AttemptRow.number")


class AttemptRow(Base):
    """One launch of a cell (a cell retried twice has three)."""

    __tablename__ = "attempts"
    __table_args__ = (UniqueConstraint("cell_pk", "number", name="uq_attempts_cell_number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cell_pk: Mapped[int] = mapped_column(ForeignKey("cells.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    job_id: Mapped[str | None] = mapped_column(String(200))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    exit_code: Mapped[int | None] = mapped_column(Integer)
    log_path: Mapped[str | None] = mapped_column(Text)
    # What made this attempt's numbers, as its process recorded it (0006); NULL: none.
    provenance: Mapped[dict[str, Any] | None]

    cell: Mapped[CellRow] = relationship(back_populates="attempts")


class LeaseRow(Base):
    """Who drives a sweep: a scheduler's lease, renewed by its heartbeat (``owner`` is
    ``None`` once released). See :mod:`orchestrator.registry.leases`."""

    __tablename__ = "sweep_leases"

    sweep_id: Mapped[int] = mapped_column(
        ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True, autoincrement=False)
    owner: Mapped[str | None] = mapped_column(String(36))
    host: Mapped[str | None] = mapped_column(String(255))
    host_id: Mapped[str | None] = mapped_column(String(200))
    pid: Mapped[int | None] = mapped_column(Integer)
    pid_start: Mapped[int | None] = mapped_column(BigInteger)
    lease_seconds: Mapped[float | None] = mapped_column(Float)
    acquired_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
