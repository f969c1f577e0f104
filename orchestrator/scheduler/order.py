"""The order in which a sweep's pending cells are launched, and which of them fit now.

A sweep's makespan is decided at its end: a long cell started late keeps the whole
cluster's sweep running while most GPUs idle. So kappa launches the **longest expected
cells first** (longest-processing-time-first), and when the next cell does not fit in
the GPUs free now it **backfills**: smaller cells behind it that fit start instead, so
no GPU idles while something could run on it.

What the order knows about a cell, and nothing else:

* its GPUs, ``Backend.gpus(settings)`` (what it must fit into);
* its expected length, ``Backend.max_steps(settings)``: the training steps it runs.
  Cells of one sweep train the same kind of model, so steps are what sets their
  relative length; the wall time itself (``resources.hours`` is one figure for the
  whole sweep) is not known per cell. Cells whose steps tie (or are unknown) keep
  registry order (their index), so a sweep whose cells all run the same steps is
  launched in plain registry order with backfill.

GPU demand is deliberately not a sort key: on simulated clusters (``bench/
cluster_makespan.py``) largest-GPU-first did worse than registry order whenever lengths
were not known, and no better when they were.

A cell's demand is computed once (its settings never change: the cell id is their
hash). :class:`LaunchOrder` with ``longest_first=False, backfill=False`` is strict FIFO,
the baseline the benchmark compares against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from orchestrator.backends import Backend
from orchestrator.registry import CellRecord


@dataclass(frozen=True)
class Demand:
    """What a cell asks for: its GPUs, and its expected length in steps (0: unknown)."""

    gpus: int
    steps: int


# A cell whose settings no longer validate: it needs nothing, so it is never held back
# for GPUs; its launch fails it (a failed attempt with the reason).
_INVALID = Demand(gpus=0, steps=0)


@dataclass
class LaunchOrder:
    """Which pending cells to launch, in what order (see the module docstring)."""

    backend: Backend
    longest_first: bool = True
    backfill: bool = True
    _demands: dict[str, Demand] = field(default_factory=dict, init=False, repr=False)

    def demand(self, cell: CellRecord) -> Demand:
        """The cell's GPUs and expected steps (validated once per cell id)."""
        known = self._demands.get(cell.cell_id)
        if known is None:
            try:
                settings = self.backend.validate(cell.settings)
                known = Demand(self.backend.gpus(settings),
                               self.backend.max_steps(settings) or 0)
            except Exception:  # the launch reports it, as a failed attempt
                known = _INVALID
            self._demands[cell.cell_id] = known
        return known

    def sort(self, cells: Iterable[CellRecord]) -> list[CellRecord]:
        """``cells`` in launch order: longest expected first, then registry order."""
        by_index = sorted(cells, key=lambda c: (c.index, c.cell_id))
        if not self.longest_first:
            return by_index
        return sorted(by_index, key=lambda c: -self.demand(c).steps)  # stable: ties by index

    def fitting(self, ordered: Sequence[CellRecord],
                slots: Callable[[int], int]) -> Iterator[CellRecord]:
        """The cells of ``ordered`` (already in launch order) that fit now, in order.

        ``slots(gpus)`` says how many more jobs of ``gpus`` GPUs could start now; it is
        asked again after each cell the caller launched. Free GPUs only shrink during a
        pass, so once ``g`` GPUs did not fit, no cell needing ``g`` or more is asked
        about again: a pass over many waiting cells stays one cheap loop.
        """
        if not ordered:
            return
        smallest = min(self.demand(c).gpus for c in ordered)
        blocked: int | None = None  # the fewest GPUs found not to fit in this pass
        for cell in ordered:
            need = self.demand(cell).gpus
            if blocked is not None and need >= blocked:
                continue
            if slots(need) <= 0:
                blocked = need
                if not self.backfill or need <= smallest:
                    return  # FIFO waits for its head; nothing smaller is left to try
                continue
            yield cell

