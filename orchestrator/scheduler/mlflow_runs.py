"""The scheduler's :class:`~orchestrator.scheduler.hooks.RunTracker` on MLflow.

A thin adapter over :class:`orchestrator.tracking.Tracker` (one client per sweep). A cell's child
run is created under the sweep's parent run just before its first launch; after that the
registry's ``mlflow_run_id`` is the truth, so a retry or resume reopens it without searching (only
a launch that may have created a run without recording it, ``may_exist``, searches first). A run's
params and its ending (files, final metrics, the ``kappa.stopped`` tag, the outbox's undelivered
metrics) take tens of milliseconds that nothing in the loop waits on, so they go through one
background thread (:class:`BackgroundWork`), in order, off the loop's critical path, each waiting
out a tracking store that went away (:mod:`orchestrator.tracking.retry`); a retry reopening a run
waits for the run's own pending work first.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path

from orchestrator.registry import CellRecord, SweepRecord
from orchestrator.runs import provenance
from orchestrator.runs.folder import (
    CONFIG_FILE,
    LOG_FILE,
    SUMMARY_FILE,
    read_summary,
    summary_final,
    summary_stop_reason,
)
from orchestrator.tracking import Tracker, git_commit
from orchestrator.tracking.outbox import Outbox
from orchestrator.tracking.retry import with_store_retries

LOG = logging.getLogger(__name__)
ARTIFACTS = (CONFIG_FILE, SUMMARY_FILE, LOG_FILE)
# Set on a cell's run when a stopping rule ended it: the reason (``plateau at step 340 ...``).
STOPPED_TAG = "kappa.stopped"


class BackgroundWork:
    """Runs submitted callables one at a time, in submission order, on a daemon thread. A task
    carries a key (the run id) to wait for one run's tasks; a task that fails is logged and
    dropped: the next scheduler's recovery redoes what it left undone."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[str, Callable[[], object]]] = queue.Queue()
        self._pending: Counter[str] = Counter()
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, key: str, task: Callable[[], object]) -> None:
        """Queue ``task`` (known by ``key``); the worker starts on first use."""
        with self._idle:
            self._pending[key] += 1
        if self._thread is None or not self._thread.is_alive():
            # Daemon: a scheduler that dies must not hang on it; recovery redoes the work.
            self._thread = threading.Thread(target=self._work, name="kappa-mlflow-finish",
                                            daemon=True)
            self._thread.start()
        self._queue.put((key, task))

    def wait_for(self, key: str) -> None:
        """Return once no task of ``key`` is queued or running."""
        with self._idle:
            self._idle.wait_for(lambda: self._pending[key] == 0)

    def flush(self) -> None:
        """Return once every task submitted so far has run."""
        with self._idle:
            self._idle.wait_for(lambda: not self._pending)

    def _work(self) -> None:
        while True:
            key, task = self._queue.get()
            try:
                task()
            except Exception as exc:  # logged and dropped; recovery redoes it
                LOG.warning("background task for %s failed: %s", key, exc)
            finally:
                with self._idle:
                    self._pending[key] -= 1
                    if self._pending[key] <= 0:
                        del self._pending[key]
                    self._idle.notify_all()


def _import_mlflow_parts(tracker: Tracker) -> None:
    """Import, on this thread, the MLflow modules the background tasks use: two threads importing
    a package with import cycles (MLflow has them) at once can deadlock or see half-made modules."""
    import mlflow.entities
    import mlflow.exceptions
    import mlflow.store.artifact.artifact_repository_registry  # noqa: F401

    tracker.client  # noqa: B018  (imports the client and opens the store)


class MlflowRunTracker:
    """Child runs per cell in the MLflow store at ``uri`` (see module docstring)."""

    def __init__(self, uri: str | None = None, background: bool = True) -> None:
        self.tracker = Tracker(uri)
        self._work = BackgroundWork() if background else None
        self._warm = False

    @cached_property
    def _git_commit(self) -> str | None:
        return git_commit()

    def cell_run(self, sweep: SweepRecord, cell: CellRecord, *, may_exist: bool,
                 name: str = "") -> str:
        """The cell's child run id (the recorded one reopened, or a new one named ``name``)."""
        if not sweep.mlflow_parent_run_id:
            return ""
        if cell.mlflow_run_id:
            run_id = cell.mlflow_run_id
            if self._work is not None:
                self._work.wait_for(run_id)  # its last end must land first
            if self.tracker.reopen_cell_run(run_id):
                # Its creator may have died before the params were in: complete them.
                self._later(run_id, lambda: with_store_retries(
                    lambda: self.tracker.log_cell_params(run_id, cell, True), "logging params"))
                return run_id
            may_exist = True  # the recorded run is gone: look before making another
        new_id = self.tracker.create_cell_run(
            sweep.mlflow_parent_run_id, cell, sweep.name, git_commit=self._git_commit,
            may_exist=may_exist, experiment_id=sweep.mlflow_experiment_id, log_params=False,
            name=name or None)
        # The params follow off the critical path (before any finish of this run: the worker keeps
        # order). A run found by the search may have them already.
        self._later(new_id, lambda: with_store_retries(
            lambda: self.tracker.log_cell_params(new_id, cell, may_exist), "logging params"))
        return new_id

    def _later(self, key: str, task: Callable[[], object]) -> None:
        if self._work is None:
            task()
            return
        if not self._warm:
            _import_mlflow_parts(self.tracker)
            self._warm = True
        self._work.submit(key, task)

    def launch_env(self, run_id: str) -> Mapping[str, str]:
        """``MLFLOW_TRACKING_URI`` and ``MLFLOW_RUN_ID`` for the launched process."""
        return self.tracker.env_for_run(run_id)

    def finish(self, run_id: str, status: str, run_dir: Path | None = None) -> None:
        """Attach the run folder's files and final metrics, then end the run (in the
        background unless built with ``background=False``)."""
        self._later(run_id, lambda: with_store_retries(
            lambda: self._end_run(run_id, status, run_dir), f"ending MLflow run {run_id}"))

    def _end_run(self, run_id: str, status: str, run_dir: Path | None) -> None:
        files = [run_dir / name for name in ARTIFACTS] if run_dir is not None else []
        if run_dir is not None:
            # Metrics the trainer could not deliver (MLflow was away) go in first.
            Outbox(run_dir).deliver(self.tracker.client, run_id)
        summary = read_summary(run_dir) or {}
        steps = summary.get("steps")
        stopped = summary_stop_reason(summary)
        if stopped:  # the run's reason for ending early, where the UI shows tags
            self.tracker.client.set_tag(run_id, STOPPED_TAG, stopped[:5000])
        made = summary.get("provenance") or provenance.read(run_dir)
        for name, value in provenance.flat(made).items():  # searchable: tags.`kappa.numerics.torch`
            self.tracker.client.set_tag(run_id, f"kappa.{name}", value[:5000])
        self.tracker.finish_cell_run(run_id, status, [f for f in files if f.exists()],
                                     final_metrics=summary_final(summary),
                                     step=steps if isinstance(steps, int) else 0)

    def flush(self) -> None:
        """Wait until every run handed to :meth:`finish` has been ended."""
        if self._work is not None:
            self._work.flush()

    def reconcile(self, sweep: SweepRecord, ended: Mapping[str, str],
                  run_dirs: Mapping[str, Path]) -> int:
        """End the runs of ended cells still RUNNING (one search, then a finish per run found);
        how many."""
        if not ended or not sweep.mlflow_parent_run_id:
            return 0
        running = set(self.tracker.running_cell_runs(sweep.mlflow_parent_run_id))
        stale = [run_id for run_id in ended if run_id in running]
        for run_id in stale:
            self.finish(run_id, ended[run_id], run_dirs.get(run_id))
        return len(stale)

    def sweep_started(self, sweep: SweepRecord) -> None:
        """Set the parent run RUNNING (a resubmit or resume after it had ended)."""
        parent = sweep.mlflow_parent_run_id
        if parent:
            with_store_retries(lambda: self.tracker.client.update_run(parent, status="RUNNING"),
                               f"reopening the parent run of {sweep.name}")

    def sweep_ended(self, sweep: SweepRecord, counts: Mapping[str, int]) -> None:
        """End the parent run once every cell's run has been ended (see the port)."""
        parent = sweep.mlflow_parent_run_id
        if not parent:
            return
        self.flush()
        # Any failed cell fails the sweep's run; else any cancelled one kills it.
        status = ("FAILED" if counts.get("failed", 0)
                  else "KILLED" if counts.get("cancelled", 0) else "FINISHED")

        def end() -> None:
            from mlflow.entities import RunTag

            tags = [RunTag(f"kappa.cells.{state}", str(n)) for state, n in counts.items()]
            self.tracker.client.log_batch(parent, tags=tags)
            self.tracker.finish_sweep_run(parent, status)

        with_store_retries(end, f"ending the parent run of {sweep.name}")

