"""Submitting a spec: validate everything first, then record the sweep in one go.

Order matters. :func:`prepare` loads the spec, resolves the backend and expands (and so
validates) every cell; it writes nothing, so a bad spec fails with a
:class:`~orchestrator.errors.UserInputError` (exit 2) and leaves no trace in the registry,
MLflow or the run folders. Only then does :func:`record` write: the MLflow experiment and
parent run, the sweep row (one per spec name), the cells that are new (resubmitting adds
only new cells), and each new cell's run folder with its ``config.yaml`` and
``cell.json``. If recording a brand-new sweep fails midway, what was created is removed
again.

Cells that ended ``failed`` or ``cancelled`` are queued again by a resubmit; ``succeeded``
cells only with ``rerun=True`` (their old run folder is kept beside the new one as
``<cell id>.prev-<n>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.backends import Backend, get_backend
from orchestrator.errors import UserInputError
from orchestrator.paths import CANARY_SUFFIX, is_canary_sweep, runs_root
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.registry.locks import sweep_record_lock
from orchestrator.scheduler.cell_file import write_cell_file
from orchestrator.spec import Spec, load_spec

CONFIG_NAME = "config.yaml"


@dataclass(frozen=True)
class PreparedSweep:
    """A spec and its validated cells, ready to record."""

    spec: Spec
    backend: Backend
    cells: tuple[Any, ...]  # orchestrator.grid.Cell

    @property
    def name(self) -> str:
        """The sweep's name (the spec's)."""
        return self.spec.name


@dataclass(frozen=True)
class SubmitResult:
    """What a submit did."""

    sweep: str
    total_cells: int
    new_cells: int
    requeued_cells: int
    experiment_id: str
    parent_run_id: str


def prepare(spec_path: str | Path) -> PreparedSweep:
    """Load and validate ``spec_path`` and every one of its cells; write nothing."""
    from orchestrator.grid import expand

    spec = load_spec(spec_path)
    if is_canary_sweep(spec.name):
        raise UserInputError(f"{spec.filename}: reserved sweep name", [spec.problem(
            ["name"], f"names ending in {CANARY_SUFFIX!r} are reserved for canary runs",
            found=repr(spec.name), fix=f"drop the {CANARY_SUFFIX!r} ending")])
    backend = get_backend(spec.backend)
    grid = expand(spec)
    # A search's grid cells are its studies' starting points; its cells are the trials,
    # added by the scheduler as Optuna asks for them (orchestrator.scheduler.search).
    cells = () if spec.search is not None else tuple(grid.cells)
    return PreparedSweep(spec=spec, backend=backend, cells=cells)


def write_run_folder(run_dir: Path, settings: Any) -> None:
    """Create ``run_dir`` with the cell's resolved settings as ``config.yaml``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = run_dir / CONFIG_NAME
    tmp = run_dir / f".{CONFIG_NAME}.tmp"
    tmp.write_text(yaml.safe_dump(dict(settings), sort_keys=False))
    tmp.replace(config)


def _archive_run_folder(run_dir: Path) -> None:
    if not run_dir.exists():
        return
    n = 1
    while (target := run_dir.with_name(f"{run_dir.name}.prev-{n}")).exists():
        n += 1
    run_dir.rename(target)


def record(
    prepared: PreparedSweep,
    registry: Registry,
    tracker: Any,  # orchestrator.tracking.Tracker
    rerun: bool = False,
) -> SubmitResult:
    """Write the validated sweep: MLflow parent run, registry rows, run folders.

    One process at a time per sweep (:func:`sweep_record_lock`): a concurrent submit of
    the same spec waits, then finds the sweep and its parent run recorded and adds only
    what is new; and a submit failing midway removes only what it created itself.
    """
    with sweep_record_lock(registry.engine, prepared.name):
        return _record(prepared, registry, tracker, rerun)


def _record(prepared: PreparedSweep, registry: Registry, tracker: Any,
            rerun: bool) -> SubmitResult:
    spec = prepared.spec
    is_new = registry.find_sweep(spec.name) is None
    experiment_id = tracker.ensure_experiment(spec.name)
    parent_run_id, run_is_new = tracker.sweep_run(
        experiment_id, spec.name, spec.source_text, tags={"kappa.backend": spec.backend})
    try:
        registry.upsert_sweep(spec.name, backend=spec.backend, spec_text=spec.source_text,
                              mlflow_experiment_id=experiment_id,
                              mlflow_parent_run_id=parent_run_id)
        new = registry.add_cells(spec.name, prepared.cells, max_retries=spec.retries)
        root = runs_root() / spec.name
        for cell in new:
            run_dir = root / cell.cell_id
            write_run_folder(run_dir, cell.settings)
            write_cell_file(run_dir, spec.name, cell, CellState.PENDING.value, None)
        # One transaction for all (one per cell took minutes at 100,000 cells); a submit
        # killed before it leaves run_dir unset, which means this same folder.
        registry.set_run_dirs(spec.name, {c.cell_id: str(root / c.cell_id) for c in new})
    except BaseException:
        if is_new:
            registry.delete_sweep(spec.name)
            if run_is_new:  # a parent run found in MLflow predates this submit: kept
                tracker.delete_sweep_runs(parent_run_id)
        raise
    # Not the cells this call added: one of those already cancelled was cancelled by a
    # `kappa cancel` that ran after they were added, and must stay so.
    requeued = _requeue_finished(registry, spec.name, rerun, {c.cell_id for c in new})
    return SubmitResult(sweep=spec.name, total_cells=len(prepared.cells), new_cells=len(new),
                        requeued_cells=requeued, experiment_id=experiment_id,
                        parent_run_id=parent_run_id)


def _requeue_finished(registry: Registry, sweep: str, rerun: bool, added: set[str]) -> int:
    again: list[CellState] = [CellState.FAILED, CellState.CANCELLED]
    if rerun:
        again.append(CellState.SUCCEEDED)
    count = 0
    for cell in registry.cells(sweep, again):
        if cell.cell_id in added:
            continue
        if cell.state is CellState.SUCCEEDED:
            _rerun_in_fresh_folder(cell)
        if registry.transition(cell, cell.state, CellState.PENDING):
            # A fresh retry budget: the user asked for this run.
            registry.update_cell(cell, max_retries=cell.max_retries + cell.attempts_count)
            count += 1
    return count


def _rerun_in_fresh_folder(cell: CellRecord) -> None:
    if not cell.run_dir:
        return
    run_dir = Path(cell.run_dir)
    config = (run_dir / CONFIG_NAME).read_text() if (run_dir / CONFIG_NAME).exists() else None
    _archive_run_folder(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (run_dir / CONFIG_NAME).write_text(config)
    else:
        write_run_folder(run_dir, cell.settings)
    write_cell_file(run_dir, cell.sweep_name, cell, CellState.PENDING.value, cell.mlflow_run_id)
