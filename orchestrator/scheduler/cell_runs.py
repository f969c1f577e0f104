"""Each cell's MLflow run, ``cell.json`` and log as the scheduler and the commands see them.

A launch opens the cell's one child run (created on the first launch, reopened by a retry, resume
or resubmit); the scheduler remembers it while the cell runs and ends it once when the cell ends.
A run created but not yet recorded in the registry is flagged by a marker in the run folder
(``.mlflow-run-pending``), so the next launch looks for it instead of making a second one.
``cell.json`` follows the registry (:func:`orchestrator.runs.folder.write_cell_file`):
:meth:`OpenedRuns.end_attempt` writes both. Runs a killed scheduler left RUNNING are ended by
:func:`end_stale_runs`, those of a sweep no scheduler drives by :func:`close_sweep_runs`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.redact import without_escape_sequences
from orchestrator.registry import TERMINAL_STATES, CellRecord, CellState, Registry, SweepRecord
from orchestrator.runs import provenance
from orchestrator.runs.folder import (
    PROVENANCE_FILE,
    RUN_PENDING_MARKER,
    write_cell_file,
    write_config,
)
from orchestrator.runs.layout import run_folder
from orchestrator.scheduler.hooks import RunTracker
from orchestrator.tracking.naming import short_names

UNFINISHED = (CellState.PENDING, CellState.QUEUED, CellState.RUNNING)
# How an ended cell's MLflow run ends.
RUN_STATUS = {CellState.SUCCEEDED: "FINISHED", CellState.FAILED: "FAILED",
              CellState.CANCELLED: "KILLED"}


@dataclass
class OpenedRuns:
    """The cells' runs one scheduler opened, so that it ends each exactly once."""

    sweep: str
    tracker: RunTracker
    _known: dict[str, tuple[str, Path]] = field(default_factory=dict)
    _names: dict[str, str] = field(default_factory=dict)  # cell id -> its run's name

    def open(self, registry: Registry, sweep: SweepRecord, cell: CellRecord,
             run_dir: Path) -> str | None:
        """Write the run folder from what the registry holds and open the cell's run
        (its id, None for a tracker that keeps none), named by the axes that vary among the
        sweep's cells; the pending marker stays until :meth:`recorded`. Raises what the
        tracking store raises."""
        # A submit killed before it wrote this folder (or a folder deleted since) costs
        # nothing: the launch is made from the registry.
        write_config(run_dir, cell.settings)
        # What an earlier attempt recorded must not pass for this one's.
        (run_dir / PROVENANCE_FILE).unlink(missing_ok=True)
        marker = run_dir / RUN_PENDING_MARKER
        may_exist = marker.exists()
        if not cell.mlflow_run_id:
            marker.touch()
        if cell.cell_id not in self._names:  # first launch, or cells added since (a search)
            self._names = short_names(registry.cells(self.sweep))
        return self.tracker.cell_run(sweep, cell, may_exist=may_exist,
                                     name=self._names.get(cell.cell_id, ""))

    @staticmethod
    def recorded(run_dir: Path) -> None:
        """The registry holds the run id now (or the launch was dropped): no marker."""
        (run_dir / RUN_PENDING_MARKER).unlink(missing_ok=True)

    def started(self, cell: CellRecord, run_id: str | None, run_dir: Path) -> None:
        """The attempt is open in the registry (with its run): no marker, the run is kept to end
        it when the cell ends, and ``cell.json`` says ``running``."""
        self.recorded(run_dir)
        if run_id:
            self._known[cell.cell_id] = (run_id, run_dir)
        self.write_cell_file(cell, CellState.RUNNING, run_id)

    def run_id(self, cell_id: str) -> str | None:
        """The run this scheduler opened for the cell, if any."""
        known = self._known.get(cell_id)
        return known[0] if known is not None else None

    def finish(self, registry: Registry, cell_id: str, status: str) -> None:
        """End the cell's run with ``status`` (an MLflow run status)."""
        known = self._known.pop(cell_id, None)
        run_id: str | None
        if known is not None:
            run_id, run_dir = known
        else:  # e.g. a reattached job: the registry knows its run
            cell = registry.get_cell(self.sweep, cell_id)
            run_id, run_dir = cell.mlflow_run_id, run_folder(cell)
        if run_id:
            self.tracker.finish(run_id, status, run_dir)

    def end_attempt(self, registry: Registry, cell: CellRecord, state: CellState,
                    **fields: Any) -> bool:
        """End the cell's attempt as ``state`` (``Registry.finish_attempt`` with ``fields``)
        and, once the registry took it, mirror it in ``cell.json``; whether it took it
        (``False``: the cell had left ``running``, e.g. cancelled), with the provenance its
        process recorded in the run folder."""
        made = provenance.read(run_folder(cell))
        if not registry.finish_attempt(cell, state, provenance=made, **fields):
            return False
        self.write_cell_file(cell, state)
        return True

    def write_cell_file(self, cell: CellRecord, state: CellState,
                        run_id: str | None = None) -> None:
        """``cell.json`` follows the registry (its run: ``run_id``, else the one this
        scheduler opened, else the recorded one); a folder that cannot take it is no
        reason to stop the sweep."""
        with contextlib.suppress(OSError):
            write_cell_file(run_folder(cell), self.sweep, cell, state.value,
                            run_id or self.run_id(cell.cell_id) or cell.mlflow_run_id)


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log (for ``last_error``)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 8192))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    # Its colours and cursor moves are not the error: the registry keeps plain text.
    return "\n".join(without_escape_sequences(text).splitlines()[-lines:])


def end_stale_runs(registry: Registry, sweep: SweepRecord, tracker: RunTracker) -> int:
    """End the MLflow runs of ``sweep``'s ended cells that are still RUNNING; how many."""
    ended: dict[str, str] = {}
    run_dirs: dict[str, Path] = {}
    for cell in registry.cells(sweep.name, list(TERMINAL_STATES)):
        if cell.mlflow_run_id and cell.state in RUN_STATUS:
            ended[cell.mlflow_run_id] = RUN_STATUS[cell.state]
            run_dirs[cell.mlflow_run_id] = run_folder(cell)
    return tracker.reconcile(sweep, ended, run_dirs) if ended else 0


def close_sweep_runs(registry: Registry, sweep: SweepRecord, tracker: RunTracker) -> bool:
    """For a sweep no scheduler drives (e.g. after ``kappa cancel``): end its ended cells' runs
    and, if no cell is unfinished, its parent run; whether the parent was ended."""
    end_stale_runs(registry, sweep, tracker)
    counts = registry.counts(sweep.name)
    if any(counts[s] for s in UNFINISHED):
        tracker.flush()
        return False
    tracker.sweep_ended(sweep, {state.value: n for state, n in counts.items()
                                if state in TERMINAL_STATES})
    return True
