"""MLflow tracking: a parent run per sweep, a child run per cell (see ``tracker.py``).

Importing this package does not import MLflow; the :class:`Tracker` does on first use.
"""

from orchestrator.runs.provenance import git_commit
from orchestrator.tracking.tracker import Tracker, absolute_uri

__all__ = ["Tracker", "absolute_uri", "git_commit"]
