"""A stop is an outcome only once the run confirms it (issue 19): the trainer's side
(:class:`StopPoint`), the confirmation test, how the stopping hook ends a cell, a
scheduler that finds the job gone, and stop requests made during a burst of launches."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kit.cells import make_cell
from kit.fake_backend import FakeBackend, FakeSettings
from kit.idle_job import IdleJob

from orchestrator.executors.base import Executor, JobHandle, JobResources
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.runs.stop_request import (
    StopPoint,
    StopRequest,
    confirms,
    logged_through,
    read_stop_request,
    write_stop_request,
)
from orchestrator.scheduler.hooks import LoopControl, SchedulerHook
from orchestrator.scheduler.loop import SweepScheduler
from orchestrator.scheduler.options import SchedulerOptions
from orchestrator.stopping.hook import SweepStopping

THRESHOLD = StopRequest("threshold", 8, "threshold at step 8 (x = 1 >= 1)")
DIVERGED = StopRequest("diverged", 3, "diverged at step 3 (x above 1 for 2 logs)", "failed")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _summary(request: StopRequest, at: int, status: str | None = None) -> dict[str, Any]:
    stopped = {"rule": request.rule, "step": request.step, "reason": request.reason,
               "outcome": request.outcome, "at_step": at}
    return {"status": status or request.outcome, "steps": at, "final": {"eval/x": 0.5},
            "stopped": stopped}


def _lines(path: Path, steps: list[int], cut: bool = False) -> None:
    text = "".join(json.dumps({"seq": i, "step": s, "metrics": {}}) + "\n"
                   for i, s in enumerate(steps))
    path.write_text(text + ('{"step": 99, "metr' if cut else ""))


def test_the_request_file_keeps_where_and_when_but_the_summary_only_where(
        tmp_path: Path) -> None:
    from orchestrator.runs.stop_request import stopped_block

    full = StopRequest("plateau", 4, "plateau at step 4 (x)", at_step=6, requested_at=12.5)
    write_stop_request(tmp_path, full)
    assert read_stop_request(tmp_path) == full
    assert json.loads((tmp_path / "stop-request.json").read_text())["requested_at"] == 12.5
    assert stopped_block(full, 6) == {"rule": "plateau", "step": 4, "outcome": "succeeded",
                                      "reason": "plateau at step 4 (x)", "at_step": 6}
    assert "at_step" not in THRESHOLD.as_json()  # not known until a run saw it


def test_a_run_trains_on_to_the_requested_step_and_records_where_it_stops(
        tmp_path: Path) -> None:
    assert not StopPoint(tmp_path).due(0)  # no request: no stop
    write_stop_request(tmp_path, THRESHOLD)
    point = StopPoint(tmp_path, reached=-1)  # a resumed attempt, from step 0
    assert [point.due(d) for d in (0, 5, 7)] == [False] * 3
    assert point.due(8) and point.request is not None and point.request.at_step == 8
    assert read_stop_request(tmp_path) == point.request  # recorded before acting on it
    # An attempt that sees the request late stops where it is.
    write_stop_request(tmp_path, THRESHOLD)
    late = StopPoint(tmp_path, reached=-1)
    assert late.due(11) and read_stop_request(tmp_path).at_step == 11  # type: ignore[union-attr]
    # The next attempt keeps that promise: from its checkpoint at 10, it trains to 11.
    again = StopPoint(tmp_path, reached=-1)
    assert not again.due(10) and again.due(11)


def test_a_stop_never_lands_before_a_step_an_earlier_attempt_logged(tmp_path: Path) -> None:
    _lines(tmp_path / "metrics.jsonl", [0, 1, 2])
    _lines(tmp_path / "mlflow-outbox.jsonl", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], cut=True)
    assert logged_through(tmp_path) == 10  # the outbox: MLflow may have step 10 already
    assert logged_through(tmp_path / "nothing") == -1
    write_stop_request(tmp_path, THRESHOLD)
    point = StopPoint(tmp_path, logged_through(tmp_path))
    assert not point.due(8) and point.due(10)
    assert read_stop_request(tmp_path).at_step == 10  # type: ignore[union-attr]


def test_only_a_report_of_this_stop_at_or_after_its_step_confirms_it() -> None:
    assert confirms(_summary(THRESHOLD, 8), THRESHOLD)
    assert confirms(_summary(THRESHOLD, 12), THRESHOLD)
    assert not confirms(_summary(THRESHOLD, 0), THRESHOLD)  # the bug: 0 steps
    assert not confirms(_summary(DIVERGED, 8), THRESHOLD)
    assert not confirms(_summary(THRESHOLD, 8, "failed"), THRESHOLD)
    assert not confirms({"status": "succeeded", "steps": 8, "final": {}}, THRESHOLD)
    assert not confirms(None, THRESHOLD)


def test_the_hook_ends_a_cell_only_on_a_confirmed_stop(tmp_path: Path) -> None:
    hook = SweepStopping(FakeBackend())
    assert hook.on_exit("c", tmp_path, 0, _summary(THRESHOLD, 8)) is None  # no request
    write_stop_request(tmp_path, THRESHOLD)
    ending = hook.on_exit("c", tmp_path, 0, _summary(THRESHOLD, 9))
    assert ending is not None and ending.state is CellState.SUCCEEDED
    assert ending.stop_reason == THRESHOLD.reason and ending.final_metrics == {"eval/x": 0.5}
    # Killed before it stopped: an ordinary failure; the request stands for the retry.
    assert hook.on_exit("c", tmp_path, -9, None) is None
    hook.on_launch("c", tmp_path)
    assert read_stop_request(tmp_path) == THRESHOLD
    # A run that reports a stop short of the request: a failed attempt, retried.
    short = hook.on_exit("c", tmp_path, 0, _summary(THRESHOLD, 0))
    assert short is not None and short.state is CellState.FAILED
    assert short.stop_reason is None and "other than the one requested" in (
        short.last_error or "")


def test_diverged_is_final_whatever_became_of_the_job(tmp_path: Path) -> None:
    hook = SweepStopping(FakeBackend())
    write_stop_request(tmp_path, DIVERGED)
    (tmp_path / "metrics.jsonl").write_text('{"step": 3, "metrics": {"x": 2.0}}\n')
    ending = hook.on_exit("c", tmp_path, -9, None)  # killed right after the request
    assert ending is not None and ending.state is CellState.FAILED
    assert ending.stop_reason == DIVERGED.reason
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "failed"
    hook.on_launch("c", tmp_path)  # only the user requeues it: it starts unasked
    assert read_stop_request(tmp_path) is None


def test_a_synthesized_summary_reports_the_step_its_final_values_come_from(
        tmp_path: Path) -> None:
    from orchestrator.runs.stop_request import synthesize_summary

    # A progress file read a moment before the metrics' last line (a CI flake): the
    # summary's step follows the metrics its final values are taken from.
    (tmp_path / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "metrics": {"x": s / 10}}) + "\n" for s in (1, 2, 3, 4)))
    summary = synthesize_summary(tmp_path, THRESHOLD, 3)
    assert summary["steps"] == summary["stopped"]["at_step"] == 4
    assert summary["final"] == {"x": 0.4}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert synthesize_summary(empty, THRESHOLD, 3)["steps"] == 3  # nothing logged yet


def test_a_request_is_stamped_with_when_it_was_made(tmp_path: Path) -> None:
    before = time.time()
    assert SweepStopping(FakeBackend()).request_stop("c", tmp_path, IdleJob(), THRESHOLD)
    made = read_stop_request(tmp_path)
    assert made is not None and made.requested_at is not None
    assert before - 0.01 <= made.requested_at <= time.time() + 0.01


def _running_cell(reg: Registry, run_dir: Path) -> CellRecord:
    reg.upsert_sweep("r", backend="fake", spec_text="name: r")
    (cell,) = reg.add_cells("r", [make_cell("c0", 0, {"i": 0})], max_retries=2)
    reg.update_cell(cell, run_dir=str(run_dir))
    reg.transition(cell, CellState.PENDING, CellState.QUEUED)
    assert reg.start_attempt(cell, job_id="local:/nonexistent/job")  # it vanished
    return cell


@pytest.mark.parametrize("case", ["diverged", "confirmed", "unconfirmed"])
def test_a_scheduler_that_finds_the_job_gone_honours_the_request(
        tmp_path: Path, case: str) -> None:
    from orchestrator.executors.local import LocalExecutor

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"step": 9, "metrics": {"x": 2.0}}\n')
    request = DIVERGED if case == "diverged" else THRESHOLD
    write_stop_request(run_dir, request)
    if case == "confirmed":  # it had stopped and written its summary before the kill
        (run_dir / "summary.json").write_text(json.dumps(_summary(THRESHOLD, 9)))
        (run_dir / "progress.json").write_text('{"step": 9, "total_steps": 40}')
    with Registry.open() as reg:
        cell = _running_cell(reg, run_dir)
        SweepScheduler(reg, "r", FakeBackend(), LocalExecutor(),
                       hooks=[SweepStopping(FakeBackend())]).recover()
        after = reg.get_cell("r", cell.cell_id)
    if case == "diverged":  # final: failed with its reason, never run again
        assert (after.state, after.stop_reason) == (CellState.FAILED, DIVERGED.reason)
        assert after.retries_left == 0
    elif case == "confirmed":
        assert (after.state, after.stop_reason) == (CellState.SUCCEEDED, THRESHOLD.reason)
        assert after.progress_step == 9 and after.final_metrics == {"eval/x": 0.5}
    else:  # requeued, uncharged: the next attempt finishes the stop
        assert after.state is CellState.PENDING and after.max_retries == 3
        assert read_stop_request(run_dir) == THRESHOLD


class _SlowSubmits(Executor):
    """Each submit takes 0.1 s (a loaded cluster, a slow tracking store): a sweep's first
    pass launches for a while."""

    name = "slow"
    job_id_prefix = "slow:"

    def __init__(self) -> None:
        self.jobs = 0

    def submit(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: Path, log_path: Path,
               resources: JobResources = JobResources()) -> JobHandle:
        time.sleep(0.1)
        self.jobs += 1
        return IdleJob(f"slow:{self.jobs}")

    def capacity(self, gpus: int = 0) -> int:
        return 8 - self.jobs

    def reattach(self, job_id: str) -> JobHandle | None:
        return None


class _Judged(SchedulerHook):
    def __init__(self) -> None:
        self.polls: list[str] = []

    def on_poll(self, loop: LoopControl, cell: CellRecord, run_dir: Path,
                job: JobHandle) -> None:
        self.polls.append(cell.cell_id)


def test_running_cells_are_judged_while_a_sweep_is_still_launching(tmp_path: Path) -> None:
    demand = FakeBackend().demand(FakeSettings()).to_json()
    judged = _Judged()
    with Registry.open() as reg:
        reg.upsert_sweep("burst", backend="fake", spec_text="name: burst")
        cells = [make_cell(f"c{i}", i, {"i": i}) for i in range(6)]
        reg.add_cells("burst", cells, demands={c.cell_id: demand for c in cells})
        scheduler = SweepScheduler(reg, "burst", FakeBackend(), _SlowSubmits(),
                                   options=SchedulerOptions(poll_interval=0.05),
                                   hooks=[judged])
        scheduler.step()  # one pass: six launches, 0.6 s
        assert reg.counts("burst")[CellState.RUNNING] == 6
    # The first cell launched was judged after each later launch, not once the pass ended.
    assert judged.polls.count(judged.polls[0]) >= 4, judged.polls


def test_never_logged_is_judged_on_the_whole_history_after_a_restart(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A scheduler restarted while its cell trains on to its group's stop reads the run's
    rows but judges nothing more, so its view of the history lacked the very metric the
    cell stopped on: "never logged (misspelt?)" was printed for it."""
    from types import SimpleNamespace

    from orchestrator.spec.stop_block import StopRules

    rules = StopRules.model_validate({"threshold": {"metric": "score", "at_least": 0.5},
                                      "together": ["arm"]})
    (tmp_path / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "metrics": {"score": s / 4}}) + "\n" for s in (1, 2, 3, 4)))
    group_stop = StopRequest("threshold", 6, "threshold at step 6 (score >= 0.5)", met_by=2)
    write_stop_request(tmp_path, group_stop)
    restarted = SweepStopping(FakeBackend(), rules, sweep="s")
    restarted.on_poll(SimpleNamespace(), SimpleNamespace(cell_id="c"),  # type: ignore[arg-type]
                      tmp_path, IdleJob())
    with caplog.at_level("WARNING", logger="orchestrator.stopping.hook"):
        ending = restarted.on_exit("c", tmp_path, 0, _summary(group_stop, 6))
    assert ending is not None and ending.stop_reason == group_stop.reason
    assert "never logged" not in caplog.text
    # A metric the run really never logged is still named.
    typo = SweepStopping(FakeBackend(), StopRules.model_validate(
        {"threshold": {"metric": "scroe", "at_least": 0.5}}), sweep="s")
    typo.on_poll(SimpleNamespace(), SimpleNamespace(cell_id="c"),  # type: ignore[arg-type]
                 tmp_path, IdleJob())
    with caplog.at_level("WARNING", logger="orchestrator.stopping.hook"):
        typo.on_exit("c", tmp_path, 0, None)
    assert "'scroe' was never logged by cell c" in caplog.text
