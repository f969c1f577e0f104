"""A sweep's plan: :func:`load_plan` reads a spec file once, checks it (the spec's and its cells'
problems in one report), expands the grid and prices it (a :class:`Plan`). A submit stores its
:class:`SweepPlan` beside the spec's text; every later step reads that (:func:`stored_plan`), never
the YAML again, and one that cannot be read is an error naming the sweep and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.backends.base import Demand
from orchestrator.errors import Problem, UserInputError
from orchestrator.grid.expand import Grid, expand
from orchestrator.grid.identity import Cell
from orchestrator.spec.loader import SpecReading, read_spec
from orchestrator.spec.model import JsonScalarValue, Resources, Spec
from orchestrator.spec.search_block import SearchSpec
from orchestrator.spec.seeds_block import SeedsSpec
from orchestrator.spec.stop_block import StopRules
from orchestrator.spec.yaml_limits import read_yaml_file


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StudyCell(_Frozen):
    """Where one study of a search starts: a grid cell, and the most steps a trial runs."""

    index: int
    cell_id: str
    axes: dict[str, JsonScalarValue]
    labels: dict[str, JsonScalarValue]
    settings: dict[str, Any]
    max_steps: int | None = None

    def cell(self) -> Cell:
        """As a grid :class:`Cell`."""
        return Cell(self.index, self.cell_id, dict(self.axes), dict(self.labels),
                    dict(self.settings))


class SweepPlan(_Frozen):
    """What a sweep runs and how, resolved at submit. ``axes`` and ``labels`` are the results'
    columns; ``cell_count`` the grid's cells (a search's studies); ``studies`` a search's
    starting cells in grid order (empty without ``search``)."""

    format: Literal[1] = 1
    name: str
    backend: str
    axes: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    cell_count: int = Field(0, ge=0)
    resources: Resources = Field(default_factory=Resources)
    retries: int = Field(0, ge=0)
    stop: StopRules | None = None
    search: SearchSpec | None = None
    studies: tuple[StudyCell, ...] = ()
    #: Seeds on demand: the grid holds each cell's first ``seeds.start`` seeds.
    seeds: SeedsSpec | None = None
    #: The command-line overrides the spec was submitted with (Hydra grammar), in order;
    #: the stored spec text is the spec as resolved after them.
    overrides: tuple[str, ...] = ()

    @property
    def gpu_hours(self) -> float:
        """cells × gpus × nodes × hours."""
        return self.cell_count * self.resources.gpu_hours

    def to_json(self) -> str:
        """The JSON the registry stores (:func:`stored_plan` reads it back)."""
        return self.model_dump_json(by_alias=True)


def stored_plan(sweep: str, text: str | None) -> SweepPlan:
    """The plan stored for ``sweep``; a missing or unreadable one is a ``UserInputError``
    naming the sweep and the fix, never a default (a lost cap would let a sweep overspend)."""
    fix = (f"submit the sweep's spec again (`kappa submit SPEC`, spec name {sweep}): it "
           "records the plan and keeps the cells that ran")
    if text is None:
        raise UserInputError(f"sweep {sweep} has no stored plan", [Problem(
            "plan", "the sweep was recorded by an older kappa and its spec could not be "
                    "planned when the registry was upgraded", found=sweep, fix=fix)])
    try:
        return SweepPlan.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "plan"
        raise UserInputError(f"the stored plan of sweep {sweep} cannot be read", [Problem(
            "plan", "the plan stored at submit does not validate (written by another kappa "
                    "version, or changed by hand)",
            found=f"{where}: {first['msg']}"[:300], fix=fix)]) from None


@dataclass(frozen=True)
class Plan:
    """Cells of a spec, the resources each needs, and the total cost."""

    grid: Grid

    @property
    def spec(self) -> Spec:
        """The spec planned."""
        return self.grid.spec

    @property
    def cells(self) -> tuple[Cell, ...]:
        """The cells, in grid order."""
        return self.grid.cells

    @property
    def count(self) -> int:
        """Number of cells."""
        return len(self.grid.cells)

    @property
    def resources(self) -> Resources:
        """What one cell needs."""
        return self.grid.spec.resources

    @property
    def gpu_hours(self) -> float:
        """count × gpus × nodes × hours."""
        return self.count * self.resources.gpu_hours

    def sweep_plan(self) -> SweepPlan:
        """What the registry stores for the sweep (see :class:`SweepPlan`)."""
        spec = self.spec
        studies = () if spec.search is None else tuple(
            _study(spec, c, self.grid.demands.get(c.cell_id)) for c in self.cells)
        return SweepPlan(
            name=spec.name, backend=spec.backend, axes=spec.axis_names,
            labels=self.grid.label_names, cell_count=self.count, resources=spec.resources,
            retries=spec.retries, stop=spec.stop, search=spec.search, studies=studies,
            seeds=spec.seeds)

    @property
    def max_count(self) -> int:
        """The most cells the sweep can have: with a ``seeds:`` block, every cell at
        ``seeds.max`` seeds (the grid holds ``seeds.start``); else :attr:`count`."""
        seeds = self.spec.seeds
        return self.count if seeds is None else self.count // seeds.start * seeds.max

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able description (what ``kappa plan --json`` prints)."""
        spec = self.spec
        shown = {"name": spec.name, "backend": spec.backend, "axes": list(spec.axis_names),
                 "labels": list(self.grid.label_names), "count": self.count,
                 "resources": self.resources.model_dump(mode="json"), "retries": spec.retries,
                 "gpu_hours": self.gpu_hours, "cells": [c._asdict() for c in self.cells]}
        if spec.seeds is not None:
            shown["seeds"] = {**spec.seeds.model_dump(mode="json"),
                              "seed_values": list(spec.seeds.seed_values()),
                              "max_count": self.max_count,
                              "max_gpu_hours": self.max_count * self.resources.gpu_hours}
        return shown


def _study(spec: Spec, cell: Cell, demand: Demand | None) -> StudyCell:
    """A study's starting cell, with the most training steps a trial can run: the base
    settings' (``Backend.max_steps``), or the top of a searched ``max_steps``. Without the
    cell's ``demand`` (judged at submit) the cell is validated here."""
    from orchestrator.backends import get_backend

    assert spec.search is not None
    steps: int | None
    if demand is not None:
        steps = demand.steps or None  # Demand.steps is max_steps, 0 when unknown
    else:
        backend = get_backend(spec.backend)
        try:
            steps = backend.max_steps(backend.validate(cell.settings))
        except UserInputError:
            steps = None
    for name, dist in spec.search.space.items():
        if name.split(".")[-1] in ("max_steps", "total_training_steps"):
            tops = [v for v in dist.corners() if isinstance(v, int | float)]
            steps = int(max(tops)) if tops else steps
    return StudyCell(index=cell.index, cell_id=cell.cell_id, axes=cell.axes,
                     labels=cell.labels, settings=cell.settings, max_steps=steps)


def plan(spec: Spec, preflight: bool = True, judge: bool = False, models: bool = False) -> Plan:
    """Expand ``spec`` (:func:`orchestrator.grid.expand`) and price it."""
    return Plan(grid=expand(spec, preflight, judge, models))


def checked(reading: SpecReading) -> Spec:
    """The spec of ``reading``, or a ``UserInputError`` with its problems and, where the
    axes allow, the cells' problems too."""
    from orchestrator.backends import get_backend
    from orchestrator.grid.validation import base_problems

    spec, problems = reading.spec, list(reading.problems)
    if not problems:
        return spec
    if reading.axes_sound:
        # Expand the axes (without broken selections) so the cells' settings problems are
        # reported in the same run.
        axes_only = spec if reading.selections_sound else spec.model_copy(
            update={"exclude": (), "include": ()})
        try:
            expand(axes_only)
        except UserInputError as exc:
            problems += exc.problems
    else:
        # The axes cannot be expanded: still report what base alone gets wrong.
        problems += base_problems(spec, get_backend(spec.backend))
    raise UserInputError(f"{spec.filename}: invalid spec", problems)


def parse_plan(text: str, filename: str = "<spec>", path: Path | None = None,
               preflight: bool = True, judge: bool = False, models: bool = False) -> Plan:
    """Check a spec's YAML text and every cell; its plan, or every problem at once."""
    return plan(checked(read_spec(text, filename, path)), preflight, judge, models)


def load_plan(path: str | Path, judge: bool = False, models: bool = False) -> Plan:
    """The plan of the spec file at ``path``, read once (see :func:`parse_plan`)."""
    file = Path(path)
    return parse_plan(read_yaml_file(file, "spec"), str(file), file, judge=judge, models=models)
