"""Lengths learnt from siblings (orchestrator/scheduler/durations.py) and the launch order
that uses them: known sibling durations give known estimates, running siblings a floor or
a projection, and a fresh order (a restarted scheduler) reads the same from the registry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from orchestrator.backends.base import Demand
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.registry.models import CellRow
from orchestrator.scheduler.durations import (
    SiblingDurations,
    finished_sample,
    spread,
    work_free_settings,
    work_key,
)
from orchestrator.scheduler.order import LaunchOrder

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FREE = frozenset({"seed"})


def _cell(index: int, config: str, seed: int, *, steps: int = 200, gpus: int = 1,
          state: CellState = CellState.PENDING, started: float | None = None,
          finished: float | None = None, attempts: int = 1, progress: int | None = None,
          progress_at: float | None = None) -> CellRecord:
    """A cell of configuration ``config`` (times in seconds after ``T0``)."""
    def at(seconds: float | None) -> datetime | None:
        return None if seconds is None else T0 + timedelta(seconds=seconds)

    return CellRecord(
        sweep_name="s", cell_id=f"c{index:03d}", index=index, axes={"config": config},
        labels={}, settings={"config": config, "seed": seed, "max_steps": steps},
        state=state, attempts_count=attempts, max_retries=0, run_dir=None,
        mlflow_run_id=None, job_id=None, exit_code=None, last_error=None,
        progress_step=progress, total_steps=steps if progress is not None else None,
        progress_updated_at=at(progress_at), final_metrics=None, stop_reason=None,
        created_at=T0, queued_at=None, started_at=at(started), finished_at=at(finished),
        demand=Demand(gpus=gpus, steps=steps).to_json())


def _done(index: int, config: str, seed: int, seconds: float, **kw: Any) -> CellRecord:
    return _cell(index, config, seed, state=CellState.SUCCEEDED, started=0.0,
                 finished=seconds, **kw)


def _estimates(now: float, finished: list[CellRecord], running: list[CellRecord],
               waiting: list[CellRecord], limit: int | None = None) -> SiblingDurations:
    durations = SiblingDurations(FREE, clock=lambda: T0 + timedelta(seconds=now),
                                 sample_limit=limit)
    for cell in waiting:
        durations.learn(cell)
    samples = [finished_sample(c, durations.learn(c)) for c in finished]
    durations.finished([s for s in samples if s is not None])
    durations.running(running)
    return durations


def test_siblings_differ_only_in_settings_that_do_not_change_the_work() -> None:
    a, b = _cell(0, "x", 0), _cell(1, "x", 1)
    assert work_key(a.settings, FREE) == work_key(b.settings, FREE)
    assert work_key(a.settings, FREE) != work_key(_cell(2, "y", 0).settings, FREE)
    assert work_key(a.settings, frozenset()) != work_key(b.settings, frozenset())
    assert work_free_settings(object()) == {"seed"}

    class Declares:
        work_free_settings = frozenset({"seed", "run_name"})

    assert work_free_settings(Declares()) == {"seed", "run_name"}


def test_estimate_is_the_finished_siblings_time_else_steps_at_the_sweeps_pace() -> None:
    waiting = [_cell(2, "x", 2), _cell(5, "y", 2, steps=400), _cell(6, "z", 0, steps=0)]
    finished = [_done(0, "x", 0, 3600.0), _done(1, "x", 1, 5400.0)]
    est = _estimates(6000.0, finished, [], waiting)
    # Two siblings of x: their geometric mean (one configuration: how much siblings vary
    # against configurations is not measurable yet, so they are taken at their word).
    assert est.expected("c002", 200) == pytest.approx((3600.0 * 5400.0) ** 0.5)
    # No sibling of y: its 400 steps at the sweep's median pace (18 and 27 s per step).
    assert est.expected("c005", 400) == pytest.approx(400 * 22.5)
    # Unknown steps: the median finished cell.
    assert est.expected("c006", 0) == pytest.approx(4500.0)
    # Only the first finished sibling (by end): 3600 s.
    first = _estimates(6000.0, finished, [], waiting, limit=1)
    assert first.expected("c002", 200) == pytest.approx(3600.0)


@pytest.mark.parametrize(("a", "b", "expected_a"), [
    ((1000.0, 1000.0), (4000.0, 4000.0), 1000.0),  # siblings agree: their time
    ((1000.0, 4000.0), (4000.0, 1000.0), 2500.0),  # they vary as much as anything: the pace
])
def test_siblings_count_as_much_as_they_agree(a: tuple[float, float], b: tuple[float, float],
                                              expected_a: float) -> None:
    finished = [_done(0, "a", 0, a[0]), _done(1, "a", 1, a[1]), _done(2, "b", 0, b[0]),
                _done(3, "b", 1, b[1])]
    est = _estimates(9000.0, finished, [], [_cell(4, "a", 2)])
    # The sweep's pace: 200 steps at the median of 5, 5, 20 and 20 s per step (2500 s).
    assert est.expected("c004", 200) == pytest.approx(expected_a)
    assert spread([[0.0, 0.0], [1.0, 1.0]]) == (0.0, 0.25)
    assert spread([[0.0]]) == (None, None) and spread([[0.0, 2.0]]) == (2.0, None)


def test_running_siblings_give_a_floor_and_with_progress_a_projection() -> None:
    waiting = [_cell(1, "long", 1), _cell(3, "half", 1), _cell(5, "short", 1)]
    finished = [_done(4, "short", 0, 600.0)]
    running = [
        _cell(0, "long", 0, state=CellState.RUNNING, started=0.0),  # no progress yet
        # 50 of 200 steps done 1000 s after its start: 4000 s in all.
        _cell(2, "half", 0, state=CellState.RUNNING, started=0.0, progress=50,
              progress_at=1000.0),
    ]
    est = _estimates(1500.0, finished, running, waiting)
    assert est.expected("c001", 200) == pytest.approx(1500.0)  # at least its elapsed time
    assert est.expected("c003", 200) == pytest.approx(4000.0)
    assert est.expected("c005", 200) == pytest.approx(600.0)
    assert est.probes(["c001", "c003", "c005"]) == set()  # every configuration started
    # Under a tenth done (start-up weighs too much): only the floor.
    early = [_cell(2, "half", 0, state=CellState.RUNNING, started=0.0, progress=10,
                   progress_at=1000.0)]
    assert _estimates(1500.0, finished, early, waiting).expected(
        "c003", 200) == pytest.approx(1500.0)


def test_what_is_not_a_sample() -> None:
    key = b"k"
    assert finished_sample(_done(0, "x", 0, 100.0, attempts=2), key) is None  # resumed
    assert finished_sample(_cell(0, "x", 0, state=CellState.FAILED, started=0.0,
                                 finished=50.0), key) is None
    # Stopped early at step 50 of 200 after 1000 s: its declared steps take 4000 s.
    stopped = finished_sample(_done(0, "x", 0, 1000.0, progress=50), key)
    assert stopped is not None and stopped.seconds == pytest.approx(4000.0)


def test_probes_first_then_declared_steps_before_anything_finished() -> None:
    waiting = [_cell(0, "x", 1, steps=800), _cell(1, "y", 0), _cell(2, "y", 1),
               _cell(3, "z", 0, steps=400)]
    running = [_cell(9, "x", 0, steps=800, state=CellState.RUNNING, started=0.0)]
    order = LaunchOrder()
    order.learn(waiting)
    order.durations.clock = lambda: T0 + timedelta(seconds=100.0)
    order.durations.finished([])
    order.durations.running(running)
    assert order.durations.expected("c000", 800) == 800.0
    # One cell of each configuration not started (z, y: most steps first), then the rest.
    assert order.durations.probes(["c000", "c001", "c002", "c003"]) == {"c001", "c003"}
    assert order.sort(waiting) == ["c003", "c001", "c000", "c002"]
    # Declared steps only (kappa's order before it learnt from siblings).
    assert LaunchOrder(siblings=False).sort(waiting) == ["c000", "c003", "c001", "c002"]


def test_launch_order_uses_the_estimates() -> None:
    waiting = [_cell(1, "short", 1, gpus=8), _cell(3, "long", 1), _cell(5, "mid", 1),
               _cell(6, "new", 0), _cell(7, "new", 1)]
    order = LaunchOrder()
    order.learn(waiting)
    finished = [_done(0, "short", 0, 1000.0), _done(2, "long", 0, 9000.0),
                _done(4, "mid", 0, 3000.0)]
    order.durations.finished([s for c in finished
                              if (s := finished_sample(c, order.durations.learn(c)))])
    order.durations.running([])
    # The configuration never run is probed first (one seed); then long (9000 s), mid,
    # the other seed of new (expected as the median cell, 3000 s: after mid by registry
    # order), short.
    assert order.sort(waiting) == ["c006", "c003", "c005", "c007", "c001"]


def test_a_restarted_scheduler_orders_from_what_the_registry_holds(tmp_path: Path) -> None:
    from orchestrator.grid.identity import Cell

    sweep = "sib"
    cells = [Cell(i, f"{i:012x}", {"config": c, "seed": s}, {},
                  {"config": c, "seed": s, "max_steps": 100})
             for i, (c, s) in enumerate((c, s) for c in ("a", "b", "c") for s in range(3))]
    demands = {c.cell_id: Demand(gpus=1, steps=100).to_json() for c in cells}
    with Registry.open(f"sqlite:///{tmp_path}/registry.db") as reg:
        reg.upsert_sweep(sweep, backend="fake", spec_text="name: sib\n")
        reg.add_cells(sweep, cells, demands=demands)
        # Seed 0 of a ran 1 h, of b 5 h; seed 0 of c has run 2 h and still runs.
        for cell_id, hours in ((cells[0].cell_id, 1.0), (cells[3].cell_id, 5.0),
                               (cells[6].cell_id, None)):
            rec = reg.get_cell(sweep, cell_id)
            assert reg.transition(rec, CellState.PENDING, CellState.QUEUED)
            assert reg.transition(rec, CellState.QUEUED, CellState.RUNNING)
            if hours is not None:
                assert reg.finish_attempt(rec, CellState.SUCCEEDED, exit_code=0)
            with reg.engine.begin() as conn:
                conn.execute(update(CellRow).where(CellRow.cell_id == cell_id).values(
                    started_at=T0, finished_at=None if hours is None
                    else T0 + timedelta(hours=hours)))
        keys = reg.cell_keys(sweep, [CellState.PENDING])

        def ranked() -> list[str]:
            order = LaunchOrder()  # what a scheduler (re)started now builds
            order.durations.clock = lambda: T0 + timedelta(hours=2.5)
            order.learn(reg.cells_by_id(sweep, [k for k, _ in keys]))
            order.observe(reg, sweep)
            return order.sort(keys)

        first = ranked()
        # b (5 h), then c (no sibling finished: 100 steps at the sweep's median pace, 3 h;
        # its running seed 0 says at least 2.5 h), then a (1 h).
        assert [reg.get_cell(sweep, i).settings["config"] for i in first] == [
            "b", "b", "c", "c", "a", "a"]
        assert ranked() == first


def test_estimates_are_remade_at_most_once_per_refresh(tmp_path: Path) -> None:
    """A pass launching short cells back to back reads the registry once a second, not
    once a launch; a clock set back remakes them at once."""
    from orchestrator.grid.identity import Cell

    sweep = "fresh"
    cells = [Cell(i, f"{i:012x}", {"config": c, "seed": 0}, {},
                  {"config": c, "seed": 0, "max_steps": 100}) for i, c in enumerate("ab")]
    now = [T0]
    durations = SiblingDurations(FREE, clock=lambda: now[0])
    with Registry.open(f"sqlite:///{tmp_path}/registry.db") as reg:
        reg.upsert_sweep(sweep, backend="fake", spec_text="name: fresh\n")
        reg.add_cells(sweep, cells)
        durations.observe(reg, sweep)
        assert durations.expected(cells[1].cell_id, 100) == 100.0  # no pace yet: steps
        rec = reg.get_cell(sweep, cells[0].cell_id)
        assert reg.transition(rec, CellState.PENDING, CellState.QUEUED)
        assert reg.transition(rec, CellState.QUEUED, CellState.RUNNING)
        assert reg.finish_attempt(rec, CellState.SUCCEEDED, exit_code=0)
        with reg.engine.begin() as conn:
            conn.execute(update(CellRow).where(CellRow.cell_id == rec.cell_id).values(
                started_at=T0, finished_at=T0 + timedelta(seconds=50)))
        now[0] = T0 + timedelta(milliseconds=999)
        durations.observe(reg, sweep)
        assert durations.expected(cells[1].cell_id, 100) == 100.0  # within the second
        now[0] = T0 + timedelta(seconds=1)
        durations.observe(reg, sweep)
        assert durations.expected(cells[1].cell_id, 100) == pytest.approx(50.0)  # a's pace
        now[0] = T0  # set back: not "fresh", remade (and unchanged)
        durations.observe(reg, sweep)
        assert durations.expected(cells[1].cell_id, 100) == pytest.approx(50.0)
