"""Where a sweep's results come from: the registry when it knows the sweep, else its run
folders (``summary.json``, ``progress.json`` and the scheduler's ``cell.json``); final
metrics missing everywhere else come from the MLflow run (its latest ``eval/*`` values).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import paths
from orchestrator.analysis.curves import from_mlflow_name
from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.errors import Problem, UserInputError
from orchestrator.registry import Registry, SweepRecord
from orchestrator.registry.engine import display_url
from orchestrator.runs import provenance
from orchestrator.runs.folder import (
    PROGRESS_FILE,
    read_cell_file,
    read_progress,
    read_summary,
    summary_final,
    summary_stop_reason,
)
from orchestrator.runs.layout import cell_folders, sweep_folder
from orchestrator.tracking import Tracker

if TYPE_CHECKING:
    import pandas as pd

FINAL_METRIC_PREFIX = "eval/"


def registry_sweep(sweep: str, registry_url: str) -> tuple[SweepRecord, list[CellResult]] | None:
    """The sweep and its cells (by index) from the registry, or ``None`` if it lacks them
    (or there is no registry: reading never creates one)."""
    if (registry := Registry.existing(registry_url)) is None:
        return None
    with registry:
        record = registry.find_sweep(sweep)
        if record is None:
            return None
        cells = registry.cells(sweep)
    results = [CellResult(
        sweep=sweep, cell_id=c.cell_id, state=str(c.state.value), axes=dict(c.axes),
        final_metrics={k: float(v) for k, v in (c.final_metrics or {}).items()
                       if isinstance(v, int | float)},
        run_dir=c.run_dir, mlflow_run_id=c.mlflow_run_id, stop_reason=c.stop_reason,
        step=c.progress_step, total_steps=c.total_steps, settings=dict(c.settings or {}),
        provenance=c.provenance,
    ) for c in cells]
    return record, results


def cell_from_run_folder(sweep: str, run_dir: Path) -> CellResult:
    """A cell result from a run folder alone."""
    meta = read_cell_file(run_dir) or {}
    summary = read_summary(run_dir) or {}
    # The summary's status, else the cell file's state, else whether the run reported yet.
    state = str(summary.get("status") or meta.get("state")
                or ("running" if (run_dir / PROGRESS_FILE).exists() else "pending"))
    progress = read_progress(run_dir)
    steps = summary.get("steps")
    return CellResult(sweep=sweep, cell_id=run_dir.name, state=state,
                      axes=dict(meta.get("axes") or {}), final_metrics=summary_final(summary),
                      run_dir=str(run_dir), mlflow_run_id=meta.get("mlflow_run_id"),
                      stop_reason=summary_stop_reason(summary),
                      step=steps if isinstance(steps, int) else (progress or (None, None))[0],
                      total_steps=progress[1] if progress and progress[1] else None,
                      provenance=summary.get("provenance") or provenance.read(run_dir))


def cells_from_run_folders(sweep: str, root: Path | None = None) -> list[CellResult]:
    """Every cell with a run folder under ``root/<sweep>/`` (default: the sweep's folder)."""
    base = sweep_folder(paths.check_name(sweep)) if root is None else root / paths.check_name(sweep)
    if not base.is_dir():
        return []
    return [cell_from_run_folder(sweep, d) for d in cell_folders(base)]


def _final_metrics(cell: CellResult, mlflow_uri: str | None) -> Mapping[str, float]:
    """The cell's final metrics: its source's, else its ``summary.json``'s, else its MLflow
    run's (latest ``eval/*`` values)."""
    metrics = cell.final_metrics
    if not metrics and cell.run_dir:
        metrics = summary_final(read_summary(Path(cell.run_dir)))
    if not metrics and cell.mlflow_run_id and mlflow_uri:
        with contextlib.suppress(Exception):  # a run deleted from the store: they stay missing
            # Through the Tracker: a store still being created by a first submit is waited for.
            run = Tracker(mlflow_uri).client.get_run(cell.mlflow_run_id)
            metrics = {from_mlflow_name(k): float(v) for k, v in run.data.metrics.items()
                       if k.startswith(FINAL_METRIC_PREFIX)}
    return metrics


def results(sweep: str, registry_url: str | None = None,
            mlflow_uri: str | None = None) -> pd.DataFrame:
    """The results frame of ``sweep`` (:mod:`orchestrator.analysis.frame`) from its sources
    (module docstring); ``UserInputError`` when none knows the sweep."""
    return frame_from_results(sweep_cells(sweep, registry_url, mlflow_uri))


def sweep_cells(sweep: str, registry_url: str | None = None,
                mlflow_uri: str | None = None) -> list[CellResult]:
    """The cells of ``sweep`` (what :func:`results` puts in its frame, settings included)."""
    paths.check_name(sweep)  # a name like ../x must not reach run folders
    url = paths.registry_url(registry_url)
    found = registry_sweep(sweep, url)
    cells = cells_from_run_folders(sweep) if found is None else found[1]
    if not cells:
        raise UserInputError(f"no results for sweep '{sweep}'", [Problem(
            "sweep", "not in the registry and no run folders", found=repr(sweep),
            allowed=f"a sweep in {display_url(url)} or its folder {sweep_folder(sweep)}",
            fix="check the name with `kappa status`, or set KAPPA_HOME / --registry")])
    uri = paths.readable_mlflow_uri(mlflow_uri)
    return [replace(c, final_metrics=_final_metrics(c, uri)) for c in cells]
