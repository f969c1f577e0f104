"""Expand a spec into its grid of cells: order, validation, ids, duplicate check."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from orchestrator.errors import KappaError, UserInputError
from orchestrator.grid.assignments import assignments, axis_values
from orchestrator.grid.cell import Cell
from orchestrator.grid.identity import CellBuilder
from orchestrator.grid.validation import validate_cells
from orchestrator.spec.model import Spec


@dataclass(frozen=True)
class Grid:
    """The cells of a spec, in grid order (``cells[i].index == i``)."""

    spec: Spec
    cells: tuple[Cell, ...]
    by_id: dict[str, Cell] = field(repr=False, compare=False)

    @property
    def axis_names(self) -> tuple[str, ...]:
        """Axis names in spec order (the keys of every ``Cell.axes``)."""
        return self.spec.axis_names

    @property
    def label_names(self) -> tuple[str, ...]:
        """Names of the label axes."""
        return tuple(sorted(self.spec.labels))

    def __len__(self) -> int:
        return len(self.cells)

    def __iter__(self) -> Iterator[Cell]:
        return iter(self.cells)


def expand(spec: Spec) -> Grid:
    """The grid of ``spec``: every cell validated by the backend, named by content hash.

    Order: the product of the axes in spec order, first axis slowest (a zip group sits
    where its first axis is), minus exclusions, then includes not already present.
    Raises ``UserInputError`` with every problem: exclusions that match no cell,
    settings the backend rejects (each reported once, at its origin in the spec), and
    duplicate cells (two assignments with identical settings and labels).
    """
    from orchestrator.backends import get_backend

    backend = get_backend(spec.backend)
    table = axis_values(spec)
    order, problems = assignments(spec, table)
    if problems:
        raise UserInputError(f"{spec.filename}: invalid grid", problems)
    builder = CellBuilder(spec, table)
    validate_cells(spec, backend, table, order, builder.settings, builder.learn)
    cells: list[Cell] = []
    by_id: dict[str, Cell] = {}
    duplicates = []
    reported: set[tuple[str | int, ...]] = set()
    for index, assignment in enumerate(order):
        cell = builder.build(index, assignment)
        other = by_id.get(cell.cell_id)
        if other is not None:
            if builder.canonical(assignment) != builder.canonical(order[other.index]):
                raise KappaError(
                    f"cell id collision between cells {other.index} and {index}; please report this"
                )
            pos = next(
                i
                for i, (x, y) in enumerate(zip(order[other.index], assignment, strict=True))
                if x != y
            )
            record = table[spec.axis_names[pos]][assignment[pos]]
            if record.origin in reported:
                continue  # the same repeated value, in another combination of the rest
            reported.add(record.origin)
            duplicates.append(
                spec.problem(
                    record.origin,
                    "duplicate cells: identical settings and labels",
                    location="cells",
                    found=f"[{other.describe()}] and [{cell.describe()}]",
                    fix="remove the repeated value or variant, or add a label axis to tell "
                    "them apart",
                )
            )
            continue
        by_id[cell.cell_id] = cell
        cells.append(cell)
    if duplicates:
        raise UserInputError(f"{spec.filename}: duplicate cells", duplicates)
    return Grid(spec=spec, cells=tuple(cells), by_id=by_id)
