"""Choosing a sweep's executor (remembered per sweep, resolved from job ids) and the
progress display of ``kappa submit --wait`` (live bars on a terminal, throttled lines in
a log)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from kit.cells import make_cell, status_of
from rich.console import Console

from orchestrator.cli.sweep_views import (
    HEARTBEAT_S,
    LineProgress,
    LiveProgress,
    progress_display,
    progress_line,
    should_print_progress,
)
from orchestrator.errors import UserInputError
from orchestrator.executors import (
    executor_for_job,
    executor_name_for_job,
    executor_options,
    get_executor,
)
from orchestrator.executors.local import LocalExecutor
from orchestrator.grid.plan import SweepPlan
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.sweeps.driver import resume
from orchestrator.sweeps.executor_choice import (
    ExecutorChoice,
    choose_executor,
    remember_executor,
    remembered_executor,
)
from orchestrator.sweeps.stores import Stores

S = CellState


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


# -- executor choice ---------------------------------------------------------------------
def test_job_ids_name_their_executor_and_unknown_ones_are_refused() -> None:
    assert executor_name_for_job("local:/runs/s/c/.jobs/train.log.ab12") == "local"
    assert executor_name_for_job("ray-jobs:kappa-train-ab12") == "ray_jobs"
    with pytest.raises(UserInputError, match="ray-jobs:") as err:
        executor_name_for_job("nope:123")  # lists the known prefixes, never guesses
    assert "local:" in str(err.value)


def test_executor_for_job_takes_only_the_options_its_executor_knows() -> None:
    executor = executor_for_job("local:/x", address="http://head:8265", max_parallel=3)
    assert isinstance(executor, LocalExecutor) and executor.max_parallel == 3
    assert executor_options("ray_jobs", max_parallel=None, address="http://h:1", junk=1) == {
        "address": "http://h:1"}
    with pytest.raises(UserInputError, match="--ray-address"):
        executor_for_job("ray-jobs:kappa-x", max_parallel=2)  # no address: say how to give it
    with pytest.raises(UserInputError, match="RAY_ADDRESS"):
        get_executor("ray_jobs")
    with pytest.raises(UserInputError, match="local, ray_jobs"):
        executor_options("ray-jobs")


def test_choice_defaults_to_the_sweeps_last_executor_else_local(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    head = {"address": "http://head:8265"}
    assert choose_executor("s") == ExecutorChoice("local", {})
    with pytest.raises(UserInputError, match="--ray-address"):
        choose_executor("s", ExecutorChoice("ray_jobs"))
    with pytest.raises(UserInputError, match="local, ray_jobs"):
        choose_executor("s", ExecutorChoice("ray-jobs", head))
    with pytest.raises(UserInputError, match=r"executor\.address"):
        choose_executor("s", ExecutorChoice("local", head))  # an option local lacks
    assert not (home / "registry.db").exists()  # choosing writes nothing

    ray = choose_executor("s", ExecutorChoice("ray_jobs", {**head, "max_parallel": "3"}))
    assert ray == ExecutorChoice("ray_jobs", {**head, "max_parallel": 3})  # normalised
    with Registry.open() as reg:
        reg.upsert_sweep("s", backend="embedded", spec_text="name: s")
    remember_executor("s", ray)
    assert remembered_executor("s") == ray
    assert choose_executor("s") == ray  # resume / a background scheduler keep it
    other = {"address": "http://other:8265"}
    shortcut = {"ray_jobs": other}
    assert choose_executor("s", ExecutorChoice(None, shortcuts=shortcut)).options == {
        **other, "max_parallel": 3}  # a shortcut overrides the remembered option only
    # ... and is dropped by any other executor.
    assert choose_executor("s", ExecutorChoice("local", shortcuts=shortcut)) == ExecutorChoice(
        "local", {})
    assert choose_executor("other") == ExecutorChoice("local", {})  # per sweep
    assert ray.cli_args() == ["--executor", "ray_jobs"]  # options travel in env()
    assert json.loads(ray.env()["KAPPA_EXECUTOR_OPTIONS"]) == {**head, "max_parallel": 3}
    assert ExecutorChoice().cli_args() == [] and ExecutorChoice().env() == {}



def _running_sweep(job_id: str) -> None:
    with Registry.open() as reg:
        reg.upsert_sweep("r", backend="embedded", spec_text="name: r",
                         plan=SweepPlan(name="r", backend="embedded").to_json())
        (cell,) = reg.add_cells("r", [make_cell("c0", 0, {"seed": 0})])
        assert reg.transition(cell, S.PENDING, S.QUEUED)
        assert reg.start_attempt(cell, job_id=job_id)


def test_resume_refuses_an_executor_that_cannot_reattach_the_running_jobs() -> None:
    _running_sweep("ray-jobs:kappa-train-ab12")
    with pytest.raises(UserInputError, match="--executor ray_jobs") as err:
        resume("r", Stores())  # the default (local) would requeue a live Ray job
    assert "ray_jobs jobs" in err.value.summary
    with Registry.open() as reg:
        assert reg.get_cell("r", "c0").state is S.RUNNING  # untouched


# -- progress display ----------------------------------------------------------------------
def test_a_log_line_is_due_on_a_change_or_after_the_heartbeat() -> None:
    a = {S.PENDING: 2, S.RUNNING: 1, S.SUCCEEDED: 0}
    assert should_print_progress(a, None, now=0.0, last_printed=None)
    assert not should_print_progress(dict(a), a, now=29.9, last_printed=0.0)
    assert should_print_progress(a, a, now=30.0, last_printed=0.0)
    assert should_print_progress({S.PENDING: 1, S.RUNNING: 2}, a, now=1.0, last_printed=0.0)
    # A state that appears with zero cells is no change.
    assert not should_print_progress({S.PENDING: 2, S.RUNNING: 1, S.FAILED: 0}, a, 1.0, 0.0)
    assert should_print_progress(a, a, now=5.0, last_printed=0.0, every=5.0)
    assert HEARTBEAT_S == 30.0


def _cells(steps: dict[str, int | None]) -> list[CellRecord]:
    """Real registry snapshots: one running cell per entry, at that step of 10."""
    with Registry.open() as reg:
        reg.upsert_sweep("p", backend="embedded", spec_text="name: p")
        cells = reg.add_cells("p", [make_cell(c, i, {"seed": i}) for i, c in enumerate(steps)])
        for cell, step in zip(cells, steps.values(), strict=True):
            reg.transition(cell, S.PENDING, S.QUEUED)
            reg.start_attempt(cell)
            if step is not None:
                reg.update_progress(cell, step, 10)
        return reg.cells("p", [S.RUNNING])


def test_log_progress_prints_only_changes_and_heartbeats() -> None:
    out = io.StringIO()
    clock = [0.0]
    display = LineProgress(Console(file=out, width=200), clock=lambda: clock[0])
    running = _cells({"aaaaaa01": 3, "bbbbbb02": None})
    counts = {S.PENDING: 1, S.RUNNING: 2}
    display.update(status_of(counts, running))
    for second in range(1, 30):  # every poll of a long cell: nothing new to say
        clock[0] = float(second)
        display.update(status_of(counts, running))
    clock[0] = 30.0
    display.update(status_of(counts, running))  # the heartbeat
    display.update(status_of({S.RUNNING: 2, S.SUCCEEDED: 1}, running))  # a change
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert "0/3 done" in lines[0] and "aaaaaa:3/10" in lines[0] and "bbbbbb:starting" in lines[0]
    assert "1/3 done" in lines[2] and "1 succeeded" in lines[2]
    assert progress_line(status_of({S.PENDING: 1})) == "0/1 done · [dim]1 pending[/]"


def test_terminal_progress_has_a_sweep_bar_and_one_bar_per_running_cell() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    display = progress_display(console)
    assert isinstance(display, LiveProgress)
    running = _cells({"aaaaaa01": 3, "bbbbbb02": 7})
    display.update(status_of({S.RUNNING: 2, S.SUCCEEDED: 1, S.PENDING: 1}, running))
    tasks = {t.id: t for t in display.progress.tasks}
    sweep = tasks[display.sweep_task]
    assert (sweep.completed, sweep.total) == (1, 4)
    assert {cid: (tasks[t].completed, tasks[t].total) for cid, t in display.cell_tasks.items()
            } == {"aaaaaa01": (3, 10), "bbbbbb02": (7, 10)}
    display.update(status_of({S.RUNNING: 1, S.SUCCEEDED: 3}, running[1:]))  # aaaaaa01 ended
    assert list(display.cell_tasks) == ["bbbbbb02"]
    assert len(display.progress.tasks) == 2
    display.close()
    assert not display.progress.live.is_started
    assert isinstance(progress_display(Console(file=io.StringIO())), LineProgress)
