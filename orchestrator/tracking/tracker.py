"""The :class:`Tracker`: one MLflow parent run per sweep, one child run per cell.

Contract (for the scheduler)
----------------------------
Call these only AFTER the spec and every cell validated, so a bad spec leaves nothing in
MLflow; if a submit still fails midway, :meth:`Tracker.delete_sweep_runs` removes what
was created.

* ``ensure_experiment(name) -> experiment_id``: get or create; on the local store the
  artifacts go under ``orchestrator.paths.mlflow_artifact_root()``.
* ``sweep_run(experiment_id, sweep_name, spec_text, tags=None) -> (parent_run_id, new)``:
  idempotent, an existing parent run of the same sweep (found by tag) is reused; the
  spec is logged as the artifact ``spec.yaml``; ``new`` says whether the run was made
  by this call. Not atomic: concurrent submits serialise it per sweep (the registry's
  ``sweep_record_lock``).
* ``create_cell_run(parent_run_id, cell, sweep_name, git_commit=None, *, may_exist=True,
  experiment_id=None) -> run_id``: the child run, created BEFORE launch and left
  RUNNING; reused (and set RUNNING again) if the cell already has one under this parent,
  so a retry logs into the same run. ``may_exist=False`` skips that search (the caller
  knows no run can exist yet: the common, cheap path: two store calls).
* ``reopen_cell_run(run_id) -> bool``: set a known child run RUNNING again (False: it is
  gone from the store).
* ``running_cell_runs(parent_run_id) -> list[run_id]``: children still RUNNING (recovery).
* ``env_for_run(run_id)``: the environment that makes the launched process log into
  that run (``MLFLOW_TRACKING_URI``, ``MLFLOW_RUN_ID``).
* ``finish_cell_run(run_id, status, artifacts)``: upload artifacts (files, or folders),
  then end the run as FINISHED, FAILED or KILLED. ``finish_sweep_run`` ends the parent.

MLflow is imported on first use only.

The methods live by concept: the store and client in ``connection.py``, experiments and
parent runs in ``sweep_runs.py``, child runs in ``cell_runs.py``.
"""

from __future__ import annotations

from orchestrator.tracking.cell_runs import CellRuns
from orchestrator.tracking.sweep_runs import SweepRuns


class Tracker(SweepRuns, CellRuns):
    """MLflow runs of sweeps and cells in the store at ``uri`` (see module docstring)."""
