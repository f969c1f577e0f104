"""How a :class:`~orchestrator.sweeps.status.SweepStatus` looks in the terminal: the status
text, the sweeps table, and progress while a sweep runs (bars on a terminal, throttled
lines in a log), also for ``kappa status SWEEP --watch`` (:func:`watch`). Renders only: every
figure comes from the status (its ``as_json`` is ``--json``). Imported only when a command
runs (rich)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table
from rich.text import Text

from orchestrator.redact import one_line
from orchestrator.sweeps.status import CellStatus, SweepStatus

if TYPE_CHECKING:
    from orchestrator.sweeps.sweep import Sweep

TABLE_ROWS = 200  # cells ``kappa status SWEEP`` draws at most (``table_cells``)
# Off a terminal, unchanged counts are repeated (with the running cells' steps) this often.
HEARTBEAT_S = 30.0

STATE_STYLE = {"pending": "dim", "queued": "cyan", "running": "bold blue",
               "succeeded": "green", "failed": "bold red", "cancelled": "yellow"}


def counts_text(counts: Mapping[str, int]) -> str:
    """``3 succeeded · 1 running · 2 pending`` (states with cells only)."""
    parts = [f"[{STATE_STYLE[s]}]{n} {s}[/]" for s, n in counts.items() if n]
    return " · ".join(parts) or "no cells"


def sweeps_table(statuses: Sequence[SweepStatus]) -> Table:
    """Every sweep with its state counts and who drives it (from its lease)."""
    table = Table(title="sweeps", title_justify="left")
    for column in ("sweep", "backend", "cells", "states", "scheduler", "updated"):
        table.add_column(column, justify="right" if column == "cells" else "left")
    for status in statuses:
        lease = status.driver.lease
        table.add_row(status.sweep, status.backend, str(status.total),
                      counts_text(status.counts),
                      f"{lease.host} pid {lease.pid}" if lease is not None and
                      status.driver.live else "",
                      status.updated_at.strftime("%Y-%m-%d %H:%M") if status.updated_at
                      else "")
    return table


def table_cells(cells: Sequence[CellStatus], limit: int = TABLE_ROWS) -> list[CellStatus]:
    """The cells ``kappa status`` shows, by index: at most ``limit``, running, failed and
    queued first (100,000 rows take minutes to draw; ``--json`` has every cell)."""
    if len(cells) <= limit:
        return list(cells)
    first = {"running": 0, "failed": 1, "queued": 2}
    picked = sorted(cells, key=lambda c: (first.get(c.state, 3), c.index))[:limit]
    return sorted(picked, key=lambda c: c.index)


def cells_table(cells: Sequence[CellStatus]) -> Table:
    """One row per cell: state (why it stopped or waits), progress, attempts, val acc."""
    table = Table(title_justify="left")
    for name, justify in (("#", "right"), ("cell", "left"), ("axes", "left"),
                          ("state", "left"), ("progress", "right"), ("attempts", "right"),
                          ("val acc", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for cell in cells:
        acc = cell.val_accuracy
        table.add_row(str(cell.index), cell.cell_id, Text(cell.axes_text),
                      f"[{STATE_STYLE[cell.state]}]{cell.state_text}[/]",
                      "" if cell.progress_step is None else cell.step_text,
                      str(cell.attempts), "" if acc is None else f"{acc:.3f}")
    return table


def print_status(console: Console, status: SweepStatus) -> None:
    """The sweep's counts, driver, executor, overrides, hours, groups, notifications,
    studies, seeds on demand and cells table, and its first failures."""
    def plain(text: str) -> None:
        if text:
            console.print(text, highlight=False, markup=False)

    console.print(f"[bold]{status.sweep}[/] ({status.backend}): {counts_text(status.counts)}"
                  f" — {status.driver.text}", highlight=False)
    if status.executor is not None:
        opts = " ".join(f"{k}={v}" for k, v in status.executor["options"].items())
        plain(f"executor: {status.executor['name']} {opts}".rstrip())
    if status.overrides_text:  # what the spec file was submitted with
        plain(f"overrides: {status.overrides_text}")
    console.print(status.hours_text, highlight=False)
    plain(status.groups_text())
    plain(f"made by: {status.made_by}" if status.made_by else "")
    if status.notify is not None:
        plain(f"notifications: {status.notify['url']} on {', '.join(status.notify['events'])}")
    for study in status.studies:
        plain(study.line())
    for line in status.seeds.lines() if status.seeds is not None else ():
        plain(line)
    shown = table_cells(status.cells)
    console.print(cells_table(shown))
    if len(shown) < len(status.cells):
        console.print(f"… and {len(status.cells) - len(shown):,} more cells (`kappa status "
                      f"{status.sweep} --json` lists every cell)", highlight=False)
    for cell in [c for c in status.cells if c.state == "failed" and c.last_error][:3]:
        first = cell.last_error.splitlines()[0] if cell.last_error else ""
        console.print(Text.assemble((cell.cell_id, "red"), f": {one_line(first)} "
                                    f"(`kappa logs {cell.cell_id}`)"))


def should_print_progress(counts: Mapping[str, int], last_counts: Mapping[str, int] | None,
                          now: float, last_printed: float | None,
                          every: float = HEARTBEAT_S) -> bool:
    """Whether a log gets a progress line now: first, on a change, or every ``every`` s."""
    if last_counts is None or last_printed is None:
        return True
    if {s: n for s, n in counts.items() if n} != {s: n for s, n in last_counts.items() if n}:
        return True
    return now - last_printed >= every


def progress_line(status: SweepStatus) -> str:
    """``3/8 done · 3 succeeded · 2 running · 3 pending · steps 1a2b3c:4/10 ...``."""
    line = f"{status.done}/{status.total} done · {counts_text(status.counts)}"
    steps = " ".join(f"{c.cell_id[:6]}:{c.step_text}" for c in status.running)
    return line + (f" · steps {steps}" if steps else "")


class LineProgress:
    """Progress for a log: a timestamped line when :func:`should_print_progress`."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self._last_counts: dict[str, int] | None = None
        self._last_printed: float | None = None

    def update(self, status: SweepStatus) -> None:
        """Print a line if the counts changed or the heartbeat is due."""
        now = self.clock()
        if not should_print_progress(status.counts, self._last_counts, now, self._last_printed):
            return
        self._last_counts, self._last_printed = dict(status.counts), now
        self.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {progress_line(status)}",
                           highlight=False, soft_wrap=True)

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

    def update(self, status: SweepStatus) -> None:
        """Move the bars to ``status``."""
        self.progress.update(self.sweep_task, completed=status.done, total=status.total,
                             description=f"sweep · {counts_text(status.counts)}")
        now_running = {c.cell_id: c for c in status.running}
        for cell_id in set(self.cell_tasks) - set(now_running):
            self.progress.remove_task(self.cell_tasks.pop(cell_id))
        for cell_id, cell in now_running.items():
            if cell_id not in self.cell_tasks:
                label = escape(f"  {cell_id[:8]} {cell.axes_text}"[:60])
                self.cell_tasks[cell_id] = self.progress.add_task(label, total=None)
            self.progress.update(self.cell_tasks[cell_id], completed=cell.progress_step or 0,
                                 total=cell.planned_steps)

    def close(self) -> None:
        """Drop the per-cell bars and stop redrawing (the sweep bar stays on screen)."""
        for task in self.cell_tasks.values():
            self.progress.remove_task(task)
        self.cell_tasks.clear()
        self.progress.stop()


def progress_display(console: Console) -> LiveProgress | LineProgress:
    """Live bars on a terminal, throttled lines otherwise."""
    return LiveProgress(console) if console.is_terminal else LineProgress(console)


def watch(console: Console, sweep: Sweep, interval: float) -> SweepStatus:
    """Draw ``sweep``'s progress every ``interval`` seconds until it has ended; the last
    status. Each failure is printed once, as it is first seen; each refresh is one SELECT
    (:meth:`~orchestrator.sweeps.sweep.Sweep.active_status`) that never makes a scheduler wait."""
    console.print(f"watching [bold]{sweep.name}[/] every {interval:g} s (Ctrl-C stops "
                  "watching, not the sweep)", highlight=False)
    display = progress_display(console)
    seen: set[tuple[str, int]] = set()
    orphaned = False
    try:
        while True:
            status = sweep.active_status()
            for cell in reversed(status.failures()):
                if (cell.cell_id, cell.attempts) not in seen:
                    seen.add((cell.cell_id, cell.attempts))
                    console.print(Text(cell.failure_text(), style="red"), highlight=False,
                                  soft_wrap=True)
            waits = status.work_left and not status.driver.live
            if waits and not orphaned:
                console.print(f"[yellow]no scheduler is running {sweep.name}[/] (`kappa "
                              f"resume {sweep.name}` runs what is left); still watching",
                              highlight=False)
            orphaned = waits
            display.update(status)
            if status.ended:
                break
            time.sleep(interval)
    finally:
        display.close()
        sweep.close()
    console.print(f"[bold]{sweep.name}[/] ended: {counts_text(status.counts)}",
                  highlight=False)
    return status
