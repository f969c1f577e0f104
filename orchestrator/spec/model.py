"""The experiment spec as strict, frozen pydantic models (reference: docs/spec.md): a
backend, the settings every cell shares (``base``), and the axes whose product is the grid.
Cross-references need the backend's settings: :mod:`orchestrator.spec.references`. Editors
validate a spec with :func:`spec_json_schema` (``# yaml-language-server: $schema=...``)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictInt,
    Tag,
    model_validator,
)

from orchestrator.errors import KappaError, Problem
from orchestrator.limits import (
    MAX_AXES,
    MAX_CPUS_PER_NODE,
    MAX_GPUS_PER_CELL,
    MAX_GPUS_PER_NODE,
    MAX_HOURS,
    MAX_NODES,
    MAX_RETRIES,
)
from orchestrator.spec.notify_block import NotifySpec
from orchestrator.spec.search_block import JsonScalar, SearchSpec
from orchestrator.spec.seeds_block import SeedsSpec
from orchestrator.spec.stop_block import AXIS_PATTERN, StopRules
from orchestrator.spec.yaml_source import SourceDocument, dotted

# A value an axis takes and a cell records: what JSON can hold without nesting (validated
# strictly as JsonScalar).
JsonScalarValue = bool | int | float | str | None


def scalar_key(value: JsonScalarValue) -> tuple[str, JsonScalarValue]:
    """A key under which axis values compare: 1 == 1.0, but True != 1 and "1" != 1."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    return ("str" if isinstance(value, str) else "null", value)


AxisName = Annotated[str, Field(pattern=AXIS_PATTERN)]
VariantName = Annotated[str, Field(min_length=1, pattern=r"^[^\s]+$")]

ListAxis = Annotated[list[JsonScalar], Field(min_length=1)]
"""An axis of values: a backend setting (or a declared label) takes each value in turn."""

VariantAxis = Annotated[dict[VariantName, dict[str, Any]], Field(min_length=1)]
"""An axis of named variants: each name bundles settings (dotted keys allowed)."""


def _axis_kind(value: Any) -> str | None:
    return "values" if isinstance(value, list) else "variants" if isinstance(value, dict) else None


Axis = Annotated[
    Annotated[ListAxis, Tag("values")] | Annotated[VariantAxis, Tag("variants")],
    Discriminator(
        _axis_kind, custom_error_type="axis_kind",
        custom_error_message="an axis is a list of values or a mapping of named variants"),
]

# Union tags pydantic adds to error locations; dropped when locating errors in the YAML.
AXIS_TAGS = frozenset({"values", "variants"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Resources(_Strict):
    """What one cell needs, for planning and scheduling: whole numbers (``gpus: "2"`` is an
    error), each bounded by what a cluster can give one cell (:mod:`orchestrator.limits`)."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)

    gpus: int = Field(0, ge=0, le=MAX_GPUS_PER_NODE, description="GPUs per node for one cell.")
    nodes: int = Field(1, ge=1, le=MAX_NODES, description="Nodes for one cell.")
    hours: float = Field(
        1.0, gt=0, le=MAX_HOURS, description="Expected wall-clock hours of one cell.")
    cpus: int = Field(1, ge=1, le=MAX_CPUS_PER_NODE, description="CPU cores per node for one cell.")

    @model_validator(mode="after")
    def _fits_a_cluster(self) -> Resources:
        if self.gpus * self.nodes > MAX_GPUS_PER_CELL:
            raise ValueError(f"gpus × nodes ({self.gpus} × {self.nodes}) is more than "
                             f"{MAX_GPUS_PER_CELL} GPUs for one cell")
        return self

    @property
    def gpu_hours(self) -> float:
        """GPU-hours one cell costs."""
        return self.gpus * self.nodes * self.hours


class Spec(_Strict):
    """One experiment: a backend, shared settings, and axes whose product is the grid."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=100,
                      description="MLflow experiment name and sweep name.")
    description: str = ""
    backend: str = Field("embedded", description="A backend name (kappa backends).")
    base: dict[str, Any] = Field(default_factory=dict,
                                 description="Backend settings shared by every cell.")
    axes: dict[AxisName, Axis] = Field(
        default_factory=dict, max_length=MAX_AXES,
        description="The grid is the product of all axes, in this order (first slowest).")
    labels: tuple[AxisName, ...] = Field(
        (), max_length=MAX_AXES,
        description="Axes that are recorded on cells but set no backend setting.")
    zip: tuple[Annotated[tuple[AxisName, ...], Field(min_length=2)], ...] = Field(
        (), max_length=MAX_AXES,
        description="Groups of axes that vary together (equal lengths) instead of crossing.")
    exclude: tuple[Annotated[dict[AxisName, JsonScalar], Field(min_length=1)], ...] = Field(
        (), description="Drop every cell that matches all the given axis values.")
    include: tuple[Annotated[dict[AxisName, JsonScalar], Field(min_length=1)], ...] = Field(
        (), description="Extra cells, each a full axis assignment, appended after the product.")
    resources: Resources = Field(default_factory=Resources)
    retries: StrictInt = Field(
        0, ge=0, le=MAX_RETRIES, description="Extra attempts for a failed cell.")
    stop: StopRules | None = Field(
        None, description="Stopping rules on live metrics and the sweep's GPU-hours cap "
                          "(docs/spec.md#stopping-rules).")
    search: SearchSpec | None = Field(
        None, description="An adaptive search (Optuna) over some settings: one study per "
                          "axis combination (docs/spec.md#search).")
    notify: NotifySpec | None = Field(
        None, description="Chat messages (a webhook) when the sweep ends, a cell fails for "
                          "good, a canary fails or a diverged rule fires "
                          "(docs/spec.md#notifications).")
    seeds: SeedsSpec | None = Field(
        None, description="Seeds on demand instead of a seed axis: each comparison gets "
                          "seeds until a sequential rule decides it, up to a maximum "
                          "(docs/spec.md#seeds-on-demand).")
    # Extension point: multi-phase cells (warm start -> RL -> eval with different settings) will be
    # described here. Reserved now so that specs fail loudly instead of silently ignoring it.
    phases: None = Field(None, description="Reserved for multi-phase cells; not supported yet.")

    _source_text: str = PrivateAttr("")
    _path: Path | None = PrivateAttr(None)
    _filename: str = PrivateAttr("<spec>")
    _document: SourceDocument | None = PrivateAttr(None)

    @property
    def source_text(self) -> str:
        """The YAML text the spec was parsed from (for registry/MLflow artifacts)."""
        return self._source_text

    @property
    def path(self) -> Path | None:
        """The file the spec was loaded from (``None``: parsed from text)."""
        return self._path

    @property
    def filename(self) -> str:
        """The name used in error messages."""
        return self._filename

    def problem(self, path: Sequence[str | int], message: str, *, location: str | None = None,
                found: str | None = None, allowed: str | None = None,
                fix: str | None = None) -> Problem:
        """A :class:`Problem` at ``path`` in the spec, with file:line:column when known."""
        doc = self._document or SourceDocument(data=None, root=None, filename=self._filename)
        return doc.problem(path, location if location is not None else dotted(path), message,
                           found, allowed, fix)

    @property
    def axis_names(self) -> tuple[str, ...]:
        """Axis names in spec order."""
        return tuple(self.axes)


def spec_json_schema() -> dict[str, Any]:
    """The spec's JSON Schema; ``base`` is checked against the chosen backend's settings."""
    from orchestrator.backends import BACKENDS, get_backend

    schema = copy.deepcopy(Spec.model_json_schema())
    schema["title"] = "kappa experiment spec"
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    names, branches = [], []
    for name in sorted(BACKENDS):
        try:
            model = get_backend(name).settings_model
        except (ImportError, KappaError):  # a backend whose extras are missing: no schema
            continue
        settings = copy.deepcopy(model.model_json_schema(ref_template="#/$defs/{model}"))
        defs.update(settings.pop("$defs", {}))
        key = f"{name}_settings"
        defs[key] = settings
        names.append(name)
        branches.append({"if": {"properties": {"backend": {"const": name}}},
                         "then": {"properties": {"base": {"$ref": f"#/$defs/{key}"}}}})
    if branches:
        schema["properties"]["backend"]["enum"] = names
        schema["allOf"] = branches
    return schema
