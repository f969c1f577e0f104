"""The scheduler end to end, in process: real SQLite registry, real MLflow store, real
processes (the fake backend, tests/kit/fake_backend.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from kit.fake_backend import write_spec
from kit.home import completions, launches, use_home

from orchestrator.registry import CellState, Registry
from orchestrator.scheduler.options import SchedulerOptions
from orchestrator.sweeps.cancelling import cancel
from orchestrator.sweeps.driver import resume, submit
from orchestrator.sweeps.stores import Stores


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def test_submit_wait_runs_every_cell_and_records_everything(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "sched-basic", seeds=3, steps=3)
    result = submit(spec, wait=True, max_parallel=2)
    assert (result.total_cells, result.new_cells) == (3, 3)
    with Registry.open() as reg:
        cells = reg.cells("sched-basic")
        assert [c.state for c in cells] == [CellState.SUCCEEDED] * 3
        for cell in cells:
            assert cell.attempts_count == 1 and cell.exit_code == 0
            assert cell.progress_step == 3 and cell.total_steps == 3
            assert cell.final_metrics["val-core/toy/acc/mean@1"] == 0.5 + cell.axes["seed"] / 100
            assert cell.final_metrics["eval/toy/mean@4"] == pytest.approx(
                0.41 + cell.axes["seed"] / 100)
            run_dir = Path(cell.run_dir or "")
            assert run_dir == home / "runs" / "sched-basic" / cell.cell_id
            assert "seed: " in (run_dir / "config.yaml").read_text()
            assert "fake trainer: done" in (run_dir / "train.log").read_text()
            env = json.loads((run_dir / "env.json").read_text())
            assert env["MLFLOW_RUN_ID"] == cell.mlflow_run_id
            attempts = reg.attempts(cell)
            assert [(a.state.value, a.exit_code) for a in attempts] == [("succeeded", 0)]
            assert attempts[0].log_path == str(run_dir / "train.log")
        sweep = reg.get_sweep("sched-basic")
    assert sorted(completions(home)) == sorted(c.cell_id for c in cells)

    from mlflow import MlflowClient

    from orchestrator.tracking import Tracker

    client = MlflowClient(Tracker().uri)
    for cell in cells:
        run = client.get_run(cell.mlflow_run_id or "")
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == sweep.mlflow_parent_run_id


def test_resubmit_is_idempotent_and_adds_only_new_cells(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "sched-idem", seeds=2, steps=2)
    submit(spec, wait=True)
    again = submit(spec, wait=True)
    assert (again.new_cells, again.requeued_cells) == (0, 0)
    assert len(completions(home)) == 2  # nothing ran twice
    write_spec(spec, "sched-idem", seeds=3, steps=2)  # one more seed
    more = submit(spec, wait=True)
    assert (more.total_cells, more.new_cells) == (3, 1)
    assert len(completions(home)) == 3
    with Registry.open() as reg:
        assert reg.counts("sched-idem")[CellState.SUCCEEDED] == 3
        assert all(c.attempts_count == 1 for c in reg.cells("sched-idem"))
    rerun = submit(spec, wait=True, rerun=True)
    assert rerun.requeued_cells == 3
    assert len(completions(home)) == 6
    prev = list((home / "runs" / "sched-idem").glob("*.prev-1"))
    assert len(prev) == 3  # old run folders kept beside the fresh ones


def test_retries_with_backoff_until_success(home: Path, tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    spec = write_spec(tmp_path / "s.yaml", "sched-retry", seeds=1, retries=2, fail_first=2)
    with caplog.at_level(logging.INFO, "orchestrator.scheduler"):
        submit(spec, wait=True)
    with Registry.open() as reg:
        (cell,) = reg.cells("sched-retry")
        assert cell.state is CellState.SUCCEEDED
        attempts = reg.attempts(cell)
    assert [(a.state.value, a.exit_code) for a in attempts] == [
        ("failed", 3), ("failed", 3), ("succeeded", 0)]
    assert launches(Path(cell.run_dir or "")) == [0, 0, 0]
    # The scheduler's log: one line for each launch, retry and end.
    lines = [r.getMessage() for r in caplog.records if r.name == "orchestrator.scheduler.loop"]
    c = cell.cell_id
    expected = ["driving sweep sched-retry"]
    for attempt in (1, 2):
        expected += [f"launched {c} (attempt {attempt}): job local:",
                     f"{c} failed (attempt {attempt}: exit code 3); retried in"]
    expected += [f"launched {c} (attempt 3): job local:", f"{c} succeeded after 3 attempt(s)",
                 "sweep sched-retry: nothing left to run (1 succeeded)"]
    assert len(lines) == len(expected), lines
    assert all(line.startswith(start) for line, start in zip(lines, expected, strict=True)), lines


def test_retries_are_bounded(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "sched-fail", seeds=1, retries=1, fail_first=5)
    submit(spec, wait=True)
    with Registry.open() as reg:
        (cell,) = reg.cells("sched-fail")
        assert cell.state is CellState.FAILED
        assert cell.attempts_count == 2
        assert "exit code 3" in (cell.last_error or "")
        assert "failing on purpose" in (cell.last_error or "")
    assert completions(home) == []


def test_cancel_while_running_is_noticed_by_the_scheduler(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "sched-cancel", seeds=2, steps=3, hold_at=1)
    cancelled: list[int] = []

    def tick(reg: Registry, sweep: str) -> None:
        # Cancel the sweep from "outside" once both cells are running.
        if not cancelled and reg.counts(sweep)[CellState.RUNNING] == 2:
            cancelled.append(len(cancel(sweep)))

    submit(spec, wait=True, options=SchedulerOptions(on_tick=tick, poll_interval=0.05))
    assert cancelled == [2]
    with Registry.open() as reg:
        cells = reg.cells("sched-cancel")
        assert [c.state for c in cells] == [CellState.CANCELLED] * 2
        assert [a.state.value for c in cells for a in reg.attempts(c)] == ["cancelled"] * 2
    assert completions(home) == []
    # Resubmitting runs the cancelled cells again; release their hold first.
    for cell in cells:
        (Path(cell.run_dir or "") / "go").touch()
    assert submit(spec, wait=True).requeued_cells == 2
    assert len(completions(home)) == 2


def test_resume_of_a_finished_sweep_does_nothing(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "sched-done", seeds=1, steps=1)
    submit(spec, wait=True)
    counts = resume("sched-done", Stores())
    assert counts[CellState.SUCCEEDED] == 1
    assert len(completions(home)) == 1
