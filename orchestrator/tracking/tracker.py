"""The :class:`Tracker`: one MLflow parent run per sweep, one child run per cell.

Call it only AFTER the spec and every cell validated, so a bad spec leaves nothing in MLflow (a
submit failing midway: :meth:`Tracker.delete_sweep_runs`). A cell's child run is made BEFORE launch
and left RUNNING (a retry logs into it); the launched process logs into it through
:meth:`Tracker.env_for_run`. MLflow is imported on first use of :attr:`Tracker.client` only.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from orchestrator import paths
from orchestrator.tracking.naming import (
    MAX_TAG_VALUE_LENGTH,
    axis_params,
    batches,
    cell_tags,
    clip,
    metric_key,
    render_value,
    settings_params,
    short_names,
    sweep_kind_tags,
)
from orchestrator.tracking.outbox import log_metrics
from orchestrator.tracking.sqlite_store import prepare_store

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

    from orchestrator.registry.snapshots import CellLike

RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")
PARENT_TAG = "mlflow.parentRunId"
NOTE_TAG = "mlflow.note.content"  # a run's description, markdown, in the UI
ROLE_TAG = "kappa.role"
SWEEP_KEY_TAG = "kappa.sweep_key"
# Set when a child run is created: how many params it gets. A run with fewer was never
# finished being made (its creator died). Runs made before this tag carry COMPLETE_TAG.
PARAM_COUNT_TAG = "kappa.param_count"
COMPLETE_TAG = "kappa.params_complete"


def absolute_uri(uri: str) -> str:
    """A local store's URI with its path made absolute (a child process started elsewhere
    writes to the same store); server URIs unchanged."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(uri.removeprefix("sqlite:///")).resolve())
    if "://" not in uri and not uri.startswith("sqlite:"):
        return Path(uri).resolve().as_uri()
    return uri


def sweep_key(sweep_name: str) -> str:
    """A quote-free stand-in for a sweep name, safe inside an MLflow filter string."""
    return hashlib.sha256(sweep_name.encode()).hexdigest()[:32]


class Tracker:
    """MLflow runs of sweeps and cells in the store at ``uri``."""

    def __init__(self, uri: str | None = None, artifact_root: Path | None = None) -> None:
        """``uri``: ``--mlflow``/``KAPPA_MLFLOW_URI``/local SQLite by default."""
        self.uri = absolute_uri(paths.mlflow_uri(uri))
        self.is_local = urlparse(self.uri).scheme in ("sqlite", "file")
        self.artifact_root = ((artifact_root or paths.mlflow_artifact_root()).resolve()
                              if self.is_local else None)
        self._client: MlflowClient | None = None
        # parent run id -> its experiment id; saves a get_run per child run.
        self._experiments: dict[str, str] = {}

    @property
    def client(self) -> MlflowClient:
        """The MLflow client (imports MLflow; makes a local store: :mod:`.sqlite_store`)."""
        if self._client is None:
            from mlflow import MlflowClient

            # MLflow announces its schema migrations at INFO on every new store; that is
            # noise in the middle of a sweep's progress output.
            logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
            logging.getLogger("alembic").setLevel(logging.WARNING)
            local = self.uri.startswith("sqlite:") and ":memory:" not in self.uri
            db = paths.local_store_path(self.uri) if local else None
            if db is not None:
                # The first call creates and migrates an empty store: one process at a time.
                prepare_store(db, lambda: MlflowClient(tracking_uri=self.uri)
                              .search_experiments(max_results=1))
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    def env_for_run(self, run_id: str) -> dict[str, str]:
        """The environment that makes a launched process log into ``run_id``."""
        env = {"MLFLOW_TRACKING_URI": self.uri, "MLFLOW_RUN_ID": run_id}
        if self.uri.startswith("file:"):
            env["MLFLOW_ALLOW_FILE_STORE"] = "true"
        return env

    def _search(self, experiment_ids: list[str], filter_string: str,
                deleted: bool = False) -> Iterator[Run]:
        """The runs ``filter_string`` finds (``deleted``: among the deleted ones only)."""
        from mlflow.entities import ViewType

        view = ViewType.DELETED_ONLY if deleted else ViewType.ACTIVE_ONLY
        token: str | None = None
        while True:
            page = self.client.search_runs(experiment_ids, filter_string=filter_string,
                                           run_view_type=view, max_results=500,
                                           page_token=token)
            yield from page
            token = page.token
            if not token:
                return

    def _children(self, parent_run_id: str, cell_id: str | None = None, *,
                  running: bool = False, deleted: bool = False) -> Iterator[Run]:
        """The parent's child runs (only ``cell_id``'s, RUNNING ones, deleted ones if asked)."""
        where = [f"tags.`{PARENT_TAG}` = '{quote_free(parent_run_id)}'"]
        if cell_id is not None:
            where.append(f"tags.`kappa.cell_id` = '{quote_free(cell_id)}'")
        if running:
            where.append("attributes.status = 'RUNNING'")
        return self._search([self.experiment_of(parent_run_id)], " and ".join(where), deleted)

    # -- the sweep's experiment and parent run -------------------------------------------
    def ensure_experiment(self, name: str) -> str:
        """The id of experiment ``name``, created (or restored from deleted) if needed."""
        from mlflow.exceptions import MlflowException

        existing = self.client.get_experiment_by_name(name)
        location = None
        if existing is None and self.artifact_root is not None:
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")[:60] or "experiment"
            digest = hashlib.sha256(name.encode()).hexdigest()[:8]
            location = (self.artifact_root / f"{slug}-{digest}").as_uri()
        try:
            if existing is None:
                return str(self.client.create_experiment(name, artifact_location=location))
            if existing.lifecycle_stage == "deleted":
                self.client.restore_experiment(existing.experiment_id)
            return str(existing.experiment_id)
        except MlflowException:
            # Another process created or restored it first; anything else is still an error.
            again = self.client.get_experiment_by_name(name)
            if again is None or again.lifecycle_stage != "active":
                raise
            return str(again.experiment_id)

    def sweep_run(self, experiment_id: str, sweep_name: str, spec_text: str,
                  tags: Mapping[str, str] | None = None) -> tuple[str, bool]:
        """The sweep's parent run id (existing, else new) and whether this call created it
        (only then may a failed submit delete it), the spec logged as ``spec.yaml``. Not
        atomic: callers serialise it (``orchestrator.registry.sweeps.sweep_record_lock``)."""
        all_tags = {**(tags or {}), **sweep_kind_tags(sweep_name), "kappa.sweep": sweep_name,
                    ROLE_TAG: "sweep", SWEEP_KEY_TAG: sweep_key(sweep_name)}
        where = (f"tags.`{SWEEP_KEY_TAG}` = '{sweep_key(sweep_name)}' "
                 f"and tags.`{ROLE_TAG}` = 'sweep'")
        run = next(self._search([experiment_id], where), None)
        if run is None:
            run_id: str = self.client.create_run(experiment_id, run_name=sweep_name,
                                                 tags=all_tags).info.run_id
        else:
            run_id = run.info.run_id
            for key, value in all_tags.items():
                self.client.set_tag(run_id, key, value)
        self.client.log_text(run_id, spec_text, "spec.yaml")
        return run_id, run is None

    def finish_sweep_run(self, parent_run_id: str, status: str = "FINISHED") -> None:
        """End the sweep's parent run."""
        self.client.set_terminated(parent_run_id, check_status(status))

    def delete_sweep_runs(self, parent_run_id: str) -> int:
        """Delete a sweep's parent run and all its child runs; how many were deleted."""
        children = list(self._children(parent_run_id))
        for run in [*children, self.client.get_run(parent_run_id)]:
            self.discard_run(run.info.run_id, run.info.status)
        return len(children) + 1

    def discard_run(self, run_id: str, status: str = "RUNNING") -> None:
        """Delete a run no attempt will log into, ended first (``KILLED``) if it is
        ``status`` RUNNING: MLflow cannot end a deleted run, which would stay RUNNING."""
        if status == "RUNNING":
            self.client.set_terminated(run_id, "KILLED")
        self.client.delete_run(run_id)

    def end_deleted_cell_runs(self, parent_run_id: str, cell_id: str) -> int:
        """End (``KILLED``) the cell's child runs that were deleted while RUNNING (by a
        kappa before :meth:`discard_run`); how many. MLflow ends only active runs, so
        each is restored, ended and deleted again."""
        found = list(self._children(parent_run_id, cell_id, running=True, deleted=True))
        for run in found:
            self.client.restore_run(run.info.run_id)
            self.discard_run(run.info.run_id)
        return len(found)

    def publish_sweep(self, parent_run_id: str, *, files: Mapping[str, str],
                      metrics: Mapping[str, float], note: str, names: Mapping[str, str],
                      experiment_tags: Mapping[str, str]) -> None:
        """Attach a sweep's summary to its parent run: ``files`` (artifact path -> text),
        ``metrics`` (at step 0; a later publish's values win), ``note`` (markdown: the
        run's description in the UI), its child runs renamed (cell id -> name) and tags on
        its experiment (e.g. its saved view)."""
        self.client.set_tag(parent_run_id, NOTE_TAG, clip(note, MAX_TAG_VALUE_LENGTH))
        for path, text in files.items():
            self.client.log_text(parent_run_id, text, path)
        self._log_metrics(parent_run_id, metrics, step=0)
        for run in self._children(parent_run_id):
            name = names.get(run.data.tags.get("kappa.cell_id", ""))
            if name and run.info.run_name != name:
                self.client.update_run(run.info.run_id, name=name)
        for key, value in experiment_tags.items():
            self.client.set_experiment_tag(self.experiment_of(parent_run_id), key, value)

    # -- a cell's child run -------------------------------------------------------------
    def experiment_of(self, parent_run_id: str) -> str:
        """The experiment id of a (parent) run, asked of the store once per run."""
        if parent_run_id not in self._experiments:
            run = self.client.get_run(parent_run_id)
            self._experiments[parent_run_id] = str(run.info.experiment_id)
        return self._experiments[parent_run_id]

    def create_cell_run(self, parent_run_id: str, cell: CellLike, sweep_name: str,
                        git_commit: str | None = None, *, may_exist: bool = True,
                        experiment_id: str | None = None, log_params: bool = True,
                        name: str | None = None) -> str:
        """The cell's child run, RUNNING, tagged, with its settings and axes as params,
        named ``name`` (default: by all its axes, :func:`~.naming.short_names`).
        ``may_exist=False`` (no run of the cell can exist yet) skips looking for one to
        reuse; ``log_params=False`` leaves the params to a later :meth:`log_cell_params`
        (the scheduler's, off its critical path)."""
        if experiment_id is not None:
            self._experiments.setdefault(parent_run_id, experiment_id)
        if may_exist:  # after a crash: what an abandoned attempt may have left
            self.end_deleted_cell_runs(parent_run_id, cell.cell_id)
            found = next(self._children(parent_run_id, cell.cell_id), None)
            if found is not None:
                run = self.client.get_run(found.info.run_id)
                if _is_complete(run):
                    if run.info.status != "RUNNING":
                        self.client.update_run(run.info.run_id, status="RUNNING")
                    return str(run.info.run_id)
                # Left half-made by a process that died while creating it.
                self.discard_run(run.info.run_id, run.info.status)
        tags = cell_tags(cell.axes, cell.labels, cell_id=cell.cell_id, sweep_name=sweep_name,
                         git_commit=git_commit)
        tags.update({PARENT_TAG: parent_run_id, ROLE_TAG: "cell",
                     PARAM_COUNT_TAG: str(len(cell_params(cell)))})
        run_id: str = self.client.create_run(self.experiment_of(parent_run_id),
                                             run_name=name or short_names([cell])[cell.cell_id],
                                             tags=tags).info.run_id
        if log_params:
            try:
                self.log_cell_params(run_id, cell)
            except BaseException:
                # A run without its params would mislead every comparison: remove it.
                self.discard_run(run_id)
                raise
        return run_id

    def log_cell_params(self, run_id: str, cell: CellLike, only_missing: bool = False) -> int:
        """Log the cell's settings and axes as the run's params (``only_missing``: those
        the run lacks, its creator having died); how many were logged."""
        from mlflow.entities import Param

        params = cell_params(cell)
        if only_missing:
            have = self.client.get_run(run_id).data.params
            params = {k: v for k, v in params.items() if k not in have}
        for chunk in batches(params):
            self.client.log_batch(run_id, params=[Param(k, v) for k, v in chunk])
        return len(params)

    def reopen_cell_run(self, run_id: str) -> bool:
        """Set a child run RUNNING again for a retry; ``False`` if the store lost it."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.update_run(run_id, status="RUNNING")
        except MlflowException:
            return False
        return True

    def running_cell_runs(self, parent_run_id: str) -> list[str]:
        """Ids of the parent's child runs that are still RUNNING (for crash recovery)."""
        return [str(run.info.run_id) for run in self._children(parent_run_id, running=True)]

    def finish_cell_run(self, run_id: str, status: str, artifacts: Iterable[Path] = (),
                        final_metrics: Mapping[str, float] | None = None,
                        step: int = 0) -> list[Path]:
        """Upload ``artifacts`` that exist (folders keep their name), log the final metrics
        the run lacks (at ``step``), then end the run; the paths that did not exist."""
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
            have = self.client.get_run(run_id).data.metrics
            self._log_metrics(run_id, {name: value for name, value in final_metrics.items()
                                       if metric_key(name) not in have}, step)
        self.client.set_terminated(run_id, status)
        return skipped

    def _log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int) -> None:
        """Log ``metrics`` to ``run_id`` at ``step``, stamped now."""
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        log_metrics(self.client, run_id, [Metric(metric_key(name), float(value), stamp, step)
                                          for name, value in metrics.items()])


def check_status(status: str) -> str:
    """``status`` upper-cased, if it is one of :data:`RUN_STATUSES` (else ``ValueError``)."""
    upper = status.upper()
    if upper not in RUN_STATUSES:
        raise ValueError(f"run status must be one of {', '.join(RUN_STATUSES)}, not {status!r}")
    return upper


def quote_free(value: str) -> str:
    """``value``, refused if it has a quote that would break an MLflow filter string."""
    if "'" in value or "`" in value:
        raise ValueError(f"identifier {value!r} cannot contain quotes")
    return value


def cell_params(cell: CellLike) -> dict[str, str]:
    """A cell's MLflow params: its resolved settings, then its axes as ``axis.<name>``. An
    axis that is a setting of the same value (``seed``) is there once, as ``axis.seed``."""
    axes = {k: render_value(v) for k, v in cell.axes.items()}
    settings = {k: v for k, v in settings_params(cell.settings).items() if axes.get(k) != v}
    return {**settings, **axis_params(cell.axes, cell.labels)}


def _is_complete(run: Run) -> bool:
    """Whether a child run got all its params (its creator did not die half-way)."""
    tags = run.data.tags
    if tags.get(COMPLETE_TAG) == "true":
        return True
    expected = tags.get(PARAM_COUNT_TAG)
    return expected is not None and expected.isdigit() and len(run.data.params) >= int(expected)
