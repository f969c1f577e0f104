"""Where kappa keeps its state by default: a project-local ``.kappa/`` folder.

``KAPPA_HOME`` moves the folder; ``KAPPA_REGISTRY`` / ``--registry`` select another
registry database (e.g. PostgreSQL); ``KAPPA_MLFLOW_URI`` / ``--mlflow`` another MLflow
tracking store or server.
"""

from __future__ import annotations

import os
from pathlib import Path


def kappa_home() -> Path:
    """The state folder (created on demand by whoever writes into it)."""
    return Path(os.environ.get("KAPPA_HOME", ".kappa")).resolve()


def registry_url(override: str | None = None) -> str:
    """The registry's SQLAlchemy URL: ``--registry``, else ``KAPPA_REGISTRY``, else SQLite."""
    default = f"sqlite:///{kappa_home() / 'registry.db'}"
    return override or os.environ.get("KAPPA_REGISTRY") or default


def mlflow_uri(override: str | None = None) -> str:
    """The MLflow URI: ``--mlflow``, else ``KAPPA_MLFLOW_URI``, else SQLite beside the registry."""
    default = f"sqlite:///{kappa_home() / 'mlflow.db'}"
    return override or os.environ.get("KAPPA_MLFLOW_URI") or default


def mlflow_artifact_root() -> Path:
    """Artifact folder for the default local MLflow store."""
    return kappa_home() / "mlartifacts"


def runs_root() -> Path:
    """Run folders live at ``runs_root() / <sweep name> / <cell id>``."""
    return kappa_home() / "runs"


def cache_dir() -> Path:
    """Content-addressed caches (warm-start checkpoints, composed configs)."""
    return Path(os.environ.get("KAPPA_CACHE", kappa_home() / "cache")).resolve()
