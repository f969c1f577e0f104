"""How sweeps look in the terminal: status tables, JSON, and progress while a sweep runs
(bars on a terminal, throttled lines in a log). Imported only when a command runs (rich).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

from orchestrator.analysis.studies import study_summaries
from orchestrator.redact import redact
from orchestrator.registry import TERMINAL_STATES, CellRecord, CellState, Registry, SweepRecord
from orchestrator.scheduler.lease import holder_alive
from orchestrator.spec.overrides import command_line
from orchestrator.sweeps.submission import overrides_of

if TYPE_CHECKING:
    from orchestrator.registry.leases import Lease
    from orchestrator.stopping.budget import SweepHours

TABLE_ROWS = 200  # cells ``kappa status SWEEP`` draws at most (``table_cells``)
# Off a terminal, unchanged counts are repeated (with the running cells' steps) this often.
HEARTBEAT_S = 30.0

STATE_STYLE = {
    CellState.PENDING: "dim",
    CellState.QUEUED: "cyan",
    CellState.RUNNING: "bold blue",
    CellState.SUCCEEDED: "green",
    CellState.FAILED: "bold red",
    CellState.CANCELLED: "yellow",
}


def val_accuracy(final: Mapping[str, Any] | None) -> float | None:
    """The cell's final validation accuracy (``val-core/<benchmark>/acc/mean@1``), if any."""
    final = final or {}
    return next((float(final[key]) for key in sorted(final)
                 if key.startswith("val-core/") and key.endswith("/acc/mean@1")), None)


class RunningCell(Protocol):
    """What the progress views read of a running cell (a :class:`CellRecord`, or the
    lighter row ``kappa status --watch`` reads, :mod:`orchestrator.cli.sweep_watch`)."""

    @property
    def cell_id(self) -> str: ...
    @property
    def axes(self) -> Mapping[str, Any]: ...
    @property
    def progress_step(self) -> int | None: ...
    @property
    def total_steps(self) -> int | None: ...
    @property
    def demand(self) -> Mapping[str, Any] | None: ...


def describe_axes(cell: RunningCell) -> str:
    """``baseline=grpo, rb=on`` for a cell."""
    return ", ".join(f"{k}={v}" for k, v in cell.axes.items())


def cell_row(cell: CellRecord, waiting: str | None = None) -> dict[str, Any]:
    """A cell as JSON-able data (``waiting``: why a pending cell cannot start yet)."""
    return {
        "cell_id": cell.cell_id, "index": cell.index, "axes": dict(cell.axes),
        "state": cell.state.value, "attempts": cell.attempts_count,
        "progress_step": cell.progress_step, "total_steps": cell.total_steps,
        "exit_code": cell.exit_code, "val_accuracy": val_accuracy(cell.final_metrics),
        "final_metrics": dict(cell.final_metrics or {}), "run_dir": cell.run_dir,
        "mlflow_run_id": cell.mlflow_run_id, "last_error": cell.last_error,
        "stop_reason": cell.stop_reason, "waiting": waiting,
    }


def sweep_hours(sweep: SweepRecord, cells: list[CellRecord]) -> tuple[SweepHours, set[str]]:
    """The sweep's hours (:mod:`orchestrator.stopping.budget`) and the ids of pending cells
    its GPU-hours cap holds back now."""
    from orchestrator.grid.plan import stored_plan
    from orchestrator.stopping.budget import admit
    from orchestrator.stopping.budget import sweep_hours as hours_of

    plan = stored_plan(sweep.name, sweep.plan)
    resources = plan.resources
    cap = plan.stop.gpu_hours if plan.stop is not None else None
    waiting: set[str] = set()
    if cap is not None:
        pending = [c for c in cells if c.state is CellState.PENDING]
        others = [c for c in cells if c.state is not CellState.PENDING]
        waiting = {c.cell_id for c in admit(pending, others, resources, cap)[1]}
    return hours_of(cells, resources, cap), waiting


def group_hours(sweep: SweepRecord, cells: list[CellRecord]) -> str | None:
    """Hours saved per comparison group (``stop.together``), or ``None`` without groups."""
    from orchestrator.grid.plan import stored_plan
    from orchestrator.stopping.budget import group_hours_text, multiplier, saved_by_group

    plan = stored_plan(sweep.name, sweep.plan)
    if plan.stop is None or not plan.stop.together:
        return None
    groups = saved_by_group(cells, plan.resources, plan.stop.together)
    return group_hours_text(groups, multiplier(plan.resources)[1])


def hours_text(hours: SweepHours) -> str:
    """``GPU-hours: used 12 · running 24 (projected) · ... · saved by stopping rules 6``."""
    def n(x: float) -> str:
        return f"{x:,.1f}" if x >= 10 else f"{x:,.3g}"

    cap = f" of cap {n(hours.cap)}" if hours.cap is not None else ""
    line = (f"{hours.unit}: used {n(hours.used)} · running {n(hours.running)} (projected) · "
            f"pending {n(hours.planned)} (planned) · sweep {n(hours.projected)}{cap}")
    if hours.stopped_cells:
        line += (f" · saved by stopping rules {n(hours.saved)} "
                 f"({hours.stopped_cells} cell{'s' if hours.stopped_cells > 1 else ''} stopped)")
    return line


def state_text(cell: CellRecord, waiting: set[str] | frozenset[str] = frozenset()) -> str:
    """``succeeded (stopped: plateau at step 340)``, ``pending (waits: gpu_hours cap)``."""
    from orchestrator.stopping.budget import CAP_REASON

    if cell.stop_reason:
        short = (CAP_REASON if cell.stop_reason.startswith(CAP_REASON)
                 else "stopped: " + cell.stop_reason.split(" (")[0])
        return f"{cell.state.value} ({short})"
    if cell.cell_id in waiting:
        return f"{cell.state.value} (waits: {CAP_REASON})"
    return cell.state.value


def driver_text(lease: Lease | None) -> str:
    """Who drives the sweep, from its lease: ``scheduler on host h1 pid 42 since ...``."""
    if lease is None:
        return "no scheduler running"
    if holder_alive(lease) is False:
        return f"no scheduler running (the last, pid {lease.pid} on this host, died)"
    if lease.expired:
        return f"no scheduler running (lease of {lease.describe()})"
    return f"scheduler on {lease.describe()}"


def executor_json(registry: Registry, sweep: SweepRecord) -> dict[str, Any] | None:
    """The executor the sweep runs on, its options' passwords masked."""
    recorded = registry.executor(sweep.name)
    return None if recorded is None else {
        "name": recorded[0], "options": json.loads(redact(json.dumps(recorded[1])))}


def sweep_json(registry: Registry, sweep: SweepRecord, lease: Lease | None) -> dict[str, Any]:
    """A sweep, its counts, driver, executor, hours and cells as JSON-able data."""
    from orchestrator.stopping.budget import CAP_REASON

    counts = registry.counts(sweep.name)
    cells = registry.cells(sweep.name)
    hours, waiting = sweep_hours(sweep, cells)
    return {
        "sweep": sweep.name, "backend": sweep.backend,
        "counts": {state.value: n for state, n in counts.items()},
        "scheduler_pid": (lease.pid if lease is not None and not lease.expired
                          and holder_alive(lease) is not False else None),
        "scheduler": None if lease is None else lease.as_json(),
        "executor": executor_json(registry, sweep),
        "overrides": list(overrides_of(sweep)),
        "mlflow_experiment_id": sweep.mlflow_experiment_id,
        "mlflow_parent_run_id": sweep.mlflow_parent_run_id,
        "hours": hours.as_json(),
        "cells": [cell_row(c, CAP_REASON if c.cell_id in waiting else None) for c in cells],
        "studies": studies_json(registry, sweep),
        "notify": notify_json(sweep.name),
    }


def notify_json(sweep: str) -> dict[str, Any] | None:
    """Where the sweep's notifications go (the URL masked) and on which events."""
    from orchestrator.notify.store import load_config

    config = load_config(sweep)
    return None if config is None else {"url": config.masked(), "events": list(config.events)}


def studies_json(registry: Registry, sweep: SweepRecord) -> list[dict[str, Any]]:
    """A search sweep's studies: trials per state, the best trial (empty otherwise)."""
    out = []
    for study in study_summaries(registry, sweep):
        best = study.best
        out.append({"study": study.name, "trials": len(study.trials), "budget": study.budget,
                    **{state.lower(): study.count(state) for state in
                       ("COMPLETE", "PRUNED", "FAIL", "RUNNING")},
                    "best": None if best is None else {"trial": best.number,
                                                       "value": best.value,
                                                       "params": best.params},
                    "error": study.error})
    return out


def counts_text(counts: Mapping[CellState, int]) -> str:
    """``3 succeeded · 1 running · 2 pending`` (states with cells only)."""
    parts = [f"[{STATE_STYLE[s]}]{n} {s.value}[/]" for s, n in counts.items() if n]
    return " · ".join(parts) or "no cells"


def sweeps_table(registry: Registry) -> Table:
    """Every sweep with its state counts and who drives it (from its lease)."""
    table = Table(title="sweeps", title_justify="left")
    for column in ("sweep", "backend", "cells", "states", "scheduler", "updated"):
        table.add_column(column, justify="right" if column == "cells" else "left")
    for sweep in registry.list_sweeps():
        counts = registry.counts(sweep.name)
        lease = registry.lease(sweep.name)
        driver = driver_text(lease)
        table.add_row(sweep.name, sweep.backend, str(sum(counts.values())), counts_text(counts),
                      f"{lease.host} pid {lease.pid}" if lease is not None and
                      driver.startswith("scheduler on") else "",
                      sweep.updated_at.strftime("%Y-%m-%d %H:%M"))
    return table


def table_cells(cells: list[CellRecord], limit: int = TABLE_ROWS) -> list[CellRecord]:
    """The cells ``kappa status`` shows, by index: at most ``limit``, running, failed and
    queued first (100,000 rows take minutes to draw; ``--json`` has every cell)."""
    if len(cells) <= limit:
        return cells
    first = {CellState.RUNNING: 0, CellState.FAILED: 1, CellState.QUEUED: 2}
    picked = sorted(cells, key=lambda c: (first.get(c.state, 3), c.index))[:limit]
    return sorted(picked, key=lambda c: c.index)


def cells_table(cells: list[CellRecord],
                waiting: set[str] | frozenset[str] = frozenset()) -> Table:
    """One row per cell: state (why it stopped or waits), progress, attempts, val acc."""
    table = Table(title_justify="left")
    for name, justify in (("#", "right"), ("cell", "left"), ("axes", "left"),
                          ("state", "left"), ("progress", "right"), ("attempts", "right"),
                          ("val acc", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for cell in cells:
        progress = "" if cell.progress_step is None else step_text(cell)
        acc = val_accuracy(cell.final_metrics)
        table.add_row(str(cell.index), cell.cell_id, describe_axes(cell),
                      f"[{STATE_STYLE[cell.state]}]{state_text(cell, waiting)}[/]", progress,
                      str(cell.attempts_count), "" if acc is None else f"{acc:.3f}")
    return table


def print_sweep(console: Console, registry: Registry, sweep: SweepRecord,
                lease: Lease | None) -> None:
    """Counts per state, who drives the sweep (its ``lease``), and the cells table."""
    counts = registry.counts(sweep.name)
    cells = registry.cells(sweep.name)
    hours, waiting = sweep_hours(sweep, cells)
    console.print(f"[bold]{sweep.name}[/] ({sweep.backend}): {counts_text(counts)} — "
                  f"{driver_text(lease)}", highlight=False)
    executor = executor_json(registry, sweep)
    if executor is not None:
        opts = " ".join(f"{k}={v}" for k, v in executor["options"].items())
        console.print(f"executor: {executor['name']} {opts}".rstrip(), highlight=False,
                      markup=False)
    if overrides := overrides_of(sweep):  # what the spec file was submitted with
        console.print(f"overrides: {command_line(overrides)}", highlight=False, markup=False)
    console.print(hours_text(hours), highlight=False)
    groups = group_hours(sweep, cells)
    if groups:
        console.print(groups, highlight=False, markup=False)
    notify = notify_json(sweep.name)
    if notify is not None:
        console.print(f"notifications: {notify['url']} on {', '.join(notify['events'])}",
                      highlight=False, markup=False)
    for study in study_summaries(registry, sweep):
        console.print(study.line(), highlight=False, markup=False)
    shown = table_cells(cells)
    console.print(cells_table(shown, waiting))
    if len(shown) < len(cells):
        console.print(f"… and {len(cells) - len(shown):,} more cells (`kappa status "
                      f"{sweep.name} --json` lists every cell)", highlight=False)
    failed = [c for c in cells if c.state is CellState.FAILED and c.last_error]
    for cell in failed[:3]:
        first = cell.last_error.splitlines()[0] if cell.last_error else ""
        console.print(f"[red]{cell.cell_id}[/]: {first} (`kappa logs {cell.cell_id}`)")


def should_print_progress(counts: Mapping[CellState, int],
                          last_counts: Mapping[CellState, int] | None,
                          now: float, last_printed: float | None,
                          every: float = HEARTBEAT_S) -> bool:
    """Whether a log gets a progress line now: first, on a change, or every ``every`` s."""
    if last_counts is None or last_printed is None:
        return True
    if {s: n for s, n in counts.items() if n} != {s: n for s, n in last_counts.items() if n}:
        return True
    return now - last_printed >= every


def planned_steps(cell: RunningCell) -> int | None:
    """The cell's length in steps: as its job reports it, else as the plan judged it
    (its demand), else ``None`` (unknown)."""
    return cell.total_steps or int((cell.demand or {}).get("steps") or 0) or None


def step_text(cell: RunningCell) -> str:
    """``12/150``, or ``starting`` for a cell whose job has not reported a step yet."""
    if cell.progress_step is None:
        return "starting"
    return f"{cell.progress_step}/{planned_steps(cell) or '?'}"


def progress_line(counts: Mapping[CellState, int], running: Sequence[RunningCell]) -> str:
    """``3/8 done · 3 succeeded · 2 running · 3 pending · steps 1a2b3c:4/10 ...``."""
    done = sum(n for s, n in counts.items() if s in TERMINAL_STATES)
    line = f"{done}/{sum(counts.values())} done · {counts_text(counts)}"
    steps = " ".join(f"{c.cell_id[:6]}:{step_text(c)}" for c in running)
    return line + (f" · steps {steps}" if steps else "")


class LineProgress:
    """Progress for a log: a timestamped line when :func:`should_print_progress`."""

    def __init__(self, console: Console, every: float = HEARTBEAT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.every = every
        self.clock = clock
        self._last_counts: dict[CellState, int] | None = None
        self._last_printed: float | None = None

    def update(self, counts: Mapping[CellState, int], running: Sequence[RunningCell]) -> None:
        """Print a line if the counts changed or the heartbeat is due."""
        now = self.clock()
        if not should_print_progress(counts, self._last_counts, now, self._last_printed,
                                     self.every):
            return
        self._last_counts, self._last_printed = dict(counts), now
        self.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] "
                           f"{progress_line(counts, running)}", highlight=False,
                           soft_wrap=True)

    def close(self) -> None:
        """Nothing to tear down."""


class LiveProgress:
    """Progress on a terminal: a bar for the sweep and one per running cell."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), console=console, transient=False)
        self.sweep_task = self.progress.add_task("sweep", total=None)
        self.cell_tasks: dict[str, TaskID] = {}
        self.progress.start()

    def update(self, counts: Mapping[CellState, int], running: Sequence[RunningCell]) -> None:
        """Move the bars to the registry's current state."""
        done = sum(n for s, n in counts.items() if s in TERMINAL_STATES)
        self.progress.update(self.sweep_task, completed=done, total=sum(counts.values()),
                             description=f"sweep · {counts_text(counts)}")
        now_running = {c.cell_id: c for c in running}
        for cell_id in set(self.cell_tasks) - set(now_running):
            self.progress.remove_task(self.cell_tasks.pop(cell_id))
        for cell_id, cell in now_running.items():
            if cell_id not in self.cell_tasks:
                label = f"  {cell_id[:8]} {describe_axes(cell)}"[:60]
                self.cell_tasks[cell_id] = self.progress.add_task(label, total=None)
            self.progress.update(self.cell_tasks[cell_id], completed=cell.progress_step or 0,
                                 total=planned_steps(cell))

    def close(self) -> None:
        """Drop the per-cell bars and stop redrawing (the sweep bar stays on screen)."""
        for task in self.cell_tasks.values():
            self.progress.remove_task(task)
        self.cell_tasks.clear()
        self.progress.stop()


def progress_display(console: Console) -> LiveProgress | LineProgress:
    """Live bars on a terminal, throttled lines otherwise."""
    return LiveProgress(console) if console.is_terminal else LineProgress(console)
