"""Seeds on demand as a sweep's cells stand now (docs/spec.md#seeds-on-demand): per
comparison row, the seeds it has, each comparison's look, and the seed to add next.

The pairing and the rule are ``kappa seed-check``'s (:func:`~.seed_check.rows_of`,
:func:`~.seed_check.paired_diffs`, :func:`~orchestrator.stopping.seeds.decide`), so a sweep
that ran the block replays to the decisions it made. A comparison is looked at over the
longest run of its seeds, in order, whose cells have ended (succeeded, or failed with no
retry left): a seed still running hides the ones after it, as the replay would see them
in order. A row gets its next seed once one of its comparisons has ended every seed it has
and wants another (:func:`~orchestrator.stopping.seeds.wants_seed`), up to ``max``; it
gets none while one of its cells is cancelled (a resubmit queues it again), nor once
``start`` of its seeds have a cell that failed for good (failures that repeat are the
settings', not chance: more seeds would fail too, and pay for it). What is
decided is a pure function of the registry's cells, so a restarted scheduler
(:mod:`orchestrator.sweeps.seed_hook`) decides the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator import paths
from orchestrator.analysis.combined import value_text
from orchestrator.analysis.seed_check import (
    SeedCell,
    cell_value,
    metric_glob,
    paired_diffs,
    points_scale,
    rows_of,
    seed_key,
)
from orchestrator.errors import UserInputError
from orchestrator.grid.plan import stored_plan
from orchestrator.registry import CellRecord, CellState, Registry, RegistryMissing
from orchestrator.scheduler.durations import Pace, finished_sample
from orchestrator.spec.model import Resources
from orchestrator.spec.seeds_block import SEED_AXIS, SeedsSpec
from orchestrator.stopping.budget import multiplier, planned_hours
from orchestrator.stopping.seeds import Look, SeedRule, decide, wants_seed


def failed_for_good(cell: CellRecord) -> bool:
    """Failed with no retry left."""
    return cell.state is CellState.FAILED and not cell.retries_left


def ended(cell: CellRecord) -> bool:
    """Succeeded, or failed for good: its value will not change."""
    return cell.state is CellState.SUCCEEDED or failed_for_good(cell)


@dataclass(frozen=True)
class Comparison:
    """One comparison as it stands: its last look (``None``: fewer than ``start`` pairs)."""

    row: str
    value: str
    look: Look | None

    @property
    def decision(self) -> str:
        """The look's decision, or ``waiting`` before the first look."""
        return "waiting" if self.look is None else self.look.decision


@dataclass(frozen=True)
class Row:
    """One comparison row: its seeds (ascending), the seed to add now (``None``: none
    now), the cells of its first seed (what the next seed's cells copy), and whether the
    rule is done with it (no comparison wants a seed more)."""

    row: str
    seeds: tuple[Any, ...]
    next_seed: int | None
    templates: tuple[CellRecord, ...]
    done: bool


@dataclass(frozen=True)
class SeedState:
    """The rule over a sweep's cells: its rows and comparisons, the metric compared and the
    scale of its margin (100: the metric is an accuracy shown in points)."""

    block: SeedsSpec
    metric: str | None
    rule: SeedRule
    scale: float
    rows: tuple[Row, ...]
    comparisons: tuple[Comparison, ...]
    #: Each cell's place: ``(row, value of the compared axis)``, by cell id.
    places: Mapping[str, tuple[str, str]]


def seed_state(cells: Sequence[CellRecord], block: SeedsSpec) -> SeedState:
    """The rule over ``cells`` (module docstring)."""
    glob = metric_glob([c for c in cells if ended(c)], block.metric)
    valued = [SeedCell(c.cell_id, dict(c.axes), cell_value(c, glob), 0.0) for c in cells]
    scale = points_scale(valued)
    # The margin is written as the table shows the metric (points for accuracies).
    rule = SeedRule(block.start, block.max, block.alpha, block.margin / scale, block.spending)
    records = {c.cell_id: c for c in cells}
    base, order = value_text(block.base), block.seed_values()
    rows, comparisons = [], []
    table = rows_of(valued, block.axis, SEED_AXIS)
    places = {c.cell_id: (row, value) for row, by_value in table.items()
              for value, by_seed in by_value.items() for c in by_seed.values()}
    for row, by_value in sorted(table.items()):
        seeds = sorted({s for by_seed in by_value.values() for s in by_seed}, key=seed_key)
        members = [records[c.cell_id] for by_seed in by_value.values() for c in by_seed.values()]
        bases = by_value.get(base, {})
        wants = False
        for value, treated in sorted(by_value.items()):
            if value == base:
                continue
            # The seeds, in order, up to the first whose pair has not ended.
            shown = []
            for seed in seeds:
                pair = [treated.get(seed), bases.get(seed)]
                if not all(c is None or ended(records[c.cell_id]) for c in pair):
                    break
                shown.append(seed)
            diffs = paired_diffs({s: treated[s] for s in shown if s in treated}, bases, rule.max)
            comparisons.append(Comparison(row, value, decide(diffs, rule)))
            wants = wants or (len(shown) == len(seeds) and wants_seed(diffs, rule))
        left = [s for s in order if s not in seeds]
        cancelled = any(c.state is CellState.CANCELLED for c in members)
        failed = {c.axes.get(SEED_AXIS) for c in members if failed_for_good(c)}
        room = len(seeds) < block.max and bool(left) and len(failed) < block.start
        first = [c for c in members if c.axes.get(SEED_AXIS) == seeds[0]] if seeds else []
        rows.append(Row(row, tuple(seeds), left[0] if wants and room and not cancelled else None,
                        tuple(sorted(first, key=lambda c: c.index)),
                        all(map(ended, members)) and not (wants and room)))
    return SeedState(block, glob, rule, scale, tuple(rows), tuple(comparisons), places)


@dataclass(frozen=True)
class SeedsSummary:
    """What ``kappa status`` shows of the rule: its state, and the hours of the fixed design
    (every row at ``max`` seeds, each cell at its planned hours) and of those the seeds the
    rows the rule is done with never needed (``unit``: GPU-hours, or cell-hours)."""

    state: SeedState
    unit: str
    fixed: float
    saved: float

    def lines(self, limit: int = 10) -> list[str]:
        """A headline, then a line per comparison (the first ``limit``)."""
        block, scale = self.state.block, self.state.scale
        head = (f"seeds on demand ({block.axis} vs {value_text(block.base)}, {block.start}.."
                f"{block.max} seeds, {self.state.metric or 'no metric yet'}): {self.unit} "
                f"saved {self.saved:.3g} of the fixed {block.max}-seed design's {self.fixed:.3g}")
        shown = [f"  {c.row or '(all cells)'}, {c.value}: {_decided(c, block.max, scale)}"
                 for c in self.state.comparisons[:limit]]
        more = len(self.state.comparisons) - limit
        return [head, *shown, *([f"  … {more} more (--json lists them)"] if more > 0 else [])]

    def as_json(self) -> dict[str, Any]:
        """For ``kappa status --json``."""
        block = self.state.block
        return {"compare": {block.axis: block.base}, "start": block.start, "max": block.max,
                "metric": self.state.metric, "unit": self.unit,
                "fixed": round(self.fixed, 4), "saved": round(self.saved, 4),
                "rows": [{"row": r.row, "seeds": list(r.seeds), "done": r.done}
                         for r in self.state.rows],
                "comparisons": [{"row": c.row, "value": c.value, "decision": c.decision,
                                 "seeds": None if c.look is None else c.look.n,
                                 "low": None if c.look is None else c.look.low,
                                 "high": None if c.look is None else c.look.high,
                                 "level": None if c.look is None else 1 - c.look.level_alpha}
                                for c in self.state.comparisons]}


def _decided(c: Comparison, top: int, scale: float) -> str:
    """``positive at 4/8 seeds, [+1.20, +5.90] at 99.6%`` (in the table's units)."""
    if c.look is None:
        return "waiting for its first look"
    look = c.look
    return (f"{look.decision} at {look.n}/{top} seeds, [{look.low * scale:+.2f}, "
            f"{look.high * scale:+.2f}] at {1 - look.level_alpha:.1%}")


def seeds_summary(cells: Sequence[CellRecord], block: SeedsSpec,
                  resources: Resources) -> SeedsSummary:
    """The rule over ``cells`` with its hours (see :class:`SeedsSummary`)."""
    state = seed_state(cells, block)
    pace = Pace.of(map(finished_sample, cells))
    fixed = saved = 0.0
    for row in state.rows:
        per_seed = sum(planned_hours(c, pace, resources) for c in row.templates)
        fixed += per_seed * block.max
        if row.done:
            saved += per_seed * max(0, block.max - len(row.seeds))
    return SeedsSummary(state, multiplier(resources)[1], fixed, saved)


def table_notes(sweeps: Sequence[str], registry_url: str | None = None) -> tuple[str, ...]:
    """What a table of ``sweeps`` says of how seeds on demand decided its comparisons (none
    unless its one sweep ran the block: :func:`sweep_seeds`)."""
    if (state := sweep_seeds(sweeps, registry_url)) is None:
        return ()
    block = state.block
    return (f"Seeds on demand ({block.axis} vs {value_text(block.base)}, {block.start} to "
            f"{block.max} seeds, alpha {block.alpha:g}, {block.spending} spending, margin "
            f"{block.margin:g}; metric {state.metric}): each comparison's seeds, decision "
            "and sequential interval, which is wider than the table's fixed-n interval "
            "(each look spends part of alpha):",
            *(f"{c.row or '(all cells)'}, {c.value}: {_decided(c, block.max, state.scale)}."
              for c in state.comparisons))


def sweep_seeds(sweeps: Sequence[str], registry_url: str | None = None) -> SeedState | None:
    """The rule over the one sweep of ``sweeps`` if it ran a ``seeds:`` block (``None``
    for several sweeps, or one without the block, a registry or a readable plan)."""
    if len(sweeps) != 1:
        return None
    try:
        with Registry.open(paths.registry_url(registry_url), create=False) as reg:
            record = reg.find_sweep(sweeps[0])
            if record is None or record.plan is None:
                return None
            seeds = stored_plan(record.name, record.plan).seeds
            return None if seeds is None else seed_state(reg.cells(record.name), seeds)
    except (RegistryMissing, UserInputError):  # no registry, or a plan it cannot read
        return None


def with_seeds(frame: Any, sweeps: Sequence[str], registry_url: str | None = None) -> Any:
    """``frame`` (one row per cell) with ``seeds.decision`` (its comparison's, ``base`` for
    the base value's cells) and ``seeds.used`` (the seeds that decision rests on; a base
    cell: its row's seeds) when its one sweep ran a ``seeds:`` block."""
    state = sweep_seeds(sweeps, registry_url)
    if state is None or "cell_id" not in frame.columns:
        return frame
    looks = {(c.row, c.value): c for c in state.comparisons}
    seeds = {r.row: len(r.seeds) for r in state.rows}
    base = value_text(state.block.base)
    decision, used = [], []
    for cell_id in frame["cell_id"]:
        row, value = state.places.get(cell_id, ("", ""))
        found = looks.get((row, value))
        decision.append("base" if value == base else found and found.decision)
        used.append(seeds.get(row) if value == base else
                    found.look.n if found and found.look else None)
    return frame.assign(**{"seeds.decision": decision, "seeds.used": used})
