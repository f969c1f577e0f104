"""A plan: the grid plus what running it costs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.grid.cell import Cell
from orchestrator.grid.expand import Grid, expand
from orchestrator.spec.model import Resources, Spec


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

    def to_dict(self, with_settings: bool = True) -> dict[str, Any]:
        """A JSON-able description (what ``kappa plan --json`` prints)."""
        spec = self.spec
        return {
            "name": spec.name,
            "backend": spec.backend,
            "axes": list(spec.axis_names),
            "labels": list(self.grid.label_names),
            "count": self.count,
            "resources": self.resources.model_dump(mode="json"),
            "retries": spec.retries,
            "gpu_hours": self.gpu_hours,
            "cells": [
                {
                    "index": c.index,
                    "cell_id": c.cell_id,
                    "axes": c.axes,
                    "labels": c.labels,
                    **({"settings": c.settings} if with_settings else {}),
                }
                for c in self.cells
            ],
        }


def plan(spec: Spec) -> Plan:
    """Expand ``spec`` and price it (see :func:`orchestrator.grid.expand`)."""
    return Plan(grid=expand(spec))
