"""The :class:`Sweep` handle: the one object a command or a notebook holds after submit.

It owns one recorded sweep: its stored plan (parsed once per handle), its folders
(:mod:`orchestrator.runs.layout`), recording new cells (a submit's, a search's trials and
seeds on demand alike: :meth:`Sweep.record_cells` is the only code that does) and its
status (:class:`~.status.SweepStatus`). It reads through the registry it is given and
never outlives it.

>>> with Registry.open() as reg:
...     status = Sweep(reg, "toy-demo").status()
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from orchestrator.errors import KappaError, Problem, UserInputError
from orchestrator.grid.plan import SweepPlan, stored_plan
from orchestrator.paths import check_name, kappa_home
from orchestrator.registry import (
    CellLike,
    CellRecord,
    CellState,
    Registry,
    RegistryMissing,
    SweepRecord,
)
from orchestrator.runs import layout
from orchestrator.runs.folder import LOG_FILE, write_cell_file, write_config
from orchestrator.runs.log_follow import stream_log
from orchestrator.scheduler.options import SchedulerOptions
from orchestrator.sweeps.status import CellStatus, Driver, SweepStatus, active_status


class Sweep:
    """One recorded sweep, read through ``registry`` (module docstring)."""

    def __init__(self, registry: Registry, name: str, record: SweepRecord | None = None
                 ) -> None:
        self.registry = registry
        self.name = name
        self._record = record
        self._reader: Engine | None = None

    @classmethod
    def open(cls, registry: Registry, name: str) -> Sweep:
        """The handle of the recorded sweep ``name``; a name no sweep can have, or an
        unknown one, is a ``UserInputError`` (exit 2; the latter lists the known ones)."""
        return cls(registry, name, registry.get_sweep(check_name(name)))

    @classmethod
    def every(cls, registry: Registry) -> list[Sweep]:
        """Every sweep of the registry, newest first."""
        return [cls(registry, record.name, record) for record in registry.list_sweeps()]

    @property
    def record(self) -> SweepRecord:
        """The sweep's row (read once); an unknown name is a ``UserInputError``."""
        if self._record is None:
            self._record = self.registry.get_sweep(self.name)
        return self._record

    @cached_property
    def plan(self) -> SweepPlan:
        """The plan stored at submit (a missing or unreadable one: ``UserInputError``)."""
        return stored_plan(self.name, self.record.plan)

    @property
    def folder(self) -> Path:
        """The sweep's folder (its cells' run folders inside)."""
        return layout.sweep_folder(self.name)

    def write_log(self, cell: CellRecord, write: Callable[[str], None],
                  follow: bool = False) -> None:
        """Write ``cell``'s training log; ``follow``: and what is appended until the cell
        has succeeded, failed or been cancelled
        (:func:`~orchestrator.runs.log_follow.stream_log`). No log: ``KappaError`` (why)."""
        def ended() -> bool:
            return self.registry.get_cell(self.name, cell.cell_id).is_terminal

        path = layout.run_folder(cell) / LOG_FILE  # every attempt's output, appended
        if stream_log(path, write, ended if follow else None):
            return
        cell = self.registry.get_cell(self.name, cell.cell_id)
        if not cell.attempts_count:
            why = "never launched"
        elif path.parent.is_dir():
            why = f"its jobs wrote none (`kappa status {self.name}` shows its error)"
        else:
            why = (f"its run folder is gone (moved or deleted; run folders are looked for "
                   f"under KAPPA_HOME, now {kappa_home()})")
        raise KappaError(f"no log at {path}: cell {cell.cell_id} is {cell.state.value}, {why}")

    def record_cells(self, cells: Sequence[CellLike], demands: Mapping[str, Any],
                     max_retries: int) -> list[CellRecord]:
        """Add the cells not yet recorded (pending), each with its run folder made
        (``config.yaml``, ``cell.json``); the new ones. ``demands``: each cell's
        ``Demand.to_json()`` by id. The run folders are recorded in one transaction (one
        per cell took minutes at 100,000 cells); a ``run_dir`` left unset means the same."""
        new = self.registry.add_cells(self.name, cells, max_retries=max_retries,
                                      demands=demands)
        for cell in new:
            folder = layout.cell_folder(self.name, cell.cell_id)
            write_config(folder, cell.settings)
            write_cell_file(folder, self.name, cell, CellState.PENDING.value, None)
        self.registry.set_run_dirs(self.name, {
            c.cell_id: str(layout.cell_folder(self.name, c.cell_id)) for c in new})
        return new

    def status(self) -> SweepStatus:
        """The whole status: every cell, hours, comparison groups, studies, seeds on demand,
        notify target (``complete``)."""
        from orchestrator.analysis.seed_live import seeds_summary
        from orchestrator.analysis.studies import study_summaries, trials_left
        from orchestrator.notify.store import load_config
        from orchestrator.spec.overrides import command_line
        from orchestrator.stopping.budget import CAP_REASON, admit, saved_by_group, sweep_hours
        from orchestrator.sweeps.status import masked_executor

        record, plan, registry = self.record, self.plan, self.registry
        now = datetime.now(UTC)  # one clock for the sweep's and its groups' projections
        cells = registry.cells(self.name)
        # From the cells read: the counts and the rows of one status always agree.
        counts = {s.value: sum(c.state is s for c in cells) for s in CellState}
        cap = plan.stop.gpu_hours if plan.stop is not None else None
        waiting: set[str] = set()
        if cap is not None:
            pending = [c for c in cells if c.state is CellState.PENDING]
            others = [c for c in cells if c.state is not CellState.PENDING]
            waiting = {c.cell_id for c in admit(pending, others, plan.resources, cap)[1]}
        together = plan.stop.together if plan.stop is not None else ()
        notify = load_config(self.name)
        overrides = tuple(plan.overrides)  # of the sweep's last submit
        studies = study_summaries(registry, record, plan)
        return SweepStatus(
            sweep=self.name, backend=record.backend, complete=True, counts=counts,
            retrying=sum(1 for c in cells if c.state is CellState.FAILED and c.retries_left),
            driver=Driver.of(registry.lease(self.name)),
            cells=tuple(CellStatus.of(c, CAP_REASON if c.cell_id in waiting else None)
                        for c in cells),
            executor=masked_executor(registry.executor(self.name)),
            overrides=overrides, overrides_text=command_line(overrides) if overrides else "",
            mlflow_experiment_id=record.mlflow_experiment_id,
            mlflow_parent_run_id=record.mlflow_parent_run_id,
            updated_at=record.updated_at,
            hours=sweep_hours(cells, plan.resources, cap, now),
            groups=tuple(saved_by_group(cells, plan.resources, together, now))
            if together else (),
            studies=tuple(studies),
            seeds=None if plan.seeds is None else seeds_summary(cells, plan.seeds,
                                                                plan.resources),
            notify=None if notify is None else {"url": notify.masked(),
                                                "events": list(notify.events)},
            trials_left=plan.search is not None and trials_left(
                studies, len(plan.studies),
                (c for c in cells if c.state is CellState.CANCELLED)))

    def active_status(self) -> SweepStatus:
        """Counts, the lease, running cells and the newest failures, in one SELECT (not
        ``complete``), through a read-only connection kept until :meth:`close`; with no
        cell unfinished, a search's studies too (whether trials are left)."""
        from orchestrator.registry.active import read_active, read_engine

        if self._reader is None:
            self._reader = read_engine(self.registry.engine)
        status = active_status(self.record, read_active(self._reader, self.name))
        if status.unfinished:
            return status
        return replace(status, trials_left=self.trials_left())

    def trials_left(self) -> bool:
        """Whether the sweep's search has trials left to ask or tell
        (:func:`~orchestrator.analysis.studies.trials_left`); never for a grid, nor for a
        sweep without a readable plan."""
        from orchestrator.analysis.studies import study_summaries, trials_left

        try:
            plan = self.plan
        except UserInputError:
            return False
        if plan.search is None:
            return False
        cancelled = self.registry.cells(self.name, [CellState.CANCELLED])
        return trials_left(study_summaries(self.registry, self.record, plan),
                           len(plan.studies), cancelled)

    def close(self) -> None:
        """Let go of the read-only connection :meth:`active_status` opened (the registry
        stays open: its opener closes it)."""
        if self._reader is not None and self._reader is not self.registry.engine:
            self._reader.dispose()
        self._reader = None


@contextmanager
def progress_ticks(show: Callable[[SweepStatus], None]) -> Iterator[SchedulerOptions]:
    """Scheduler options whose every tick hands ``show`` the sweep's active status (one
    SELECT, through a handle kept for the whole run)."""
    handles: list[Sweep] = []

    def tick(registry: Registry, sweep: str) -> None:
        if not handles:
            handles.append(Sweep(registry, sweep))
        show(handles[0].active_status())

    try:
        yield SchedulerOptions(on_tick=tick)
    finally:
        for handle in handles:
            handle.close()


def mlflow_experiment(registry_url: str | None,
                      sweep: str | None) -> tuple[str, str, str | None] | None:
    """``(sweep name, MLflow experiment id, parent run id)`` of ``sweep`` (default: the
    newest, and ``None`` when there is none or it has no experiment yet); creates nothing.
    An unknown ``sweep``, or one without its experiment, is a ``UserInputError``."""
    try:
        registry = Registry.open(registry_url, create=False)
    except RegistryMissing:
        if sweep is not None:
            raise
        return None
    with registry:  # an unknown sweep: the error lists the known ones
        newest = Sweep.every(registry) if sweep is None else [Sweep.open(registry, sweep)]
    if not newest:
        return None
    record = newest[0].record
    if record.mlflow_experiment_id is None:
        if sweep is None:
            return None
        raise UserInputError(f"sweep {sweep} has no MLflow experiment yet", [Problem(
            "sweep", "it was recorded without its MLflow experiment", found=sweep,
            fix=f"`kappa resume {sweep}` creates it")])
    return record.name, record.mlflow_experiment_id, record.mlflow_parent_run_id
