"""What the scheduler needs of the tracking side (:class:`RunTracker`) and, optionally,
of an executor (:class:`JobFinder`), as small protocols: anything with these methods
plugs in. (A launch is a :class:`~orchestrator.backends.Backend`'s, where it runs an
:class:`~orchestrator.executors.Executor`'s, cell states the registry's.)"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from orchestrator.registry import CellRecord, SweepRecord


class RunTracker(Protocol):
    """The tracking side of a sweep: one child run per cell under the sweep's parent run
    (the defaults track nothing: :class:`NullTracker`)."""

    def cell_run(self, sweep: SweepRecord, cell: CellRecord, *, may_exist: bool) -> str:
        """The cell's child run id, RUNNING: ``cell.mlflow_run_id`` reopened, else a new run
        (``""``: none). ``may_exist``: an earlier launch may have created a run it never
        recorded, so look for one before creating (the scheduler knows when)."""
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
