"""The :class:`Tracker`: one MLflow parent run per sweep, one child run per cell.

Call it only AFTER the spec and every cell validated, so a bad spec leaves nothing in
MLflow; if a submit still fails midway, :meth:`Tracker.delete_sweep_runs` removes what
was created. A cell's child run is created BEFORE launch and left RUNNING (a retry logs
into the same run); the launched process logs into it through
:meth:`Tracker.env_for_run`. MLflow is imported on first use only.

The methods live by concept: the store and client in ``connection.py``, experiments and
parent runs in ``sweep_runs.py``, child runs in ``cell_runs.py``.
"""

from __future__ import annotations

from orchestrator.tracking.cell_runs import CellRuns
from orchestrator.tracking.sweep_runs import SweepRuns


class Tracker(SweepRuns, CellRuns):
    """MLflow runs of sweeps and cells in the store at ``uri`` (see module docstring)."""
