"""A built table, independent of its output format: blocks of rows of cells."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.analysis.stats import Interval

RowKind = Literal["absolute", "delta"]

Label = str | bool


@dataclass(frozen=True)
class TableCell:
    """One number (with its interval) or a missing value with the reason (a cell state)."""

    interval: Interval | None
    kind: RowKind
    missing: str | None = None
    bold: bool = False
    partial: bool = False  # rests on fewer runs than the row's n (a metric some runs lack)
    differences: tuple[float, ...] = ()  # a delta's per-seed differences, in the table's units

    @property
    def significant(self) -> bool:
        """A delta whose confidence interval excludes zero. The paired t-interval keeps its
        coverage from 2 pairs on (wide there), so the mark needs no minimum of pairs."""
        return (self.kind == "delta" and self.interval is not None
                and self.interval.excludes_zero)


@dataclass(frozen=True)
class TableRow:
    """A labelled row: absolute scores, or signed deltas against the row above."""

    labels: tuple[Label, ...]
    kind: RowKind
    n: str
    cells: tuple[TableCell, ...]
    marker: str = ""  # "§1": a footnote on the step its pairs were compared at
    note: str | None = None  # that footnote's text (without the marker)


@dataclass(frozen=True)
class TableBlock:
    """Rows under one value of the block axis (``title`` is ``None`` without blocks)."""

    title: str | None
    rows: tuple[TableRow, ...]


@dataclass(frozen=True)
class Table:
    """The whole table: label headers, value columns, blocks, and the notes that explain it."""

    label_headers: tuple[str, ...]
    columns: tuple[str, ...]
    blocks: tuple[TableBlock, ...]
    notes: tuple[str, ...]
    digits: int = 2
    show_ci: bool = True
