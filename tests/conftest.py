"""Shared pytest configuration."""

from __future__ import annotations

import os

# Keep tests hermetic: no MLflow run leaks in from the caller's environment, and torch
# stays on the two cores CI has.
for _var in ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "KAPPA_REGISTRY"):
    os.environ.pop(_var, None)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
