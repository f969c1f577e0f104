"""The launch order on its own: longest expected first, registry order on ties, backfill;
strict FIFO as the baseline; a cell's stored demand is read once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from orchestrator.backends.base import Demand
from orchestrator.registry import CellRecord, CellState
from orchestrator.scheduler.order import LaunchOrder


def _cell(index: int, gpus: int | None, steps: int | None = None) -> CellRecord:
    """A pending cell whose demand was judged at submit (``gpus=None``: never judged)."""
    demand = None if gpus is None else Demand(gpus=gpus, steps=steps or 0).to_json()
    return CellRecord(
        sweep_name="s", cell_id=f"c{index:03d}", index=index, axes={}, labels={},
        settings={"gpus": gpus, "max_steps": steps}, state=CellState.PENDING,
        attempts_count=0, max_retries=0, run_dir=None, mlflow_run_id=None, job_id=None,
        exit_code=None, last_error=None, progress_step=None, total_steps=None,
        progress_updated_at=None, final_metrics=None, stop_reason=None,
        created_at=datetime.now(UTC), queued_at=None, started_at=None, finished_at=None,
        demand=demand)


def _pool(free: int) -> tuple[Callable[[int], int], Callable[[int], None]]:
    """A pool of ``free`` GPUs: its slots() and take()."""
    state = {"free": free}

    def slots(gpus: int) -> int:
        return 99 if gpus == 0 else state["free"] // gpus

    def take(gpus: int) -> None:
        state["free"] -= gpus

    return slots, take


def _launch(order: LaunchOrder, cells: list[CellRecord], free: int) -> list[int]:
    slots, take = _pool(free)
    launched = []
    for cell_id in order.fitting(order.sort(cells), slots):
        take(order.demand(cell_id).gpus)
        launched.append(int(cell_id[1:]))
    return launched


def test_longest_expected_first_ties_in_registry_order() -> None:
    cells = [_cell(0, 1, 100), _cell(1, 8, 400), _cell(2, 2, None), _cell(3, 4, 400),
             _cell(4, 1, 800)]
    order = LaunchOrder()
    assert order.sort(reversed(cells)) == ["c004", "c001", "c003", "c000", "c002"]
    # Keys as a pass reads them give the same order once the cells' demands are known.
    assert order.sort((c.cell_id, c.index) for c in cells) == order.sort(cells)
    # Without lengths (or with longest_first off) the order is the registry's.
    assert LaunchOrder(longest_first=False).sort(reversed(cells)) == [
        "c000", "c001", "c002", "c003", "c004"]


def test_backfill_starts_smaller_cells_behind_one_that_does_not_fit() -> None:
    cells = [_cell(0, 8, 800), _cell(1, 8, 400), _cell(2, 4, 300), _cell(3, 2, 200),
             _cell(4, 4, 100), _cell(5, 1, 50)]
    # 14 free: the first 8 fits; the second 8 does not, the 4 behind it does, then 2.
    assert _launch(LaunchOrder(), cells, 14) == [0, 2, 3]
    # Strict FIFO stops at the first cell that does not fit.
    fifo = LaunchOrder(longest_first=False, backfill=False)
    assert _launch(fifo, cells, 14) == [0]
    assert _launch(LaunchOrder(), cells, 0) == []


def test_a_pass_asks_capacity_once_per_size_that_does_not_fit() -> None:
    cells = [_cell(i, 8, 100) for i in range(1000)] + [_cell(1000, 1, 100)]
    asked: list[int] = []

    def slots(gpus: int) -> int:
        asked.append(gpus)
        return 1 if gpus <= 4 else 0

    order = LaunchOrder()
    assert list(order.fitting(order.sort(cells), slots)) == ["c1000"]
    assert asked == [8, 1]


def test_demand_is_read_once_and_cells_never_judged_are_left_to_the_launch() -> None:
    order = LaunchOrder()
    good, never = _cell(0, 2, 10), _cell(1, None, 10)
    read: list[str] = []

    class Counting(dict[str, Any]):
        def __getitem__(self, key: str) -> Any:
            read.append(key)
            return super().__getitem__(key)

    assert good.demand is not None
    counted = replace(good, demand=Counting(good.demand))
    for _ in range(3):
        order.sort([counted, never])
    assert read.count("gpus") == 1 and order.knows("c000") and not order.knows("c002")
    # A cell without a stored demand needs no GPUs here: its launch fails it.
    assert order.demand(never).gpus == 0
    assert _launch(order, [good, never], 0) == [1]
