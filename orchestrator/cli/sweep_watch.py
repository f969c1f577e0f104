"""``kappa status SWEEP --watch``: the bars ``kappa submit --wait`` draws (lines in a log)
and each failure as it happens, until the sweep has ended; each refresh is one SELECT
(:meth:`~orchestrator.sweeps.sweep.Sweep.active_status`) that never makes a scheduler wait."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape

from orchestrator.cli.sweep_views import counts_text, progress_display
from orchestrator.sweeps.status import SweepStatus
from orchestrator.sweeps.sweep import Sweep


def watch(console: Console, sweep: Sweep, interval: float,
          sleep: Callable[[float], None] = time.sleep) -> SweepStatus:
    """Draw ``sweep``'s progress every ``interval`` seconds until it has ended; the last
    status. Each failure is printed once, as it is first seen."""
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
                    console.print(f"[red]{escape(cell.failure_text())}[/]", highlight=False,
                                  markup=True, soft_wrap=True)
            waits = status.work_left and not status.driver.live
            if waits and not orphaned:
                console.print(f"[yellow]no scheduler is running {sweep.name}[/] (`kappa "
                              f"resume {sweep.name}` runs what is left); still watching",
                              highlight=False)
            orphaned = waits
            display.update(status)
            if status.ended:
                break
            sleep(interval)
    finally:
        display.close()
        sweep.close()
    console.print(f"[bold]{sweep.name}[/] ended: {counts_text(status.counts)}",
                  highlight=False)
    return status
