"""Taking over a sweep that an earlier, killed scheduler left behind.

``queued`` cells go back to ``pending``; ``running`` cells are reattached through the
executor, and cells whose job vanished are requeued (no retry charged) to resume from
their last checkpoint; ``failed`` cells with retries left (killed during a backoff) go
back to ``pending``; runs of ended cells that were left RUNNING are ended.
"""

from __future__ import annotations

from orchestrator.executors import Executor, JobHandle
from orchestrator.registry import CellRecord, CellState, Registry, SweepRecord
from orchestrator.runs.folder import LOG_FILE
from orchestrator.scheduler.cells import cell_run_dir, end_stale_runs
from orchestrator.scheduler.ports import JobFinder, RunTracker


def recover_cells(registry: Registry, sweep: SweepRecord, executor: Executor,
                  tracker: RunTracker) -> list[tuple[CellRecord, JobHandle]]:
    """Put the sweep's cells back into states a new scheduler can drive; the running
    cells whose jobs were reattached, to be watched again."""
    for cell in registry.cells(sweep.name, [CellState.QUEUED]):
        registry.transition(cell, CellState.QUEUED, CellState.PENDING)
    reattached: list[tuple[CellRecord, JobHandle]] = []
    for cell in registry.cells(sweep.name, [CellState.RUNNING]):
        job = find_job(registry, executor, cell)
        if job is not None:
            reattached.append((cell, job))
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
        log = cell_run_dir(cell) / LOG_FILE
        for job_id in executor.jobs_for_log(log, since=cell.started_at)[:1]:
            job = executor.reattach(job_id)
            if job is not None:
                registry.attach_job(cell, job_id)
                return job
    return None
