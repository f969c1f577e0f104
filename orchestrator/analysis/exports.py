"""The result commands' output: ``kappa export``'s frame in CSV, JSON or Parquet, ``kappa
table``'s text (a search's best trials, else the ablation table), and ``kappa
convergence``'s steps. One sweep or several read as one (:mod:`.combined`)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.analysis.combined import results_of
from orchestrator.errors import Problem, UserInputError

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.analysis.tables import TableSpec

EXPORT_FORMATS = ("csv", "parquet", "json")


def export_frame(sweeps: Sequence[str], registry_url: str | None = None,
                 mlflow_uri: str | None = None) -> pd.DataFrame:
    """The results frame ``kappa export`` writes: one sweep's with a search's trials."""
    from orchestrator.analysis.search_results import with_trials

    frame = results_of(sweeps, registry_url, mlflow_uri)
    return with_trials(frame, sweeps[0], registry_url) if len(sweeps) == 1 else frame


def export_text(frame: pd.DataFrame, fmt: str) -> str:
    """The frame as CSV, or as JSON records (one per cell, axis values keeping their
    types; NaN as ``null``, ±inf as ``"inf"``/``"-inf"``, as a spec writes it)."""
    if fmt == "csv":
        return str(frame.to_csv(index=False))
    records = [{str(k): _json_value(v) for k, v in record.items()}
               for record in frame.to_dict("records")]
    return json.dumps(records, indent=2, allow_nan=False) + "\n"


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return _json_value(value.item())
    return value


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """Write the frame as Parquet, which needs one type per column: axis columns of
    mixed types become strings."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            inferred = frame[column].infer_objects()
            mixed = inferred.dtype == object and len({type(v) for v in inferred.dropna()}) > 1
            frame[column] = (inferred.astype(str).where(inferred.notna(), None) if mixed
                             else inferred)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False)


def table_text(sweeps: Sequence[str], spec: TableSpec, fmt: str, placed: bool,
               registry_url: str | None = None, mlflow_uri: str | None = None) -> str:
    """``kappa table``'s text in ``fmt``. Unless options ``placed`` the axes, the table
    follows the sweep's axes (:func:`~orchestrator.analysis.report.auto_layout`), and one
    search sweep without chosen metrics shows its best trial per study instead."""
    from orchestrator.analysis.report import auto_layout
    from orchestrator.analysis.tables import build_table, render

    if not placed and not spec.metrics and len(sweeps) == 1:
        from orchestrator.analysis.search_results import best_trials, sweep_studies

        studies = sweep_studies(sweeps[0], registry_url)
        if studies:
            return best_trials(studies, fmt)
    frame = results_of(sweeps, registry_url, mlflow_uri)
    return render(build_table(frame, spec if placed else auto_layout(frame, spec)), fmt)


def convergence_text(sweeps: Sequence[str], metric: str, fmt: str,
                     registry_url: str | None = None, mlflow_uri: str | None = None) -> str:
    """Each cell's convergence step on the ``metric`` curves, as markdown or CSV;
    ``UserInputError`` when cells logged curves but none matches ``metric`` (a typo)."""
    from orchestrator import paths
    from orchestrator.analysis.curves import load_curves
    from orchestrator.analysis.dynamics import convergence_frame
    from orchestrator.analysis.tables.render import frame_table

    frame = results_of(sweeps, registry_url, mlflow_uri)
    uri = paths.readable_mlflow_uri(mlflow_uri)
    curves = load_curves(frame, [metric], uri)
    if curves.empty and (logged := sorted(set(load_curves(frame, ["*"], uri)["metric"]))):
        raise UserInputError("no curve matches --metric", [Problem(
            "--metric", "no per-step metric of this sweep matches", found=metric,
            allowed=", ".join(logged), fix="use a glob such as 'val-core/*/acc/mean@1'")])
    conv = convergence_frame(curves, frame, metric)
    conv.columns = [c.removeprefix("axis.") for c in conv.columns]
    return frame_table(conv, fmt, _convergence_value, spaced_rule=True)


def _convergence_value(column: str, value: Any) -> str:
    """Steps to 0.1, values to 4 decimals, ``—`` when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if column == "convergence_step":
        return f"{float(value):.1f}"
    if column == "last_value":
        return f"{float(value):.4f}"
    return str(value)
