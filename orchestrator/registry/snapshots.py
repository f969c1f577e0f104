"""What the registry hands out: plain frozen snapshots, never live ORM rows.

A snapshot is a copy taken inside the transaction that read it, so it can be passed
between threads and kept after the session is gone (no detached-instance errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from orchestrator.registry.models import AttemptRow, CellRow, SweepRow
from orchestrator.registry.states import TERMINAL_STATES, AttemptState, CellState


class CellLike(Protocol):
    """What :meth:`Registry.add_cells` needs of a cell (``orchestrator.grid.Cell`` fits)."""

    @property
    def cell_id(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def axes(self) -> Mapping[str, Any]: ...

    @property
    def settings(self) -> Any: ...

    @property
    def labels(self) -> Any: ...


@dataclass(frozen=True)
class SweepRecord:
    """A sweep as stored."""

    name: str
    backend: str
    spec_text: str
    spec_hash: str
    mlflow_experiment_id: str | None
    mlflow_parent_run_id: str | None
    created_at: datetime
    updated_at: datetime
    #: The plan made at submit, as JSON (read it with orchestrator.grid.plan.stored_plan).
    plan: str | None = None

    @classmethod
    def of(cls, row: SweepRow) -> SweepRecord:
        """Snapshot a row (inside its session)."""
        return cls(
            name=row.name,
            backend=row.backend,
            spec_text=row.spec_text,
            spec_hash=row.spec_hash,
            mlflow_experiment_id=row.mlflow_experiment_id,
            mlflow_parent_run_id=row.mlflow_parent_run_id,
            created_at=row.created_at,
            updated_at=row.updated_at,
            plan=row.plan,
        )


@dataclass(frozen=True)
class CellRecord:
    """A cell as stored: its configuration and where its run stands."""

    sweep_name: str
    cell_id: str
    index: int
    axes: Mapping[str, Any]
    settings: Mapping[str, Any]
    labels: Mapping[str, Any]
    state: CellState
    attempts_count: int
    max_retries: int
    run_dir: str | None
    mlflow_run_id: str | None
    job_id: str | None
    exit_code: int | None
    last_error: str | None
    progress_step: int | None
    total_steps: int | None
    progress_updated_at: datetime | None
    final_metrics: Mapping[str, Any] | None
    created_at: datetime
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    stop_reason: str | None = None
    #: What the scheduler needs of the cell, judged at submit (``Demand.to_json``), or
    #: ``None`` when it never was (settings that no longer validated at an upgrade).
    demand: Mapping[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str]:
        """``(sweep name, cell id)``: what identifies the cell to the registry."""
        return (self.sweep_name, self.cell_id)

    @property
    def is_terminal(self) -> bool:
        """Succeeded, failed or cancelled."""
        return self.state in TERMINAL_STATES

    @property
    def retries_left(self) -> int:
        """Launches still allowed after the ones made (1 + max_retries in all); none for
        a cell a stopping rule failed (diverged: running it again would diverge again)."""
        if self.state is CellState.FAILED and self.stop_reason:
            return 0
        return max(0, 1 + self.max_retries - self.attempts_count)

    @classmethod
    def pending(cls, sweep_name: str, row: Mapping[str, Any]) -> CellRecord:
        """Snapshot a cell just inserted as ``pending`` from the values it was inserted
        with (``Registry.add_cells``)."""
        return cls(
            sweep_name=sweep_name, cell_id=row["cell_id"], index=row["index"],
            axes=dict(row["axes"]), settings=dict(row["settings"]), labels=dict(row["labels"]),
            state=CellState.PENDING, attempts_count=0, max_retries=row["max_retries"],
            run_dir=None, mlflow_run_id=None, job_id=None, exit_code=None, last_error=None,
            progress_step=None, total_steps=None, progress_updated_at=None,
            final_metrics=None, created_at=row["created_at"], queued_at=None,
            started_at=None, finished_at=None, demand=row.get("demand"))

    @classmethod
    def of(cls, row: CellRow, sweep_name: str) -> CellRecord:
        """Snapshot a row (inside its session)."""
        return cls(
            sweep_name=sweep_name,
            cell_id=row.cell_id,
            index=row.index,
            axes=dict(row.axes),
            settings=dict(row.settings),
            labels=dict(row.labels),
            state=CellState(row.state),
            attempts_count=row.attempts_count,
            max_retries=row.max_retries,
            run_dir=row.run_dir,
            mlflow_run_id=row.mlflow_run_id,
            job_id=row.job_id,
            exit_code=row.exit_code,
            last_error=row.last_error,
            progress_step=row.progress_step,
            total_steps=row.total_steps,
            progress_updated_at=row.progress_updated_at,
            final_metrics=None if row.final_metrics is None else dict(row.final_metrics),
            created_at=row.created_at,
            queued_at=row.queued_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            stop_reason=row.stop_reason,
            demand=None if row.demand is None else dict(row.demand),
        )


@dataclass(frozen=True)
class AttemptRecord:
    """One launch of a cell."""

    sweep_name: str
    cell_id: str
    number: int
    state: AttemptState
    job_id: str | None
    started_at: datetime
    finished_at: datetime | None
    exit_code: int | None
    log_path: str | None

    @classmethod
    def of(cls, row: AttemptRow, sweep_name: str, cell_id: str) -> AttemptRecord:
        """Snapshot a row (inside its session)."""
        return cls(
            sweep_name=sweep_name,
            cell_id=cell_id,
            number=row.number,
            state=AttemptState(row.state),
            job_id=row.job_id,
            started_at=row.started_at,
            finished_at=row.finished_at,
            exit_code=row.exit_code,
            log_path=row.log_path,
        )
