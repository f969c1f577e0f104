"""Concurrent use: several ``kappa`` processes submit, resume and cancel one sweep at once.

Real processes (``kappa_at_go.py``: each imports everything, then all start on one
signal), the fake backend, real SQLite and a real PostgreSQL registry, a real MLflow
store. Whatever the interleaving: no traceback, the documented exit codes, a usable
MLflow store, one parent run per sweep and one child run per cell, every cell recorded
once and attempted as often as it should be. Random orders and delays print their seed
(``KAPPA_TEST_SEED`` replays one).
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kit.fake_backend import write_spec
from kit.home import completions, launches, register_backends, seed_mlflow_store
from kit.kappa_main import KAPPA_SCRIPT

from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.submission import prepare, record
from orchestrator.tracking import Tracker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "registry"))
from kappa_pg_server import PgServer

HERE = Path(__file__).resolve().parent
AT_GO = HERE / "kappa_at_go.py"
SAFETY = 300  # seconds; a guard against hangs, not a speed assertion
SWEEP = "conc"


@dataclass(frozen=True)
class Stores:
    """Where a test's sweep lives."""

    home: Path
    registry_url: str


SLOW = pytest.mark.slow
PG = pytest.mark.postgres


@pytest.fixture
def stores(request: pytest.FixtureRequest, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[Stores]:
    """A fresh KAPPA_HOME (no MLflow store yet) and an empty registry on the backend
    ``request.param`` names (``sqlite`` or ``postgres``; tests parametrize it)."""
    # The server first: its processes must not inherit this test's KAPPA_HOME (the test
    # waits for every process that has it to end).
    server: PgServer | None = (request.getfixturevalue("pg_server")
                               if request.param == "postgres" else None)
    register_backends(monkeypatch)  # for record() in this process
    home = (tmp_path / "home").resolve()
    monkeypatch.setenv("KAPPA_HOME", str(home))
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "0.05")
    monkeypatch.setenv("KAPPA_RETRY_BACKOFF", "0.05")
    monkeypatch.setenv("KAPPA_CLI", f"{sys.executable} {KAPPA_SCRIPT}")  # background schedulers
    if server is None:
        url = f"sqlite:///{home / 'registry.db'}"
        monkeypatch.setenv("KAPPA_REGISTRY", url)
        yield Stores(home, url)
        return
    url = server.create_database()
    monkeypatch.setenv("KAPPA_REGISTRY", url)
    try:
        yield Stores(home, url)
    finally:
        wait_until_quiet(home)
        server.drop_database(url)


def seed_for(request: pytest.FixtureRequest) -> int:
    """The random seed of a test (``KAPPA_TEST_SEED`` replays one), printed."""
    seed = int(os.environ.get("KAPPA_TEST_SEED") or random.SystemRandom().randrange(2**32))
    print(f"\n{request.node.name}: random seed {seed} (replay: KAPPA_TEST_SEED={seed})")
    return seed


@dataclass(frozen=True)
class Outcome:
    """One process's command and how it ended."""

    args: tuple[str, ...]
    delay: float
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (f"kappa {' '.join(self.args)} (after {self.delay:.2f} s) -> "
                f"{self.returncode}\n{self.stdout}\n{self.stderr}")


def run_together(commands: list[list[str]], delays: list[float], go: Path,
                 late: frozenset[int] = frozenset(), home: Path | None = None,
                 ) -> list[Outcome]:
    """Start one process per command; once all are ready, release them at once, each
    after its delay. The ``late`` ones are released (then after their delay) only once
    the sweep's first run folder exists in ``home``, i.e. a submit has recorded it."""
    later = go.with_name(go.name + "-late")
    procs, outputs = [], []
    for i, (argv, delay) in enumerate(zip(commands, delays, strict=True)):
        # Files, not pipes: a process blocked on a full pipe could hold the sweep's lock.
        out, err = go.with_name(f"out.{i}"), go.with_name(f"err.{i}")
        outputs.append((out, err))
        with open(out, "w") as out_file, open(err, "w") as err_file:
            procs.append(subprocess.Popen(
                [sys.executable, str(AT_GO), str(later if i in late else go), str(i),
                 f"{delay:.3f}", *argv],
                stdout=out_file, stderr=err_file, text=True, env=dict(os.environ)))
    ready = [Path(f"{later if i in late else go}.{i}") for i in range(len(procs))]
    _wait_for(lambda: all(r.exists() for r in ready), procs, "every process ready")
    go.touch()
    if late:
        assert home is not None
        _wait_for(lambda: any((home / "runs" / SWEEP).glob("*/cell.json")),
                  [p for i, p in enumerate(procs) if i not in late], "the sweep recorded")
        later.touch()
    outcomes = []
    for argv, delay, proc, (out, err) in zip(commands, delays, procs, outputs, strict=True):
        proc.wait(SAFETY)
        outcomes.append(Outcome(tuple(argv), delay, proc.returncode, out.read_text(),
                                err.read_text()))
    return outcomes


def _wait_for(condition: Callable[[], bool], procs: list[subprocess.Popen[str]],
              what: str) -> None:
    """Until ``condition()``; fail once ``procs`` have all exited without it, or any of
    them has when ``what`` is their readiness (they cannot get ready then)."""
    deadline = time.monotonic() + SAFETY
    while not condition():
        exited = [p.poll() is not None for p in procs]
        if time.monotonic() > deadline or all(exited) or (
                what == "every process ready" and any(exited)):
            for proc in procs:
                proc.kill()
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def kappa_processes(home: Path) -> list[int]:
    """Processes (background schedulers, trainers) started for this KAPPA_HOME."""
    needle = b"\0KAPPA_HOME=" + str(home).encode() + b"\0"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = b"\0" + (entry / "environ").read_bytes()
        except OSError:  # gone, or a kernel thread
            continue
        if needle in environ:
            pids.append(int(entry.name))
    return pids


def wait_until_quiet(home: Path) -> None:
    """Until every process of this home (detached schedulers included) has exited."""
    deadline = time.monotonic() + SAFETY
    while kappa_processes(home):
        assert time.monotonic() < deadline, f"still running: {kappa_processes(home)}"
        time.sleep(0.1)


def check_outcomes(outcomes: list[Outcome], home: Path) -> None:
    """Each process ended as documented (0; 1 for ``--wait`` when cells were cancelled;
    2 for a resume or cancel that found no sweep); no traceback anywhere (schedulers'
    logs too)."""
    for outcome in outcomes:
        assert "Traceback" not in outcome.stdout + outcome.stderr, str(outcome)
        command = outcome.args[0]
        if outcome.returncode == 0:
            continue
        if outcome.returncode == 1:
            # A command that drove the sweep to its end says so when cells ended
            # cancelled (by a concurrent cancel): exit 1, with the sweep's table.
            assert "--wait" in outcome.args and "cancelled" in outcome.stdout, str(outcome)
            continue
        # A resume or cancel that ran before any submit recorded the sweep finds none
        # (or no registry at all yet): a user error, said in one message.
        assert command in ("resume", "cancel") and outcome.returncode == 2, str(outcome)
        assert outcome.stderr.startswith("error: ") and (
            SWEEP in outcome.stderr or "registry" in outcome.stderr), str(outcome)
    for log in (home / "scheduler").glob("*.log"):
        assert "Traceback" not in log.read_text(), log.read_text()


def check_sweep(stores: Stores, spec: Path, *, exact: bool) -> None:
    """The registry, the run folders and MLflow agree: every cell of the spec once, one
    parent run, one child run per attempted cell. ``exact``: no cancel took part, so every
    cell ran exactly once."""
    from mlflow import MlflowClient

    expected = sorted(c.cell_id for c in prepare(spec).cells)
    with Registry.open(stores.registry_url) as reg:
        (sweep,) = reg.list_sweeps()
        cells = reg.cells(SWEEP)
        attempts = {c.cell_id: reg.attempts(c) for c in cells}
    assert sorted(c.cell_id for c in cells) == expected  # none lost, none doubled
    on_disk = sorted(p.name for p in (stores.home / "runs" / SWEEP).iterdir() if p.is_dir())
    assert on_disk == expected
    done = Counter(completions(stores.home))
    for cell in cells:
        tries = attempts[cell.cell_id]
        assert cell.state in (CellState.SUCCEEDED, CellState.CANCELLED), cell
        assert cell.attempts_count == len(tries)
        assert [a.number for a in tries] == list(range(1, len(tries) + 1))
        assert all(a.finished_at is not None for a in tries)  # no attempt left open
        run_dir = stores.home / "runs" / SWEEP / cell.cell_id
        assert len(launches(run_dir)) <= len(tries) and done[cell.cell_id] <= len(tries)
        if cell.state is CellState.SUCCEEDED:
            assert tries[-1].state.value == "succeeded" and done[cell.cell_id] >= 1
        if exact:
            assert cell.state is CellState.SUCCEEDED and len(tries) == 1
            assert launches(run_dir) == [0] and done[cell.cell_id] == 1

    client = MlflowClient(f"sqlite:///{stores.home / 'mlflow.db'}")  # usable afterwards
    experiment = client.get_experiment_by_name(SWEEP)
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r.info.run_id for r in runs if r.data.tags.get("kappa.role") == "sweep"]
    assert parents == [sweep.mlflow_parent_run_id]
    children = Counter(r.data.tags.get("kappa.cell_id") for r in runs
                       if r.data.tags.get("kappa.role") == "cell")
    assert all(r.data.tags.get("mlflow.parentRunId") == parents[0] for r in runs
               if r.data.tags.get("kappa.role") == "cell")
    # A cell cancelled between its claim and its launch has a run (ended KILLED, recorded
    # on the cell) and no attempt: the scheduler's documented path (loop._launch).
    ran = {c.cell_id: c for c in cells if c.attempts_count or c.mlflow_run_id}
    assert children == Counter(list(ran)), "exactly one child run per cell that opened one"
    by_id = {r.data.tags.get("kappa.cell_id"): r for r in runs
             if r.data.tags.get("kappa.role") == "cell"}
    assert all(ran[i].mlflow_run_id == by_id[i].info.run_id for i in ran)
    assert all(by_id[i].info.status == "KILLED" for i, c in ran.items()
               if not c.attempts_count), "a run of a cell that never ran is ended KILLED"


def _mix(n: int, rng: random.Random, spec: Path) -> list[list[str]]:
    """``n`` commands on one sweep: half submits (one waits), the rest resumes and
    cancels, in a random order."""
    submits = max(1, n // 2)
    commands = [["submit", str(spec)] for _ in range(submits - 1)]
    commands.append(["submit", str(spec), "--wait"])
    rest = n - submits
    commands += [["resume", SWEEP, "--wait"] for _ in range(rest - rest // 2)]
    commands += [["cancel", SWEEP] for _ in range(rest // 2)]
    rng.shuffle(commands)
    return commands


# -- the scenario: simultaneous first submits on a fresh home ----------------------
@pytest.mark.parametrize(("stores", "processes"), [
    ("sqlite", 4),
    pytest.param("sqlite", 8, marks=SLOW),
    pytest.param("postgres", 4, marks=[PG, SLOW]),
    pytest.param("postgres", 8, marks=[PG, SLOW]),
], indirect=["stores"])
def test_simultaneous_first_submits_on_a_fresh_home(
        stores: Stores, tmp_path: Path, processes: int) -> None:
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=4, steps=2, step_seconds=0.02)
    # Half of them drive the sweep themselves, half start a background scheduler.
    commands = [["submit", str(spec)] + (["--wait"] if i % 2 else []) for i in range(processes)]
    outcomes = run_together(commands, [0.0] * processes, tmp_path / "go")
    wait_until_quiet(stores.home)
    check_outcomes(outcomes, stores.home)
    assert all(o.returncode == 0 for o in outcomes), "\n".join(map(str, outcomes))
    check_sweep(stores, spec, exact=True)


# -- submits, resumes and cancels at once, in a random order ----------------------------
MIXES = [
    pytest.param("sqlite", 4, marks=SLOW),
    pytest.param("sqlite", 8, marks=SLOW),
    pytest.param("postgres", 4, marks=PG),
    pytest.param("postgres", 8, marks=[PG, SLOW]),
]


@pytest.mark.parametrize(("stores", "processes"), MIXES, indirect=["stores"])
def test_submit_resume_cancel_at_once(
        stores: Stores, tmp_path: Path, request: pytest.FixtureRequest, processes: int) -> None:
    seed_mlflow_store(stores.home)  # the store's creation race has its own test
    # Cells of about a second, and starts spread over seconds: the commands land before,
    # while and after the sweep is recorded and while its cells run.
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=3, steps=2, step_seconds=0.2)
    rng = random.Random(seed_for(request))
    commands = _mix(processes, rng, spec)
    # Resumes and cancels land before the sweep is recorded, or (``late``) once it is,
    # while its cells wait or run.
    delays = [round(rng.uniform(0, 1.5), 3) for _ in commands]
    late = frozenset(i for i, c in enumerate(commands) if c[0] != "submit" and rng.random() < 0.7)
    outcomes = run_together(commands, delays, tmp_path / "go", late, stores.home)
    print("\n".join(f"{o.args} {'late ' if i in late else ''}after {o.delay} s -> "
                    f"{o.returncode}" for i, o in enumerate(outcomes)))
    wait_until_quiet(stores.home)
    check_outcomes(outcomes, stores.home)
    check_sweep(stores, spec, exact=False)
    # Resubmitting requeues what was cancelled; then every cell has succeeded.
    final = subprocess.run([sys.executable, str(KAPPA_SCRIPT), "submit", str(spec), "--wait"],
                           capture_output=True, text=True, timeout=SAFETY, check=False)
    assert final.returncode == 0 and "Traceback" not in final.stderr, final.stderr
    wait_until_quiet(stores.home)
    check_sweep(stores, spec, exact=False)
    with Registry.open(stores.registry_url) as reg:
        assert {c.state for c in reg.cells(SWEEP)} == {CellState.SUCCEEDED}


@pytest.mark.slow
@pytest.mark.parametrize(("stores", "processes"), [
    pytest.param(backend, 8, id=f"{backend}-8-round{i}", marks=[PG] if backend == "postgres"
                 else []) for backend in ("sqlite", "postgres") for i in range(3)
], indirect=["stores"])
def test_submit_resume_cancel_at_once_more_orders(
        stores: Stores, tmp_path: Path, request: pytest.FixtureRequest, processes: int) -> None:
    test_submit_resume_cancel_at_once(stores, tmp_path, request, processes)


# -- the parent run: decided once per sweep --------------------------------------------
class RacingTracker(Tracker):
    """A tracker whose parent-run lookup waits (up to 2 s) for a second one to look too:
    without serialisation both would find nothing and both create a run."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def _search(self, experiment_ids: list[str], filter_string: str,
                deleted: bool = False) -> Iterator[Any]:
        found = list(super()._search(experiment_ids, filter_string, deleted))
        if "'sweep'" in filter_string:
            # Broken: the other one was kept out until this one went on (as it should).
            with contextlib.suppress(threading.BrokenBarrierError):
                self.barrier.wait(timeout=2.0)
        return iter(found)


BOTH = pytest.mark.parametrize("stores", ["sqlite", pytest.param("postgres", marks=PG)],
                               indirect=True)


@BOTH
def test_two_records_of_one_spec_at_once_make_one_parent_run(
        stores: Stores, tmp_path: Path) -> None:
    seed_mlflow_store(stores.home)
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=3, steps=1)
    prepared = prepare(spec)
    barrier = threading.Barrier(2)
    results = []

    def submit() -> None:
        with Registry.open(stores.registry_url) as reg:
            results.append(record(prepared, reg, RacingTracker(barrier)))

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SAFETY)
    assert len(results) == 2
    assert sorted(r.new_cells for r in results) == [0, 3]
    assert results[0].parent_run_id == results[1].parent_run_id
    tracker = Tracker()
    runs = tracker.client.search_runs([results[0].experiment_id])
    assert [r.info.run_id for r in runs] == [results[0].parent_run_id]
    with Registry.open(stores.registry_url) as reg:
        assert reg.get_sweep(SWEEP).mlflow_parent_run_id == results[0].parent_run_id


@BOTH
def test_a_failed_first_record_keeps_a_parent_run_it_did_not_create(
        stores: Stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry is new but MLflow already has the sweep's parent run (e.g. after the
    registry was reset): a submit failing midway removes its sweep row, not that run."""
    seed_mlflow_store(stores.home)
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=2, steps=1)
    tracker = Tracker()
    experiment = tracker.ensure_experiment(SWEEP)
    earlier = tracker.sweep_run(experiment, SWEEP, "earlier")[0]

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(Registry, "add_cells", broken)
    with Registry.open(stores.registry_url) as reg, pytest.raises(OSError, match="disk"):
        record(prepare(spec), reg, tracker)
    with Registry.open(stores.registry_url) as reg:
        assert reg.find_sweep(SWEEP) is None
    assert tracker.client.get_run(earlier).info.lifecycle_stage == "active"


@BOTH
def test_a_cancel_landing_inside_a_submit_is_not_undone_by_it(
        stores: Stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kappa cancel`` runs just after a submit added the cells and before it requeues
    finished ones: those cells stay cancelled (the cancel saw them, so it came after the
    submit), while a cell cancelled before the submit is requeued by it as documented."""
    seed_mlflow_store(stores.home)
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=2, steps=1)
    with Registry.open(stores.registry_url) as reg:
        first = record(prepare(spec), reg, Tracker())
        (old,) = [c for c in reg.cells(SWEEP) if c.axes["seed"] == 0]
        assert reg.transition(old, CellState.PENDING, CellState.CANCELLED)
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=4, steps=1)
    add_cells = Registry.add_cells

    def add_then_cancel(self: Registry, *args: Any, **kwargs: Any) -> list[Any]:
        added = add_cells(self, *args, **kwargs)
        for cell in added:  # what a concurrent `kappa cancel` does
            assert self.transition(cell, CellState.PENDING, CellState.CANCELLED)
        return added

    monkeypatch.setattr(Registry, "add_cells", add_then_cancel)
    with Registry.open(stores.registry_url) as reg:
        second = record(prepare(spec), reg, Tracker())
        states = {c.axes["seed"]: c.state for c in reg.cells(SWEEP)}
    assert (first.new_cells, second.new_cells, second.requeued_cells) == (2, 2, 1)
    assert states == {0: CellState.PENDING, 1: CellState.PENDING,
                      2: CellState.CANCELLED, 3: CellState.CANCELLED}
