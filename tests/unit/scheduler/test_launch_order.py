"""The launch order on its own: longest expected first, registry order on ties, backfill;
strict FIFO as the baseline; a cell's demand is judged once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from orchestrator.backends.base import Backend, LaunchSpec
from orchestrator.registry import CellRecord, CellState
from orchestrator.scheduler.order import LaunchOrder


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    gpus: int
    max_steps: int | None = None


@dataclass
class _Backend(Backend):
    name: ClassVar[str] = "order-test"
    settings_model: ClassVar[type[BaseModel]] = _Settings
    validated: list[int] = field(default_factory=list)

    def validate(self, settings: Any) -> BaseModel:
        self.validated.append(id(settings))
        return super().validate(settings)

    def launch(self, settings: BaseModel, run_dir: Path) -> LaunchSpec:
        return LaunchSpec(argv=("true",))

    def gpus(self, settings: BaseModel) -> int:
        assert isinstance(settings, _Settings)
        return settings.gpus


def _cell(index: int, gpus: Any, steps: int | None = None) -> CellRecord:
    return CellRecord(
        sweep_name="s", cell_id=f"c{index:03d}", index=index, axes={}, labels={},
        settings={"gpus": gpus, "max_steps": steps}, state=CellState.PENDING,
        attempts_count=0, max_retries=0, run_dir=None, mlflow_run_id=None, job_id=None,
        exit_code=None, last_error=None, progress_step=None, total_steps=None,
        progress_updated_at=None, final_metrics=None, stop_reason=None,
        created_at=datetime.now(UTC), queued_at=None, started_at=None, finished_at=None)


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
    order = LaunchOrder(_Backend())
    assert order.sort(reversed(cells)) == ["c004", "c001", "c003", "c000", "c002"]
    # Keys as a pass reads them give the same order once the cells' demands are known.
    assert order.sort((c.cell_id, c.index) for c in cells) == order.sort(cells)
    # Without lengths (or with longest_first off) the order is the registry's.
    assert LaunchOrder(_Backend(), longest_first=False).sort(reversed(cells)) == [
        "c000", "c001", "c002", "c003", "c004"]


def test_backfill_starts_smaller_cells_behind_one_that_does_not_fit() -> None:
    cells = [_cell(0, 8, 800), _cell(1, 8, 400), _cell(2, 4, 300), _cell(3, 2, 200),
             _cell(4, 4, 100), _cell(5, 1, 50)]
    # 14 free: the first 8 fits; the second 8 does not, the 4 behind it does, then 2.
    assert _launch(LaunchOrder(_Backend()), cells, 14) == [0, 2, 3]
    # Strict FIFO stops at the first cell that does not fit.
    fifo = LaunchOrder(_Backend(), longest_first=False, backfill=False)
    assert _launch(fifo, cells, 14) == [0]
    assert _launch(LaunchOrder(_Backend()), cells, 0) == []


def test_a_pass_asks_capacity_once_per_size_that_does_not_fit() -> None:
    cells = [_cell(i, 8, 100) for i in range(1000)] + [_cell(1000, 1, 100)]
    asked: list[int] = []

    def slots(gpus: int) -> int:
        asked.append(gpus)
        return 1 if gpus <= 4 else 0

    order = LaunchOrder(_Backend())
    assert list(order.fitting(order.sort(cells), slots)) == ["c1000"]
    assert asked == [8, 1]


def test_demand_is_judged_once_and_bad_settings_are_left_to_the_launch() -> None:
    backend = _Backend()
    order = LaunchOrder(backend)
    good, bad = _cell(0, 2, 10), _cell(1, "two", 10)
    for _ in range(3):
        order.sort([good, bad])
    assert len(backend.validated) == 2 and order.knows("c000") and not order.knows("c002")
    # A cell that no longer validates needs no GPUs here: its launch fails it.
    assert order.demand(bad).gpus == 0
    assert _launch(order, [good, bad], 0) == [1]
