"""Seeds on demand in a running sweep (docs/spec.md#seeds-on-demand): the scheduler hook
that adds a comparison row's next seed once the rule wants it.

Every pass in which a cell ended or was added, :class:`SeedsHook` asks
:func:`~orchestrator.analysis.seed_live.seed_state` (the rule of ``kappa seed-check``)
which rows want their next seed, and records those cells as a submit would: each a copy of
its row's first seed's cell with the seed changed, validated and its demand judged here.
The decision is a pure function of the registry and a cell's id is its content, so a
scheduler killed anywhere is followed by one that adds exactly the cells still missing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.errors import UserInputError
from orchestrator.grid.identity import Cell, content_id
from orchestrator.grid.plan import SweepPlan
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.scheduler.hooks import SchedulerHook
from orchestrator.spec.search_block import with_values
from orchestrator.spec.seeds_block import SEED_AXIS

if TYPE_CHECKING:
    from orchestrator.backends import Backend

LOG = logging.getLogger(__name__)


@dataclass
class SeedsHook(SchedulerHook):
    """The sweep's ``seeds:`` block as a hook of the loop (module docstring)."""

    sweep: str
    plan: SweepPlan
    backend: Backend
    #: Records new cells as a submit does (the sweep's handle's ``record_cells``).
    record_cells: Callable[[Registry, Sequence[Cell], Mapping[str, Any], int],
                           list[CellRecord]]
    _seen: dict[CellState, int] | None = field(default=None, init=False)
    _told: bool = field(default=False, init=False)

    def on_pass(self, registry: Registry) -> None:
        """Add the next seed of every row that wants one (module docstring)."""
        from orchestrator.analysis.seed_live import seed_state

        counts, seeds = registry.counts(self.sweep), self.plan.seeds
        assert seeds is not None
        if counts == self._seen:
            return  # no cell ended, started or was added since the last look
        state = seed_state(registry.cells(self.sweep), seeds)
        if state.metric is None and not self._told and counts[CellState.SUCCEEDED]:
            LOG.warning("sweep %s: no ended cell logged a metric to compare (seeds.metric, "
                        "default eval/*/mean@k): every row gets all %d seeds", self.sweep,
                        seeds.max)
            self._told = True
        new: list[Cell] = []
        demands: dict[str, Any] = {}
        for row in state.rows:
            if row.next_seed is None:
                continue
            for template in row.templates:
                try:
                    cell, demand = seed_cell(self.backend, self.plan, template, row.next_seed)
                except UserInputError as exc:  # the row waits, asked again when a cell ends
                    LOG.error("sweep %s: the %s backend rejects seed %s of cell %s: %s",
                              self.sweep, self.backend.name, row.next_seed, template.cell_id,
                              exc.render())
                    continue
                new.append(cell)
                demands[cell.cell_id] = demand
            LOG.info("sweep %s: %s gets seed %s (%d cells)", self.sweep, row.row or "the sweep",
                     row.next_seed, len(row.templates))
        if new:
            self.record_cells(registry, new, demands, self.plan.retries)
        self._seen = registry.counts(self.sweep)


def seed_cell(backend: Backend, plan: SweepPlan, template: CellRecord | Cell,
              seed: int) -> tuple[Cell, Any]:
    """``template`` (a cell of its row's first seed) at ``seed``, validated by
    ``backend``, and its demand: the cell the rule adds (``UserInputError``: rejected)."""
    assert plan.seeds is not None
    validated = backend.validate(with_values(template.settings, {SEED_AXIS: seed}))
    resolved = validated.model_dump(mode="json")  # stored as its id hashes it
    labels = dict(template.labels)
    # Grid indices stay unique: seed number k of the grid's cell i is k × cells + i.
    index = plan.seeds.seed_values().index(seed) * plan.cell_count + template.index
    cell = Cell(index, content_id(backend.name, resolved, labels),
                {**template.axes, SEED_AXIS: seed}, labels, resolved)
    return cell, backend.demand(validated).to_json()


def reachable_ids(backend: Backend, plan: SweepPlan, cells: Sequence[Cell]) -> set[str]:
    """The ids of every cell the spec can have: its grid ``cells`` and, with a ``seeds:``
    block, each of their rows at each seed up to ``max`` (what a stale check of the spec
    must cover, as the rule may have added any of them)."""
    ids = {c.cell_id for c in cells}
    if plan.seeds is None:
        return ids
    values = plan.seeds.seed_values()
    for template in (c for c in cells if c.axes.get(SEED_AXIS) == values[0]):
        for seed in values[plan.seeds.start:]:
            try:
                ids.add(seed_cell(backend, plan, template, seed)[0].cell_id)
            except UserInputError:
                continue  # never added by the rule either
    return ids
