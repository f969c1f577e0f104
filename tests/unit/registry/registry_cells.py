"""Cells for the registry tests (a plain module: ``conftest`` is not importable by name)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FakeCell:
    """A cell as orchestrator.grid makes them (any object with these attributes works)."""

    cell_id: str
    index: int
    axes: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, Any] = field(default_factory=dict)


def make_cells(n: int, prefix: str = "c") -> list[FakeCell]:
    """``n`` distinct cells with 12-hex-like ids."""
    return [
        FakeCell(
            cell_id=f"{prefix}{i:011x}"[:12],
            index=i,
            axes={"algorithm": "grpo", "seed": i},
            settings={"algorithm": {"name": "grpo", "clip": 0.2}, "seed": i},
            labels={"algorithm": "grpo"},
        )
        for i in range(n)
    ]
