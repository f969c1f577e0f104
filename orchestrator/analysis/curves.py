"""Per-step curves of a sweep's cells: from run folders' ``metrics.jsonl`` or MLflow history.

The long form has one row per (cell, step, metric): columns ``cell_id``, ``step``,
``metric``, ``value`` plus every ``axis.<name>`` column of the results frame, so plots
can group and colour by any axis. In a frame of several sweeps (where one cell id can be in
two sweeps) ``cell_id`` is ``<sweep>/<cell id>`` (:func:`curve_key`).
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.analysis.frame import AXIS_PREFIX
from orchestrator.runs.folder import METRICS_FILE
from orchestrator.runs.metrics import metric_curves
from orchestrator.tracking import Tracker

if TYPE_CHECKING:
    import pandas as pd

CURVE_COLUMNS: tuple[str, ...] = ("cell_id", "step", "metric", "value")


def _matching(names: Sequence[str], patterns: Sequence[str]) -> list[str]:
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def from_mlflow_name(name: str) -> str:
    """A metric name as kappa spells it: MLflow rejects ``@``, so (like verl's MLflow
    logger) kappa logs ``mean@8`` as ``mean_at_8``."""
    return name.replace("_at_", "@")


def _mlflow_history(run_id: str, patterns: Sequence[str],
                    mlflow_uri: str) -> dict[str, dict[int, float]]:
    # Through the Tracker: a store still being created by a first submit is waited for.
    client = Tracker(mlflow_uri).client
    stored = {from_mlflow_name(n): n for n in sorted(client.get_run(run_id).data.metrics)}
    out: dict[str, dict[int, float]] = {}
    for name in _matching(list(stored), patterns):
        for m in client.get_metric_history(run_id, stored[name]):
            out.setdefault(name, {})[int(m.step)] = float(m.value)
    return out


def cell_curves(run_dir: str | None, mlflow_run_id: str | None, patterns: Sequence[str],
                mlflow_uri: str | None = None) -> dict[str, dict[int, float]]:
    """Histories of the metrics matching ``patterns`` (globs) of one cell: from the run
    folder's ``metrics.jsonl``, else (a run on another machine) from its MLflow run."""
    found = metric_curves(Path(run_dir) / METRICS_FILE) if run_dir else {}
    wanted = {m: found[m] for m in _matching(list(found), patterns)}
    if not wanted and mlflow_run_id and mlflow_uri:
        # An unreachable or foreign store leaves the curve missing rather than failing.
        with contextlib.suppress(Exception):
            wanted = _mlflow_history(mlflow_run_id, patterns, mlflow_uri)
    return wanted


def curve_key(record: dict[str, Any], combined: bool) -> str:
    """A frame record's ``cell_id`` in the curves (``<sweep>/<cell id>`` when ``combined``)."""
    return f"{record['sweep']}/{record['cell_id']}" if combined else str(record["cell_id"])


def load_curves(frame: pd.DataFrame, patterns: Sequence[str],
                mlflow_uri: str | None = None) -> pd.DataFrame:
    """Long-form curves of the metrics matching ``patterns`` for every cell in ``frame``."""
    import pandas as pd

    axis_cols = [c for c in frame.columns if c.startswith(AXIS_PREFIX)]
    combined = "sweep" in frame.columns and frame["sweep"].nunique() > 1
    rows: list[dict[str, Any]] = []
    for record in frame.to_dict("records"):
        histories = cell_curves(record.get("run_dir"), record.get("mlflow_run_id"), patterns,
                                mlflow_uri)
        axes = {c: record[c] for c in axis_cols}
        for metric, points in histories.items():
            rows += [{"cell_id": curve_key(record, combined), "step": step, "metric": metric,
                      "value": points[step], **axes} for step in sorted(points)]
    return pd.DataFrame(rows, columns=[*CURVE_COLUMNS, *axis_cols])
