"""What the registry hands out: frozen snapshots copied inside the transaction that read
them, never live ORM rows, so they cross threads and outlive the session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from orchestrator.paths import rehomed_run_dir
from orchestrator.registry.models import AttemptRow, CellRow, SweepRow
from orchestrator.registry.states import TERMINAL_STATES, AttemptState, CellState
from orchestrator.runs.folder import CellFacts


class CellLike(CellFacts, Protocol):
    """What :meth:`Registry.add_cells` needs of a cell (``orchestrator.grid.Cell`` fits)."""

    @property
    def index(self) -> int: ...
    @property
    def settings(self) -> Any: ...


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
        return cls(**{name: getattr(row, name) for name in _SWEEP_COLUMNS})


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
    #: What made the latest ended attempt's numbers (:mod:`orchestrator.runs.provenance`),
    #: or ``None`` (none ended yet, or made before kappa recorded it).
    provenance: Mapping[str, Any] | None = None

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
    def of(cls, row: CellRow | Mapping[str, Any], sweep_name: str) -> CellRecord:
        """Snapshot a row (inside its session), or a cell from the values it was inserted with."""
        get = row.get if isinstance(row, Mapping) else partial(getattr, row)
        values: dict[str, Any] = {name: get(name) for name in _CELL_COLUMNS}
        copied = {name: None if values[name] is None else dict(values[name])
                  for name in ("final_metrics", "demand", "provenance")}
        # A moved KAPPA_HOME: each run folder where it is now (paths.rehomed_run_dir).
        values["run_dir"] = rehomed_run_dir(values["run_dir"], sweep_name)
        return cls(**{**values, "sweep_name": sweep_name, "axes": dict(values["axes"]),
                      "settings": dict(values["settings"]), "labels": dict(values["labels"]),
                      "state": CellState(values["state"]), **copied})


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
    provenance: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, row: AttemptRow, sweep_name: str, cell_id: str) -> AttemptRecord:
        """Snapshot a row (inside its session)."""
        values = {name: getattr(row, name) for name in _ATTEMPT_COLUMNS}
        return cls(**{**values, "sweep_name": sweep_name, "cell_id": cell_id,
                      "state": AttemptState(row.state)})


# The fields each ``of`` copies from the row's same-named columns (the rest it is given).
_SWEEP_COLUMNS = tuple(f.name for f in fields(SweepRecord))
_CELL_COLUMNS = tuple(f.name for f in fields(CellRecord) if f.name != "sweep_name")
_ATTEMPT_COLUMNS = tuple(f.name for f in fields(AttemptRecord)
                         if f.name not in ("sweep_name", "cell_id"))
