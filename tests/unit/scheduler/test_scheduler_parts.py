"""Scheduler parts on their own: backoff, the sweep lock, crash recovery, status views."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kit.cells import make_cell
from kit.fake_backend import FakeBackend

from orchestrator.executors.local import LocalExecutor
from orchestrator.registry import CellState, Registry
from orchestrator.scheduler.cell_runs import log_tail
from orchestrator.scheduler.loop import SweepScheduler
from orchestrator.scheduler.options import retry_delay
from orchestrator.sweeps.status import CellStatus, val_accuracy


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_retry_delay_doubles_and_is_capped() -> None:
    assert [retry_delay(n, 2.0) for n in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 16.0]
    assert retry_delay(30, 2.0, cap=60.0) == 60.0
    assert retry_delay(0, 1.0) == 1.0


def test_log_tail_keeps_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert log_tail(log, lines=2) == "line 98\nline 99"
    assert log_tail(tmp_path / "missing.log") == ""


# The one-scheduler rule (the registry lease) is tested in
# tests/unit/registry/test_registry_lease.py and tests/integration/test_lease_takeover.py.


def test_recover_takes_over_what_a_dead_scheduler_left(home: Path) -> None:
    with Registry.open() as reg:
        reg.upsert_sweep("r", backend="fake", spec_text="name: r")
        cells = reg.add_cells("r", [make_cell(f"c{i}", i, {"i": i}) for i in range(4)],
                              max_retries=1)
        _queued, c_vanished, c_retry, c_spent = cells
        for cell in cells:
            assert reg.transition(cell, CellState.PENDING, CellState.QUEUED)
        # c_vanished: running, but its job id points at nothing.
        assert reg.start_attempt(c_vanished, job_id="local:/nonexistent/job")
        # c_retry: failed once, one retry left (the scheduler died during the backoff).
        assert reg.start_attempt(c_retry)
        assert reg.finish_attempt(c_retry, CellState.FAILED, exit_code=1)
        # c_spent: failed twice, no retry left.
        for _ in range(2):
            assert reg.start_attempt(c_spent)
            assert reg.finish_attempt(c_spent, CellState.FAILED, exit_code=1)
            reg.transition(c_spent, CellState.FAILED, CellState.PENDING)
            reg.transition(c_spent, CellState.PENDING, CellState.QUEUED)
        reg.transition(c_spent, CellState.QUEUED, CellState.FAILED)

        SweepScheduler(reg, "r", FakeBackend(), LocalExecutor()).recover()
        state = {c.cell_id: c for c in reg.cells("r")}
        assert state["c0"].state is CellState.PENDING
        assert state["c1"].state is CellState.PENDING
        assert state["c1"].max_retries == 2  # a vanished job does not cost a retry
        assert [a.state.value for a in reg.attempts(c_vanished)] == ["failed"]
        assert state["c2"].state is CellState.PENDING
        assert state["c3"].state is CellState.FAILED


def test_recover_finds_a_job_whose_id_was_never_recorded(home: Path, tmp_path: Path) -> None:
    with Registry.open() as reg:
        reg.upsert_sweep("r", backend="fake", spec_text="name: r")
        (cell,) = reg.add_cells("r", [make_cell("c0", 0, {"i": 0})])
        run_dir = tmp_path / "run"
        reg.update_cell(cell, run_dir=str(run_dir))
        reg.transition(cell, CellState.PENDING, CellState.QUEUED)
        assert reg.start_attempt(cell, log_path=str(run_dir / "train.log"))
        # The old scheduler submitted the job, then died before attach_job.
        go = tmp_path / "go"
        job = LocalExecutor().submit(
            (sys.executable, "-c", f"import os,time\nwhile not os.path.exists({str(go)!r}): "
             "time.sleep(0.02)"), {}, tmp_path, run_dir / "train.log")
        executor = LocalExecutor()
        scheduler = SweepScheduler(reg, "r", FakeBackend(), executor)
        scheduler.recover()
        found = reg.get_cell("r", "c0")
        assert found.state is CellState.RUNNING
        assert found.job_id == job.job_id
        assert executor.running() == 1
        go.touch()
        assert job.wait(60) == 0


def test_recover_never_takes_an_earlier_attempts_job_for_this_one(
        home: Path, tmp_path: Path) -> None:
    """Attempt 1's job finished (exit 3); attempt 2 opened, and its scheduler was killed
    before it submitted anything. The log's only job is attempt 1's: recovery must not
    attach it (and read its exit code as attempt 2's), but rerun the cell."""
    with Registry.open() as reg:
        reg.upsert_sweep("r", backend="fake", spec_text="name: r")
        (cell,) = reg.add_cells("r", [make_cell("c0", 0, {"i": 0})], max_retries=2)
        run_dir = tmp_path / "run"
        reg.update_cell(cell, run_dir=str(run_dir))
        log = str(run_dir / "train.log")
        reg.transition(cell, CellState.PENDING, CellState.QUEUED)
        assert reg.start_attempt(cell, log_path=log)
        old = LocalExecutor().submit((sys.executable, "-c", "raise SystemExit(3)"), {},
                                     tmp_path, run_dir / "train.log")
        assert old.wait(60) == 3
        assert reg.finish_attempt(cell, CellState.FAILED, exit_code=3)
        reg.transition(cell, CellState.FAILED, CellState.PENDING)
        reg.transition(cell, CellState.PENDING, CellState.QUEUED)
        assert reg.start_attempt(cell, log_path=log)  # attempt 2: killed before submit

        SweepScheduler(reg, "r", FakeBackend(), LocalExecutor()).recover()
        found = reg.get_cell("r", "c0")
        assert found.job_id != old.job_id
        assert found.state is CellState.PENDING  # run again: its job vanished
        attempts = reg.attempts(found)
        assert [a.state.value for a in attempts] == ["failed", "failed"]
        assert attempts[-1].exit_code is None


def test_status_views() -> None:
    assert val_accuracy({"val-core/gsm8k/acc/mean@1": 0.25, "x": 1}) == 0.25
    assert val_accuracy({"eval/x/mean@8": 0.3}) is None
    assert val_accuracy(None) is None


def test_cell_row_is_json_ready(home: Path) -> None:
    import json

    with Registry.open() as reg:
        reg.upsert_sweep("v", backend="fake", spec_text="name: v")
        (cell,) = reg.add_cells("v", [make_cell("c0", 0, {"seed": 1})])
        row = CellStatus.of(cell).as_json()
    assert json.loads(json.dumps(row))["axes"] == {"seed": 1}
    assert row["state"] == "pending" and row["val_accuracy"] is None


def test_cancel_follows_cells_a_live_scheduler_moves_meanwhile(home: Path) -> None:
    from orchestrator.sweeps.cancelling import _cancel_cell, _Executors

    with Registry.open() as reg:
        reg.upsert_sweep("r", backend="fake", spec_text="name: r")
        claimed, started = reg.add_cells("r", [make_cell(f"c{i}", i, {"i": i}) for i in range(2)])
        # `kappa cancel` read both as pending; then the scheduler claimed one and started
        # the other before the cancel reached them.
        assert reg.transition(claimed, CellState.PENDING, CellState.QUEUED)
        assert reg.transition(started, CellState.PENDING, CellState.QUEUED)
        assert reg.start_attempt(started, job_id="local:/nonexistent/job")
        for stale in (claimed, started):
            assert _cancel_cell(reg, stale, _Executors(reg)) is not None
        assert [c.state for c in reg.cells("r")] == [CellState.CANCELLED] * 2
        # A cell that ended meanwhile stays as it ended.
        (done,) = reg.add_cells("r", [make_cell("c2", 2, {"i": 2})])
        reg.transition(done, CellState.PENDING, CellState.QUEUED)
        reg.start_attempt(done)
        reg.finish_attempt(done, CellState.SUCCEEDED, exit_code=0)
        assert _cancel_cell(reg, done, _Executors(reg)) is None
        assert reg.get_cell("r", "c2").state is CellState.SUCCEEDED
