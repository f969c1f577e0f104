"""A cell: one point of the grid, named by a hash of what it runs.

The id is the first 12 hex digits of the SHA-256 of the canonical JSON (sorted keys, no
spaces) of ``{"backend", "settings", "labels"}``, where ``settings`` is the backend's
validated settings *with defaults*, as ``model_dump(mode="json")`` gives them. So the id
does not depend on key order, YAML formatting or how a value was spelled (``1e-3`` vs
``0.001``), and the same cell in two specs has the same id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from orchestrator.spec.model import JsonScalarValue

ID_LENGTH = 12


def canonical_json(value: Any) -> str:
    """The one JSON text of ``value`` that ids hash: sorted keys, no whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def content_id(backend: str, settings_dump: Mapping[str, Any],
               labels: Mapping[str, JsonScalarValue]) -> str:
    """The id of a cell with these validated settings (incl. defaults) and labels: the
    definition, which :func:`orchestrator.grid.expand` computes faster from pieces."""
    text = canonical_json({"backend": backend, "settings": dict(settings_dump),
                           "labels": dict(labels)})
    return hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH]


class Cell(NamedTuple):
    """One point of the grid (immutable; a named tuple because grids have 100k of them).
    ``axes`` maps every axis name (spec order) to the value the cell takes (a variant's name
    for axes of named variants). ``settings`` is what the cell's ``config.yaml`` gets:
    ``base`` with the axis values merged in, before defaults (treat it as read-only; cells
    share nested mappings). ``labels`` holds the label axes' values. A named tuple is about
    half the cost of a frozen dataclass to create, which matters at 100k cells."""

    # Shadows tuple.index on purpose: the position in the grid is what callers want.
    index: int  # type: ignore[assignment]
    cell_id: str
    axes: dict[str, JsonScalarValue]
    labels: dict[str, JsonScalarValue]
    settings: dict[str, Any]

    def describe(self) -> str:
        """``baseline=grpo, seed=0`` — the axis values, for humans."""
        return ", ".join(f"{name}={value}" for name, value in self.axes.items())
