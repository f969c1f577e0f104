"""A built table, independent of its output format: blocks of rows of cells."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.analysis.stats import Interval

RowKind = Literal["absolute", "delta"]

# A bootstrap over n pairs excludes 0 whenever every pair moved the same way, which with
# no effect at all happens with probability 2^(1-n): one time in two for 2 pairs. Below 3
# pairs the mark would say nothing.
MIN_PAIRS_FOR_MARK = 3
Label = str | bool


@dataclass(frozen=True)
class TableCell:
    """One number (with its interval) or a missing value with the reason (a cell state)."""

    interval: Interval | None
    kind: RowKind
    missing: str | None = None
    bold: bool = False
    partial: bool = False  # rests on fewer runs than the row's n (a metric some runs lack)

    @property
    def significant(self) -> bool:
        """A delta whose confidence interval, over at least ``MIN_PAIRS_FOR_MARK`` pairs,
        excludes zero."""
        return (self.kind == "delta" and self.interval is not None
                and self.interval.n >= MIN_PAIRS_FOR_MARK and self.interval.excludes_zero)


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
