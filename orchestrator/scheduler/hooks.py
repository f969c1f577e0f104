"""How stopping and search take part in the scheduler loop: the hook protocol.

The loop (:mod:`.loop`) moves cells through their states and knows nothing of stopping
rules, GPU-hours caps or Optuna studies; whoever builds it (:mod:`orchestrator.sweeps`)
passes it the sweep's hooks, which the loop calls at fixed points of a pass, in the
order given. Like an Optuna pruner, a hook only judges and asks: it never changes a
cell's state itself (the loop does, from what the hook answers), so a hook that does
nothing (:class:`SchedulerHook`'s defaults) leaves the loop as it would be without it.

Contract (every method is called from the loop's one thread):

* :meth:`~SchedulerHook.on_pass` — once per pass, before the loop launches: e.g. a search
  tells ended trials and asks new ones (adding pending cells to the registry).
* :meth:`~SchedulerHook.may_launch` — which of the pending cells (ids, in launch order)
  may start now; the loop launches only those that every hook lets through. ``idle``
  says nothing runs or waits to retry (so nothing running could change the answer).
* :meth:`~SchedulerHook.on_launch` — a cell's new launch is about to be submitted.
* :meth:`~SchedulerHook.on_poll` — every poll of a running cell; the hook may ask the
  loop to stop the cell (:meth:`LoopControl.stop_cell`).
* :meth:`~SchedulerHook.request_stop` — the loop asks the hooks, in order, to stop a
  running cell (for :meth:`LoopControl.stop_cell`); the first that does says ``True``.
* :meth:`~SchedulerHook.on_exit` — a cell's job ended: an :class:`Ending` if the hook
  decides how the cell ends (the first hook that answers wins), else ``None`` and the
  ordinary success/failure path applies.
* :meth:`~SchedulerHook.busy` — whether the hook still has work for the loop (a search
  with trials left to ask): the loop ends only when no cell is left and no hook is busy.

A hook keeps nothing a restart would lose: what it decided is in the registry or the
run folder (a stop request, a study), and a new scheduler's hooks read it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.executors.base import JobHandle
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.runs.stop_request import StopRequest


@dataclass(frozen=True)
class Ending:
    """How a cell ends when a hook decides it (what the loop writes to the registry)."""

    state: CellState
    final_metrics: dict[str, float]
    stop_reason: str
    last_error: str | None

    @property
    def run_status(self) -> str:
        """The MLflow status of its run."""
        return "FINISHED" if self.state is CellState.SUCCEEDED else "FAILED"


class LoopControl(Protocol):
    """What a hook may ask of the loop."""

    def stop_cell(self, cell_id: str, request: StopRequest) -> bool:
        """Ask a running cell to stop (see :meth:`SchedulerHook.request_stop`)."""
        ...


class SchedulerHook(Protocol):
    """A participant in the loop (see the module docstring for when each is called).

    Subclass it and override what the hook needs; the defaults do nothing.
    """

    def on_pass(self, registry: Registry) -> None:
        """Once per pass, before launching."""
        return None

    def may_launch(self, registry: Registry, sweep: str, ranked: list[str],
                   idle: bool) -> list[str]:
        """The ids of ``ranked`` (pending cells, in launch order) that may start now."""
        return ranked

    def on_launch(self, cell_id: str, run_dir: Path) -> None:
        """A new launch of the cell is about to be submitted."""
        return None

    def on_poll(self, loop: LoopControl, cell: CellRecord, run_dir: Path,
                job: JobHandle) -> None:
        """A poll of a running cell."""
        return None

    def request_stop(self, cell_id: str, run_dir: Path, job: JobHandle,
                     request: StopRequest) -> bool:
        """Stop the running cell as asked; whether this hook made the request."""
        return False

    def on_exit(self, cell_id: str, run_dir: Path, code: int,
                summary: Mapping[str, Any] | None) -> Ending | None:
        """The cell's job ended with ``code``: how the cell ends, if this hook decides."""
        return None

    def busy(self) -> bool:
        """Whether the loop must keep going for this hook even with no cell left."""
        return False


Hooks = Sequence[SchedulerHook]
