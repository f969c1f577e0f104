"""The sweep commands as a user runs them: real ``kappa`` processes, SQLite, MLflow.

The commands run through ``tests/kit/kappa_main.py`` (the real ``kappa`` entry point with
the fake test backends registered).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kit.cli import process
from kit.fake_backend import write_spec
from kit.home import completions, launches, use_home
from kit.kappa_main import KAPPA_SCRIPT
from kit.wait import wait_until

from orchestrator.registry import CellState, Registry

SAFETY = 180  # seconds; a guard against hangs, not a speed assertion


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Background schedulers must know the fake backend too.
    return use_home(tmp_path / "home", monkeypatch, cli=True)


def test_bad_spec_exits_2_and_writes_nothing(home: Path, tmp_path: Path) -> None:
    before = sorted(p.name for p in home.iterdir())
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad-one\nbackend: fake\nbase:\n  steps: 0\n  stepz: 3\n"
                   "axes:\n  seed: [0, 1]\n")
    proc = process("submit", str(bad), "--wait", code=None)
    assert proc.returncode == 2, proc.stderr
    assert "steps" in proc.stderr and "stepz" in proc.stderr  # every problem at once
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("name: bad-two\nbackend: nosuch\naxes:\n  seed: [0]\n")
    proc = process("submit", str(unknown), code=None)
    assert proc.returncode == 2 and "fake" in proc.stderr  # lists the known backends
    assert sorted(p.name for p in home.iterdir()) == before  # no registry, no runs
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    assert [e.name for e in client.search_experiments()] == ["Default"]


def test_sigkill_mid_sweep_then_resume_finishes_every_cell_once(
        home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "crash", seeds=3, steps=4, hold_at=3)
    # Cells run steps 1-2 (checkpointing each), then wait for <run_dir>/go before step 3.
    orchestrator = subprocess.Popen(
        [sys.executable, str(KAPPA_SCRIPT), "submit", str(spec), "--wait", "--max-parallel", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def two_cells_parked() -> bool:
        if not (home / "registry.db").exists():
            return False
        try:
            with Registry.open() as reg:
                running = reg.cells("crash", [CellState.RUNNING])
        except Exception:  # the sweep is not recorded yet
            return False
        return len(running) == 2 and all(c.job_id and c.progress_step == 2 for c in running)

    wait_until(two_cells_parked, "two cells at step 2")
    os.killpg(orchestrator.pid, signal.SIGKILL)  # the scheduler dies; its jobs do not
    orchestrator.wait(SAFETY)
    with Registry.open() as reg:
        victim, survivor = reg.cells("crash", [CellState.RUNNING])
        waiting = reg.cells("crash", [CellState.PENDING, CellState.QUEUED])
    assert len(waiting) == 1
    # The victim's job dies too (as if its machine went down): it must be requeued.
    victim_job = Path((victim.job_id or "").removeprefix("local:"))
    victim_pid = json.loads((victim_job / "pid.json").read_text())["pid"]
    os.killpg(victim_pid, signal.SIGKILL)
    for cell in reg_cells_dirs(home, "crash"):
        (cell / "go").touch()

    process("resume", "crash", "--wait", "--max-parallel", "2")

    with Registry.open() as reg:
        cells = {c.cell_id: c for c in reg.cells("crash")}
        assert {c.state for c in cells.values()} == {CellState.SUCCEEDED}
        victim_attempts = reg.attempts(cells[victim.cell_id])
        survivor_attempts = reg.attempts(cells[survivor.cell_id])
    done = completions(home)
    assert sorted(done) == sorted(cells)  # every cell completed exactly once
    run = home / "runs" / "crash"
    assert launches(run / victim.cell_id) == [0, 2]  # relaunched from its checkpoint
    assert launches(run / survivor.cell_id) == [0]  # reattached, never relaunched
    assert [a.state.value for a in victim_attempts] == ["failed", "succeeded"]
    assert [a.state.value for a in survivor_attempts] == ["succeeded"]


def reg_cells_dirs(home: Path, sweep: str) -> list[Path]:
    return [p for p in (home / "runs" / sweep).iterdir() if p.is_dir()]


def test_status_logs_cancel_and_background_submit(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "cli-bg", seeds=2, steps=2, hold_at=2)
    out = process("submit", str(spec)).stdout  # returns at once; a scheduler runs detached
    assert "background" in out

    def both_parked() -> bool:
        with Registry.open() as reg:
            return all(c.progress_step == 1 for c in reg.cells("cli-bg"))

    wait_until(both_parked, "both cells at step 1")
    status = json.loads(process("status", "cli-bg", "--json").stdout)
    assert status["counts"]["running"] == 2
    assert status["scheduler_pid"] is not None
    first, second = (c["cell_id"] for c in status["cells"])
    assert "resuming from step 0" in process("logs", first[:8]).stdout

    assert "cancelled 1 cell" in process("cancel", first).stdout
    _follow_while_it_runs(home / "runs" / "cli-bg" / second, second)

    def sweep_over() -> bool:
        with Registry.open() as reg:
            counts = reg.counts("cli-bg")
        return counts[CellState.CANCELLED] == 1 and counts[CellState.SUCCEEDED] == 1

    wait_until(sweep_over, "the background scheduler to finish")
    # Its log says what it launched and how each cell ended, a line each.
    scheduler = home / "scheduler" / "cli-bg.log"
    wait_until(lambda: "nothing left to run" in scheduler.read_text(), "the scheduler's end")
    log = scheduler.read_text()
    for line in (f"launched {first} (attempt 1)", f"launched {second} (attempt 1)",
                 f"{first} cancelled after 1 attempt(s)",
                 f"{second} succeeded after 1 attempt(s)"):
        assert line in log, log
    table = process("status", "cli-bg").stdout
    assert "succeeded" in table and "cancelled" in table and "0.51" in table
    assert "cli-bg" in process("status").stdout
    assert process("cancel", "no-such-thing", code=None).returncode == 2
    assert process("logs", "no-such-cell", code=None).returncode == 2


def _follow_while_it_runs(run_dir: Path, cell: str) -> None:
    """``kappa logs CELL -f`` on a running cell prints what is appended to its log as it
    is appended, and returns (exit 0) once the cell has ended, its last lines printed."""
    follower = subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), "logs", cell, "-f"],
                                stdout=subprocess.PIPE, text=True)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(follower.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: any("resuming from step 0" in line for line in seen),
                   "the log so far")
        with open(run_dir / "train.log", "a") as log:
            log.write("appended while following\n")
        wait_until(lambda: "appended while following\n" in seen, "the appended line")
        assert follower.poll() is None  # the cell runs on: still following
        (run_dir / "go").touch()
        assert follower.wait(SAFETY) == 0
    finally:
        follower.kill()
        follower.wait()
    reader.join(SAFETY)
    assert seen[-1] == "fake trainer: done\n"


@pytest.mark.parametrize("given", ["relative", "unset"])
def test_a_relative_or_unset_home_reaches_every_job_as_one_absolute_path(
        given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs run in their run folder: a relative (or unset, i.e. ``.kappa``) KAPPA_HOME
    handed on as it was gave every cell its own warm-start cache there, rebuilt by each
    (issue 19, 5). Every command resolves it once; a relative KAPPA_CACHE likewise."""
    work = tmp_path / "work"
    home = use_home(work / ("state" if given == "relative" else ".kappa"), monkeypatch,
                    cli=True)
    monkeypatch.chdir(work)
    if given == "relative":
        monkeypatch.setenv("KAPPA_HOME", "state")
        monkeypatch.setenv("KAPPA_CACHE", "shared-cache")
    else:
        monkeypatch.delenv("KAPPA_HOME")
        monkeypatch.delenv("KAPPA_CACHE", raising=False)
    spec = write_spec(tmp_path / "s.yaml", "rel-home", seeds=2, steps=1)
    process("submit", str(spec), "--wait")
    run_dirs = sorted((home / "runs" / "rel-home").iterdir())
    assert len(run_dirs) == 2
    for run_dir in run_dirs:
        env = json.loads((run_dir / "env.json").read_text())
        assert env["KAPPA_HOME"] == str(home), env
        assert env["KAPPA_CACHE"] == (str(work / "shared-cache") if given == "relative"
                                      else None), env
        assert not (run_dir / "state").exists() and not (run_dir / ".kappa").exists()
    from orchestrator.cli.app import main

    monkeypatch.setattr(sys, "argv", ["kappa", "status", "rel-home"])
    with pytest.raises(SystemExit) as done:  # in-process too, and restored afterwards
        main()
    assert done.value.code in (0, None)
    assert os.environ.get("KAPPA_HOME") == ("state" if given == "relative" else None)
