"""``kappa cancel``: stop a sweep's (or one cell's) unfinished cells (:func:`cancel`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator import paths
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors import (
    Executor,
    executor_name_for_job,
    job_id_prefixes,
)
from orchestrator.registry import TERMINAL_STATES, CellRecord, CellState, Registry
from orchestrator.scheduler.lease import is_driven
from orchestrator.sweeps.executor_choice import choice_for_job
from orchestrator.sweeps.stores import Stores

_CANCEL_TRIES = 20


def cancel(target: str, stores: Stores = Stores(),
           executor: Executor | None = None,
           options: Mapping[str, Any] | None = None,
           shortcuts: Mapping[str, Mapping[str, Any]] | None = None) -> list[CellRecord]:
    """Cancel sweep ``target`` (or the cell ``target`` names: an id or unique prefix); the
    cells cancelled. Unfinished cells become ``cancelled`` and their running jobs are
    stopped here, with or without a live scheduler, each by the executor its id's prefix
    names (``executor`` overrides), made by :func:`~.executor_choice.choice_for_job` from
    ``options`` (``-E``) and ``shortcuts`` (keyed by executor name)."""
    with stores.open_registry() as registry:
        cells = _cells_of(registry, target)
        executors = _Executors(registry, options or {}, shortcuts or {}, {} if executor is None
                               else {name: executor for name in job_id_prefixes().values()})
        # Every executor is made before any cell changes, so a missing address cancels nothing.
        for cell in cells:
            if cell.state is CellState.RUNNING and cell.job_id:
                executors.of(cell.job_id, cell.sweep_name)
        # Waiting cells first: cancelling a running one frees a slot, and a live scheduler
        # would fill it with a cell this loop had not reached yet.
        cancelled = [done for cell in sorted(cells, key=lambda c: c.state is CellState.RUNNING)
                     if (done := _cancel_cell(registry, cell, executors)) is not None]
        # Cells waiting for a retry sit in ``failed`` with retries left; stop those too.
        for cell in cells:
            if cell.state is CellState.FAILED and cell.retries_left > 0 and (
                    registry.transition(cell, CellState.FAILED, CellState.PENDING)
                    and registry.transition(cell, CellState.PENDING, CellState.CANCELLED,
                                            last_error="cancelled by user")):
                cancelled.append(cell)
                _note_cancelled(cell)
        _close_undriven(registry, {c.sweep_name for c in cancelled}, stores)
        return cancelled


def _close_undriven(registry: Registry, sweeps: set[str], stores: Stores) -> None:
    """End the MLflow runs of cancelled cells, and the parent run of a sweep left with
    nothing to do, where no scheduler is there to do it (a live one does it itself)."""
    from orchestrator.scheduler.cell_runs import close_sweep_runs
    from orchestrator.scheduler.mlflow_runs import MlflowRunTracker

    undriven = sorted(s for s in sweeps if not is_driven(s, registry))
    if not undriven:
        return
    tracker = MlflowRunTracker(stores.mlflow_uri, background=False)
    for sweep in undriven:
        try:
            close_sweep_runs(registry, registry.get_sweep(sweep), tracker)
        except Exception as exc:  # the cancel stands; the runs wait for the next scheduler
            print(f"kappa: cancelled, but could not end the MLflow runs of {sweep} "
                  f"({str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}); "
                  f"`kappa resume {sweep}` ends them", file=sys.stderr)


def _cancel_cell(registry: Registry, cell: CellRecord,
                 executors: _Executors) -> CellRecord | None:
    """Cancel one unfinished cell, whatever state a live scheduler moves it to meanwhile;
    the cell as it was cancelled, or ``None`` if it had already ended."""
    for _ in range(_CANCEL_TRIES):
        if cell.state in TERMINAL_STATES:
            return None
        if registry.transition(cell, cell.state, CellState.CANCELLED,
                               last_error="cancelled by user"):
            _note_cancelled(cell)
            if cell.state is CellState.RUNNING and cell.job_id:
                job = executors.of(cell.job_id, cell.sweep_name).reattach(cell.job_id)
                if job is not None:
                    job.cancel()
            return cell
        cell = registry.get_cell(cell.sweep_name, cell.cell_id)  # it moved on: look again
    raise RuntimeError(f"cell {cell.cell_id} kept changing state; cancel it again")


@dataclass
class _Executors:
    """The executors that stop a cancel's jobs, each made once from ``kappa cancel``'s
    ``-E`` options and shortcuts."""

    registry: Registry
    options: Mapping[str, Any] = field(default_factory=dict)
    shortcuts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    made: dict[str, Executor] = field(default_factory=dict)  # by executor name

    def of(self, job_id: str, sweep: str) -> Executor:
        """The executor that can stop ``job_id`` (of ``sweep``): the one its prefix names."""
        name = executor_name_for_job(job_id)
        if name not in self.made:
            self.made[name] = choice_for_job(sweep, name, self.registry, self.options,
                                             self.shortcuts).make()
        return self.made[name]


def _note_cancelled(cell: CellRecord) -> None:
    """Let the cell's ``cell.json`` say so (a missing folder is no reason to fail)."""
    from orchestrator.runs.folder import write_cell_file
    from orchestrator.runs.layout import run_folder

    run_dir = run_folder(cell)
    if run_dir.is_dir():
        write_cell_file(run_dir, cell.sweep_name, cell, CellState.CANCELLED.value,
                        cell.mlflow_run_id)


def _cells_of(registry: Registry, target: str) -> list[CellRecord]:
    """The cells ``target`` names: a whole sweep, or one cell of any sweep."""
    paths.check_name(target, "sweep or cell")  # before a query: $'\xff' cannot be encoded
    if registry.find_sweep(target) is not None:
        return registry.cells(target)
    matches = []
    for sweep in registry.sweep_names():
        try:
            matches.append(registry.get_cell(sweep, target))
        except Exception:  # not in this sweep
            continue
    if len(matches) == 1:
        return matches
    known = ", ".join(registry.sweep_names()) or "(none)"
    if matches:
        raise UserInputError(f"'{target}' names cells in several sweeps", [Problem(
            "target", "ambiguous cell id", found=target,
            allowed=", ".join(f"{c.sweep_name}/{c.cell_id}" for c in matches),
            fix="give more characters of the cell id")])
    raise UserInputError(f"no sweep or cell '{target}'", [Problem(
        "target", "neither a sweep name nor a cell id", found=target, allowed=known,
        fix="`kappa status` lists sweeps; `kappa status SWEEP` their cells")])


def find_cell(registry: Registry, target: str) -> CellRecord:
    """The one cell ``target`` names (id or unique prefix, in any sweep)."""
    cells = _cells_of(registry, target)
    if len(cells) != 1:
        raise UserInputError(f"'{target}' is a sweep, not a cell", [Problem(
            "cell", "expected a cell id", found=target,
            fix=f"`kappa status {target}` lists its cells")])
    return cells[0]


__all__ = ["cancel", "find_cell"]
