"""Facts about a sweep's cells that the loop and the commands share: where a cell runs,
the tail of its log, the backoff before a retry, and ending the MLflow runs of cells (and
of the sweep) that have ended."""

from __future__ import annotations

from pathlib import Path

from orchestrator.registry import TERMINAL_STATES, CellState, Registry, SweepRecord
from orchestrator.runs.layout import run_folder
from orchestrator.scheduler.ports import RunTracker

UNFINISHED = (CellState.PENDING, CellState.QUEUED, CellState.RUNNING)
# How an ended cell's MLflow run ends.
RUN_STATUS = {CellState.SUCCEEDED: "FINISHED", CellState.FAILED: "FAILED",
              CellState.CANCELLED: "KILLED"}


def retry_delay(failures: int, base: float, cap: float = 300.0) -> float:
    """Seconds to wait before retry number ``failures`` (1, 2, ...): ``base * 2**(n-1)``."""
    return min(cap, base * 2 ** max(0, failures - 1))


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log (for ``last_error``)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 8192))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


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
    """For a sweep no scheduler drives (e.g. after ``kappa cancel``): end its ended cells'
    runs and, if no cell is unfinished, its parent run; whether the parent was ended."""
    end_stale_runs(registry, sweep, tracker)
    counts = registry.counts(sweep.name)
    if any(counts[s] for s in UNFINISHED):
        tracker.flush()
        return False
    tracker.sweep_ended(sweep, {state.value: n for state, n in counts.items()
                                if state in TERMINAL_STATES})
    return True
