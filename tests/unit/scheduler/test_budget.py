"""GPU-hours of a sweep (used, projected, planned, saved) and the cap, on snapshots."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from kit.cells import status_of

from orchestrator.registry import CellRecord, CellState
from orchestrator.scheduler.durations import Pace, finished_sample
from orchestrator.spec.model import Resources
from orchestrator.stopping.budget import admit, planned_hours, sweep_hours
from orchestrator.sweeps.status import CellStatus

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EIGHT_GPUS = Resources(gpus=8, hours=10)


def cell(n: int, state: CellState, *, step: int | None = None, total: int | None = 100,
         ran_h: float | None = None, stop_reason: str | None = None) -> CellRecord:
    started = NOW - timedelta(hours=ran_h) if ran_h is not None else None
    ended = state in (CellState.SUCCEEDED, CellState.FAILED, CellState.CANCELLED)
    return CellRecord(
        sweep_name="s", cell_id=f"c{n}", index=n, axes={}, settings={}, labels={},
        state=state, attempts_count=1, max_retries=0, run_dir=None, mlflow_run_id=None,
        job_id=None, exit_code=None, last_error=None, progress_step=step, total_steps=total,
        progress_updated_at=None if step is None else NOW, final_metrics=None, created_at=NOW,
        queued_at=None,
        started_at=started, finished_at=NOW if ended and started else None,
        stop_reason=stop_reason)


def test_before_anything_ends_every_cell_costs_its_plan() -> None:
    cells = [cell(0, CellState.RUNNING, ran_h=1), cell(1, CellState.PENDING),
             cell(2, CellState.QUEUED)]
    hours = sweep_hours(cells, EIGHT_GPUS, cap=500, now=NOW)
    # The running cell has no step yet: its plan (8 GPUs x 10 h) stands.
    assert (hours.unit, hours.used, hours.running, hours.planned) == ("GPU-hours", 0, 80, 160)
    assert (hours.projected, hours.saved, hours.cap) == (240, 0, 500)


def test_running_cells_are_projected_from_their_measured_rate() -> None:
    running = cell(0, CellState.RUNNING, step=25, ran_h=2)  # 2 h for 25 of 100 steps
    assert sweep_hours([running], EIGHT_GPUS, now=NOW).running == pytest.approx(8 * 8)


def test_stopped_cells_save_the_unrun_part_of_their_plan() -> None:
    cells = [
        cell(0, CellState.SUCCEEDED, step=100, ran_h=10),  # ran to the end
        cell(1, CellState.SUCCEEDED, step=40, ran_h=4, stop_reason="plateau at step 40"),
        cell(2, CellState.FAILED, step=10, ran_h=1, stop_reason="diverged at step 10"),
        cell(3, CellState.CANCELLED, total=None, stop_reason="gpu_hours cap"),  # not a stop
        cell(4, CellState.PENDING),
    ]
    hours = sweep_hours(cells, EIGHT_GPUS, now=NOW)
    assert hours.used == pytest.approx(8 * 15)
    # Measured: the succeeded cells ran at 10 h per 100 steps, so a full run is 80 GPU-h.
    pace = Pace.of(map(finished_sample, cells))
    assert planned_hours(cells[4], pace, EIGHT_GPUS) == pytest.approx(80)
    assert hours.planned == pytest.approx(80)
    assert hours.stopped_cells == 2
    assert hours.saved == pytest.approx(80 * 0.6 + 80 * 0.9)
    text = status_of({}, hours=hours).hours_text
    assert text.startswith("GPU-hours: used 120.0") and "saved by stopping rules 120.0" in text
    assert "(2 cells stopped)" in text


def test_cells_without_gpus_are_counted_in_cell_hours() -> None:
    hours = sweep_hours([cell(0, CellState.PENDING)], Resources(hours=0.25), now=NOW)
    assert (hours.unit, hours.planned) == ("cell-hours", 0.25)


def test_the_cap_admits_cells_while_their_plan_fits() -> None:
    pending = [cell(n, CellState.PENDING) for n in range(1, 5)]
    running = [cell(0, CellState.RUNNING, ran_h=0.1)]  # no step yet: 80 committed
    admitted, blocked = admit(pending, running, EIGHT_GPUS, cap=250, now=NOW)
    assert [c.cell_id for c in admitted] == ["c1", "c2"] and len(blocked) == 2
    # Measured progress lowers the running cell's projection: one cell more fits.
    # 0.1 h for half: 1.6 GPU-h in all
    fast = [replace(running[0], progress_step=50, progress_updated_at=NOW)]
    admitted, _ = admit(pending, fast, EIGHT_GPUS, cap=250, now=NOW)
    assert len(admitted) == 3
    assert admit(pending, [], EIGHT_GPUS, cap=79, now=NOW) == ([], pending)


def test_status_says_why_a_cell_stopped_or_waits() -> None:
    stopped = cell(0, CellState.SUCCEEDED, step=40, ran_h=1,
                   stop_reason="plateau at step 340 (val-core/arith-val/acc/mean@1)")
    assert CellStatus.of(stopped).state_text == "succeeded (stopped: plateau at step 340)"
    capped = cell(1, CellState.CANCELLED, stop_reason="gpu_hours cap")
    assert CellStatus.of(capped).state_text == "cancelled (gpu_hours cap)"
    waiting = cell(2, CellState.PENDING)
    assert CellStatus.of(waiting, "gpu_hours cap").state_text == "pending (waits: gpu_hours cap)"
    assert CellStatus.of(waiting).state_text == "pending"


def test_hours_saved_are_told_per_comparison_group() -> None:
    from orchestrator.stopping.budget import saved_by_group, sweep_hours

    def member(n: int, rb: bool, seed: int, step: int, stopped: bool) -> CellRecord:
        base = cell(n, CellState.SUCCEEDED, step=step, ran_h=step / 10,
                    stop_reason="plateau at step 60, together with 1 other cell" if stopped
                    else None)
        return replace(base, axes={"baseline": "grpo", "reward_budget": rb, "seed": seed})

    cells = [member(0, False, 0, 60, True), member(1, True, 0, 60, True),
             member(2, False, 1, 100, False), member(3, True, 1, 100, False)]
    groups = saved_by_group(cells, EIGHT_GPUS, ["reward_budget"])
    assert [(g.label, g.cells, g.steps) for g in groups] == [
        ("baseline=grpo, seed=0", 2, (60,)), ("baseline=grpo, seed=1", 2, ())]
    # Planned: the median measured full run, 8 GPUs x 10 h; each stopped cell saves 40%.
    assert groups[0].saved == pytest.approx(2 * 80 * 0.4) and groups[1].saved == 0
    status = status_of({}, groups=tuple(groups), hours=sweep_hours(cells, EIGHT_GPUS, now=NOW))
    text = status.groups_text(limit=1)
    assert text == ("GPU-hours saved per comparison group: baseline=grpo, seed=0: 64 at step "
                    "60; … 1 more")
