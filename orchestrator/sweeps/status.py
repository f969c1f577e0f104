"""A sweep's status as one frozen value, :class:`SweepStatus`, which every face renders
(``kappa status`` text and ``--json``, ``--watch``, ``submit --wait``'s bars, the sweep-end
notification, ``orchestrator.api.status``), so no two disagree; none reads the registry.
``complete``: ``Sweep.status()`` read every cell (hours, groups, studies, seeds, the cells
the cap holds back); else ``Sweep.active_status()`` read only what moves, in one SELECT.

A sweep *has ended* when no scheduler holds its lease (one finishing its bookkeeping
still does) and its work is done: no cell pending, queued, running or waiting for a retry,
and no search trials left (:func:`~orchestrator.analysis.studies.trials_left`), whoever
drives it: a search with no trial recorded yet has not ended, nor has a sweep whose work
waits with no scheduler (a ``kappa resume`` elsewhere picks it up).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from orchestrator.redact import one_line, redact
from orchestrator.registry import TERMINAL_STATES, CellRecord, CellState, SweepRecord
from orchestrator.runs import provenance
from orchestrator.scheduler.lease import holder_alive
from orchestrator.stopping.budget import CAP_REASON, GroupHours, SweepHours

if TYPE_CHECKING:
    from orchestrator.analysis.seed_live import SeedsSummary
    from orchestrator.analysis.studies import StudySummary
    from orchestrator.registry.active import ActiveCells
    from orchestrator.registry.leases import Lease

STATES = tuple(s.value for s in CellState)
TERMINAL = frozenset(s.value for s in TERMINAL_STATES)
UNFINISHED = ("pending", "queued", "running")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def number(x: float) -> str:
    """``1,234.5`` from 10 up, three significant digits below."""
    return f"{x:,.1f}" if x >= 10 else f"{x:,.3g}"


def val_accuracy(final: Mapping[str, Any] | None) -> float | None:
    """The cell's final validation accuracy (``val-core/<benchmark>/acc/mean@1``), if any."""
    final = final or {}
    return next((float(final[key]) for key in sorted(final)
                 if key.startswith("val-core/") and key.endswith("/acc/mean@1")), None)


@dataclass(frozen=True)
class CellStatus:
    """One cell as every view shows it."""

    cell_id: str
    index: int
    axes: Mapping[str, Any]
    state: str
    attempts: int
    progress_step: int | None
    total_steps: int | None
    #: The cell's length in steps: as its job reports it, else as the plan judged it.
    planned_steps: int | None
    exit_code: int | None
    final_metrics: Mapping[str, Any]
    run_dir: str | None
    mlflow_run_id: str | None
    last_error: str | None
    stop_reason: str | None
    waiting: str | None  # why a pending cell cannot start yet
    finished_at: datetime | None
    #: What made its numbers (:mod:`orchestrator.runs.provenance`), when recorded.
    provenance: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, cell: CellRecord | Mapping[str, Any], waiting: str | None = None
           ) -> CellStatus:
        """From a registry snapshot, or a row of :func:`~orchestrator.registry.active.
        read_active` (the same names)."""
        get: Callable[[str], Any] = (cell.__getitem__ if isinstance(cell, Mapping)
                                     else lambda name: getattr(cell, name))
        demand = get("demand") or {}
        state = get("state")
        return cls(get("cell_id"), get("index"), dict(get("axes") or {}),
                   state.value if isinstance(state, CellState) else str(state),
                   get("attempts_count"), get("progress_step"), get("total_steps"),
                   get("total_steps") or int(demand.get("steps") or 0) or None,
                   get("exit_code"), dict(get("final_metrics") or {}), get("run_dir"),
                   get("mlflow_run_id"), get("last_error"), get("stop_reason"), waiting,
                   get("finished_at"), get("provenance"))

    @property
    def val_accuracy(self) -> float | None:
        """Final validation accuracy, if logged."""
        return val_accuracy(self.final_metrics)

    @property
    def axes_text(self) -> str:
        """``baseline=grpo, seed=1``, on one line of plain text (a value's control
        characters and line breaks as escapes: a spec's values are shown, never obeyed)."""
        return one_line(", ".join(f"{k}={v}" for k, v in self.axes.items()))

    @property
    def state_text(self) -> str:
        """``succeeded (stopped: plateau at step 340)``, ``pending (waits: gpu_hours cap)``."""
        if self.stop_reason:
            short = (CAP_REASON if self.stop_reason.startswith(CAP_REASON)
                     else "stopped: " + self.stop_reason.split(" (")[0])
            return f"{self.state} ({short})"
        return f"{self.state} (waits: {self.waiting})" if self.waiting else self.state

    @property
    def step_text(self) -> str:
        """``12/150``, or ``starting`` for a cell whose job has not reported a step yet."""
        if self.progress_step is None:
            return "starting"
        return f"{self.progress_step}/{self.planned_steps or '?'}"

    def failure_text(self) -> str:
        """``1a2b3c4d5e6f (seed=1) failed: exit code 1 (`kappa logs ...`)``, masked."""
        why = self.stop_reason or next(
            (line for line in (self.last_error or "").splitlines() if line.strip()), "")
        return redact(f"{self.cell_id} ({self.axes_text}) failed: {one_line(why.strip()[:200])} "
                      f"(`kappa logs {self.cell_id}`)")

    def as_json(self) -> dict[str, Any]:
        """JSON-able, as ``kappa status --json`` lists it."""
        return {"cell_id": self.cell_id, "index": self.index, "axes": dict(self.axes),
                "state": self.state, "attempts": self.attempts,
                "progress_step": self.progress_step, "total_steps": self.total_steps,
                "exit_code": self.exit_code, "val_accuracy": self.val_accuracy,
                "final_metrics": dict(self.final_metrics), "run_dir": self.run_dir,
                "mlflow_run_id": self.mlflow_run_id, "last_error": self.last_error,
                "stop_reason": self.stop_reason, "waiting": self.waiting,
                "provenance": None if self.provenance is None else dict(self.provenance)}


@dataclass(frozen=True)
class Driver:
    """Who drives the sweep, from its lease."""

    lease: Lease | None
    alive: bool | None  # the holder's process, when on this host (None: cannot tell)

    @property
    def live(self) -> bool:
        """A scheduler holds the lease now: not expired, and its process not seen dead."""
        return self.lease is not None and not self.lease.expired and self.alive is not False

    @property
    def text(self) -> str:
        """``scheduler on host h1 pid 42 since ...`` or why none runs."""
        lease = self.lease
        if lease is None:
            return "no scheduler running"
        if self.alive is False:
            return f"no scheduler running (the last, pid {lease.pid} on this host, died)"
        if lease.expired:
            return f"no scheduler running (lease of {lease.describe()})"
        return f"scheduler on {lease.describe()}"

    @classmethod
    def of(cls, lease: Lease | None) -> Driver:
        """Judge ``lease`` now."""
        return cls(lease, None if lease is None else holder_alive(lease))


@dataclass(frozen=True)
class SweepStatus:
    """A sweep as every view shows it (module docstring); ``complete``: every cell was
    read (else only the running ones and the newest failures, and no hours)."""

    sweep: str
    backend: str
    complete: bool
    counts: Mapping[str, int]
    retrying: int  # failed cells that will be retried
    driver: Driver
    cells: tuple[CellStatus, ...]
    executor: Mapping[str, Any] | None = None
    overrides: tuple[str, ...] = ()
    overrides_text: str = ""
    mlflow_experiment_id: str | None = None
    mlflow_parent_run_id: str | None = None
    updated_at: datetime | None = None
    hours: SweepHours | None = None
    groups: tuple[GroupHours, ...] = ()
    studies: tuple[StudySummary, ...] = ()
    notify: Mapping[str, Any] | None = None
    seeds: SeedsSummary | None = None
    #: A search has trials left to ask or tell (judged only when no cell is unfinished).
    trials_left: bool = False

    @property
    def total(self) -> int:
        """Cells in all."""
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        """Cells that ended (succeeded, failed or cancelled)."""
        return sum(n for s, n in self.counts.items() if s in TERMINAL)

    @property
    def unfinished(self) -> int:
        """Cells pending, queued, running or waiting to be retried."""
        return sum(self.counts.get(s, 0) for s in UNFINISHED) + self.retrying

    @property
    def work_left(self) -> bool:
        """An unfinished cell, or a search's trials left (module docstring)."""
        return bool(self.unfinished) or self.trials_left

    @property
    def ended(self) -> bool:
        """Nothing left to run and no scheduler (module docstring)."""
        return not self.work_left and not self.driver.live

    @property
    def all_succeeded(self) -> bool:
        """No cell failed or was cancelled."""
        return not self.counts.get("failed") and not self.counts.get("cancelled")

    @property
    def running(self) -> tuple[CellStatus, ...]:
        """The running cells, by index."""
        return tuple(c for c in self.cells if c.state == "running")

    @property
    def made_by(self) -> str:
        """What made the ended cells' numbers, in one line, ``""`` when none recorded it
        (:func:`orchestrator.runs.provenance.made_by`)."""
        return provenance.made_by([c.provenance for c in self.cells
                                   if c.state in TERMINAL and c.final_metrics])

    @property
    def hours_text(self) -> str:
        """``GPU-hours: used 12 · running 24 (projected) · ...`` (empty without hours)."""
        hours = self.hours
        if hours is None:
            return ""
        cap = f" of cap {number(hours.cap)}" if hours.cap is not None else ""
        line = (f"{hours.unit}: used {number(hours.used)} · running {number(hours.running)} "
                f"(projected) · pending {number(hours.planned)} (planned) · sweep "
                f"{number(hours.projected)}{cap}")
        if hours.stopped_cells:
            line += (f" · saved by stopping rules {number(hours.saved)} "
                     f"({hours.stopped_cells} cell{'s' if hours.stopped_cells > 1 else ''} "
                     "stopped)")
        return line

    def groups_text(self, limit: int = 5) -> str:
        """``GPU-hours saved per comparison group: baseline=grpo: 0.12 at step 130; ...``
        (the ``limit`` groups that saved most, then how many more); empty without groups."""
        if not self.groups or self.hours is None:
            return ""
        parts = []
        for group in self.groups[:limit]:
            where = (f" at step {group.steps[0]}" if len(group.steps) == 1 else
                     f" at steps {', '.join(map(str, group.steps))}" if group.steps else
                     " (ran to full length)")
            parts.append(f"{group.label}: {group.saved:.3g}{where}")
        more = f"; … {len(self.groups) - limit} more" if len(self.groups) > limit else ""
        return f"{self.hours.unit} saved per comparison group: " + "; ".join(parts) + more

    def failures(self) -> list[CellStatus]:
        """The failed cells among :attr:`cells`, newest first."""
        failed = [c for c in self.cells if c.state == "failed"]
        return sorted(failed, key=lambda c: (c.finished_at is not None,
                                             c.finished_at or _EPOCH), reverse=True)

    def as_json(self) -> dict[str, Any]:
        """JSON-able, as ``kappa status --json`` prints it."""
        lease = self.driver.lease
        return {
            "sweep": self.sweep, "backend": self.backend, "counts": dict(self.counts),
            "scheduler_pid": lease.pid if lease is not None and self.driver.live else None,
            "scheduler": None if lease is None else lease.as_json(),
            "driver": self.driver.text,
            "executor": None if self.executor is None else dict(self.executor),
            "overrides": list(self.overrides),
            "mlflow_experiment_id": self.mlflow_experiment_id,
            "mlflow_parent_run_id": self.mlflow_parent_run_id,
            "hours": None if self.hours is None else self.hours.as_json(),
            "groups": [{"label": g.label, "cells": g.cells, "steps": list(g.steps),
                        "saved": round(g.saved, 4), "hours": g.hours.as_json()}
                       for g in self.groups],
            "made_by": self.made_by,
            "cells": [c.as_json() for c in self.cells],
            "studies": [_study_json(s) for s in self.studies],
            "notify": None if self.notify is None else dict(self.notify),
            "seeds": None if self.seeds is None else self.seeds.as_json(),
        }


def _study_json(study: StudySummary) -> dict[str, Any]:
    best = study.best
    return {"study": study.name, "trials": len(study.trials), "budget": study.budget,
            **{state.lower(): study.count(state)
               for state in ("COMPLETE", "PRUNED", "FAIL", "RUNNING")},
            "best": None if best is None else {"trial": best.number, "value": best.value,
                                               "params": best.params},
            "error": study.error}


def masked_executor(recorded: tuple[str, Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """The executor the sweep runs on, its options' passwords masked."""
    return None if recorded is None else {
        "name": recorded[0], "options": json.loads(redact(json.dumps(recorded[1])))}


def active_status(record: SweepRecord, active: ActiveCells) -> SweepStatus:
    """A status from one read of the sweep's active part (``complete`` is false)."""
    counts = {s.value: active.counts.get(s, 0) for s in CellState}
    return SweepStatus(record.name, record.backend, False, counts, active.retrying,
                       Driver.of(active.lease), tuple(CellStatus.of(c) for c in active.cells),
                       updated_at=record.updated_at)
