"""``<run_dir>/cell.json``: what a run folder is, readable without the registry.

The scheduler writes it when the run folder is made (state ``pending``) and again at
each launch and end of the cell, always atomically (temp file + rename), so a run folder
copied elsewhere still says which sweep and cell it is, its axes, how it ended and
which MLflow run holds its curves. :mod:`orchestrator.analysis.sources` reads it::

    {"sweep": str, "cell_id": str, "axes": {name: value}, "labels": {name: label},
     "state": "pending" | "running" | "succeeded" | "failed" | "cancelled" | ...,
     "mlflow_run_id": str | null}

The registry stays the truth; this file follows it (written after each state change).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

CELL_FILE = "cell.json"


class _CellFacts(Protocol):
    @property
    def cell_id(self) -> str: ...
    @property
    def axes(self) -> Mapping[str, Any]: ...
    @property
    def labels(self) -> Any: ...


def cell_document(
    sweep: str, cell: _CellFacts, state: str, mlflow_run_id: str | None
) -> dict[str, Any]:
    """The content of ``cell.json`` for ``cell`` of ``sweep``."""
    labels = cell.labels if isinstance(cell.labels, Mapping) else {}
    return {
        "sweep": sweep,
        "cell_id": cell.cell_id,
        "axes": dict(cell.axes),
        "labels": dict(labels),
        "state": str(state),
        "mlflow_run_id": mlflow_run_id or None,
    }


def write_cell_file(
    run_dir: Path, sweep: str, cell: _CellFacts, state: str, mlflow_run_id: str | None
) -> Path:
    """Write ``run_dir/cell.json`` atomically (the folder is created if needed)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / CELL_FILE
    tmp = run_dir / f".{CELL_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(cell_document(sweep, cell, state, mlflow_run_id), indent=1,
                              default=str))
    tmp.replace(target)
    return target


def read_cell_file(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/cell.json`` as a dict, or ``None`` if absent or unreadable."""
    try:
        data = json.loads((run_dir / CELL_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
