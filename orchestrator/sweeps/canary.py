"""Canary runs: every distinct cell configuration, a few steps long, before the grid.

A spec that validates can still die at its first step, after hours in a queue (a reward
function that raises, a plug-in missing from the Ray workers, an unwritable folder). A
short real run of each cell's :meth:`~orchestrator.backends.base.Backend.canary_settings`,
on the executor the grid will use, sees those.

Cells that differ only in the backend's ``canary_free_settings`` (``seed``), or whose
canaries come out equal, share one canary: the first of them in grid order. A search's
canaries are its studies' starting cells (the canary sweep runs no search). The canaries
are a sweep of their own, ``<name>.canary``, with no retries and runs tagged
``kappa.canary=true``; content-addressed like cells, one that passed is not run again
unless ``rerun``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.backends.base import Demand
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors import Executor
from orchestrator.grid import Cell, canonical_json, content_id
from orchestrator.paths import canary_sweep
from orchestrator.registry import CellRecord, CellState
from orchestrator.runs.folder import LOG_FILE
from orchestrator.runs.layout import run_folder
from orchestrator.scheduler.cell_runs import log_tail
from orchestrator.scheduler.options import SchedulerOptions
from orchestrator.scheduler.order import check_fit
from orchestrator.sweeps.driver import resume
from orchestrator.sweeps.executor_choice import (
    ExecutorChoice,
    choose_executor,
    remember_executor,
)
from orchestrator.sweeps.stores import Stores
from orchestrator.sweeps.submission import PreparedSweep, record


@dataclass(frozen=True)
class Canary:
    """One canary: its cell (of the canary sweep), the grid cells it vouches for and
    what it changes (setting -> (the grid cell's value, the canary's), defaults included)."""

    cell: Cell
    stands_for: tuple[Cell, ...]
    changes: dict[str, tuple[Any, Any]]


@dataclass(frozen=True)
class CanaryPlan:
    """The canaries of a prepared grid, and each one's demand (by canary cell id, from
    its one validation)."""

    grid: PreparedSweep
    canaries: tuple[Canary, ...]
    demands: Mapping[str, Demand] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The canary sweep's name."""
        return canary_sweep(self.grid.name)

    @property
    def free_settings(self) -> frozenset[str]:
        """Settings in which cells may differ and still share a canary."""
        return self.grid.backend.canary_free_settings

    @property
    def is_search(self) -> bool:
        """Whether the canaries stand for a search's studies (module docstring)."""
        return self.grid.spec.search is not None

    def sweep(self) -> PreparedSweep:
        """The canaries as a sweep to record: the grid's spec renamed, no retries, no
        search and no seeds on demand (a canary runs its one cell)."""
        spec = self.grid.spec.model_copy(update={"name": self.name, "retries": 0,
                                                 "search": None, "seeds": None})
        plan = self.grid.plan.model_copy(update={"name": self.name, "retries": 0,
                                                 "search": None, "studies": (), "seeds": None})
        cells = tuple(c.cell for c in self.canaries)
        return PreparedSweep(spec=spec, backend=self.grid.backend, cells=cells, plan=plan,
                             demands={c.cell_id: self.demands[c.cell_id] for c in cells})


def _without(settings: dict[str, Any], free: frozenset[str]) -> str:
    return canonical_json({k: v for k, v in settings.items() if k not in free})


def canaried_cells(grid: PreparedSweep) -> tuple[Cell, ...]:
    """The cells canaries stand for: the grid's, or a search's studies' starting cells."""
    if grid.spec.search is not None:
        return tuple(study.cell() for study in grid.plan.studies)
    return tuple(grid.cells)


def plan_canaries(grid: PreparedSweep) -> CanaryPlan:
    """One canary per distinct configuration of ``grid``'s cells (prepared with
    ``models=True``); writes nothing. ``UserInputError`` (every problem, located at the
    cell a canary stands for) if the backend rejects a canary's settings."""
    backend = grid.backend
    free = backend.canary_free_settings
    groups: dict[str, list[Cell]] = {}
    for cell in canaried_cells(grid):
        groups.setdefault(_without(cell.settings, free), []).append(cell)
    found: dict[str, tuple[Cell, list[Cell], dict[str, tuple[Any, Any]]]] = {}
    demands: dict[str, Demand] = {}
    problems: list[Problem] = []
    validated: dict[str, Any] = {}  # where -> the canary's validated settings
    for members in groups.values():
        first = members[0]
        model = grid.models[first.cell_id]  # the cell's one validation, at prepare
        settings = backend.canary_settings(first.settings, model)
        where = f"canary of cell {first.cell_id} ({first.describe()})"
        try:
            canary = backend.validate(settings)
        except UserInputError as exc:
            problems += [Problem(f"{where}.{p.location}", p.message, p.found, p.allowed,
                                 p.fix) for p in exc.problems]
            continue
        validated[where] = canary
        dump = canary.model_dump(mode="json")
        key = _without(dump, free)
        if key in found:  # another group's canary came out the same
            found[key][1].extend(members)
            continue
        before = model.model_dump(mode="json")
        changes = {k: (before.get(k), v) for k, v in dump.items() if before.get(k) != v}
        cell = Cell(len(found), content_id(backend.name, dump, first.labels),
                    dict(first.axes), dict(first.labels), dump)
        found[key] = (cell, list(members), changes)
        demands[cell.cell_id] = backend.demand(canary)
    try:  # one batch: the canaries' problems are located by the cell each stands for
        backend.preflight(validated)
    except UserInputError as exc:
        problems += exc.problems
    if problems:
        raise UserInputError(f"{grid.spec.filename}: the backend rejects canary settings "
                             "(a bug of its canary_settings; please report it)", problems)
    canaries = tuple(Canary(cell, tuple(sorted(members, key=lambda c: c.index)), changes)
                     for cell, members, changes in found.values())
    return CanaryPlan(grid, canaries, demands)


@dataclass(frozen=True)
class CanaryResult:
    """How one canary ended."""

    canary: Canary
    record: CellRecord

    @property
    def passed(self) -> bool:
        """Whether the canary's run succeeded."""
        return self.record.state is CellState.SUCCEEDED

    @property
    def log_path(self) -> Path:
        """The canary's training log."""
        return run_folder(self.record) / LOG_FILE

    def tail(self, lines: int = 20) -> str:
        """The end of its log (else the registry's last error)."""
        return log_tail(self.log_path, lines) or (self.record.last_error or "")


@dataclass(frozen=True)
class CanaryOutcome:
    """Every canary's result; ``reused`` of them had passed before and did not run."""

    plan: CanaryPlan
    results: tuple[CanaryResult, ...]
    reused: int

    @property
    def failed(self) -> list[CanaryResult]:
        """The canaries that did not pass, in grid order."""
        return [r for r in self.results if not r.passed]

    @property
    def passed(self) -> bool:
        """Whether every canary passed."""
        return not self.failed


def run_canaries(plan: CanaryPlan, stores: Stores = Stores(), *, rerun: bool = False,
                 max_parallel: int | None = None, options: SchedulerOptions | None = None,
                 executor: Executor | None = None,
                 choice: ExecutorChoice | None = None) -> CanaryOutcome:
    """Record ``plan``'s canary sweep and drive it to the end here. The executor
    (``executor``, else ``choice`` completed as for the grid's sweep) is made and every
    canary checked against it before anything is written."""
    from orchestrator.notify.store import effective, save_config
    from orchestrator.tracking import Tracker

    chosen = None
    if executor is None:
        chosen = choose_executor(plan.grid.name, choice, stores)
        executor = chosen.make(max_parallel)  # an unreachable cluster fails here
    prepared = plan.sweep()
    check_fit(prepared.demands.items(), executor, plan.grid.spec.resources)
    ids = [c.cell.cell_id for c in plan.canaries]
    if not ids:  # nothing to vouch for: nothing recorded, nothing run
        return CanaryOutcome(plan, (), 0)
    notify = effective(plan.grid.spec.notify)  # a failed canary is posted (canary_failed)
    with stores.open_registry() as registry:
        before = {c.cell_id for c in registry.cells(plan.name, [CellState.SUCCEEDED])} \
            if registry.find_sweep(plan.name) is not None else set()
        record(prepared, registry, Tracker(stores.mlflow_uri), rerun=rerun)
        # Cells of the canary sweep that are not this plan's (canaries of a spec since
        # changed, trials an older kappa ran there) would run again, unreported: not here.
        for stale in registry.cells(plan.name, [CellState.PENDING]):
            if stale.cell_id not in ids:
                registry.transition(stale, CellState.PENDING, CellState.CANCELLED)
    save_config(plan.name, notify)
    if chosen is not None:
        remember_executor(plan.name, chosen, stores)
    resume(plan.name, stores, max_parallel=max_parallel, options=options, executor=executor)
    with stores.open_registry() as registry:
        records = {c.cell_id: c for c in registry.cells(plan.name)}
    results = tuple(CanaryResult(c, records[c.cell.cell_id]) for c in plan.canaries)
    reused = 0 if rerun else len(before.intersection(ids))
    return CanaryOutcome(plan, results, reused)


def describe_changes(changes: dict[str, tuple[Any, Any]], limit: int = 6) -> str:
    """``max_steps 100→2, prompts_per_step 32→2`` (the first ``limit`` changes)."""
    parts = [f"{k} {_short(a)}→{_short(b)}" for k, (a, b) in list(changes.items())[:limit]]
    more = len(changes) - limit
    return ", ".join(parts) + (f", … (+{more})" if more > 0 else "") if parts else "(none)"


def _short(value: Any, width: int = 72) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def cells_text(cells: Sequence[Cell], limit: int = 4) -> str:
    """``3 cells: 1a2b3c4d5e6f, …`` for a report line."""
    ids = ", ".join(c.cell_id for c in cells[:limit])
    return f"{len(cells)} cell{'s' if len(cells) != 1 else ''}: {ids}" + (
        ", …" if len(cells) > limit else "")
