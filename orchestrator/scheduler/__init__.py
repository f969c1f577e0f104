"""The scheduler: moves a sweep's cells through their states until every one has ended.

Public API (for the CLI and other front ends):

* :func:`submit` ``(spec_path, stores=Stores(), rerun=False, wait=False,
  max_parallel=None) -> SubmitResult`` — validate the spec and every cell first (bad
  input: ``UserInputError``, nothing written), record it, then drive it here or in a
  detached background scheduler.
* :func:`resume` ``(sweep, stores, max_parallel=None) -> counts`` — drive an existing
  sweep to the end, taking over after a crash.
* :func:`cancel` ``(sweep_or_cell, stores) -> cancelled cells``.
* :class:`SweepScheduler` — the loop itself, over any Backend / Executor / RunTracker.

Heavy imports (MLflow, SQLAlchemy) happen when these are called, not on import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.scheduler.driver import Stores, cancel, resume, submit
    from orchestrator.scheduler.loop import SchedulerOptions, SweepScheduler

_LAZY = {
    "Stores": "orchestrator.scheduler.driver",
    "cancel": "orchestrator.scheduler.driver",
    "resume": "orchestrator.scheduler.driver",
    "submit": "orchestrator.scheduler.driver",
    "SchedulerOptions": "orchestrator.scheduler.loop",
    "SweepScheduler": "orchestrator.scheduler.loop",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


__all__ = ["SchedulerOptions", "Stores", "SweepScheduler", "cancel", "resume", "submit"]
