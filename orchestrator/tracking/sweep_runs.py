"""A sweep's MLflow experiment and parent run: find or create, end, and delete again."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from orchestrator.tracking.connection import (
    PARENT_TAG,
    ROLE_TAG,
    TrackerConnection,
    check_status,
    quote_free,
)
from orchestrator.tracking.naming import sweep_kind_tags

SWEEP_KEY_TAG = "kappa.sweep_key"


def sweep_key(sweep_name: str) -> str:
    """A quote-free stand-in for a sweep name, safe inside an MLflow filter string."""
    return hashlib.sha256(sweep_name.encode()).hexdigest()[:32]


class SweepRuns(TrackerConnection):
    """The tracker's experiment and parent-run methods (mixed into :class:`~.tracker.Tracker`)."""

    def ensure_experiment(self, name: str) -> str:
        """The id of experiment ``name``, created (or restored from deleted) if needed."""
        from mlflow.exceptions import MlflowException

        existing = self.client.get_experiment_by_name(name)
        if existing is not None:
            if existing.lifecycle_stage == "deleted":
                try:
                    self.client.restore_experiment(existing.experiment_id)
                except MlflowException:
                    # Another process restored it first; anything else is still an error.
                    again = self.client.get_experiment_by_name(name)
                    if again is None or again.lifecycle_stage != "active":
                        raise
            return str(existing.experiment_id)
        location = None
        if self.artifact_root is not None:
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")[:60] or "experiment"
            digest = hashlib.sha256(name.encode()).hexdigest()[:8]
            location = (self.artifact_root / f"{slug}-{digest}").as_uri()
        try:
            return str(self.client.create_experiment(name, artifact_location=location))
        except MlflowException:
            # Another process created it between our lookup and create.
            again = self.client.get_experiment_by_name(name)
            if again is None:
                raise
            return str(again.experiment_id)

    def sweep_run(self, experiment_id: str, sweep_name: str, spec_text: str,
                  tags: Mapping[str, str] | None = None) -> tuple[str, bool]:
        """The sweep's parent run id (the existing one for ``sweep_name``, else a new one)
        and whether this call created it (only such a run may be deleted when the submit
        fails); the spec is logged as ``spec.yaml``. Not atomic: callers serialise it per
        sweep (``orchestrator.registry.locks.sweep_record_lock``)."""
        all_tags = {**(tags or {}), **sweep_kind_tags(sweep_name), "kappa.sweep": sweep_name,
                    ROLE_TAG: "sweep", SWEEP_KEY_TAG: sweep_key(sweep_name)}
        found = self._search(
            [experiment_id],
            f"tags.`{SWEEP_KEY_TAG}` = '{sweep_key(sweep_name)}' and tags.`{ROLE_TAG}` = 'sweep'",
        )
        run = next(found, None)
        created = run is None
        if run is None:
            run_id: str = self.client.create_run(experiment_id, run_name=sweep_name,
                                                 tags=all_tags).info.run_id
        else:
            run_id = run.info.run_id
            for key, value in all_tags.items():
                self.client.set_tag(run_id, key, value)
        self.client.log_text(run_id, spec_text, "spec.yaml")
        return run_id, created

    def finish_sweep_run(self, parent_run_id: str, status: str = "FINISHED") -> None:
        """End the sweep's parent run."""
        self.client.set_terminated(parent_run_id, check_status(status))

    # -- undo ----------------------------------------------------------------------------
    def delete_sweep_runs(self, parent_run_id: str) -> int:
        """Delete a sweep's parent run and all its child runs (a submit that failed
        midway); how many runs were deleted."""
        parent = self.client.get_run(parent_run_id)
        children = [run.info.run_id for run in self._search(
            [parent.info.experiment_id], f"tags.`{PARENT_TAG}` = '{quote_free(parent_run_id)}'")]
        for run_id in [*children, parent_run_id]:
            self.client.delete_run(run_id)
        return len(children) + 1
