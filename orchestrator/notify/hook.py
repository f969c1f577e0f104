"""Notifications as a scheduler hook: it posts what the sweep's ``notify.json`` asks for
when a cell fails for good and when the sweep has nothing left to run. A failure of its
own is logged, never raised: notifications cannot change how a sweep runs or ends.

A failed cell of a canary sweep is a ``canary_failed`` message, one failed by a ``diverged`` rule a
``diverged`` one (not also ``cell_failed``); a canary sweep's own end is not reported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from orchestrator.notify.messages import EndedSweep, cell_failed, sweep_end
from orchestrator.notify.sender import Notifier
from orchestrator.notify.store import SentLog, load_config
from orchestrator.paths import is_canary_sweep
from orchestrator.registry import CellState, Registry
from orchestrator.scheduler.hooks import SchedulerHook
from orchestrator.spec.notify_block import Event, NotifySpec

LOG = logging.getLogger(__name__)


class NotifyHook(SchedulerHook):
    """Posts one sweep's messages (module docstring)."""

    def __init__(self, sweep: str, config: NotifySpec,
                 status: Callable[[Registry], EndedSweep],
                 notifier: Notifier | None = None) -> None:
        self.sweep = sweep
        self.config = config
        self.status = status
        self.notifier = notifier or Notifier(config.url, SentLog(sweep))

    @classmethod
    def of(cls, sweep: str, status: Callable[[Registry], EndedSweep]) -> NotifyHook | None:
        """The hook for ``sweep`` if it has notifications (``None`` otherwise); ``status``
        reads the sweep's complete status (its handle's), which the end message reports."""
        config = load_config(sweep)
        return None if config is None else cls(sweep, config, status)

    def on_cell_end(self, registry: Registry, cell_id: str, status: str) -> None:
        """A cell's run ended: a failure with no retry left is posted."""
        if status != "FAILED":
            return
        try:
            cell = registry.get_cell(self.sweep, cell_id)
            if cell.state is not CellState.FAILED or cell.retries_left > 0:
                return
            kind: Event = ("diverged" if (cell.stop_reason or "").startswith("diverged")
                           else "canary_failed" if is_canary_sweep(self.sweep)
                           else "cell_failed")
            if kind in self.config.events:
                self.notifier.send(cell_failed(self.sweep, cell, kind))
        except Exception as exc:
            LOG.warning("no notification for cell %s: %s", cell_id, exc)

    def on_sweep_end(self, registry: Registry) -> None:
        """The sweep has nothing left to run: post its end, then wait (bounded) for the
        queued messages to go out."""
        try:
            if "sweep_end" in self.config.events and not is_canary_sweep(self.sweep):
                self.notifier.send(sweep_end(self.status(registry)))
        except Exception as exc:
            LOG.warning("no end-of-sweep notification for %s: %s", self.sweep, exc)
        finally:
            self.notifier.close()
