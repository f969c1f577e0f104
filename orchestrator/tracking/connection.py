"""The connection under :class:`~.tracker.Tracker`: the MLflow store's URI and client.

MLflow is imported on first use of :attr:`TrackerConnection.client` only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from orchestrator import paths
from orchestrator.tracking.sqlite_store import prepare_store

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")
PARENT_TAG = "mlflow.parentRunId"
ROLE_TAG = "kappa.role"


def absolute_uri(uri: str) -> str:
    """A local store's URI with its path made absolute, so a child process started in
    another folder writes to the same store. Server URIs are returned unchanged."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(uri.removeprefix("sqlite:///")).resolve())
    if "://" not in uri and not uri.startswith("sqlite:"):
        return Path(uri).resolve().as_uri()
    return uri


class TrackerConnection:
    """The MLflow store at ``uri``; the sweep and cell run methods build on it."""

    def __init__(self, uri: str | None = None, artifact_root: Path | None = None) -> None:
        """``uri``: ``--mlflow``/``KAPPA_MLFLOW_URI``/local SQLite by default."""
        self.uri = absolute_uri(paths.mlflow_uri(uri))
        scheme = urlparse(self.uri).scheme
        self.is_local = scheme in ("sqlite", "file")
        self.artifact_root = ((artifact_root or paths.mlflow_artifact_root()).resolve()
                              if self.is_local else None)
        self._client: MlflowClient | None = None
        # parent run id -> its experiment id; saves a get_run per child run.
        self._experiments: dict[str, str] = {}

    @property
    def client(self) -> MlflowClient:
        """The MLflow client (imports MLflow; creates and migrates a local store, safely
        across processes: see :mod:`.sqlite_store`)."""
        if self._client is None:
            import logging

            from mlflow import MlflowClient

            # MLflow announces its schema migrations at INFO on every new store; that is
            # noise in the middle of a sweep's progress output.
            logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
            logging.getLogger("alembic").setLevel(logging.WARNING)
            local = self.uri.startswith("sqlite:") and ":memory:" not in self.uri
            db = paths.local_store_path(self.uri) if local else None
            if db is not None:
                # Making the client opens the store, which creates and migrates an empty
                # one: one process at a time (a server migrates its store itself).
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

    def _search(self, experiment_ids: list[str], filter_string: str) -> Iterator[Run]:
        token: str | None = None
        while True:
            page = self.client.search_runs(experiment_ids, filter_string=filter_string,
                                           max_results=500, page_token=token)
            yield from page
            token = page.token
            if not token:
                return


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
