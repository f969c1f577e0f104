"""Fault injection: SIGKILL at random moments of a real sweep, then check nothing was lost.

Each scenario runs a toy sweep (3 cells of the fake backend's ``fault`` curve: a real
trainer process that logs through the real outbox, checkpoints and resumes) with the real
``kappa`` CLI,
the local executor, SQLite and MLflow, and SIGKILLs one of

* ``orchestrator``: ``kappa submit --wait`` while it drives the sweep;
* ``submit``: ``kappa submit`` (no ``--wait``) while it records the sweep or starts its
  background scheduler;
* ``job``: a running cell's trainer process;
* ``wrapper``: only the local executor's job wrapper of a running cell;

at a moment drawn from the scenario's seed. Then the user's way back (``kappa resume``, or
submitting the spec again when the sweep was never recorded) must end with: every cell
``succeeded`` by exactly one succeeded attempt, one MLflow child run per cell, every metric
point the trainer computed in MLflow exactly once (counted per step against the trainer's
formula), the parent run FINISHED, and no traceback in any output.

A scenario makes three (``slow``: four) such kills one after the other, each at a moment
drawn from the scenario's seed, before the way back. Each prints ``fault seed=N: ...``
(what was killed when); ``KAPPA_FAULT_SEEDS=N[,M...]`` replays those seeds. The default
run has 24 kill points (6 per target); ``slow`` adds 64 more.
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
from pathlib import Path

import pytest
from kit.fake_trainer import final_metrics, step_metrics
from kit.home import use_home
from kit.kappa_main import KAPPA_SCRIPT
from kit.run_files import progress_step

from orchestrator.registry import CellState, Registry
from orchestrator.tracking.naming import metric_key

SAFETY = 240  # seconds: a guard against hangs, not a speed assertion
TARGETS = ("orchestrator", "job", "wrapper", "submit")
STEPS = 8
CELLS = 3


def _seeds(default: range) -> list[int]:
    chosen = os.environ.get("KAPPA_FAULT_SEEDS")
    return [int(s) for s in chosen.split(",")] if chosen else list(default)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch, cli=True)


def write_fault_spec(path: Path, steps: int = STEPS, step_seconds: float = 0.08) -> Path:
    """The sweep ``faults``: CELLS cells (axis ``seed``) of the fake backend, curve
    ``fault``."""
    path.write_text(
        "name: faults\nbackend: fake\nretries: 6\n"
        f"base:\n  curve: fault\n  steps: {steps}\n  checkpoint_every: 3\n"
        f"  step_seconds: {step_seconds}\n"
        f"axes:\n  seed: {list(range(CELLS))}\n")
    return path


class Processes:
    """The kappa processes a scenario starts; their output is checked at the end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.logs: list[Path] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        log = self.folder / f"kappa-{len(self.logs)}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            return subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), *args], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=dict(os.environ), start_new_session=True)

    def run(self, *args: str) -> int:
        proc = self.start(*args)
        return proc.wait(SAFETY)

    def output(self) -> str:
        return "".join(f"--- {p.name}\n{p.read_text(errors='replace')}" for p in self.logs)


def _live_jobs(home: Path) -> list[tuple[int, Path]]:
    """(wrapper pid, run folder) of every job that has not recorded an exit."""
    found = []
    for record in (home / "runs").glob("faults/*/.jobs/*/pid.json"):
        if (record.parent / "exit").exists():
            continue
        try:
            pid = int(json.loads(record.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            continue
        if Path(f"/proc/{pid}").exists():
            found.append((pid, record.parent.parent.parent))
    return found


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []




def _kill_a_job(home: Path, rng: random.Random, target: str,
                driver: subprocess.Popen[bytes]) -> str:
    """SIGKILL the trainer or the wrapper of a running cell once it reached a random step."""
    at_step = rng.randrange(0, STEPS)
    deadline = time.monotonic() + SAFETY
    while driver.poll() is None and time.monotonic() < deadline:
        jobs = [(pid, d) for pid, d in _live_jobs(home) if progress_step(d) >= at_step]
        if jobs:
            wrapper, run_dir = rng.choice(jobs)
            victims = [wrapper] if target == "wrapper" else _children(wrapper)
            if victims:
                for pid in victims:
                    os.kill(pid, signal.SIGKILL)
                return f"{target} of {run_dir.name} at step >= {at_step}"
        time.sleep(0.01)
    return "missed (the sweep ended first)"


def check_nothing_lost(home: Path, procs: Processes, context: str, tracking_uri: str | None = None,
                       steps: int = STEPS) -> int:
    """Every cell succeeded once, one FINISHED child run per cell, every metric point
    exactly once; how many metric points MLflow holds."""
    from mlflow import MlflowClient

    out = procs.output() + "".join(
        p.read_text(errors="replace") for p in (home / "scheduler").glob("*.log"))
    assert "Traceback" not in out, f"{context}\n{out}"
    with Registry.open() as registry:
        cells = registry.cells("faults")
        assert len(cells) == CELLS, context
        for cell in cells:
            assert cell.state is CellState.SUCCEEDED, f"{context}: {cell}\n{out}"
            won = [a for a in registry.attempts(cell) if a.state.value == "succeeded"]
            assert len(won) == 1, f"{context}: {cell.cell_id} attempts {won}"
        sweep = registry.get_sweep("faults")
    client = MlflowClient(tracking_uri or f"sqlite:///{home / 'mlflow.db'}")
    parent = client.get_run(sweep.mlflow_parent_run_id)
    assert parent.info.status == "FINISHED", context
    experiment = parent.info.experiment_id
    sweeps = client.search_runs([experiment], "tags.`kappa.role` = 'sweep'")
    assert len(sweeps) == 1, context
    children = client.search_runs([experiment], "tags.`kappa.role` = 'cell'")
    by_cell = Counter(r.data.tags["kappa.cell_id"] for r in children)
    assert sorted(by_cell) == sorted(c.cell_id for c in cells), context
    assert set(by_cell.values()) == {1}, f"{context}: child runs {by_cell}"
    points = 0
    for run in children:
        assert run.info.status == "FINISHED", context
        seed_value = int(run.data.params["axis.seed"])
        expected: dict[str, Counter[int]] = {}
        values: dict[tuple[str, int], float] = {}
        for step in range(steps + 1):
            for key, value in step_metrics(seed_value, step).items():
                expected.setdefault(metric_key(key), Counter())[step] += 1
                values[metric_key(key), step] = value
        for key, value in final_metrics(seed_value).items():
            expected.setdefault(metric_key(key), Counter())[steps] += 1
            values[metric_key(key), steps] = value
        for key, want in expected.items():
            history = client.get_metric_history(run.info.run_id, key)
            got = Counter(m.step for m in history)
            assert got == want, f"{context}: {key} steps {sorted(got.elements())}"
            assert all(m.value == values[key, m.step] for m in history), context
            points += len(history)
    return points


def _recorded() -> bool:
    """Whether the sweep made it in with its cells (a submit killed between recording the
    sweep and its cells leaves a sweep that `kappa resume` refuses: it says to submit)."""
    with Registry.open() as registry:
        return registry.find_sweep("faults") is not None and bool(registry.cell_keys("faults"))


def _drive(procs: Processes, spec: Path) -> subprocess.Popen[bytes]:
    """What a user starts to get the sweep going: submit it, or resume it once recorded."""
    if _recorded():
        return procs.start("resume", "faults", "--wait")
    return procs.start("submit", str(spec), "--wait")


def _kill_process_later(victim: subprocess.Popen[bytes], delay: float, name: str) -> str:
    try:
        victim.wait(delay)
        return f"{name} ended before its kill at {delay:.2f} s"
    except subprocess.TimeoutExpired:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        return f"{name} killed at {delay:.2f} s"


def _scenario(home: Path, tmp_path: Path, seed: int, kills: int = 3) -> None:
    """``kills`` SIGKILLs one after the other, each of a target and at a moment drawn
    from ``seed``; then the way back, then the checks."""
    rng = random.Random(seed)
    spec = write_fault_spec(tmp_path / "faults.yaml")
    procs = Processes(tmp_path)
    driver: subprocess.Popen[bytes] | None = None
    done: list[str] = []
    for n in range(kills):
        target = TARGETS[(seed + n) % len(TARGETS)]
        if target == "submit":  # submitting (again) records the spec, starts a scheduler
            victim = procs.start("submit", str(spec))
            done.append(_kill_process_later(victim, rng.uniform(0.1, 3.0), "submit"))
            continue
        if driver is None or driver.poll() is not None:
            driver = _drive(procs, spec)
        if target == "orchestrator":
            done.append(_kill_process_later(driver, rng.uniform(0.2, 4.0), "orchestrator"))
            driver = None
        else:
            done.append(_kill_a_job(home, rng, target, driver))
    what = "; ".join(done)
    print(f"fault seed={seed}: {what}")
    if driver is not None:
        assert driver.wait(SAFETY) == 0, f"fault seed={seed} {what}\n{procs.output()}"
    # The user's way back: resume, or submit again if the sweep never made it in.
    code = procs.run("resume", "faults", "--wait") if _recorded() else procs.run(
        "submit", str(spec), "--wait")
    assert code == 0, f"fault seed={seed} {what}\n{procs.output()}"
    check_nothing_lost(home, procs, f"fault seed={seed} {what}")


@pytest.mark.parametrize("seed", _seeds(range(8)))
def test_kills_at_random_moments_lose_nothing(home: Path, tmp_path: Path, seed: int) -> None:
    """8 scenarios x 3 kills: 24 kill points, every target 6 times."""
    _scenario(home, tmp_path, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", _seeds(range(8, 24)))
def test_kills_at_more_random_moments(home: Path, tmp_path: Path, seed: int) -> None:
    _scenario(home, tmp_path, seed, kills=4)


def test_an_mlflow_server_outage_longer_than_the_client_retries_loses_no_point(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real ``mlflow server`` is SIGKILLed mid-sweep, stays away for longer than the
    MLflow client's own retry budget (made short here), and comes back on the same port:
    training goes on, cells finish, and every metric point reaches the server."""
    from kit.mlflow_ui import free_port as _free_port
    from kit.mlflow_ui import mlflow_server, stop, wait_until_up

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    store = f"sqlite:///{tmp_path / 'server.db'}"
    monkeypatch.setenv("KAPPA_MLFLOW_URI", base)
    # The client gives up after one quick retry; the outage below lasts 8 s.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")
    monkeypatch.setenv("KAPPA_METRICS_FLUSH_SECONDS", "1")
    server = mlflow_server(store, tmp_path / "artifacts", port, tmp_path / "server-1.log")
    try:
        wait_until_up(base, server, tmp_path / "server-1.log")
        spec = write_fault_spec(tmp_path / "faults.yaml", steps=40, step_seconds=0.15)
        procs = Processes(tmp_path)
        driver = procs.start("submit", str(spec), "--wait")
        deadline = time.monotonic() + SAFETY
        while not any(progress_step(d) >= 5 for _, d in _live_jobs(home)):
            assert driver.poll() is None and time.monotonic() < deadline, procs.output()
            time.sleep(0.05)
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        time.sleep(8)  # cells train on (some finish) while the server is away
        trained = [progress_step(d) for d in (home / "runs" / "faults").iterdir() if d.is_dir()]
        server = mlflow_server(store, tmp_path / "artifacts", port, tmp_path / "server-2.log")
        wait_until_up(base, server, tmp_path / "server-2.log")
        assert driver.wait(SAFETY) == 0, procs.output()
        points = check_nothing_lost(home, procs, "mlflow outage", tracking_uri=base, steps=40)
        print(f"mlflow outage of 8 s: {points} metric points, 0 lost; steps reached during "
              f"the outage: {trained}")
        assert max(trained) > 5  # training went on while the server was away
        with Registry.open() as registry:  # the outage was charged to no cell's retries
            assert [c.attempts_count for c in registry.cells("faults")] == [1] * CELLS
    finally:
        stop(server)
