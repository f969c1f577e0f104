"""GPU-hours of a sweep (cell-hours when its cells use no GPU; a cell needs ``gpus ×
nodes`` GPUs), pure arithmetic over registry snapshots and the spec's ``resources``:

* **used**: ended cells, the wall time of their last attempt;
* **planned**: pending and queued cells, their declared steps at the sweep's pace
  (:mod:`orchestrator.scheduler.durations`); ``resources.hours`` until a cell finished;
* **running**: as that model projects each cell, else (under a tenth of its steps, or
  retried) the larger of its planned hours and the hours it has run;
* **saved**: cells a stopping rule ended, planned hours × the fraction of steps not run.

The cap (``stop.gpu_hours``): a cell starts only if used + running + its planned hours stay
within it. Cells that cannot start wait while cells run (a stop may free budget); once
nothing runs they are cancelled with the reason ``gpu_hours cap``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from orchestrator.registry import CellRecord, CellState
from orchestrator.scheduler.durations import Pace, declared_steps, finished_sample, running_view
from orchestrator.spec.model import Resources
from orchestrator.stopping.groups import group_key

CAP_REASON = "gpu_hours cap"


@dataclass(frozen=True)
class SweepHours:
    """A sweep's hours (GPU-hours, or cell-hours when its cells use no GPU)."""

    unit: str
    used: float
    running: float
    planned: float
    saved: float
    cap: float | None
    stopped_cells: int

    @property
    def projected(self) -> float:
        """What the whole sweep is projected to cost: used + running + planned."""
        return self.used + self.running + self.planned

    def as_json(self) -> dict[str, float | str | int | None]:
        """For ``kappa status --json``."""
        return {"unit": self.unit, "used": round(self.used, 4),
                "running_projected": round(self.running, 4),
                "pending_planned": round(self.planned, 4),
                "projected": round(self.projected, 4), "saved": round(self.saved, 4),
                "cap": self.cap, "stopped_cells": self.stopped_cells}


def multiplier(resources: Resources) -> tuple[float, str]:
    """``(gpus × nodes, "GPU-hours")`` of one cell, or ``(1, "cell-hours")`` without GPUs."""
    gpus = resources.gpus * resources.nodes
    return (float(gpus), "GPU-hours") if gpus > 0 else (1.0, "cell-hours")


def is_stopped(cell: CellRecord) -> bool:
    """Whether a stopping rule ended the cell (not the cap, not a cancel)."""
    return bool(cell.stop_reason) and cell.state in (CellState.SUCCEEDED, CellState.FAILED)


def unrun_fraction(cell: CellRecord) -> float:
    """The fraction of its steps a stopped cell did not run (0 when unknown)."""
    steps = declared_steps(cell)
    if not steps or cell.progress_step is None:
        return 0.0
    return min(1.0, max(0.0, 1.0 - cell.progress_step / steps))


def planned_hours(cell: CellRecord, pace: Pace | None, resources: Resources) -> float:
    """The hours one full run of ``cell`` is planned at (see the module docstring)."""
    hours = resources.hours if pace is None else pace.seconds(declared_steps(cell)) / 3600.0
    return multiplier(resources)[0] * hours


def sweep_hours(cells: Iterable[CellRecord], resources: Resources, cap: float | None = None,
                now: datetime | None = None, pace: Pace | None = None) -> SweepHours:
    """Used, running (projected), pending (planned) and saved hours of ``cells``, at
    ``pace`` (default: the pace their finished ones set)."""
    now = now or datetime.now(UTC)
    cells = list(cells)
    gpus, unit = multiplier(resources)
    pace = pace or Pace.of(map(finished_sample, cells))
    used = running = planned = saved = 0.0
    stopped = 0
    for cell in cells:
        if cell.state is CellState.RUNNING:
            elapsed, length = running_view(cell, now)
            running += (gpus * length / 3600.0 if length is not None else
                        max(planned_hours(cell, pace, resources), gpus * elapsed / 3600.0))
        elif cell.state in (CellState.PENDING, CellState.QUEUED):
            planned += planned_hours(cell, pace, resources)
        else:
            if cell.started_at is not None and cell.finished_at is not None:
                ran = (cell.finished_at - cell.started_at).total_seconds()
                used += gpus * max(0.0, ran / 3600.0)
            if is_stopped(cell):
                stopped += 1
                saved += planned_hours(cell, pace, resources) * unrun_fraction(cell)
    return SweepHours(unit, used, running, planned, saved, cap, stopped)


def admit(pending: Sequence[CellRecord], others: Iterable[CellRecord], resources: Resources,
          cap: float, now: datetime | None = None) -> tuple[list[CellRecord], list[CellRecord]]:
    """Split ``pending`` (in launch order) into the cells the cap lets start now and
    those that must wait, each admitted cell's hours committed before the next is judged
    (``others``: the sweep's other cells)."""
    others = list(others)
    hours = sweep_hours(others, resources, now=now)
    committed = hours.used + hours.running
    pace = Pace.of(map(finished_sample, others))
    admitted: list[CellRecord] = []
    for n, cell in enumerate(pending):
        planned = planned_hours(cell, pace, resources)
        if committed + planned > cap + 1e-9:
            return admitted, list(pending[n:])
        committed += planned
        admitted.append(cell)
    return admitted, []


def cap_message(hours: SweepHours) -> str:
    """Why cells wait or were cancelled: ``gpu_hours cap: 1,920 of 2,000 committed...``."""
    committed = hours.used + hours.running
    return (f"{CAP_REASON}: {committed:,.1f} of {hours.cap or 0:,.1f} {hours.unit} used or "
            "committed to running cells; a cell more would exceed it")


@dataclass(frozen=True)
class GroupHours:
    """One comparison group (``stop.together``): its label (the axis values its members
    share), its cells, the steps its stopped members ended at, and its members' hours at
    the sweep's pace."""

    label: str
    cells: int
    steps: tuple[int, ...]
    hours: SweepHours

    @property
    def saved(self) -> float:
        """The hours stopping saved in the group."""
        return self.hours.saved


def saved_by_group(cells: Sequence[CellRecord], resources: Resources,
                   together: Sequence[str], now: datetime | None = None) -> list[GroupHours]:
    """Each comparison group's hours, the groups that saved most first."""
    pace = Pace.of(map(finished_sample, cells))
    groups: dict[str, list[CellRecord]] = {}
    for cell in cells:
        groups.setdefault(group_key(cell.axes, together), []).append(cell)
    out = []
    for members in groups.values():
        label = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                          for k, v in sorted(members[0].axes.items())
                          if k not in together) or "(all cells)"
        steps = tuple(sorted({c.progress_step for c in members
                              if is_stopped(c) and c.progress_step is not None}))
        out.append(GroupHours(label, len(members), steps,
                              sweep_hours(members, resources, now=now, pace=pace)))
    return sorted(out, key=lambda g: (-g.saved, g.label))
