"""verl cells' metrics reach MLflow exactly once through kappa's outbox, across an MLflow
outage, a verl crash that a retry resumes from its checkpoint, and a SIGKILLed launch (slow).

No GPU here: the cells' ``python`` is the kit's labelled FAKE verl (:mod:`kit.fake_verl`),
which writes verl's file log, checkpoints and resumes, and refuses verl's own MLflow
logger. Everything else is real: ``kappa submit --wait`` as a process, the scheduler, the
local executor, the phase driver, SQLite, and an ``mlflow server`` that is SIGKILLed
mid-run and brought back on the same port. Every (step, metric) of every launch's file
log must then be in the cell's MLflow run once, with the value first logged.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import yaml
from kit.fake_verl import write_fake_verl
from kit.home import use_home
from kit.run_files import progress_step
from test_fault_injection import SAFETY, Processes

from orchestrator.backends.verl.logs import log_files, phase_of, read_lines, verl_metric_key
from orchestrator.registry import CellState, Registry

pytestmark = pytest.mark.slow

SWEEP = "verl-outage"
STEPS = 12


def _spec(path: Path, fake: Path) -> Path:
    spec = {
        "name": SWEEP, "backend": "verl",
        "base": {"python": str(fake), "model_path": "/fake/model",
                 "train_files": "/fake/train.parquet", "val_files": "/fake/val.parquet",
                 "eval_files": ["/fake/math500.parquet"],
                 "reward_function_path": "/fake/rewards.py",
                 # two training phases and an evaluation: three launches per attempt
                 "entropy_intervention": "entropy_reward", "entropy_coef": 0.01,
                 "intervention_steps": 5, "max_steps": STEPS, "checkpoint_every": 4,
                 "nnodes": 1, "n_gpus_per_node": 1, "tensor_parallel_size": 1},
        "axes": {"seed": [0, 1]},
        "resources": {"gpus": 1, "nodes": 1, "hours": 0.25},
        "retries": 3,
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _run_dirs(home: Path) -> list[Path]:
    return [d for d in (home / "runs" / SWEEP).glob("*") if d.is_dir()] \
        if (home / "runs" / SWEEP).is_dir() else []


def _wait_for(what: str, check: object, driver: object, procs: Processes) -> None:
    deadline = time.monotonic() + SAFETY
    while not check():  # type: ignore[operator]
        assert driver.poll() is None, f"{what}: the sweep ended\n{procs.output()}"  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"{what}: not after {SAFETY} s\n{procs.output()}"
        time.sleep(0.05)


def _kill_launch(run_dir: Path) -> bool:
    """SIGKILL the phase driver of ``run_dir`` and everything it started."""
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "orchestrator.backends.verl.run_phases" in cmd and str(run_dir) in cmd:
            victims = [*proc.children(recursive=True), proc]
            for victim in victims:
                victim.send_signal(signal.SIGKILL)
            return True
    return False


def _expected(run_dir: Path) -> dict[tuple[str, int, str], float]:
    """(phase, step, MLflow key) -> the value first logged, over every launch's file log."""
    first: dict[tuple[str, int, str], float] = {}
    for path in log_files(run_dir):
        for step, metrics in read_lines(path)[0]:
            for name, value in metrics.items():
                first.setdefault((phase_of(path), step, verl_metric_key(name)), value)
    return first


def test_verl_metrics_survive_an_mlflow_outage_exactly_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kit.mlflow_ui import free_port as _free_port
    from kit.mlflow_ui import mlflow_server, stop, wait_until_up
    from mlflow import MlflowClient

    home = use_home(tmp_path / "home", monkeypatch, cli=True)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    store = f"sqlite:///{tmp_path / 'server.db'}"
    monkeypatch.setenv("KAPPA_MLFLOW_URI", base)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")  # outage > client retries
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
    # A server that is away refuses connections at once; this only bounds a slow answer
    # (a loaded machine's server can take seconds for its first requests).
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")
    monkeypatch.setenv("KAPPA_METRICS_FLUSH_SECONDS", "1")
    monkeypatch.setenv("KAPPA_VERL_PREFLIGHT", "off")
    monkeypatch.setenv("KAPPA_VERL_POLL_SECONDS", "0.2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # two pretend devices for the executor
    monkeypatch.setenv("FAKE_VERL_STEP_SECONDS", "0.4")
    monkeypatch.setenv("FAKE_VERL_FAIL_AT", "10")  # each cell's verl crashes once at step 10
    monkeypatch.setenv("FAKE_VERL_FAIL_ONCE", "1")
    spec = _spec(tmp_path / "spec.yaml", write_fake_verl(tmp_path))
    server = mlflow_server(store, tmp_path / "artifacts", port, tmp_path / "server-1.log")
    procs = Processes(tmp_path)
    try:
        wait_until_up(base, server, tmp_path / "server-1.log")
        driver = procs.start("submit", str(spec), "--wait")
        _wait_for("a cell at step 3",
                  lambda: any(progress_step(d) >= 3 for d in _run_dirs(home)), driver, procs)
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        at_kill = max(progress_step(d) for d in _run_dirs(home))
        # While MLflow is away, one cell's launch dies with queued, unsent points.
        _wait_for("a cell at step 6", lambda: any(progress_step(d) >= 6 for d in _run_dirs(home)),
                  driver, procs)
        killed = next(d for d in _run_dirs(home) if progress_step(d) >= 6)
        assert _kill_launch(killed), procs.output()
        time.sleep(6)
        trained = max(progress_step(d) for d in _run_dirs(home))
        server = mlflow_server(store, tmp_path / "artifacts", port, tmp_path / "server-2.log")
        wait_until_up(base, server, tmp_path / "server-2.log")
        assert driver.wait(SAFETY) == 0, procs.output()

        out = procs.output() + "".join(
            p.read_text(errors="replace") for p in (home / "scheduler").glob("*.log"))
        assert "Traceback" not in out, out
        client = MlflowClient(base)
        with Registry.open() as registry:
            cells = registry.cells(SWEEP)
        assert len(cells) == 2 and all(c.state is CellState.SUCCEEDED for c in cells), out
        points = redone = 0
        for cell in cells:
            assert cell.run_dir and cell.mlflow_run_id
            run_dir = Path(cell.run_dir)
            expected = _expected(run_dir)
            logged = Counter((phase_of(path), s, k) for path in log_files(run_dir)
                             for s, m in read_lines(path)[0] for k in m)
            redone += sum(1 for n in logged.values() if n > 1)
            # One point per (phase, step, key): the evaluation phase's may share a step
            # and key with the training phase's last validation.
            want = Counter((key, step) for _, step, key in expected)
            want_values = sorted((key, step, v) for (_, step, key), v in expected.items())
            got: Counter[tuple[str, int]] = Counter()
            values = []
            for key in {k for _, _, k in expected}:
                for m in client.get_metric_history(cell.mlflow_run_id, key):
                    got[key, m.step] += 1
                    values.append((key, m.step, m.value))
            assert got == want, f"{cell.cell_id}: {sorted((got - want).items())} too many, " \
                f"{sorted((want - got).items())} missing"
            assert sorted(values) == want_values, cell.cell_id
            assert max(s for _, s, _ in expected) == STEPS
            points += len(expected)
        print(f"verl outage: {points} metric points, each in MLflow once; MLflow killed at "
              f"step {at_kill}, steps reached while it was away {trained}, points logged "
              f"again by a relaunch (sent once) {redone}")
        assert trained > at_kill  # training went on while the server was away
        assert redone > 0  # a relaunch did redo steps, and they were not sent twice
    finally:
        stop(server)
