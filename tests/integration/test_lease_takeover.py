"""Two "machines" (two KAPPA_HOMEs, two host ids) drive one sweep through ONE registry.

Real ``kappa`` processes, the fake backend, a real PostgreSQL registry (SQLite where it
is cheap) and one shared MLflow store; leases of 3 s. Whatever the (seeded, printed;
``KAPPA_TEST_SEED`` replays) moment the owner is SIGKILLed: the second scheduler waits,
naming the holder, takes over only once the lease expired, and finishes the sweep; every
cell ends succeeded, ran to completion once, and was launched once per attempt. A
scheduler paused (SIGSTOP) past its lease and then continued launches nothing more and
exits. ``kappa status`` on the second machine shows the holder.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kit.fake_backend import write_spec
from kit.home import completions, launches, seed_mlflow_store
from kit.kappa_main import KAPPA_SCRIPT
from kit.wait import wait_until
from sqlalchemy import select

from orchestrator.registry import CellState, Registry
from orchestrator.registry.leases import Lease
from orchestrator.registry.models import LeaseRow

SAFETY = 300.0  # seconds; a guard against hangs, never a speed assertion
LEASE = "3"
SWEEP = "lease"


@dataclass(frozen=True)
class Machine:
    """One "machine": its KAPPA_HOME and host id, the shared registry and MLflow store."""

    name: str
    home: Path
    env: dict[str, str]

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``kappa ARGS`` in the background, its output kept in ``<home>/<name>.out``."""
        out = open(self.home / f"{args[0]}.out", "w")  # noqa: SIM115 (closed by the child's end)
        return subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), *args], env=self.env, text=True,
                                stdout=out, stderr=subprocess.STDOUT)

    def output(self, command: str) -> str:
        return (self.home / f"{command}.out").read_text()

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(KAPPA_SCRIPT), *args], env=self.env, text=True,
                              capture_output=True, timeout=SAFETY, check=False)


@pytest.fixture(params=["postgres", pytest.param("sqlite", marks=pytest.mark.slow)])
def machines(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Machine, ...]]:
    if request.param == "postgres":
        server = request.getfixturevalue("pg_server")
        url = server.create_database()
    else:
        url = f"sqlite:///{tmp_path / 'shared' / 'registry.db'}"
    seed_mlflow_store(tmp_path / "shared")
    found = []
    for name in ("a", "b"):
        home = (tmp_path / name).resolve()
        home.mkdir()
        env = {**os.environ, "KAPPA_HOME": str(home), "KAPPA_REGISTRY": url,
               "KAPPA_MLFLOW_URI": f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}",
               "KAPPA_LEASE_SECONDS": LEASE, "KAPPA_HOST_ID": f"machine-{name}",
               "KAPPA_POLL_INTERVAL": "0.05", "KAPPA_RETRY_BACKOFF": "0.05",
               "KAPPA_CLI": f"{sys.executable} {KAPPA_SCRIPT}"}
        found.append(Machine(name, home, env))
    yield tuple(found)
    if request.param == "postgres":
        server.drop_database(url)


def _seed() -> int:
    seed = int(os.environ.get("KAPPA_TEST_SEED") or random.randrange(1_000_000))
    print(f"KAPPA_TEST_SEED={seed}")
    return seed


def _lease(url: str) -> Lease | None:
    with Registry.open(url) as reg:
        return reg.lease(SWEEP) if reg.find_sweep(SWEEP) else None


def _held_by(url: str, pid: int, running: bool = True) -> bool:
    with Registry.open(url) as reg:
        if reg.find_sweep(SWEEP) is None:
            return False
        lease = reg.lease(SWEEP)
        busy = bool(reg.cells(SWEEP, [CellState.RUNNING])) or not running
        return lease is not None and lease.pid == pid and busy


def _let_go(url: str, indexes: set[int] | None = None) -> None:
    """Let the sweep's cells (those at ``indexes``, else all) run past their hold step."""
    with Registry.open(url) as reg:
        for cell in reg.cells(SWEEP):
            if indexes is not None and cell.index not in indexes:
                continue
            assert cell.run_dir is not None
            Path(cell.run_dir).mkdir(parents=True, exist_ok=True)
            (Path(cell.run_dir) / "go").touch()


def _check_every_cell_ran_once(url: str, home: Path) -> None:
    with Registry.open(url) as reg:
        cells = reg.cells(SWEEP)
        assert {c.state for c in cells} == {CellState.SUCCEEDED}, [c.state for c in cells]
        for cell in cells:
            assert cell.run_dir is not None
            # One trainer process per attempt that got a job: a scheduler killed or paused
            # between opening an attempt and submitting its job leaves an attempt without
            # one (the cell is then relaunched), and a stale scheduler's launch would be a
            # trainer start no attempt records (recording its job id is fenced).
            with_job = [a for a in reg.attempts(cell) if a.job_id]
            assert len(launches(Path(cell.run_dir))) == len(with_job), cell.cell_id
    done = Counter(completions(home))
    assert sorted(done) == sorted(c.cell_id for c in cells) and set(done.values()) == {1}


def test_the_owner_killed_the_other_machine_takes_over_after_expiry(
        machines: tuple[Machine, Machine], tmp_path: Path) -> None:
    rng = random.Random(_seed())
    a, b = machines
    url = a.env["KAPPA_REGISTRY"]
    # Cells park at step 2 until the test lets them go: the sweep cannot end before the
    # second machine has asked for it and looked at it.
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=3, steps=3, step_seconds=0.05,
                      hold_at=2)
    first = a.start("submit", str(spec), "--wait", "--max-parallel", "2")
    wait_until(lambda: _held_by(url, first.pid), "machine a driving the sweep", timeout=SAFETY)
    second = b.start("resume", SWEEP, "--wait", "--max-parallel", "2")
    wait_until(lambda: "already being driven" in b.output("resume"), "machine b waiting",
               timeout=SAFETY)
    status = b.run("status", SWEEP, "--json")
    assert status.returncode == 0, status.stderr
    holder = json.loads(status.stdout)["scheduler"]
    assert (holder["pid"], holder["expired"]) == (first.pid, False)
    assert json.loads(status.stdout)["scheduler_pid"] == first.pid
    assert holder["heartbeat_age_s"] >= 0 and json.loads(status.stdout)["executor"] == {
        "name": "local", "options": {}}
    # Cell 0 ends and machine a launches cell 2 while the kill comes at a random moment;
    # cell 1 stays parked until after the kill, so the sweep cannot end before it.
    _let_go(url, {0})
    time.sleep(rng.uniform(0.0, 1.5))
    before_kill = _lease(url)
    first.send_signal(signal.SIGKILL)
    code_a = first.wait(SAFETY)
    _let_go(url)
    assert second.wait(SAFETY) == 0, b.output("resume")
    assert f"already being driven by a scheduler on host {holder['host']} pid " \
           f"{first.pid}" in b.output("resume")
    # Never at once: machine b took the lease only after machine a's last one expired
    # (a released lease row keeps its last holder's pid and when it was taken).
    with Registry.open(url) as reg, reg.engine.connect() as conn:
        pid, acquired = conn.execute(select(LeaseRow.pid, LeaseRow.acquired_at)).one()
    assert before_kill is not None and pid == second.pid and acquired is not None
    if before_kill.pid == first.pid:
        assert acquired >= before_kill.expires_at
    else:  # a's heartbeat starved past its lease on a busy machine: a stopped, b took over
        assert before_kill.pid == second.pid and code_a in (1, -signal.SIGKILL)
    _check_every_cell_ran_once(url, a.home)
    assert _lease(url) is None  # released on b's clean exit


@pytest.mark.slow  # ~15 s alone on 2 cores: kappa processes start slowly
def test_a_paused_scheduler_that_lost_its_lease_launches_nothing_more(
        machines: tuple[Machine, Machine], tmp_path: Path) -> None:
    a, b = machines
    url = a.env["KAPPA_REGISTRY"]
    if url.startswith("sqlite"):
        pytest.skip("a writer paused inside a SQLite transaction holds the whole database")
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=3, steps=3, step_seconds=0.05,
                      hold_at=2)
    first = a.start("submit", str(spec), "--wait", "--max-parallel", "1")
    wait_until(lambda: _held_by(url, first.pid), "machine a driving the sweep", timeout=SAFETY)
    first.send_signal(signal.SIGSTOP)
    _let_go(url)
    try:
        second = b.start("resume", SWEEP, "--wait", "--max-parallel", "1")
        wait_until(lambda: _held_by(url, second.pid, running=False), "machine b taking over",
                   timeout=SAFETY)
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(SAFETY) == 1, a.output("submit")
    assert "lease" in a.output("submit")
    assert second.wait(SAFETY) == 0, b.output("resume")
    _check_every_cell_ran_once(url, a.home)
