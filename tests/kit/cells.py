"""Cells as :mod:`orchestrator.grid` makes them, for tests that store or read cells
without expanding a spec (the registry, the tracker, the results frame)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.grid.identity import Cell


def make_cell(cell_id: str, index: int = 0, axes: Mapping[str, Any] | None = None,
         settings: Mapping[str, Any] | None = None,
         labels: Mapping[str, Any] | None = None) -> Cell:
    """One cell; what is not given is empty."""
    return Cell(index=index, cell_id=cell_id, axes=dict(axes or {}),
                labels=dict(labels or {}), settings=dict(settings or {}))


def make_cells(n: int, prefix: str = "c") -> list[Cell]:
    """``n`` distinct grpo cells (axis ``seed``) with 12-hex-like ids."""
    return [make_cell(f"{prefix}{i:011x}"[:12], i, axes={"algorithm": "grpo", "seed": i},
                      settings={"algorithm": {"name": "grpo", "clip": 0.2}, "seed": i},
                      labels={"algorithm": "grpo"})
            for i in range(n)]


def status_of(counts: Mapping[Any, int], cells: Sequence[Any] = (), **fields: Any) -> Any:
    """A :class:`~orchestrator.sweeps.status.SweepStatus` of ``cells`` (registry snapshots)
    with these ``counts`` (by ``CellState`` or its value), as the views receive it."""
    from orchestrator.sweeps.status import STATES, CellStatus, Driver, SweepStatus

    by_name = {getattr(s, "value", s): n for s, n in counts.items()}
    return SweepStatus(fields.pop("sweep", "s"), fields.pop("backend", "fake"),
                       fields.pop("complete", True), {s: by_name.get(s, 0) for s in STATES},
                       fields.pop("retrying", 0), fields.pop("driver", Driver(None, None)),
                       tuple(CellStatus.of(c) for c in cells), **fields)
