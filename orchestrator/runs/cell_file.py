"""``<run_dir>/cell.json``: what a run folder is, readable without the registry.

Written atomically after each state change of the cell (the registry stays the truth),
so a run folder copied elsewhere still says which sweep and cell it is, its axes, how it
ended and which MLflow run holds its curves (:mod:`orchestrator.analysis.sources`)::

    {"sweep": str, "cell_id": str, "axes": {name: value}, "labels": {name: label},
     "state": "pending" | "running" | "succeeded" | "failed" | "cancelled" | ...,
     "mlflow_run_id": str | null}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from orchestrator.runs.folder import CELL_FILE, read_json, write_json


class _CellFacts(Protocol):
    @property
    def cell_id(self) -> str: ...
    @property
    def axes(self) -> Mapping[str, Any]: ...
    @property
    def labels(self) -> Any: ...


def write_cell_file(run_dir: Path, sweep: str, cell: _CellFacts, state: str,
                    mlflow_run_id: str | None) -> Path:
    """Write ``run_dir/cell.json`` atomically (the folder is created if needed)."""
    labels = cell.labels if isinstance(cell.labels, Mapping) else {}
    document = {"sweep": sweep, "cell_id": cell.cell_id, "axes": dict(cell.axes),
                "labels": dict(labels), "state": str(state),
                "mlflow_run_id": mlflow_run_id or None}
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / CELL_FILE, document, indent=1, default=str)
    return run_dir / CELL_FILE


def read_cell_file(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/cell.json`` as a dict, or ``None`` if absent or unreadable."""
    return read_json(run_dir / CELL_FILE)
