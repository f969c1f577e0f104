"""A cell: one point of the grid, named by the first 12 hex digits of the SHA-256 of the
canonical JSON of ``{"backend", "settings", "labels"}``, the settings validated and with
defaults (why: docs/spec.md#cells)."""

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
    """The id of a cell with these validated settings (incl. defaults) and labels (the
    definition; :func:`orchestrator.grid.expand` computes it faster from pieces)."""
    text = canonical_json({"backend": backend, "settings": dict(settings_dump),
                           "labels": dict(labels)})
    return hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH]


class Cell(NamedTuple):
    """One point of the grid (fields: docs/spec.md#cells; ``settings`` is read-only, cells
    share nested mappings). A named tuple: half the cost of a frozen dataclass to create,
    which matters at 100k cells."""

    # Shadows tuple.index on purpose: the position in the grid is what callers want.
    index: int  # type: ignore[assignment]
    cell_id: str
    axes: dict[str, JsonScalarValue]
    labels: dict[str, JsonScalarValue]
    settings: dict[str, Any]

    def describe(self) -> str:
        """``baseline=grpo, seed=0`` — the axis values, for humans."""
        return ", ".join(f"{name}={value}" for name, value in self.axes.items())
