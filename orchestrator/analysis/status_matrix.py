"""The sweep's grid as a matrix of cells coloured by state, each linking to its MLflow run.

Columns are the values of one axis (the seed axis when it varies, else the last varying
axis); rows are the combinations of the other varying axes, in order of appearance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.analysis.frame import axes_text, axis_column, varying_axes

if TYPE_CHECKING:
    import pandas as pd

KNOWN_STATES: tuple[str, ...] = ("succeeded", "stopped", "failed", "cancelled", "running",
                                  "queued", "pending")


def state_class(state: str, stop_reason: str | None = None) -> str:
    """The CSS class suffix for a state (unknown states share one colour); a succeeded
    cell a stopping rule ended is ``stopped``."""
    if state == "succeeded" and stop_reason:
        return "stopped"
    return state if state in KNOWN_STATES else "unknown"


def state_label(state: str, stop_reason: str | None = None) -> str:
    """``stopped: plateau at step 340``, ``failed: diverged at step 12``, or the state."""
    if not stop_reason:
        return state
    short = stop_reason.split(" (")[0].split(":")[0]
    return f"{'stopped' if state == 'succeeded' else state}: {short}"


def stop_reason_of(record: dict[str, Any]) -> str | None:
    """A frame record's stop reason (``None`` when absent or NaN)."""
    reason = record.get("stop_reason")
    return reason if isinstance(reason, str) and reason else None


@dataclass(frozen=True)
class MatrixCell:
    """One cell of the grid as the report shows it."""

    text: str
    state: str
    state_class: str
    title: str
    href: str | None


@dataclass(frozen=True)
class MatrixRow:
    """Labels (one per row axis) and a cell (or ``None``: not in the grid) per column."""

    labels: tuple[str, ...]
    cells: tuple[MatrixCell | None, ...]


@dataclass(frozen=True)
class StatusMatrix:
    """Row headers, column headers and rows."""

    row_headers: tuple[str, ...]
    columns: tuple[str, ...]
    rows: tuple[MatrixRow, ...]


def matrix_cell(record: dict[str, Any], axes: list[str], ui: str | None,
                experiment_id: str | None) -> MatrixCell:
    """A frame record as the report shows it (``href``: its run's page in the MLflow UI at
    ``ui``, when known; the direct route when the experiment is unknown)."""
    state = str(record["state"])
    reason = stop_reason_of(record)
    run_id = record.get("mlflow_run_id")
    route = f"experiments/{experiment_id}/runs" if experiment_id else "runs"
    href = f"{ui.rstrip('/')}/#/{route}/{run_id}" if ui and run_id else None
    title = f"{record['cell_id']} · {axes_text(record, axes)}"
    if reason:
        title += f" · {reason}"
    cell_id = str(record["cell_id"])
    text = cell_id if len(cell_id) <= 16 else cell_id[:10]  # content hashes: a short prefix
    return MatrixCell(text, state_label(state, reason), state_class(state, reason), title, href)


def status_matrix(frame: pd.DataFrame, seed_axis: str = "seed",
                  mlflow_ui: str | None = None,
                  experiment_id: str | None = None) -> StatusMatrix:
    """The grid of ``frame`` as a :class:`StatusMatrix`."""
    varying = varying_axes(frame)
    col_axis = seed_axis if seed_axis in varying else (varying[-1] if varying else None)
    row_axes = [a for a in varying if a != col_axis]
    records = frame.to_dict("records")
    columns = (list(dict.fromkeys(str(r[axis_column(col_axis)]) for r in records))
               if col_axis else [""])
    grid: dict[tuple[str, ...], dict[str, MatrixCell]] = {}
    for record in records:
        key = tuple(str(record[axis_column(a)]) for a in row_axes)
        col = str(record[axis_column(col_axis)]) if col_axis else ""
        grid.setdefault(key, {})[col] = matrix_cell(record, varying, mlflow_ui, experiment_id)
    rows = tuple(MatrixRow(key, tuple(cells.get(c) for c in columns))
                 for key, cells in grid.items())
    col_label = f"{col_axis}=" if col_axis else ""
    return StatusMatrix(tuple(row_axes), tuple(f"{col_label}{c}" for c in columns), rows)
