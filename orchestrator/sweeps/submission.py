"""Submitting a spec: validate everything first, then record the sweep in one go.

:func:`prepare` validates the spec and every cell and judges each cell's
:class:`~orchestrator.backends.base.Demand` (stored with it: the scheduler validates
nothing); it writes nothing, so a bad spec fails (exit 2) without a trace. Only then does
:func:`record` write the MLflow experiment and parent run, the sweep row (one per spec
name), the new cells and their run folders; a brand-new sweep whose recording fails midway
is removed again. A resubmit queues ``failed`` and ``cancelled`` cells again, ``succeeded``
ones with ``rerun=True``, or (``rerun_stale=True``) those other numerics made
(:mod:`.staleness`); a rerun starts afresh, its old run folder kept as
``<cell id>.prev-<n>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from orchestrator.backends import Backend, get_backend
from orchestrator.backends.base import Demand
from orchestrator.errors import UserInputError
from orchestrator.grid.plan import SweepPlan
from orchestrator.redact import redact
from orchestrator.registry import CellState, Registry
from orchestrator.registry.sweeps import sweep_record_lock
from orchestrator.runs.folder import start_over, write_cell_file
from orchestrator.runs.layout import run_folder
from orchestrator.spec.model import Spec
from orchestrator.spec.notify_block import shareable
from orchestrator.spec.overrides import command_line
from orchestrator.sweeps.seed_hook import reachable_ids
from orchestrator.sweeps.spec_plan import load_plan_with
from orchestrator.sweeps.staleness import StaleCells, stale_cells
from orchestrator.sweeps.sweep import Sweep

#: The MLflow parent run's tag holding the overrides (shell-quoted, as typed).
OVERRIDES_TAG = "kappa.overrides"
MAX_TAG_CHARS = 5000  # MLflow's limit on a tag value


@dataclass(frozen=True)
class PreparedSweep:
    """A spec, its validated cells, what the scheduler needs of each (by cell id) and
    its plan, ready to record."""

    spec: Spec
    backend: Backend
    cells: tuple[Any, ...]  # orchestrator.grid.Cell, its settings resolved (Grid.resolved)
    plan: SweepPlan
    demands: Mapping[str, Demand] = field(default_factory=dict)
    #: Each cell's validated settings, by cell id (``prepare(..., models=True)``: what
    #: its canary starts from, :func:`orchestrator.sweeps.canary.plan_canaries`).
    models: Mapping[str, BaseModel] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The sweep's name (the spec's)."""
        return self.spec.name

    def require_search(self) -> None:
        """Refuse (exit 2) a spec without a ``search:`` block, for ``kappa search``."""
        if self.spec.search is None:
            raise UserInputError(f"{self.spec.filename}: no search: block", [self.spec.problem(
                [], "`kappa search` runs a spec's search: block, and this spec has none",
                fix="add search: {space: ..., objective: ..., trials: N} "
                    "(docs/spec.md#search), or run the grid with `kappa submit`")])


@dataclass(frozen=True)
class SubmitResult:
    """What a submit did."""

    sweep: str
    total_cells: int
    new_cells: int
    requeued_cells: int
    experiment_id: str
    parent_run_id: str
    #: Its finished cells that other numerics made than the installed ones (found before
    #: any requeue; run again with ``rerun_stale``, kept otherwise).
    stale: StaleCells


def prepare(spec_path: str | Path, models: bool = False,
            overrides: Sequence[str] = ()) -> PreparedSweep:
    """Read ``spec_path`` once, apply the command-line ``overrides``, validate it and every
    cell (preflighted as one batch) and make its plan, which keeps the overrides (so
    everything later shows what ran); write nothing. ``models``: keep each cell's validated
    settings (``PreparedSweep.models``, what its canary starts from)."""
    # Each cell validated once, its demand judged (and its model kept if asked).
    planned = load_plan_with(spec_path, overrides, judge=True, models=models)
    spec = planned.spec  # a name kappa reserves for its own sweeps was refused there
    backend = get_backend(spec.backend)
    # A search's grid cells are its studies' starting points; its cells are the trials,
    # added by the scheduler as Optuna asks for them (orchestrator.search.hook). A cell is
    # stored, and launched, with the resolved settings its id hashes: a job run by a later
    # kappa must not fill in that kappa's defaults.
    resolved = planned.grid.resolved
    cells = () if spec.search is not None else tuple(
        c._replace(settings=resolved[c.cell_id]) for c in planned.cells)
    demands = {c.cell_id: planned.grid.demands[c.cell_id] for c in cells}
    sweep_plan = planned.sweep_plan()
    if overrides:
        sweep_plan = sweep_plan.model_copy(update={"overrides": tuple(overrides)})
    return PreparedSweep(spec=spec, backend=backend, cells=cells, plan=sweep_plan,
                         demands=demands, models=planned.grid.models)


def record(
    prepared: PreparedSweep,
    registry: Registry,
    tracker: Any,  # orchestrator.tracking.Tracker
    rerun: bool = False,
    rerun_stale: bool = False,
) -> SubmitResult:
    """Write the validated sweep and requeue what runs again (module docstring), one
    process at a time per sweep: a concurrent submit of the same spec waits, then adds
    only what is new; a submit failing midway removes only what it created itself."""
    with sweep_record_lock(registry.engine, prepared.name):
        return _record(prepared, registry, tracker, rerun, rerun_stale)


def _record(prepared: PreparedSweep, registry: Registry, tracker: Any,
            rerun: bool, rerun_stale: bool) -> SubmitResult:
    spec = prepared.spec
    known = registry.find_sweep(spec.name)
    is_new = known is None
    # A literal webhook URL is a secret: stored and shown masked (notify.json has it).
    spec_text, shown = shareable(spec.source_text, prepared.plan.overrides, spec.notify)
    plan = prepared.plan.model_copy(update={"overrides": shown})
    # The rule of a seeds: block may have added cells beyond the grid: they are the spec's.
    reachable = reachable_ids(prepared.backend, prepared.plan, prepared.cells)
    stale = stale_cells(registry, spec.name, reachable,
                        prepared.backend.numerics()) if not is_new else None
    if (known is not None and known.mlflow_experiment_id and known.mlflow_parent_run_id
            and known.spec_text == spec_text and known.plan == plan.to_json()
            and not _anything_to_run(prepared, registry, rerun,
                                     stale.cell_ids if stale and rerun_stale else ())):
        # Its parent run already holds this spec and these tags, and no cell runs: MLflow
        # (seconds to import and open) has nothing to learn.
        experiment_id, parent_run_id = known.mlflow_experiment_id, known.mlflow_parent_run_id
        run_is_new = False
    else:
        experiment_id = tracker.ensure_experiment(spec.name)
        # Always set: a resubmit without overrides must not show the last one's. A
        # password in a URL is masked, as everywhere kappa shows text.
        overrides = redact(command_line(shown))
        parent_run_id, run_is_new = tracker.sweep_run(
            experiment_id, spec.name, spec_text,
            tags={"kappa.backend": spec.backend, OVERRIDES_TAG: overrides[:MAX_TAG_CHARS]})
    try:
        registry.upsert_sweep(spec.name, backend=spec.backend, spec_text=spec_text,
                              mlflow_experiment_id=experiment_id,
                              mlflow_parent_run_id=parent_run_id, plan=plan.to_json())
        new = Sweep(registry, spec.name).record_cells(
            prepared.cells, {k: d.to_json() for k, d in prepared.demands.items()},
            max_retries=spec.retries)
    except BaseException:
        if is_new:
            registry.delete_sweep(spec.name)
            if run_is_new:  # a parent run found in MLflow predates this submit: kept
                tracker.delete_sweep_runs(parent_run_id)
        raise
    if stale is None:
        stale = stale_cells(registry, spec.name, reachable, prepared.backend.numerics())
    # Not the cells this call added: one of those already cancelled was cancelled by a
    # `kappa cancel` that ran after they were added, and must stay so.
    requeued = _requeue_finished(registry, spec.name, rerun, {c.cell_id for c in new},
                                 stale.cell_ids if rerun_stale else ())
    return SubmitResult(sweep=spec.name, total_cells=len(prepared.cells), new_cells=len(new),
                        requeued_cells=requeued, experiment_id=experiment_id,
                        parent_run_id=parent_run_id, stale=stale)


def _anything_to_run(prepared: PreparedSweep, registry: Registry, rerun: bool,
                     stale: Sequence[str]) -> bool:
    """Whether recording ``prepared`` would add or requeue a cell (what
    :func:`_requeue_finished` would run again: the same states)."""
    recorded = {cell_id for cell_id, _ in registry.cell_keys(prepared.name)}
    return bool(stale or registry.cell_keys(prepared.name, _run_again(rerun))
                or any(c.cell_id not in recorded for c in prepared.cells))


def _run_again(rerun: bool) -> list[CellState]:
    """The finished states a resubmit runs again: failed, cancelled, succeeded with ``rerun``."""
    return [CellState.FAILED, CellState.CANCELLED, *([CellState.SUCCEEDED] if rerun else [])]


def _requeue_finished(registry: Registry, sweep: str, rerun: bool, added: set[str],
                      stale: Sequence[str]) -> int:
    cells = registry.cells(sweep, _run_again(rerun))
    if stale and not rerun:  # just those: a sweep's succeeded cells may be 100,000
        cells += [c for c in registry.cells_by_id(sweep, stale)
                  if c.state is CellState.SUCCEEDED]
    count = 0
    for cell in cells:
        if cell.cell_id in added:
            continue
        if cell.state is CellState.SUCCEEDED:  # rerun afresh: no old checkpoint resumed
            folder = run_folder(cell)
            start_over(folder, cell.settings)
            write_cell_file(folder, cell.sweep_name, cell, CellState.PENDING.value,
                            cell.mlflow_run_id)
        if registry.transition(cell, cell.state, CellState.PENDING):
            # A fresh retry budget: the user asked for this run.
            registry.update_cell(cell, max_retries=cell.max_retries + cell.attempts_count)
            count += 1
    return count
