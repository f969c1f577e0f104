"""A cell's MLflow child run: create or reuse before launch, params, reopen, finish."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.tracking.connection import (
    PARENT_TAG,
    ROLE_TAG,
    TrackerConnection,
    check_status,
    quote_free,
)
from orchestrator.tracking.naming import (
    MAX_PARAMS_TAGS_PER_BATCH,
    axis_params,
    batches,
    cell_tags,
    metric_key,
    run_name,
    settings_params,
)
from orchestrator.tracking.outbox import log_metrics

if TYPE_CHECKING:
    from mlflow.entities import Run

    from orchestrator.registry.snapshots import CellLike

# Set when a child run is created: how many params it gets. A run with fewer was never
# finished being made (its creator died). Runs made before this tag carry COMPLETE_TAG.
PARAM_COUNT_TAG = "kappa.param_count"
COMPLETE_TAG = "kappa.params_complete"


class CellRuns(TrackerConnection):
    """The tracker's child-run methods (mixed into :class:`~.tracker.Tracker`)."""

    def experiment_of(self, parent_run_id: str) -> str:
        """The experiment id of a (parent) run, asked of the store once per run."""
        if parent_run_id not in self._experiments:
            run = self.client.get_run(parent_run_id)
            self._experiments[parent_run_id] = str(run.info.experiment_id)
        return self._experiments[parent_run_id]

    def find_cell_run(self, parent_run_id: str, cell_id: str) -> str | None:
        """The id of the cell's child run under this parent, if one exists."""
        found = self._search([self.experiment_of(parent_run_id)],
                             f"tags.`{PARENT_TAG}` = '{quote_free(parent_run_id)}' "
                             f"and tags.`kappa.cell_id` = '{quote_free(cell_id)}'")
        run = next(found, None)
        return None if run is None else str(run.info.run_id)

    def create_cell_run(self, parent_run_id: str, cell: CellLike, sweep_name: str,
                        git_commit: str | None = None, *, may_exist: bool = True,
                        experiment_id: str | None = None, log_params: bool = True) -> str:
        """The cell's child run, RUNNING, with axis tags and params and the settings as params.

        ``may_exist=False`` (only when no run of the cell can exist yet) skips looking for
        one to reuse. With ``log_params=False`` a new run gets its params only from a later
        :meth:`log_cell_params` (the scheduler does that off its critical path)."""
        if experiment_id is not None:
            self._experiments.setdefault(parent_run_id, experiment_id)
        if may_exist:
            existing = self.find_cell_run(parent_run_id, cell.cell_id)
            if existing is not None:
                run = self.client.get_run(existing)
                if _is_complete(run):
                    if run.info.status != "RUNNING":
                        self.client.update_run(existing, status="RUNNING")
                    return existing
                # Left half-made by a process that died while creating it.
                self.client.delete_run(existing)
        tags = cell_tags(cell.axes, cell.labels, cell_id=cell.cell_id, sweep_name=sweep_name,
                         git_commit=git_commit)
        tags.update({PARENT_TAG: parent_run_id, ROLE_TAG: "cell",
                     PARAM_COUNT_TAG: str(len(cell_params(cell)))})
        run_id: str = self.client.create_run(self.experiment_of(parent_run_id),
                                             run_name=run_name(cell.axes, cell.labels),
                                             tags=tags).info.run_id
        if log_params:
            try:
                self.log_cell_params(run_id, cell)
            except BaseException:
                # A run without its params would mislead every comparison: remove it.
                self.client.delete_run(run_id)
                raise
        return run_id

    def log_cell_params(self, run_id: str, cell: CellLike, only_missing: bool = False) -> int:
        """Log the cell's settings and axes as the run's params; how many were logged.
        ``only_missing``: only those the run lacks (its creator died before they were in).
        """
        from mlflow.entities import Param

        params = cell_params(cell)
        if only_missing:
            have = self.client.get_run(run_id).data.params
            params = {k: v for k, v in params.items() if k not in have}
        for chunk in batches(params, MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, params=[Param(k, v) for k, v in chunk])
        return len(params)

    def reopen_cell_run(self, run_id: str) -> bool:
        """Set a known child run RUNNING again (a retry or resume logs into it); ``False``
        if the store no longer has it (deleted by hand): make a new one then."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.update_run(run_id, status="RUNNING")
        except MlflowException:
            return False
        return True

    def running_cell_runs(self, parent_run_id: str) -> list[str]:
        """Ids of the parent's child runs that are still RUNNING (for crash recovery)."""
        return [str(run.info.run_id) for run in self._search(
            [self.experiment_of(parent_run_id)],
            f"tags.`{PARENT_TAG}` = '{quote_free(parent_run_id)}' "
            "and attributes.status = 'RUNNING'")]

    def finish_cell_run(self, run_id: str, status: str, artifacts: Iterable[Path] = (),
                        final_metrics: Mapping[str, float] | None = None,
                        step: int = 0) -> list[Path]:
        """Upload ``artifacts`` that exist (folders keep their name), log the final metrics
        the run lacks (at ``step``: a backend's process may have logged them itself), then
        end the run. Returns the paths skipped because they did not exist.
        """
        status = check_status(status)
        skipped = []
        for path in artifacts:
            if path.is_dir():
                self.client.log_artifacts(run_id, str(path), artifact_path=path.name)
            elif path.is_file():
                self.client.log_artifact(run_id, str(path))
            else:
                skipped.append(path)
        if final_metrics:
            self._log_missing_metrics(run_id, final_metrics, step)
        self.client.set_terminated(run_id, status)
        return skipped

    def _log_missing_metrics(self, run_id: str, final: Mapping[str, float], step: int) -> None:
        import time

        from mlflow.entities import Metric

        have = self.client.get_run(run_id).data.metrics
        stamp = int(time.time() * 1000)
        log_metrics(self.client, run_id, [Metric(metric_key(name), float(value), stamp, step)
                                          for name, value in final.items()
                                          if metric_key(name) not in have])


def cell_params(cell: CellLike) -> dict[str, str]:
    """A cell's MLflow params: its resolved settings, then its axes as ``axis.<name>``."""
    return {**settings_params(cell.settings), **axis_params(cell.axes, cell.labels)}


def _is_complete(run: Run) -> bool:
    """Whether a child run got all its params (its creator did not die half-way)."""
    tags = run.data.tags
    if tags.get(COMPLETE_TAG) == "true":
        return True
    expected = tags.get(PARAM_COUNT_TAG)
    return expected is not None and expected.isdigit() and len(run.data.params) >= int(expected)
