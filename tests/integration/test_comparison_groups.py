"""Comparison groups (``stop.together``) through the real scheduler: real SQLite registry,
real MLflow store, real processes (the fake backend's scripted ``score`` curves, which
hold before a chosen step until the test says go, so every decision lands at a known
point whatever the machine's load).

Two arms of one seed form a group: ``early`` reaches the threshold at step 2, ``late``
at step 8. Both are held before step 12; the group's decision, made once both have met
the rule, is a step past 11; both train on to it and stop there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.cli import run_kappa
from kit.home import use_home
from kit.run_files import progress_step
from kit.scheduler import in_process_scheduler
from kit.wait import wait_until

from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.runs.stop_request import read_stop_request
from orchestrator.scheduler.loop import SweepScheduler
from orchestrator.sweeps.driver import resume
from orchestrator.sweeps.submission import prepare, record
from orchestrator.tracking import Tracker

HOLD = 12
# Room past the hold: the group's margin grows with the members' speed (100 steps/s here)
# times the time between scheduler passes, so a loaded machine can put the stop far on.
STEPS = 400
ARMS = {"early": [0.1, 0.6], "late": [0.1] * 7 + [0.6],
        "broken": {"values": [0.1], "fail_at_step": 5}}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = use_home(tmp_path / "home", monkeypatch)
    yield home
    # Jobs still waiting at their hold (a test that failed, or never said go) go on to
    # their stop or their end and exit, rather than outlive the test.
    for run_dir in (home / "runs").glob("*/*"):
        if run_dir.is_dir():
            (run_dir / "go").touch()


def _spec(path: Path, name: str, arms: list[str], retries: int = 0) -> Path:
    variants = {a: ARMS[a] if isinstance(ARMS[a], dict) else {"values": ARMS[a]}
                for a in arms}
    path.write_text(
        f"name: {name}\nbackend: fake\nretries: {retries}\n"
        f"base: {{curve: stop, steps: {STEPS}, step_seconds: 0.01, hold_at: {HOLD}}}\n"
        f"axes:\n  arm: {json.dumps(variants)}\n  seed: [0]\n"
        "stop: {threshold: {metric: score, at_least: 0.5}, together: [arm]}\n")
    return path


def _cells(sweep: str) -> dict[str, CellRecord]:
    with Registry.open() as reg:
        return {str(c.axes["arm"]): c for c in reg.cells(sweep)}


def _start(tmp_path: Path, name: str, arms: list[str]) -> tuple[SweepScheduler, dict[str, Path]]:
    spec = _spec(tmp_path / f"{name}.yaml", name, arms)
    with Registry.open() as reg:
        record(prepare(spec), reg, Tracker())
    first = in_process_scheduler(name, max_parallel=3)
    first.recover()
    first.step()  # launches every arm
    dirs = {arm: Path(c.run_dir or "") for arm, c in _cells(name).items()}
    wait_until(lambda: all(progress_step(dirs[a]) == HOLD - 1 for a in arms if a != "broken"),
              "the arms to reach their hold")
    return first, dirs


def _collect(scheduler: SweepScheduler, sweep: str, arms: list[str]) -> None:
    """Step ``scheduler`` until the arms' cells have ended."""
    wait_until(lambda: (scheduler.step(), all(
        _cells(sweep)[a].is_terminal for a in arms))[1], "the scheduler to collect them")


def _decision(run_dir: Path) -> tuple[object, ...] | None:
    """The group decision a member holds (what every member must share)."""
    request = read_stop_request(run_dir)
    return None if request is None else (request.rule, request.step, request.reason,
                                         request.met_by)


def _ended_together(name: str, arms: list[str]) -> int:
    cells = _cells(name)
    steps = set()
    for arm in arms:
        cell = cells[arm]
        summary = json.loads((Path(cell.run_dir or "") / "summary.json").read_text())
        stopped = summary["stopped"]
        assert cell.state is CellState.SUCCEEDED, (arm, cell.state, cell.last_error)
        assert "together with" in (cell.stop_reason or ""), cell.stop_reason
        assert stopped["at_step"] == stopped["step"] == summary["steps"] == cell.progress_step
        assert cell.final_metrics == summary["final"]  # evaluated where it stopped
        assert summary["final"]["eval/toy/mean@4"] == 0.25 + stopped["at_step"] / 1000
        steps.add(stopped["at_step"])
    (step,) = steps  # every member at one step
    assert HOLD + 1 <= step < STEPS
    return step


def test_a_group_stops_at_its_later_member_and_every_member_there(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, dirs = _start(tmp_path, "grp", ["early", "late"])
    first.step()  # reads steps 1..11 of both: early met the rule at 2, late at 8
    requests = {a: read_stop_request(dirs[a]) for a in ("early", "late")}
    assert _decision(dirs["early"]) == _decision(dirs["late"]) is not None
    assert requests["early"] is not None
    assert requests["early"].met_by == 8 and requests["early"].step >= HOLD + 1
    for run_dir in dirs.values():
        (run_dir / "go").touch()
    wait_until(lambda: all((d / "summary.json").exists() for d in dirs.values()), "the stops")
    _collect(first, "grp", ["early", "late"])
    step = _ended_together("grp", ["early", "late"])
    assert step == requests["early"].step
    ran = run_kappa(capsys, "status", "grp")
    assert ran.code == 0, ran.output
    assert "cell-hours saved per comparison group: seed=0: " in ran.out
    assert f"at step {step}" in ran.out


def test_without_groups_each_cell_stops_where_its_own_rule_fires(
        home: Path, tmp_path: Path) -> None:
    spec = _spec(tmp_path / "alone.yaml", "alone", ["early", "late"])
    spec.write_text(spec.read_text().replace(", together: [arm]", ""))
    with Registry.open() as reg:
        record(prepare(spec), reg, Tracker())
    first = in_process_scheduler("alone", max_parallel=3)
    first.recover()
    first.step()
    dirs = {arm: Path(c.run_dir or "") for arm, c in _cells("alone").items()}
    wait_until(lambda: all(progress_step(d) == HOLD - 1 for d in dirs.values()), "the holds")
    first.step()
    steps = {a: read_stop_request(d).step for a, d in dirs.items()}  # type: ignore[union-attr]
    assert steps == {"early": 2, "late": 8}


def test_a_member_that_fails_for_good_does_not_hold_the_others(
        home: Path, tmp_path: Path) -> None:
    arms = ["early", "late", "broken"]
    first, dirs = _start(tmp_path, "grp-fail", arms)
    wait_until(lambda: (dirs["broken"] / "launches.log").exists()
              and _cells("grp-fail")["broken"].state is CellState.RUNNING, "broken's launch")
    # The broken arm crashes at step 5; once collected it has left the group.
    wait_until(lambda: (first.step(), _cells("grp-fail")["broken"].state)[1]
              is CellState.FAILED, "the broken arm to fail")
    first.step()
    request = read_stop_request(dirs["early"])
    assert request is not None and _decision(dirs["early"]) == _decision(dirs["late"])
    assert "together with 1 other cell" in request.reason  # early and late only
    for arm in ("early", "late"):
        (dirs[arm] / "go").touch()
    wait_until(lambda: all((dirs[a] / "summary.json").exists() for a in ("early", "late")),
              "the stops")
    _collect(first, "grp-fail", ["early", "late"])
    _ended_together("grp-fail", ["early", "late"])
    assert _cells("grp-fail")["broken"].state is CellState.FAILED


@pytest.mark.parametrize("crash", ["between the members' requests", "before any request"])
def test_a_restarted_scheduler_finishes_the_group_decision(
        home: Path, tmp_path: Path, crash: str) -> None:
    first, dirs = _start(tmp_path, "grp-crash", ["early", "late"])
    if crash.startswith("between"):
        first.step()  # decides and writes both requests ...
        decided = _decision(dirs["early"])
        assert decided is not None
        # ... and a crash between the two writes is this state: the second never landed.
        (dirs["late"] / "stop-request.json").unlink()
    del first  # the scheduler dies; its jobs wait at their hold, nothing in memory survives
    second = in_process_scheduler("grp-crash", max_parallel=3)
    second.recover()  # reattaches to both jobs
    second.step()  # reads the decision back, or makes it from the logged histories
    request = read_stop_request(dirs["early"])
    assert request is not None and _decision(dirs["early"]) == _decision(dirs["late"])
    if crash.startswith("between"):
        assert _decision(dirs["early"]) == decided
    for run_dir in dirs.values():
        (run_dir / "go").touch()
    wait_until(lambda: all((d / "summary.json").exists() for d in dirs.values()), "the stops")
    counts = resume("grp-crash")  # a third scheduler collects them
    assert counts[CellState.SUCCEEDED] == 2
    assert _ended_together("grp-crash", ["early", "late"]) == request.step
