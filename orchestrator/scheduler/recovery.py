"""Taking over a sweep that an earlier, killed scheduler left behind.

``queued`` cells go back to ``pending``; ``running`` cells are reattached through the
executor, and cells whose job vanished are requeued (no retry charged) to resume from
their last checkpoint, unless the scheduler's hooks decide how they ended (a stop the
run confirmed, a ``diverged`` cell); ``failed`` cells with retries left (killed during a
backoff) go back to ``pending``; runs of ended cells that were left RUNNING are ended.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence

from orchestrator.backends import Backend
from orchestrator.executors import Executor, JobHandle
from orchestrator.registry import CellRecord, CellState, Registry, SweepRecord
from orchestrator.runs.folder import LOG_FILE
from orchestrator.runs.layout import run_folder
from orchestrator.scheduler.cell_runs import OpenedRuns, end_stale_runs
from orchestrator.scheduler.hooks import JobFinder, RunTracker, SchedulerHook, decide_ending

# The exit code the hooks hear for a job that vanished with an earlier scheduler.
VANISHED_CODE = -int(signal.SIGKILL)


def recover_cells(registry: Registry, sweep: SweepRecord, executor: Executor,
                  tracker: RunTracker, ended: Callable[[CellRecord], bool] | None = None,
                  ) -> list[tuple[CellRecord, JobHandle]]:
    """Put the sweep's cells back into states a new scheduler can drive; the running
    cells whose jobs were reattached, to be watched again. ``ended(cell)`` is asked of
    a cell whose job vanished: whether it recorded the cell's ending (else requeued)."""
    for cell in registry.cells(sweep.name, [CellState.QUEUED]):
        registry.transition(cell, CellState.QUEUED, CellState.PENDING)
    reattached: list[tuple[CellRecord, JobHandle]] = []
    for cell in registry.cells(sweep.name, [CellState.RUNNING]):
        job = find_job(registry, executor, cell)
        if job is not None:
            reattached.append((cell, job))
            continue
        if ended is not None and ended(cell):
            continue
        # The job vanished with the old scheduler's machine or process group: run
        # it again in the same folder. It was not the cell's fault, so the retry
        # budget grows by the attempt it loses.
        if registry.finish_attempt(cell, CellState.FAILED,
                                   last_error="job vanished (scheduler restart)"):
            registry.update_cell(cell, max_retries=cell.max_retries + 1)
            registry.transition(cell, CellState.FAILED, CellState.PENDING)
    for cell in registry.cells(sweep.name, [CellState.FAILED]):
        if cell.retries_left > 0:
            registry.transition(cell, CellState.FAILED, CellState.PENDING)
    # Runs of ended cells still RUNNING: a killed scheduler never finished them.
    end_stale_runs(registry, sweep, tracker)
    return reattached


def find_job(registry: Registry, executor: Executor, cell: CellRecord) -> JobHandle | None:
    """The job of the running cell's current attempt, reattached; None if it is gone."""
    if cell.job_id:
        return executor.reattach(cell.job_id)
    # Killed between opening the attempt and recording the job id: ask the
    # executor for a job that writes to this cell's log, submitted since this
    # attempt opened. An older job there is an earlier attempt's (its exit code is
    # not this one's); none means this attempt's launch died before submitting.
    if isinstance(executor, JobFinder) and cell.started_at is not None:
        log = run_folder(cell) / LOG_FILE
        for job_id in executor.jobs_for_log(log, since=cell.started_at)[:1]:
            job = executor.reattach(job_id)
            if job is not None:
                registry.attach_job(cell, job_id)
                return job
    return None


def ended_while_away(registry: Registry, backend: Backend, hooks: Sequence[SchedulerHook],
                     runs: OpenedRuns, cell: CellRecord) -> bool:
    """A running cell whose job vanished with the last scheduler: whether its hooks decide how it
    ended (a stop its run confirmed, or ``diverged``, final whatever became of the job), recorded
    here (its MLflow run is ended with the other ended cells'); otherwise it is to be requeued."""
    run_dir = run_folder(cell)
    ending = decide_ending(hooks, cell.cell_id, run_dir, VANISHED_CODE,
                           backend.read_summary(run_dir))
    if ending is None or ending.stop_reason is None:
        return False
    progress = backend.read_progress(run_dir)  # how far it got while unwatched
    if progress is not None:
        registry.update_progress(cell, progress[0], progress[1] or None)
    runs.end_attempt(registry, cell, ending.state, final_metrics=ending.final_metrics,
                     last_error=ending.last_error, stop_reason=ending.stop_reason)
    return True
