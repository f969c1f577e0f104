"""Which cells a spec has: the product of its axes, zips, exclusions and includes. A cell is first
an *assignment*: per axis (in spec order) the index of its value in that axis's list of
:class:`AxisValue`, to which includes may append values (``seed: 7``)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import Problem
from orchestrator.spec.model import JsonScalarValue, Spec, scalar_key
from orchestrator.spec.settings_paths import LeafPath, flatten, nest
from orchestrator.spec.yaml_source import dotted

Assignment = tuple[int, ...]


@dataclass(frozen=True)
class AxisValue:
    """One value of one axis: what a cell records, and the settings it sets."""

    axis: str
    value: JsonScalarValue
    overrides: dict[LeafPath, Any]
    origin: tuple[str | int, ...]
    is_variant: bool = False
    is_label: bool = False
    nested: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nested", nest(self.overrides))

    @property
    def top_keys(self) -> frozenset[str]:
        """Top-level settings this value sets."""
        return frozenset(path[0] for path in self.overrides)

    def describe(self, loc: LeafPath) -> str:
        """The dotted location of setting ``loc`` as this value sets it."""
        rest = loc if self.is_variant else loc[len(self.axis.split(".")):]
        return dotted(self.origin) + ("." + ".".join(rest) if rest else "")


def axis_values(spec: Spec) -> dict[str, list[AxisValue]]:
    """Every axis's values in spec order (includes may add more later)."""
    table: dict[str, list[AxisValue]] = {}
    for axis, values in spec.axes.items():
        if isinstance(values, dict):
            table[axis] = [AxisValue(axis, name, flatten(settings), ("axes", axis, name),
                                     is_variant=True) for name, settings in values.items()]
        else:
            is_label = axis in spec.labels
            path = tuple(axis.split("."))
            table[axis] = [AxisValue(axis, v, {} if is_label else {path: v}, ("axes", axis, i),
                                     is_label=is_label) for i, v in enumerate(values)]
    return table


def _dimensions(spec: Spec) -> list[list[int]]:
    """Axis positions varying together, ordered by each group's first axis."""
    names = list(spec.axes)
    grouped = {axis: group for group in spec.zip for axis in group}
    groups = dict.fromkeys(grouped.get(axis, (axis,)) for axis in names)  # each group once
    return [[names.index(a) for a in group] for group in groups]


def cell_bound(spec: Spec, table: dict[str, list[AxisValue]]) -> tuple[int, str]:
    """At most how many cells the grid has, and how that is reckoned, without enumerating:
    the product of the dimensions' lengths (a zip group at its longest axis) plus the
    includes (exclusions apply after the product is enumerated)."""
    names = list(spec.axes)
    factors = [(" & ".join(names[p] for p in dim), max(len(table[names[p]]) for p in dim))
               for dim in _dimensions(spec)]
    bound = math.prod(length for _, length in factors) + len(spec.include)
    shown = [f"{length:,} ({name})" for name, length in factors[:8]]
    if len(factors) > 8:
        shown.append(f"... ({len(factors)} dimensions)")
    how = " × ".join(shown) or "1 (no axes)"
    if spec.include:
        how += f" + {len(spec.include)} included"
    return bound, how


def product(spec: Spec, table: dict[str, list[AxisValue]]) -> Iterator[Assignment]:
    """The crossed (and zipped) assignments, first axis slowest."""
    sizes = [len(table[a]) for a in spec.axes]
    dims = _dimensions(spec)
    if all(len(d) == 1 for d in dims):
        yield from itertools.product(*(range(n) for n in sizes))
        return
    order = [pos for dim in dims for pos in dim]
    perm = [order.index(pos) for pos in range(len(order))]
    options = [[(i,) * len(dim) for i in range(sizes[dim[0]])] for dim in dims]
    for combo in itertools.product(*options):
        flat = tuple(itertools.chain.from_iterable(combo))
        yield tuple(flat[k] for k in perm)


# Per axis, where each value sits in its list, by scalar_key (1 == 1.0).
_Positions = dict[str, dict[tuple[str, JsonScalarValue], list[int]]]


def _exclusion_masks(spec: Spec, table: dict[str, list[AxisValue]],
                     where: _Positions) -> list[list[int]]:
    """Per axis position and value, the bit set of exclusions that value does not contradict:
    a cell matches exclusion ``e`` when bit ``e`` survives the AND of its values' masks, one
    AND per axis per cell (a loop over every exclusion took minutes on 10^5 cells and 10^4
    exclusions). Values no exclusion names share one mask object."""
    names = list(spec.axes)
    position = {axis: p for p, axis in enumerate(names)}
    free = [0] * len(names)  # exclusions that leave the axis free
    named: list[dict[int, int]] = [{} for _ in names]  # value index -> exclusions naming it
    for e, entry in enumerate(spec.exclude):
        bit = 1 << e
        constrained = {position[a] for a in entry}
        for p in range(len(names)):
            if p not in constrained:
                free[p] |= bit
        for axis, value in entry.items():
            p = position[axis]
            for i in where[axis].get(scalar_key(value), []):
                named[p][i] = named[p].get(i, 0) | bit
    masks = []
    for p, axis in enumerate(names):
        row = [free[p]] * len(table[axis])
        for i, bits in named[p].items():
            row[i] = free[p] | bits
        masks.append(row)
    return masks


def assignments(spec: Spec,
                table: dict[str, list[AxisValue]]) -> tuple[list[Assignment], list[Problem]]:
    """The grid's assignments in order, and problems (exclusions matching nothing).
    ``table`` gains the new values includes bring to list axes."""
    names = list(spec.axes)
    where: _Positions = {axis: {} for axis in table}
    for axis, values in table.items():
        for i, v in enumerate(values):
            where[axis].setdefault(scalar_key(v.value), []).append(i)
    matched = 0  # bit e: exclusion e dropped a cell
    cells: list[Assignment] = []
    if spec.exclude:
        masks = _exclusion_masks(spec, table, where)
        every = (1 << len(spec.exclude)) - 1
        for assignment in product(spec, table):
            hit = every
            for p, i in enumerate(assignment):
                hit &= masks[p][i]
                if not hit:
                    break
            if hit:
                matched |= hit
            else:
                cells.append(assignment)
    else:
        cells = list(product(spec, table))
    problems = [spec.problem(("exclude", e), "exclusion matches no cell of the grid",
                             found=repr(dict(spec.exclude[e])),
                             fix="check the values against the axes (and zip groups)")
                for e in range(len(spec.exclude)) if not matched >> e & 1]
    seen = set(cells)
    for e, entry in enumerate(spec.include):
        picks = []
        for axis in names:
            values, key = table[axis], scalar_key(entry[axis])
            if key not in where[axis]:  # a new value of a list axis (variants were checked)
                label = values[0].is_label
                values.append(AxisValue(axis, entry[axis],
                                        {} if label else {tuple(axis.split(".")): entry[axis]},
                                        ("include", e, axis), is_label=label))
                where[axis][key] = [len(values) - 1]
            picks.append(where[axis][key][0])
        assignment = tuple(picks)
        if assignment not in seen:
            seen.add(assignment)
            cells.append(assignment)
    if not cells and not problems:
        problems.append(spec.problem(("axes",), "the spec expands to no cells",
                                     fix="loosen the exclusions"))
    return cells, problems
