"""Expand a spec into its grid of cells: order, validation, ids, duplicate check."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from orchestrator import configuration
from orchestrator.backends.base import Demand
from orchestrator.errors import KappaError, Problem, UserInputError
from orchestrator.grid.assignments import AxisValue, assignments, axis_values, cell_bound
from orchestrator.grid.identity import Cell, CellBuilder
from orchestrator.grid.validation import validate_cells
from orchestrator.limits import DEFAULT_MAX_CELLS, INT32_MAX, MAX_PROBLEMS
from orchestrator.spec.model import Spec
from orchestrator.spec.seeds_axis import with_seed_axis


@dataclass(frozen=True)
class Grid:
    """The cells of a spec, in grid order (``cells[i].index == i``)."""

    spec: Spec
    cells: tuple[Cell, ...]
    by_id: dict[str, Cell] = field(repr=False, compare=False)
    #: Each cell's ``Backend.demand``, by cell id; empty unless expanded with ``judge``.
    demands: dict[str, Demand] = field(default_factory=dict, repr=False, compare=False)
    #: Each cell's validated settings, by cell id (a canary starts from them); only with ``models``.
    models: dict[str, BaseModel] = field(default_factory=dict, repr=False, compare=False)
    #: Each cell's resolved settings, by cell id: its validated model's dump, every default
    #: filled in, which its id hashes (what a submit stores and launches); only with ``judge``.
    resolved: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False,
                                                compare=False)

    @property
    def label_names(self) -> tuple[str, ...]:
        """Names of the label axes."""
        return tuple(sorted(self.spec.labels))

    def __len__(self) -> int:
        return len(self.cells)

    def __iter__(self) -> Iterator[Cell]:
        return iter(self.cells)


def expand(spec: Spec, preflight: bool = True, judge: bool = False, models: bool = False) -> Grid:
    """The grid of ``spec`` in its order (docs/spec.md#order-zip-exclude-include), cells named by
    content hash, validated by the backend and preflighted as one batch (unless
    ``preflight=False``); more than ``KAPPA_MAX_CELLS`` cells is refused; ``UserInputError`` with
    every problem. Without ``judge`` each distinct combination is validated once; with it (a submit)
    every cell once, its demand judged and its resolved settings dumped from that model
    (``Grid.demands``, ``Grid.resolved``); ``models`` (implies ``judge``) keeps each cell's model
    too (``Grid.models``)."""
    from orchestrator.backends import get_backend

    backend = get_backend(spec.backend)
    spec = with_seed_axis(spec)  # a seeds: block's first seeds (docs/spec.md#seeds-on-demand)
    table = axis_values(spec)
    _check_size(spec, table)
    order, problems = assignments(spec, table)
    if problems:
        raise UserInputError(f"{spec.filename}: invalid grid", problems)
    builder = CellBuilder(spec, table)
    validated = validate_cells(spec, backend, table, order, builder.settings, preflight)
    for index, valid in validated.items():
        builder.learn(order[index], valid)
    by_id: dict[str, Cell] = {}  # the grid's cells, in order
    demands: dict[str, Demand] = {}
    resolved: dict[str, dict[str, Any]] = {}
    kept: dict[str, BaseModel] = {}
    unsound: list[Problem] = []
    duplicates: dict[tuple[str | int, ...], Problem] = {}  # by the repeated value's origin
    for index, assignment in enumerate(order):
        cell = builder.build(index, assignment)
        if (other := by_id.get(cell.cell_id)) is not None:
            if builder.canonical(assignment) != builder.canonical(order[other.index]):
                raise KappaError(f"cell id collision between cells {other.index} and {index}; "
                                 "please report this")
            pos = next(i for i, (x, y) in enumerate(zip(order[other.index], assignment,
                                                        strict=True)) if x != y)
            origin = table[spec.axis_names[pos]][assignment[pos]].origin
            if origin not in duplicates:  # else the same value, in another combination of the rest
                duplicates[origin] = spec.problem(
                    origin, "duplicate cells: identical settings and labels", location="cells",
                    found=f"[{other.describe()}] and [{cell.describe()}]",
                    fix="remove the repeated value or variant, or add a label axis to tell them "
                        "apart")
            continue
        by_id[cell.cell_id] = cell
        if judge or models:
            model: BaseModel | None = validated.get(index)
            if model is None:  # not a covering cell: validated here, its only time
                try:
                    model = backend.validate(cell.settings)
                except UserInputError as exc:  # the backend's coupled_settings is wrong
                    unsound += [spec.problem(("axes",), f"{p.location}: {p.message}",
                                             location="cells", found=f"[{cell.describe()}]")
                                for p in exc.problems]
                    continue
            demands[cell.cell_id] = backend.demand(model)
            resolved[cell.cell_id] = model.model_dump(mode="json")
            if models:
                kept[cell.cell_id] = model
    if unsound:
        raise UserInputError(f"{spec.filename}: invalid settings", unsound[:MAX_PROBLEMS])
    if duplicates:
        raise UserInputError(f"{spec.filename}: duplicate cells", list(duplicates.values()))
    return Grid(spec=spec, cells=tuple(by_id.values()), by_id=by_id, demands=demands, models=kept,
                resolved=resolved)


def _check_size(spec: Spec, table: dict[str, list[AxisValue]]) -> None:
    """Refuse a grid bigger than the limit before enumerating it (10^7 cells would take
    minutes and gigabytes to be refused later)."""
    limit: int = configuration.read("KAPPA_MAX_CELLS")
    bound, how = cell_bound(spec, table)
    if spec.seeds is not None:  # as many cells as seeds on demand may grow it to
        grown = -(-bound * spec.seeds.max // spec.seeds.start)
        if grown > limit:
            raise UserInputError(f"{spec.filename}: grid too large", [spec.problem(
                ("seeds", "max"), f"at max seeds the grid has up to {_count(grown)} cells, "
                f"more than the limit of {limit:,}", found=f"{how} / {spec.seeds.start} start"
                f" × {spec.seeds.max} max", allowed=f"<= {limit:,} cells",
                fix="lower seeds.max or shorten axes" + (
                    f"; if you mean it, raise the limit: KAPPA_MAX_CELLS={grown} kappa ..."
                    if grown <= INT32_MAX else ""))])
    if bound <= limit:
        return
    raise UserInputError(f"{spec.filename}: grid too large", [spec.problem(
        ("axes",), f"the grid has up to {_count(bound)} cells, more than the limit of {limit:,}",
        found=how, allowed=f"<= {limit:,} cells" + (
            f" (default {DEFAULT_MAX_CELLS:,})" if limit != DEFAULT_MAX_CELLS else ""),
        fix="shorten axes or zip them" + (
            f"; if you mean it, raise the limit: KAPPA_MAX_CELLS={bound} kappa ..."
            if bound <= INT32_MAX else ""))])


def _count(n: int) -> str:
    """``1,234,567``; an astronomic count as a power of ten (Python refuses to print
    integers of more than 4300 digits)."""
    return f"{n:,}" if n < 10**18 else f"about 10^{math.floor(math.log10(n))}"
