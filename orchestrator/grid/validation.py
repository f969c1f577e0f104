"""Validate every cell's settings with the backend, each distinct combination once: a *free* axis
(no cross-field rule reads it, e.g. ``seed``) is valid or not on its own; the others are coupled
(``coupled_settings``, docs/spec.md#fast-validation-for-backend-authors). The first cell of each
coupled combination and of each free value is validated. A problem is reported once, where its
setting is written (``axes.kappa.k200.kl_coef``, ``axes.seed[2]``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from pydantic import BaseModel

from orchestrator.backends.base import Backend
from orchestrator.errors import Problem, UserInputError
from orchestrator.grid.assignments import Assignment, AxisValue
from orchestrator.limits import MAX_PROBLEMS, more_problems
from orchestrator.spec.model import Spec
from orchestrator.spec.settings_paths import (
    LeafIndex,
    LeafPath,
    did_you_mean,
    flatten,
    overlaps,
    settings_paths,
    undot,
)


def coupled_axes(spec: Spec, table: Mapping[str, Sequence[AxisValue]],
                 coupled: frozenset[str] | None) -> list[int]:
    """Positions of the axes whose combinations must be validated together."""
    keys = [set().union(*(v.top_keys for v in table[a])) for a in spec.axes]
    return [i for i, mine in enumerate(keys) if coupled is None or mine & coupled
            or any(mine & other for j, other in enumerate(keys) if j != i)]


def cells_to_validate(cells: Sequence[Assignment], coupled_pos: Sequence[int],
                      n_axes: int) -> list[int]:
    """Indices of the cells that cover every combination that matters: the first cell of
    each combination of coupled values, and the first holding each free axis value."""
    backwards = range(len(cells) - 1, -1, -1)

    def first_of(keys: Iterable[Any]) -> Iterable[int]:
        # Later (smaller) indices overwrite earlier ones: each key keeps its first cell.
        return dict(zip(reversed(list(keys)), backwards, strict=True)).values()

    projection = itemgetter(*coupled_pos) if coupled_pos else (lambda cell: ())
    chosen = set(first_of(map(projection, cells)))
    for p in range(n_axes):
        if p not in coupled_pos:
            chosen.update(first_of(map(itemgetter(p), cells)))
    return sorted(chosen)


class _Collector:
    """Attributes backend problems to their origin in the spec and deduplicates them."""

    def __init__(self, spec: Spec, model: type[BaseModel]) -> None:
        self.spec = spec
        self.known = settings_paths(model)
        self.base_leaves = LeafIndex.of(flatten(spec.base))
        self.variant_leaves: dict[str, LeafIndex[LeafPath]] = {}  # by axis, filled on demand
        self.problems: dict[tuple[str, str, str | None], Problem] = {}
        # Cross-field problems: message -> failing cells. Their "found" is the whole
        # input mapping, different in every cell, so it is left out.
        self.cross: dict[str, list[Assignment]] = {}

    def _fix(self, parts: LeafPath, problem: Problem) -> tuple[str | None, str | None]:
        if problem.message != "unknown setting":
            return problem.allowed, problem.fix
        siblings = [p.split(".")[-1] for p in self.known if tuple(p.split(".")[:-1]) == parts[:-1]]
        allowed = f"a setting of the {self.spec.backend} backend (see `kappa schema`)"
        # `d_model` at the top level is `model.d_model`: a nested setting at the wrong depth.
        elsewhere = sorted(p for p in self.known if p.split(".")[-1] == parts[-1])
        fix = f"did you mean '{elsewhere[0]}'?" if elsewhere else did_you_mean(parts[-1], siblings)
        return (problem.allowed or allowed, problem.fix or fix)

    def add(self, problem: Problem, records: Sequence[AxisValue], cell: Assignment) -> None:
        parts: LeafPath = tuple(problem.location.split(".")) if problem.location else ()
        owner = {leaf: record for record in records for leaf in record.overrides}
        overlapping = {*self.base_leaves.overlapping(parts),
                       *(leaf for leaf in owner if overlaps(leaf, parts))}
        # Who sets the settings that overlap the problem's: a cell's axis value, else base.
        origins = {id(owner.get(leaf)): owner.get(leaf) for leaf in overlapping}
        if len(origins) > 1 or not parts:
            self.cross.setdefault(problem.message, []).append(cell)
            return
        allowed, fix = self._fix(parts, problem)
        path: tuple[str | int, ...] = ("base", *parts)
        location = "base." + problem.location
        message = problem.message
        if not origins:
            fix = fix or "set it in base or in an axis"
            if (lacking := self._variant_lacking(parts, records)) is not None:
                # Other variants of this axis set it: the one this cell takes forgot to.
                location, path = lacking.describe(()), lacking.origin
                message = f"{'.'.join(parts)}: {message}"
                fix = f"set {'.'.join(parts)} in this variant too (other variants set it)"
        else:
            origin = next(iter(origins.values()))
            if origin is not None:  # located where the value is written in the spec
                location = origin.describe(parts)
                path = (*origin.origin, *parts) if origin.is_variant else origin.origin
        key = (location, message, problem.found)
        if key not in self.problems:
            self.problems[key] = self.spec.problem(path, message, location=location,
                                                   found=problem.found, allowed=allowed, fix=fix)

    def _variant_lacking(self, parts: LeafPath, records: Sequence[AxisValue]) -> AxisValue | None:
        """The cell's variant whose axis sets ``parts`` in other variants, if any."""
        for record in records:
            variants = self.spec.axes.get(record.axis)
            if not record.is_variant or not isinstance(variants, dict):
                continue
            leaves = self.variant_leaves.get(record.axis)
            if leaves is None:
                every = {leaf for settings in variants.values() for leaf in flatten(settings)}
                leaves = self.variant_leaves[record.axis] = LeafIndex.of(every)
            if leaves.overlapping(parts):
                return record
        return None

    def cross_problems(self, table: Mapping[str, Sequence[AxisValue]],
                       positions: Sequence[int], checked: int) -> list[Problem]:
        """One problem per cross-field message, placed at what its failing cells share."""
        names = list(self.spec.axes)
        out = []
        for message, cells in self.cross.items():
            pinned = [table[names[p]][cells[0][p]] for p in positions
                      if len({cell[p] for cell in cells}) == 1]
            if len(cells) == checked:
                out.append(self.spec.problem(("base",), message, location="base"))
            elif not pinned:
                example = ", ".join(f"{names[p]}={table[names[p]][cells[0][p]].value}"
                                    for p in positions)
                out.append(self.spec.problem(("axes",), f"{message} (e.g. in cell {example})",
                                             location="cells"))
            else:
                first = pinned[0]
                location = first.describe(()) if len(pinned) == 1 else (
                    "cells with " + ", ".join(f"{v.axis}={v.value}" for v in pinned))
                out.append(self.spec.problem(first.origin, message, location=location,
                                             fix="exclude these cells, or change the values"))
        return out


def validate_cells(spec: Spec, backend: Backend, table: Mapping[str, Sequence[AxisValue]],
                   cells: Sequence[Assignment], settings_of: Callable[[Assignment], dict[str, Any]],
                   preflight: bool = True) -> dict[int, BaseModel]:
    """Validate the cells that cover every combination, then preflight them as one batch
    (:meth:`Backend.preflight`, unless ``preflight=False``); raise with all problems at
    once. ``settings_of`` gives a cell's settings (what its config.yaml gets). The validated
    models, by their cell's index in ``cells``."""
    names = list(spec.axes)
    coupled_pos = coupled_axes(spec, table, getattr(backend, "coupled_settings", None))
    chosen = cells_to_validate(cells, coupled_pos, len(names))
    collector = _Collector(spec, backend.settings_model)
    checked = 0
    valid: dict[int, BaseModel] = {}

    def add(exc: UserInputError, cell: Assignment) -> None:
        records = [table[names[i]][k] for i, k in enumerate(cell)]
        for problem in (exc.problems or (Problem("", exc.summary),))[:MAX_PROBLEMS]:
            collector.add(problem, records, cell)

    for index in chosen:
        if len(collector.problems) + len(collector.cross) >= MAX_PROBLEMS:
            break  # enough to act on; validating 10^5 broken cells would take minutes
        checked += 1
        cell = cells[index]
        try:
            model = backend.validate(settings_of(cell))
        except UserInputError as exc:
            add(exc, cell)
            continue
        valid[index] = model
    try:
        if preflight:
            backend.preflight({str(n): model for n, model in enumerate(valid.values())})
    except UserInputError:
        # The batch failed: ask cell by cell (answers are cached) to place each problem.
        for index, model in valid.items():
            try:
                backend.preflight({"": model})
            except UserInputError as exc:
                add(exc, cells[index])
    problems = list(collector.problems.values())[:MAX_PROBLEMS]
    problems += collector.cross_problems(table, coupled_pos, checked)
    if checked < len(chosen) or len(collector.problems) > MAX_PROBLEMS:
        problems.append(more_problems())
    if problems:
        raise UserInputError(f"{spec.filename}: invalid settings", problems)
    return valid


def base_problems(spec: Spec, backend: Backend) -> list[Problem]:
    """Problems of ``base``'s own values when the axes are too broken to expand: not of a
    setting an axis sets, a missing setting (an axis may give it) or a cross-field rule."""
    from orchestrator.backends.validation import validate_model
    from orchestrator.spec.references import axis_leaf_paths

    axis_leaves = {leaf for axis in spec.axes for leaf in axis_leaf_paths(spec, axis)}
    collector = _Collector(spec, backend.settings_model)
    try:
        validate_model(backend.settings_model, undot(spec.base), what="base")
    except UserInputError as exc:
        for problem in exc.problems:
            parts = tuple(problem.location.split(".")) if problem.location else ()
            if parts and problem.message != "Field required" \
                    and not any(overlaps(parts, leaf) for leaf in axis_leaves):
                collector.add(problem, (), ())
    return list(collector.problems.values())
