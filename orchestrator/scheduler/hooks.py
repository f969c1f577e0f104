"""What plugs into the scheduler loop, as small protocols: anything with their methods plugs in.

The loop (:mod:`.loop`) tracks its cells' runs through a :class:`RunTracker` and, recovering after a
crash, asks an executor that is a :class:`JobFinder` for jobs it never recorded. It knows nothing of
stopping rules, GPU-hours caps or Optuna studies; whoever builds it (:mod:`orchestrator.sweeps`)
passes it the sweep's hooks, which it calls from its one thread at fixed points of a pass, in the
order given. Like an Optuna pruner, a hook only judges and asks: the loop changes cell states from
its answers, so a hook that does nothing (:class:`SchedulerHook`'s defaults) leaves the loop as it
was. A hook keeps nothing a restart would lose: what it decided is in the registry or the run folder
(a stop request, a study), and a new scheduler's hooks read it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from orchestrator.executors.base import JobHandle
from orchestrator.registry import CellRecord, CellState, Registry, SweepRecord
from orchestrator.runs.stop_request import StopRequest


@dataclass(frozen=True)
class Ending:
    """How a cell ends when a hook decides it (what the loop writes to the registry):
    final with a ``stop_reason``, else an ordinary failed attempt (retried)."""

    state: CellState
    final_metrics: dict[str, float]
    stop_reason: str | None
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
    """A participant in the loop: subclass it and override what the hook needs; the
    defaults do nothing."""

    def on_pass(self, registry: Registry) -> None:
        """Once per pass, before launching (e.g. a search tells ended trials and asks new
        ones, adding pending cells)."""
        return None

    def may_launch(self, registry: Registry, sweep: str, ranked: list[str],
                   idle: bool) -> list[str]:
        """The ids of ``ranked`` (pending cells, in launch order) that may start now; the
        loop launches only those every hook lets through. ``idle``: nothing runs or waits
        to retry (so nothing running could change the answer)."""
        return ranked

    def on_launch(self, cell_id: str, run_dir: Path) -> None:
        """A new launch of the cell is about to be submitted."""
        return None

    def on_poll(self, loop: LoopControl, cell: CellRecord, run_dir: Path,
                job: JobHandle) -> None:
        """A poll of a running cell; the hook may ask ``loop`` to stop it."""
        return None

    def request_stop(self, cell_id: str, run_dir: Path, job: JobHandle,
                     request: StopRequest) -> bool:
        """Stop the running cell as asked (for :meth:`LoopControl.stop_cell`, which asks
        the hooks in order until one does); whether this hook made the request."""
        return False

    def on_exit(self, cell_id: str, run_dir: Path, code: int,
                summary: Mapping[str, Any] | None) -> Ending | None:
        """The cell's job ended with ``code``: how the cell ends, if this hook decides (the
        first hook that answers wins; ``None``: the ordinary success/failure path)."""
        return None

    def on_cell_end(self, registry: Registry, cell_id: str, status: str) -> None:
        """The cell's run ended for good (``status``: its MLflow status, ``FINISHED``,
        ``FAILED`` or ``KILLED``): succeeded, failed with no retry left, or cancelled."""
        return None

    def on_sweep_end(self, registry: Registry) -> None:
        """The sweep has nothing left to run (the loop is about to return)."""
        return None

    def busy(self) -> bool:
        """Whether the loop must keep going for this hook even with no cell left (a
        search with trials left to ask)."""
        return False


class RunTracker(Protocol):
    """The tracking side of a sweep: one child run per cell under the sweep's parent run
    (the defaults track nothing: :class:`NullTracker`)."""

    def cell_run(self, sweep: SweepRecord, cell: CellRecord, *, may_exist: bool,
                 name: str = "") -> str:
        """The cell's child run id, RUNNING: ``cell.mlflow_run_id`` reopened, else a new run
        named ``name`` (``""``: none). ``may_exist``: an earlier launch may have created a run
        it never recorded, so look for one before creating (the scheduler knows when)."""
        return ""

    def launch_env(self, run_id: str) -> Mapping[str, str]:
        """Environment that makes the launched process log into ``run_id``."""
        return {}

    def finish(self, run_id: str, status: str, run_dir: Path | None = None) -> None:
        """End the run (``FINISHED``, ``FAILED`` or ``KILLED``), keeping files of ``run_dir``;
        may complete later, off the caller's path (:meth:`flush` waits for it)."""
        return None

    def flush(self) -> None:
        """Wait until every :meth:`finish` so far has reached the store."""
        return None

    def reconcile(self, sweep: SweepRecord, ended: Mapping[str, str],
                  run_dirs: Mapping[str, Path]) -> int:
        """End the runs in ``ended`` (run id -> status) that are still RUNNING: what a
        scheduler that died before finishing them left. Returns how many it ended."""
        return 0

    def sweep_started(self, sweep: SweepRecord) -> None:
        """The sweep's parent run is RUNNING again (a scheduler drives the sweep)."""
        return None

    def sweep_ended(self, sweep: SweepRecord, counts: Mapping[str, int]) -> None:
        """End the sweep's parent run: ``FINISHED`` when every cell succeeded, ``FAILED``
        when one failed, else ``KILLED`` (cancelled cells); ``counts`` (state -> cells)
        go with it as tags."""
        return None


class NullTracker(RunTracker):
    """Tracks nothing (for benchmarks and registry-only runs)."""


@runtime_checkable
class JobFinder(Protocol):
    """Optional executor ability: find jobs by the log they write to (the one gap in
    crash recovery: a scheduler killed between starting a job and recording its id)."""

    def jobs_for_log(self, log_path: Path, since: datetime | None = None) -> list[str]:
        """Ids of the jobs submitted with ``log_path``, newest first; with ``since``,
        only those submitted at or after that moment (of the submitter's clock)."""
        ...


def decide_ending(hooks: Sequence[SchedulerHook], cell_id: str, run_dir: Path, code: int,
                  summary: Mapping[str, Any] | None) -> Ending | None:
    """Tell every hook that the cell's job ended; the first ending one decides wins."""
    endings = [hook.on_exit(cell_id, run_dir, code, summary) for hook in hooks]
    return next((ending for ending in endings if ending is not None), None)
