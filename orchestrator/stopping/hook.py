"""The scheduler's side of stopping (a hook of the loop): judge live metrics, ask cells to
stop, end them, and hold back cells the sweep's GPU-hours cap cannot afford.

A request is not an outcome: the cell ends ``succeeded (stopped ...)`` only when its run
confirms the stop (:func:`~orchestrator.runs.stop_request.confirms`). A job that dies
before is an ordinary failed attempt, and the request stands for the next attempt.
``diverged`` is final once decided: the cell fails with that reason, not retried. A
restart loses nothing: histories are re-read from run folders, requests from
``stop-request.json``."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestrator.backends import Backend
from orchestrator.executors import JobHandle
from orchestrator.grid.plan import SweepPlan
from orchestrator.paths import is_canary_sweep
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.runs.folder import summary_final, write_cell_file
from orchestrator.runs.layout import group_decision_file
from orchestrator.runs.stop_request import (
    StopRequest,
    clear_stop_request,
    confirms,
    point_to_group,
    read_stop_request,
    synthesize_summary,
)
from orchestrator.scheduler.hooks import Ending, LoopControl, SchedulerHook
from orchestrator.spec.model import Resources
from orchestrator.spec.stop_block import StopRules
from orchestrator.stopping import budget
from orchestrator.stopping.group_watch import ComparisonGroups, Watch
from orchestrator.stopping.rules import MetricHistory, first_stop

LOG = logging.getLogger(__name__)


@dataclass
class SweepStopping(SchedulerHook):
    """Stopping rules and the GPU-hours cap of one sweep (see the module docstring)."""

    backend: Backend
    rules: StopRules | None = None
    resources: Resources = field(default_factory=Resources)
    sweep: str = ""
    _watches: dict[str, Watch] = field(default_factory=dict, init=False)
    _warned: set[str] = field(default_factory=set, init=False)
    _groups: ComparisonGroups | None = field(default=None, init=False)
    _last_pass: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.rules is not None and self.rules.grouped:
            self._groups = ComparisonGroups(self.sweep, self.rules, self.backend)

    @classmethod
    def of(cls, plan: SweepPlan, backend: Backend) -> SweepStopping:
        """The sweep's rules and cap, from its plan. A canary sweep gets none of the
        grid's rules (its few steps must all run); its cap is the grid's budget."""
        return cls(backend, None if is_canary_sweep(plan.name) else plan.stop, plan.resources,
                   plan.name)

    @property
    def cap(self) -> float | None:
        """The sweep's GPU-hours cap, if any."""
        return self.rules.gpu_hours if self.rules is not None else None

    # -- a cell's life ----------------------------------------------------------------
    def on_launch(self, cell_id: str, run_dir: Path) -> None:
        """A new launch: forget what was read of the last one. A standing request is the
        new launch's too, but a ``diverged`` one (final) only a user's requeue relaunches:
        that launch starts unasked."""
        self._watches.pop(cell_id, None)
        request = read_stop_request(run_dir)
        if request is not None and request.outcome == "failed":
            clear_stop_request(run_dir)
        key = self._groups.keys.get(cell_id) if self._groups is not None else None
        if key is not None:  # where the launch reads its group's decision
            point_to_group(run_dir, group_decision_file(run_dir.parent, key))

    def _watch_of(self, cell_id: str, run_dir: Path) -> Watch:
        if cell_id not in self._watches:
            # A request already in the folder was made by this launch's scheduler before
            # it restarted: it stands.
            self._watches[cell_id] = Watch(request=read_stop_request(run_dir))
        return self._watches[cell_id]

    def on_poll(self, loop: LoopControl, cell: CellRecord, run_dir: Path,
                job: JobHandle) -> None:
        """Read the cell's metrics logged since the last poll and judge its history (the
        first rule that fires stops it)."""
        watch = self._watch_of(cell.cell_id, run_dir)
        watch.job = job
        if watch.request is not None and not watch.short_of_group_stop:
            self._end_job(watch, job)  # a restarted scheduler finishes what it began
            return
        if self.rules is None or not self.rules.has_rules:
            return
        read = self.backend.read_metrics(run_dir, watch.cursor)
        if read.restarted:  # the run rewrote its history (a resume): judge it afresh
            watch.history = MetricHistory()
        watch.cursor = read.cursor
        watch.rows_seen += len(read.rows)
        watch.last_step = max([watch.last_step, *(int(step) for step, _ in read.rows)])
        if read.rows:
            seen = (time.monotonic(), watch.last_step)
            watch.first_seen, watch.last_seen = watch.first_seen or seen, seen
        if watch.request is not None:  # a group's stop lies ahead: ends once it gets there
            self._end_job(watch, job)
            return
        if not watch.history.add(read.rows, self.rules.metrics()) and not read.restarted:
            return
        if self._groups is not None:
            decision = self._groups.judge(cell.cell_id, watch.history, watch.cache)
        else:
            decision = first_stop(self.rules, watch.history, watch.cache)
        if decision is not None:
            self.request_stop(cell.cell_id, run_dir, job, decision)

    def on_pass(self, registry: Registry) -> None:
        """Comparison groups: a group whose members have all met the rule is stopped."""
        if self._groups is None:
            return
        now = time.monotonic()
        period, self._last_pass = now - (self._last_pass or now), now
        for cell, request in self._groups.decisions(registry, self._watches, period):
            watch = self._watches.get(cell.cell_id)
            run_dir = Path(cell.run_dir) if cell.run_dir else None
            held = read_stop_request(run_dir) if run_dir is not None else None
            if watch is not None and held is not None and held.step == request.step:
                watch.request = held  # the run took it from the group's file already
                if watch.job is not None:
                    self._end_job(watch, watch.job)
            elif watch is not None and watch.job is not None and run_dir is not None:
                self.request_stop(cell.cell_id, run_dir, watch.job, request)
            elif run_dir is not None and held is None:
                # Waiting to retry: its next attempt trains to the group's step and stops.
                self.backend.request_stop(run_dir, request)

    def request_stop(self, cell_id: str, run_dir: Path, job: JobHandle,
                     request: StopRequest) -> bool:
        """Ask the cell to stop (the first request for a launch wins; a pruner calls this
        with :func:`~orchestrator.stopping.rules.pruned`). Whether it was made."""
        watch = self._watch_of(cell_id, run_dir)
        if watch.request is not None:
            return False
        request = replace(request, requested_at=round(time.time(), 3))
        self.backend.request_stop(run_dir, request)
        watch.request = request
        LOG.info("cell %s: stopping (%s)", cell_id, request.reason)
        self._end_job(watch, job)
        return True

    def _end_job(self, watch: Watch, job: JobHandle) -> None:
        """A backend whose process cannot be asked is ended through its executor (once
        it has reached a group's stop step)."""
        if not (self.backend.stops_itself or watch.job_ended or watch.short_of_group_stop):
            watch.job_ended = True
            job.cancel()

    def on_exit(self, cell_id: str, run_dir: Path, code: int,
                summary: Mapping[str, Any] | None) -> Ending | None:
        """How the cell ends if a stop was requested (module docstring); a run reporting
        another stop is a failed attempt; ``None``: no request, or a job that died before
        its stop (an ordinary failure)."""
        watch = self._watches.pop(cell_id, None)
        self._warn_unlogged(cell_id, run_dir, watch)
        if self._groups is not None:
            self._groups.changed = True  # a member leaving may let its group stop
        request = read_stop_request(run_dir)
        if request is None:
            return None
        if not confirms(summary, request):
            ended = summary if isinstance(summary, Mapping) else {}
            reported = isinstance(ended.get("stopped"), Mapping)
            if not reported and code == 0 and ended.get("status") in ("succeeded",
                                                                      request.outcome):
                # It reached its last step before it saw the request: the rule's decision
                # stands, recorded in its summary like any stop.
                steps = ended.get("steps")
                summary = synthesize_summary(
                    run_dir, request, steps if type(steps) is int else None, summary_final(ended))
            elif request.outcome == "failed" or not self.backend.stops_itself:
                # Diverged is final; a process that cannot be asked was ended by us.
                summary = self.backend.stopped_summary(run_dir, request)
            elif reported:
                return Ending(CellState.FAILED, {}, None, (
                    f"the run reported a stop other than the one requested ({request.reason}):"
                    f" {ended.get('stopped')}"))
            else:
                return None
        final = summary_final(summary)
        if request.outcome == "succeeded":
            return Ending(CellState.SUCCEEDED, final, request.reason, None)
        return Ending(CellState.FAILED, final, request.reason, f"stopped: {request.reason}")

    def _warn_unlogged(self, cell_id: str, run_dir: Path, watch: Watch | None) -> None:
        """A rule whose metric a run never logged is likely misspelt: say so, once, judged
        on the run's whole history (this scheduler may have read only part of it)."""
        if watch is None or self.rules is None or watch.rows_seen == 0:
            return
        missing = self.rules.metrics() - set(watch.history.series) - self._warned
        if missing:
            whole = MetricHistory()
            whole.add(self.backend.read_metrics(run_dir, None).rows, frozenset(missing))
            missing -= set(whole.series)
        for metric in sorted(missing):
            self._warned.add(metric)
            LOG.warning("stopping rule metric %r was never logged by cell %s (misspelt?)",
                        metric, cell_id)

    # -- the cap ----------------------------------------------------------------------
    def may_launch(self, registry: Registry, sweep: str, ranked: list[str],
                   idle: bool) -> list[str]:
        """The cells the cap lets start, in launch order; once nothing runs (``idle``) and
        none may start, the held-back ones are cancelled (a resubmit requeues them)."""
        if self.cap is None:
            return ranked
        waiting = {c.cell_id: c for c in registry.cells_by_id(sweep, ranked)}
        if not waiting:
            return []
        others = [c for c in registry.cells(sweep) if c.cell_id not in waiting]
        admitted, blocked = budget.admit([waiting[i] for i in ranked if i in waiting], others,
                                         self.resources, self.cap)
        if blocked and not admitted and idle:
            self._cancel(registry, sweep, blocked)
        return [cell.cell_id for cell in admitted]

    def _cancel(self, registry: Registry, sweep: str, blocked: Sequence[CellRecord]) -> None:
        """End the cells the cap holds back once nothing runs that could free budget."""
        why = budget.cap_message(budget.sweep_hours(registry.cells(sweep), self.resources,
                                                    self.cap))
        count = 0
        for cell in blocked:
            if registry.transition(cell, CellState.PENDING, CellState.CANCELLED,
                                   last_error=why, stop_reason=budget.CAP_REASON):
                count += 1
                if cell.run_dir:
                    write_cell_file(Path(cell.run_dir), sweep, cell,
                                    CellState.CANCELLED.value, cell.mlflow_run_id)
        if count:
            LOG.warning("%s: %d cell(s) cancelled: %s", sweep, count, why)
