"""The scheduler loop: moves one sweep's cells through their states until none is left.

Each state change is one registry transaction (compare-and-set), so the registry is the truth and
another process (``kappa cancel``, a second ``kappa submit``) can act on the sweep meanwhile. The
loop recovers what a killed scheduler left (:mod:`.recovery`); launches pending cells that fit the
free capacity (:mod:`.order`), judged from each cell's demand stored at submit (it validates no
settings); watches running jobs (progress, then ``succeeded``, or ``failed`` and retried after a
backoff while retries remain); kills the jobs of cells cancelled behind its back; and calls its
hooks (:mod:`.hooks`: stopping rules and the GPU-hours cap, a search's trials). A launch that cannot
be made is a failed attempt; a tracking store or executor that is away makes a cell wait (or gives
its attempt back), uncharged. Cells' MLflow runs may end in the background;
:meth:`SweepScheduler.run` waits for them before it returns.

It holds the sweep's lease (:mod:`.lease`) throughout and writes through a registry fenced by it:
once the lease is lost it raises :class:`~.lease.LeaseLost` before its next pass or launch, and any
write it still tries changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from orchestrator.backends import Backend
from orchestrator.executors import Executor, JobHandle
from orchestrator.registry import CellRecord, CellState, Registry, SweepRecord
from orchestrator.registry.engine import server_away
from orchestrator.runs.folder import LOG_FILE
from orchestrator.runs.layout import run_folder
from orchestrator.runs.provenance import EXECUTOR_ENV
from orchestrator.runs.stop_request import StopRequest
from orchestrator.scheduler.cell_runs import OpenedRuns, close_sweep_runs, log_tail
from orchestrator.scheduler.hooks import NullTracker, RunTracker, SchedulerHook, decide_ending
from orchestrator.scheduler.lease import LeaseLost, SchedulerLease
from orchestrator.scheduler.options import SchedulerOptions, retry_delay
from orchestrator.scheduler.order import LaunchOrder, job_resources, stored_demand
from orchestrator.scheduler.recovery import ended_while_away, recover_cells
from orchestrator.spec.model import Resources
from orchestrator.tracking.retry import is_unreachable

LOG = logging.getLogger(__name__)

# How often a running sweep asks the registry whether a cell was cancelled.
CANCEL_CHECK_SECONDS = 1.0


@dataclass
class _Running:
    cell: CellRecord
    job: JobHandle
    run_dir: Path
    progress: tuple[int, int] | None = None


@dataclass
class SweepScheduler:
    """Drives one sweep to the end. Build it, then call :meth:`run`."""

    registry: Registry
    sweep: str
    backend: Backend
    executor: Executor
    tracker: RunTracker = field(default_factory=NullTracker)
    options: SchedulerOptions = field(default_factory=SchedulerOptions)
    order: LaunchOrder | None = None  # None: kappa's (LaunchOrder.for_backend)
    hooks: Sequence[SchedulerHook] = ()  # stopping, search (:mod:`.hooks`), called in order
    resources: Resources = field(default_factory=Resources)  # the spec's, per cell
    _running: dict[str, _Running] = field(default_factory=dict, init=False)
    _retry_at: dict[str, float] = field(default_factory=dict, init=False)
    _next_cancel_check: float = field(default=0.0, init=False)
    _store_waits: Counter[str] = field(default_factory=Counter, init=False)
    _lease: SchedulerLease | None = field(default=None, init=False)
    _judged_at: float = field(default=0.0, init=False)  # when running cells were last judged
    runs: OpenedRuns = field(init=False)  # the cells' MLflow runs and cell.json files

    def __post_init__(self) -> None:
        self.runs = OpenedRuns(self.sweep, self.tracker)

    def run(self) -> dict[CellState, int]:
        """Take the sweep's lease (:class:`~.lease.SweepLockedError` if another scheduler
        holds it), recover, then launch and watch until no cell is pending, running or
        retrying. :class:`~.lease.LeaseLost` if the lease is lost meanwhile."""
        own = self.registry
        with SchedulerLease(own, self.sweep) as lease:
            self._lease, self.registry = lease, own.fenced(lease.me.owner)
            try:
                self._drive()
            except Exception as exc:
                if isinstance(exc, LeaseLost) or lease.held():
                    raise
                # E.g. the server ended a transaction it was frozen in: the loss is the news.
                raise lease.lost_error() from exc
            finally:
                self._lease, self.registry = None, own
        counts = own.counts(self.sweep)
        LOG.info("sweep %s: nothing left to run (%s)", self.sweep, ", ".join(
            f"{n} {state.value}" for state, n in counts.items() if n))
        return counts

    def _drive(self) -> None:
        """Recover, then step until the sweep has nothing left to run; end its runs."""
        LOG.info("driving sweep %s", self.sweep)
        try:
            self.recover()
            self.tracker.sweep_started(self._sweep)
            while True:
                try:
                    self.step()
                    if self.options.on_tick is not None:
                        self.options.on_tick(self.registry, self.sweep)
                    counts = self.registry.counts(self.sweep)  # counted, not read: cheap
                except Exception as exc:  # a registry restarting: ride it out, then
                    if self._lease is None or not server_away(exc):  # take stock anew
                        raise
                    self._lease.wait_for(lambda: self.registry.counts(self.sweep), exc)
                    self.recover()
                    continue
                if not self._running and not self._retry_at and not (
                        counts[CellState.PENDING] or counts[CellState.QUEUED]) and not any(
                        hook.busy() for hook in self.hooks):
                    break
                self._pause()
        finally:
            self.tracker.flush()  # runs ended in the background reach the store
        for hook in self.hooks:  # e.g. the end-of-sweep notification
            hook.on_sweep_end(self.registry)
        # Still under the lease: a scheduler for cells submitted meanwhile starts
        # after this and reopens the parent run.
        close_sweep_runs(self.registry, self._sweep, self.tracker)

    def _pause(self) -> None:
        """Wait up to one poll interval, less if the oldest job ends (short cells do not idle)."""
        if self._running:
            next(iter(self._running.values())).job.wait(self.options.poll_interval)
        else:
            time.sleep(self.options.poll_interval)

    def step(self) -> None:
        """One pass: notice cancels, collect ended jobs, release due retries, launch."""
        self._check_lease()
        self._notice_cancelled()
        self._collect()
        self._release_retries()
        for hook in self.hooks:
            hook.on_pass(self.registry)  # e.g. a search tells ended trials, asks new ones
        self._launch_pending()

    def _check_lease(self) -> None:
        if self._lease is not None:
            self._lease.check()

    # -- recovery ---------------------------------------------------------------------
    def recover(self) -> None:
        """Take over whatever an earlier scheduler of this sweep left behind."""
        ended = partial(ended_while_away, self.registry, self.backend, self.hooks, self.runs)
        for cell, job in recover_cells(self.registry, self._sweep, self.executor,
                                       self.tracker, ended):
            self._running[cell.cell_id] = _Running(cell, job, run_folder(cell))
            LOG.info("reattached to %s (attempt %d): job %s", cell.cell_id,
                     cell.attempts_count, job.job_id)

    @cached_property
    def _sweep(self) -> SweepRecord:
        return self.registry.get_sweep(self.sweep)

    def stop_cell(self, cell_id: str, request: StopRequest) -> bool:
        """Ask a running cell to stop as a stopping rule would (a pruner's entry point):
        the first hook that stops cells makes the request; whether one was made (not for
        a cell that is not running here)."""
        entry = self._running.get(cell_id)
        return entry is not None and any(
            hook.request_stop(cell_id, entry.run_dir, entry.job, request)
            for hook in self.hooks)

    # -- launching --------------------------------------------------------------------
    def _slots(self, gpus: int) -> int:
        free = self.executor.capacity(gpus)
        limit = self.options.max_parallel
        return free if limit is None else min(free, limit - len(self._running))

    def _launch_pending(self) -> None:
        if self._slots(0) <= 0:
            return  # full: no need to ask the registry what waits
        order = self.order = self.order or LaunchOrder.for_backend(self.backend)
        # Ids and indexes only: a pass over 100,000 waiting cells decodes no settings; a
        # cell's stored demand is read once, when the order first meets it.
        keys = self.registry.cell_keys(self.sweep, [CellState.PENDING])
        unseen = [cell_id for cell_id, _ in keys if not order.knows(cell_id)]
        if unseen:
            order.learn(self.registry.cells_by_id(self.sweep, unseen))
        if keys:
            order.observe(self.registry, self.sweep)  # lengths learnt from siblings
        ranked = order.sort(keys)
        idle = not self._running and not self._retry_at
        for hook in self.hooks:  # e.g. a GPU-hours cap holds cells back
            ranked = hook.may_launch(self.registry, self.sweep, ranked, idle)
        ready = [cell_id for cell_id in ranked if cell_id not in self._retry_at]
        for cell_id in order.fitting(ready, self._slots):
            cell = self.registry.get_cell(self.sweep, cell_id)
            if self.registry.transition(cell, CellState.PENDING, CellState.QUEUED):
                self._launch(cell)
                self._judge_between_launches()

    def _launch(self, cell: CellRecord) -> None:
        run_dir = run_folder(cell)
        log_path = run_dir / LOG_FILE
        demand = stored_demand(cell)
        try:
            if demand is None:
                raise ValueError("the cell's settings did not validate when the registry "
                                 "was upgraded; submit its spec again")
            launch = self.backend.launch(cell.settings, run_dir, demand)
        except Exception as exc:  # counts as a failed attempt: retried while retries last
            self._fail_launch(cell, run_dir, f"launch failed: {exc}")
            return
        if self._slots(demand.gpus) <= 0:
            # Not enough free GPUs for this one now; hand the claim back.
            self.registry.transition(cell, CellState.QUEUED, CellState.PENDING)
            return
        try:
            # Every attempt logs into the cell's one child run (:mod:`.cell_runs`).
            run_id = self.runs.open(self.registry, self._sweep, cell, run_dir)
        except Exception as exc:
            if not is_unreachable(exc):
                self._fail_launch(cell, run_dir, f"launch failed: {exc}")
                return
            # The tracking store is away: not the cell's fault, so no retry is charged;
            # the cell waits and is launched again once the store answers.
            LOG.warning("cell %s waits: tracking store unreachable (%s)", cell.cell_id,
                        (str(exc).splitlines() or [""])[0][:160])
            if self.registry.transition(cell, CellState.QUEUED, CellState.PENDING):
                self._store_waits[cell.cell_id] += 1
                self._retry_at[cell.cell_id] = time.monotonic() + retry_delay(
                    self._store_waits[cell.cell_id], self.options.retry_backoff, cap=60.0)
            return
        self._store_waits.pop(cell.cell_id, None)
        # One transaction opens the attempt and records the run id and folder; until it
        # commits, the marker makes a later launch look for the run before making one.
        fields = {"log_path": str(log_path), "run_dir": str(run_dir)} | (
            {"mlflow_run_id": run_id} if run_id else {})
        if not self.registry.transition(cell, CellState.QUEUED, CellState.RUNNING, **fields):
            # Cancelled between the claim and the launch.
            if run_id:
                self.registry.update_cell(cell, mlflow_run_id=run_id)
                self.tracker.finish(run_id, "KILLED", run_dir)
            self.runs.recorded(run_dir)
            return
        self.runs.started(cell, run_id, run_dir)
        env = {**launch.env, **(self.tracker.launch_env(run_id) if run_id else {}),
               EXECUTOR_ENV: self.executor.name}  # the job records who ran it
        for hook in self.hooks:
            hook.on_launch(cell.cell_id, run_dir)
        self._check_lease()  # a scheduler paused since its last pass starts nothing
        try:
            job = self.executor.submit(launch.argv, env, run_dir, log_path, job_resources(
                demand, self.resources))
        except Exception as exc:
            away = is_unreachable(exc)
            self.runs.end_attempt(self.registry, cell, CellState.FAILED, last_error=(
                f"executor unreachable (no retry charged): {exc}" if away
                else f"executor refused the job: {exc}"))
            if away:  # the cluster is away, not the cell's fault: the attempt is given back
                self.registry.update_cell(cell, max_retries=cell.max_retries + 1)
            self._after_failure(cell.cell_id)
            return
        try:
            self.registry.attach_job(cell, job.job_id)
        except LeaseLost:
            job.cancel()  # lost the sweep while submitting: the new owner runs the cell
            raise
        self._running[cell.cell_id] = _Running(cell, job, run_dir)
        LOG.info("launched %s (attempt %d): job %s", cell.cell_id, cell.attempts_count + 1,
                 job.job_id)

    def _fail_launch(self, cell: CellRecord, run_dir: Path, why: str) -> None:
        """A launch that could not be made: a failed attempt like any other (retries apply)."""
        if self.registry.transition(cell, CellState.QUEUED, CellState.RUNNING,
                                    run_dir=str(run_dir)):  # else cancelled meanwhile
            self._fail(cell, last_error=why)

    # -- watching ---------------------------------------------------------------------
    def _collect(self) -> None:
        for cell_id, entry in list(self._running.items()):
            code = entry.job.poll()
            self._report_progress(entry)
            if code is None:
                continue
            del self._running[cell_id]
            summary = self.backend.read_summary(entry.run_dir)
            ending = decide_ending(self.hooks, cell_id, entry.run_dir, code, summary)
            # A hook's ending with a reason is final (``CellRecord.retries_left`` is 0 then).
            if ending is not None and ending.stop_reason is not None:
                self._end(entry.cell, ending.state, ending.run_status, exit_code=code,
                          final_metrics=ending.final_metrics, last_error=ending.last_error,
                          stop_reason=ending.stop_reason)
            elif ending is not None:  # a failed attempt like any other (retried)
                self._fail(entry.cell, exit_code=code, last_error=ending.last_error)
            elif code == 0 and summary is not None and summary.get("status") == "succeeded":
                final = summary.get("final")
                self._end(entry.cell, CellState.SUCCEEDED, "FINISHED", exit_code=0,
                          final_metrics=dict(final) if isinstance(final, dict) else {})
            else:
                why = (f"exit code {code}" if code != 0
                       else "exit code 0 but no succeeded summary.json")
                tail = log_tail(entry.run_dir / LOG_FILE)
                if self._fail(entry.cell, exit_code=code, last_error=f"{why}\n{tail}".strip()):
                    continue
                if self.registry.get_cell(self.sweep, cell_id).state is CellState.CANCELLED:
                    self._cancelled(entry)  # its job died of the cancel

    def _report_progress(self, entry: _Running) -> None:
        self._judge(entry)  # first: a registry busy with other writers does not delay a stop
        progress = self.backend.read_progress(entry.run_dir)
        if progress is not None and progress != entry.progress:
            entry.progress = progress
            self.registry.update_progress(entry.cell, progress[0], progress[1] or None)

    def _judge(self, entry: _Running) -> None:
        self._judged_at = time.monotonic()
        for hook in self.hooks:  # e.g. stopping rules judge new metrics, a pruner reports
            hook.on_poll(self, entry.cell, entry.run_dir, entry.job)

    def _judge_between_launches(self) -> None:
        """A burst of launches (a sweep starting) can outlast many poll intervals: the
        running cells' new metrics are judged meanwhile, so a stop is asked within one
        poll interval of its metric being logged, not after the burst."""
        if time.monotonic() - self._judged_at >= self.options.poll_interval:
            for entry in list(self._running.values()):  # an ended one is collected next pass
                self._judge(entry)

    def _end(self, cell: CellRecord, state: CellState, run_status: str,
             **fields: Any) -> None:
        """End the cell for good as ``state`` (registry, ``cell.json``), then its run."""
        if self.runs.end_attempt(self.registry, cell, state, **fields):
            self._finish_run(cell.cell_id, run_status)

    def _fail(self, cell: CellRecord, **fields: Any) -> bool:
        """A failed attempt, retried after a backoff while retries last; whether it was taken."""
        if not self.runs.end_attempt(self.registry, cell, CellState.FAILED, **fields):
            return False
        self._after_failure(cell.cell_id)
        return True

    def _after_failure(self, cell_id: str) -> None:
        cell = self.registry.get_cell(self.sweep, cell_id)
        if cell.state is CellState.FAILED and cell.retries_left > 0:
            delay = retry_delay(cell.attempts_count, self.options.retry_backoff)
            self._retry_at[cell_id] = time.monotonic() + delay
            LOG.info("%s failed (attempt %d: %s); retried in %.3g s", cell_id,
                     cell.attempts_count, _first_line(cell.last_error), delay)
        else:
            self._finish_run(cell_id, "FAILED")

    def _release_retries(self) -> None:
        now = time.monotonic()
        for cell_id, due in list(self._retry_at.items()):
            if due <= now:
                del self._retry_at[cell_id]
                self.registry.transition((self.sweep, cell_id), CellState.FAILED,
                                         CellState.PENDING)

    def _notice_cancelled(self) -> None:
        # ``kappa cancel`` stops the jobs itself; this only catches up the bookkeeping, so
        # once a second (not every poll) is soon enough.
        if not self._running or time.monotonic() < self._next_cancel_check:
            return
        self._next_cancel_check = time.monotonic() + CANCEL_CHECK_SECONDS
        still = {cell_id for cell_id, _ in self.registry.cell_keys(self.sweep,
                                                                    [CellState.RUNNING])}
        for cell_id in [c for c in self._running if c not in still]:
            entry = self._running.pop(cell_id)
            entry.job.cancel()
            self._cancelled(entry)

    def _cancelled(self, entry: _Running) -> None:
        """A cell cancelled behind the loop's back: ``cell.json``, then its run, say so."""
        self.runs.write_cell_file(entry.cell, CellState.CANCELLED)
        self._finish_run(entry.cell.cell_id, "KILLED")

    def _finish_run(self, cell_id: str, status: str) -> None:
        self.runs.finish(self.registry, cell_id, status)
        cell = self.registry.get_cell(self.sweep, cell_id)
        ended = f"stopped ({cell.state.value})" if cell.stop_reason else cell.state.value
        why = cell.stop_reason or (_first_line(cell.last_error)
                                   if cell.state is CellState.FAILED else "")
        LOG.info("%s %s after %d attempt(s)%s", cell_id, ended, cell.attempts_count,
                 f": {why}" if why else "")
        for hook in self.hooks:  # e.g. a notification of a cell that failed for good
            hook.on_cell_end(self.registry, cell_id, status)


def _first_line(text: str | None) -> str:
    return (text or "").strip().partition("\n")[0][:200]
