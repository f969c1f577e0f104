"""The scheduler's :class:`~orchestrator.scheduler.ports.RunTracker` on MLflow.

A thin adapter over :class:`orchestrator.tracking.Tracker`: the child run of a cell is
created under the sweep's parent run just before its first launch and reused by every
retry and resume; when the cell ends, its config, summary and log are attached.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from orchestrator.registry import CellRecord, SweepRecord
from orchestrator.tracking import Tracker, git_commit

ARTIFACTS = ("config.yaml", "summary.json", "train.log")


class MlflowRunTracker:
    """Child runs per cell in the MLflow store at ``uri`` (see module docstring)."""

    def __init__(self, uri: str | None = None) -> None:
        self.tracker = Tracker(uri)
        self._commit: str | None = None
        self._commit_known = False

    def _git_commit(self) -> str | None:
        if not self._commit_known:
            self._commit = git_commit()
            self._commit_known = True
        return self._commit

    def cell_run(self, sweep: SweepRecord, cell: CellRecord) -> str:
        """The cell's child run id (created RUNNING, or the existing one reopened)."""
        if not sweep.mlflow_parent_run_id:
            return ""
        return self.tracker.create_cell_run(sweep.mlflow_parent_run_id, cell, sweep.name,
                                            git_commit=self._git_commit())

    def launch_env(self, run_id: str) -> Mapping[str, str]:
        """``MLFLOW_TRACKING_URI`` and ``MLFLOW_RUN_ID`` for the launched process."""
        return self.tracker.env_for_run(run_id)

    def finish(self, run_id: str, status: str, run_dir: Path | None = None) -> None:
        """Attach the run folder's config, summary and log, then end the run."""
        files = [run_dir / name for name in ARTIFACTS] if run_dir is not None else []
        self.tracker.finish_cell_run(run_id, status, [f for f in files if f.exists()])
