"""Stopping rules and the GPU-hours cap through the real scheduler, in process: real
SQLite registry, real MLflow store, real processes (the fake backend's scripted
``stop`` curve, tests/kit/fake_backend.py). The embedded trainer's own tests are in
test_stopping_embedded.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit.cli import run_kappa
from kit.fake_backend import stop_spec
from kit.home import use_home
from kit.run_files import progress_step
from kit.scheduler import in_process_scheduler
from kit.wait import wait_until

from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.scheduler.options import SchedulerOptions
from orchestrator.stopping.rules import pruned
from orchestrator.sweeps.driver import resume, submit
from orchestrator.sweeps.submission import prepare, record
from orchestrator.tracking import Tracker

RISING = [round(0.1 * i, 2) for i in range(1, 11)]  # 0.1 .. 1.0, then 1.0 repeats


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def _only_cell(sweep: str) -> CellRecord:
    with Registry.open() as reg:
        (cell,) = reg.cells(sweep)
    return cell


def _summary(cell: CellRecord) -> dict[str, object]:
    return dict(json.loads((Path(cell.run_dir or "") / "summary.json").read_text()))


def _run(cell: CellRecord) -> tuple[str, dict[str, str]]:
    from mlflow import MlflowClient

    run = MlflowClient(Tracker().uri).get_run(cell.mlflow_run_id or "")
    return run.info.status, run.data.tags


def _status(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    # Wide (the kit's default): a table must not wrap reasons.
    ran = run_kappa(capsys, "status", *args)
    assert ran.code == 0, ran.output
    return ran.output


def test_threshold_ends_a_cell_succeeded_with_its_reason(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = stop_spec(tmp_path / "s.yaml", "stop-thr", "{threshold: {metric: score, "
                     "at_least: 0.5}}", steps=400, step_seconds=0.02, values=RISING)
    submit(spec, wait=True)
    cell = _only_cell("stop-thr")
    assert cell.state is CellState.SUCCEEDED and cell.attempts_count == 1
    assert cell.stop_reason == "threshold at step 5 (score = 0.5 >= 0.5)"
    summary = _summary(cell)
    stopped = summary["stopped"]
    assert isinstance(stopped, dict) and stopped["rule"] == "threshold" and stopped["step"] == 5
    # It ended where it saw the request: at or after step 5, long before step 400.
    assert 5 <= stopped["at_step"] < 400 and summary["steps"] == stopped["at_step"]
    assert cell.progress_step == stopped["at_step"] and cell.total_steps == 400
    assert cell.final_metrics == summary["final"]
    status, tags = _run(cell)
    assert (status, tags["kappa.stopped"]) == ("FINISHED", cell.stop_reason)

    text = _status(capsys, "stop-thr")
    assert "succeeded (stopped: threshold at step 5)" in text
    assert "saved by stopping rules" in text and "1 cell stopped" in text
    data = json.loads(_status(capsys, "stop-thr", "--json"))
    assert data["cells"][0]["stop_reason"] == cell.stop_reason
    assert data["hours"]["stopped_cells"] == 1 and data["hours"]["saved"] > 0


def test_diverged_fails_the_cell_and_is_never_retried(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = stop_spec(tmp_path / "s.yaml", "stop-div",
                     "{diverged: [{metric: score, above: 0.25, for: 3}]}", retries=2,
                     steps=400, step_seconds=0.02, values=[0.1, 0.3, 0.1, 0.3, 0.4, 0.5])
    submit(spec, wait=True)
    cell = _only_cell("stop-div")
    # 0.3 (step 2) then 0.1 resets the count: steps 4, 5, 6 are the three in a row.
    assert cell.state is CellState.FAILED and cell.attempts_count == 1
    assert cell.stop_reason == "diverged at step 6 (score above 0.25 for 3 logs; last 0.5)"
    assert cell.last_error == f"stopped: {cell.stop_reason}" and cell.retries_left == 0
    assert _summary(cell)["status"] == "failed"
    status, tags = _run(cell)
    assert (status, tags["kappa.stopped"]) == ("FAILED", cell.stop_reason)
    # A scheduler started again retries failed cells with retries left: not this one.
    resume("stop-div")
    again = _only_cell("stop-div")
    assert (again.state, again.attempts_count) == (CellState.FAILED, 1)
    assert "failed (stopped: diverged at step 6)" in _status(capsys, "stop-div")


def test_a_nonfinite_value_is_seen_and_fails_the_cell(home: Path, tmp_path: Path) -> None:
    spec = stop_spec(tmp_path / "s.yaml", "stop-nan",
                     "{diverged: [{metric: score, nonfinite: true}]}", steps=400,
                     step_seconds=0.02, values=[0.1, 0.2, "nan", 0.3])
    submit(spec, wait=True)
    cell = _only_cell("stop-nan")
    assert cell.state is CellState.FAILED
    assert cell.stop_reason == "diverged at step 3 (score non-finite; last nan)"
    lines = (Path(cell.run_dir or "") / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[2])["nonfinite"] == {"score": "nan"}


def test_a_process_that_cannot_be_asked_is_ended_and_summarised(
        home: Path, tmp_path: Path) -> None:
    spec = stop_spec(tmp_path / "s.yaml", "stop-deaf", "{threshold: {metric: score, "
                     "at_least: 0.3}}", backend="fake-deaf", steps=2000,
                     step_seconds=0.02, values=RISING)
    submit(spec, wait=True)
    cell = _only_cell("stop-deaf")
    assert cell.state is CellState.SUCCEEDED
    assert (cell.stop_reason or "").startswith("threshold at step 3 ")
    assert cell.exit_code != 0  # ended by a signal through its executor
    summary = _summary(cell)
    stopped = summary["stopped"]
    assert isinstance(stopped, dict) and 3 <= int(stopped["at_step"]) < 2000
    # Synthesized from the last metrics: the last value of every metric.
    at = int(stopped["at_step"])
    assert summary["final"] == {"steps_done": float(at), "score": RISING[min(at, 10) - 1]}
    assert _run(cell)[1]["kappa.stopped"] == cell.stop_reason


@pytest.mark.parametrize("killed", ["before the rule fired", "after the rule fired"])
def test_a_restarted_scheduler_recomputes_the_rules_from_the_logged_metrics(
        home: Path, tmp_path: Path, killed: str) -> None:
    # The rule fires at step 6; the cell holds before step 4 (before) or step 8 (after)
    # until told to go on, so the first scheduler dies at a known point.
    hold = 4 if killed.startswith("before") else 8
    spec = stop_spec(tmp_path / "s.yaml", "stop-crash", "{threshold: {metric: score, "
                     "at_least: 0.6}}", steps=50, values=RISING, hold_at=hold)
    with Registry.open() as reg:
        record(prepare(spec), reg, Tracker())
        run_dir = Path(reg.cells("stop-crash")[0].run_dir or "")
    first = in_process_scheduler("stop-crash")
    first.recover()
    first.step()  # launches the cell
    wait_until(lambda: progress_step(run_dir) == hold - 1, "the hold")  # the job waits there
    first.step()  # reads steps 1 .. hold-1: the rule fires iff step 6 is among them
    assert _only_cell("stop-crash").progress_step == hold - 1
    assert (run_dir / "stop-request.json").exists() == killed.startswith("after")
    del first  # the scheduler dies; its job runs on, held, and nothing in memory survives
    (run_dir / "go").touch()
    counts = resume("stop-crash")  # reattaches to the job and judges its history again
    assert counts[CellState.SUCCEEDED] == 1
    cell = _only_cell("stop-crash")
    assert cell.stop_reason == "threshold at step 6 (score = 0.6 >= 0.6)"
    assert cell.attempts_count == 1  # the same launch, reattached
    stopped = _summary(cell)["stopped"]
    assert isinstance(stopped, dict)
    if killed.startswith("after"):  # the request stood: the run stopped where it was held
        assert stopped["at_step"] == hold - 1
    else:
        assert 6 <= stopped["at_step"] < 50


def test_the_gpu_hours_cap_holds_cells_back_then_cancels_what_cannot_fit(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Planned: 1 GPU x 1 h per cell. A cap of 0.5 fits no cell at all: nothing starts and
    # the sweep ends with every cell cancelled for the cap.
    spec = stop_spec(tmp_path / "s.yaml", "stop-cap", "{gpu_hours: 0.5}", seeds=2,
                     resources="{gpus: 1, hours: 1}", steps=2)
    result = submit(spec, wait=True)
    with Registry.open() as reg:
        cells = reg.cells("stop-cap")
    assert [c.state for c in cells] == [CellState.CANCELLED] * 2
    assert all(c.stop_reason == "gpu_hours cap" and c.attempts_count == 0 for c in cells)
    assert "gpu_hours cap: 0.0 of 0.5 GPU-hours" in (cells[0].last_error or "")
    assert result.total_cells == 2
    assert "cancelled (gpu_hours cap)" in _status(capsys, "stop-cap")


def test_the_cap_lets_a_cell_wait_until_measured_costs_free_the_budget(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A cap of 1.5 planned hours: one cell starts, the second waits ("waits: gpu_hours
    # cap"); once the first ends its measured cost (seconds) replaces the plan, and the
    # second fits.
    spec = stop_spec(tmp_path / "s.yaml", "stop-cap2", "{gpu_hours: 1.5}", seeds=2,
                     resources="{gpus: 1, hours: 1}", steps=3, hold_at=2)
    seen: list[str] = []

    def tick(reg: Registry, sweep: str) -> None:
        cells = reg.cells(sweep)
        if not seen and cells[0].state is CellState.RUNNING:
            seen.append(_status(capsys, sweep))
            (Path(cells[0].run_dir or "") / "go").touch()
        if cells[1].state is CellState.RUNNING:
            (Path(cells[1].run_dir or "") / "go").touch()

    submit(spec, wait=True, max_parallel=2, options=SchedulerOptions(
        poll_interval=0.05, on_tick=tick))
    assert "pending (waits: gpu_hours cap)" in seen[0] and "of cap 1.5" in seen[0]
    with Registry.open() as reg:
        assert [c.state for c in reg.cells("stop-cap2")] == [CellState.SUCCEEDED] * 2


def test_a_pruner_stops_a_cell_as_a_rule_would(home: Path, tmp_path: Path) -> None:
    spec = stop_spec(tmp_path / "s.yaml", "stop-prune", "{gpu_hours: 100}", steps=50,
                     values=RISING, hold_at=4, resources="{gpus: 1, hours: 1}")
    with Registry.open() as reg:
        record(prepare(spec), reg, Tracker())
        cell = reg.cells("stop-prune")[0]
    run_dir = Path(cell.run_dir or "")
    scheduler = in_process_scheduler("stop-prune")
    scheduler.recover()
    scheduler.step()
    wait_until(lambda: progress_step(run_dir) == 3, "step 3")
    assert scheduler.stop_cell(cell.cell_id, pruned(3, "median pruner"))
    assert not scheduler.stop_cell(cell.cell_id, pruned(3))  # the first request stands
    assert not scheduler.stop_cell("no-such-cell", pruned(3))
    (run_dir / "go").touch()
    wait_until(lambda: (scheduler.step(), _only_cell("stop-prune").is_terminal)[1], "the end")
    done = _only_cell("stop-prune")
    assert (done.state, done.stop_reason) == (CellState.SUCCEEDED,
                                               "pruned at step 3 (median pruner)")
    assert _summary(done)["stopped"] == {"rule": "pruned", "step": 3, "outcome": "succeeded",
                                         "reason": done.stop_reason, "at_step": 3}


def test_a_rule_on_a_metric_no_run_logs_warns(
        home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spec = stop_spec(tmp_path / "s.yaml", "stop-typo", "{threshold: {metric: scroe, "
                     "at_least: 0.1}}", steps=3, values=RISING)
    with caplog.at_level("WARNING", logger="orchestrator.stopping.hook"):
        submit(spec, wait=True)
    cell = _only_cell("stop-typo")
    assert (cell.state, cell.stop_reason, cell.progress_step) == (CellState.SUCCEEDED, None, 3)
    assert "stopping rule metric 'scroe' was never logged" in caplog.text
