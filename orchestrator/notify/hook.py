"""Notifications as a scheduler hook: the loop tells it when a cell's run ends for good
and when the sweep has nothing left to run; it posts what the sweep's ``notify.json``
asks for (:mod:`orchestrator.notify.store`), through a :class:`~.sender.Notifier` that
never makes the loop wait. A failure of its own (a registry read, a message) is logged,
never raised: notifications cannot change how a sweep runs or ends.

A cell of a canary sweep (``<name>.canary``) that fails is a ``canary_failed`` message;
a cell failed by a ``diverged`` rule is a ``diverged`` one (not also ``cell_failed``);
a canary sweep's own end is not reported (its failures are).
"""

from __future__ import annotations

import logging

from orchestrator.notify.messages import cell_failed, sweep_end
from orchestrator.notify.sender import Notifier
from orchestrator.notify.store import SentLog, load_config
from orchestrator.paths import is_canary_sweep
from orchestrator.registry import CellState, Registry
from orchestrator.scheduler.hooks import SchedulerHook
from orchestrator.spec.notify_block import Event, NotifySpec

LOG = logging.getLogger(__name__)


class NotifyHook(SchedulerHook):
    """Posts one sweep's messages (module docstring)."""

    def __init__(self, sweep: str, config: NotifySpec, notifier: Notifier | None = None
                 ) -> None:
        self.sweep = sweep
        self.config = config
        self.notifier = notifier or Notifier(config.url, SentLog(sweep))

    @classmethod
    def of(cls, sweep: str) -> NotifyHook | None:
        """The hook for ``sweep`` if it has notifications (``None`` otherwise)."""
        config = load_config(sweep)
        return None if config is None else cls(sweep, config)

    def wants(self, kind: Event) -> bool:
        """Whether the sweep's ``notify.events`` lists ``kind``."""
        return kind in self.config.events

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
            if self.wants(kind):
                self.notifier.send(cell_failed(self.sweep, cell, kind))
        except Exception as exc:
            LOG.warning("no notification for cell %s: %s", cell_id, exc)

    def on_sweep_end(self, registry: Registry) -> None:
        """The sweep has nothing left to run: post its end, then wait (bounded) for the
        queued messages to go out."""
        try:
            if self.wants("sweep_end") and not is_canary_sweep(self.sweep):
                from orchestrator.sweeps.sweep import Sweep

                self.notifier.send(sweep_end(Sweep(registry, self.sweep).status()))
        except Exception as exc:
            LOG.warning("no end-of-sweep notification for %s: %s", self.sweep, exc)
        finally:
            self.notifier.close()
