"""Stops that kills interrupt (issue 19): a stop is an outcome only once the run confirms it.

A cell with a ``threshold`` rule that fires at step 8 and ``checkpoint_every: 10`` runs
under ``kappa submit --wait``; at a moment drawn from the scenario's seed, around the
moment ``stop-request.json`` appears, the scheduler and the cell's job process group are
SIGKILLed (or, in some scenarios, only the job); then ``kappa resume SWEEP`` (in
process). The
cell must end ``succeeded (stopped: threshold at step 8)`` at a step ``N >= 8`` with the
numbers of an undisturbed run that stopped at ``N``, and MLflow must hold every point of
``metrics.jsonl`` exactly once and no other (before the fix: 0 steps, the warm start's
numbers, ``metrics.jsonl`` cut back to step 0 while MLflow kept steps 1-8).

* the fake trainer's ``fault`` curve (a pure function of the step, through the real
  outbox): quick, 3 moments in the default run;
* the real embedded trainer: the final evaluation and every logged number equal to an
  undisturbed ``train`` of ``N`` steps: 1 moment in the default run, 20 with ``slow``.

A ``diverged`` cell whose scheduler and job are killed after the request is failed at
once by the next scheduler, never run again. Each scenario prints ``stop-kill seed=N:
...``; ``KAPPA_STOP_KILL_SEEDS=N[,M...]`` replays those seeds.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from kit.fake_trainer import final_metrics, step_metrics
from kit.home import use_home
from kit.kappa_main import KAPPA_SCRIPT
from kit.run_files import job_groups, progress_step

from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.sweeps.driver import resume
from orchestrator.tracking.naming import metric_key

SAFETY = 300  # seconds: a guard against hangs, not a speed assertion
SWEEP = "stop-kill"
FIRES_AT = 8
VOLATILE = ("timing_s/", "perf/")
EMBEDDED: dict[str, Any] = {
    "task": "arithmetic", "group_size": 4, "prompts_per_step": 4, "ppo_mini_batches": 1,
    "max_steps": 40, "val_every": 1, "val_size": 8, "eval_samples": 2,
    "checkpoint_every": 10, "model": {"d_model": 16, "n_layers": 1, "n_heads": 2},
    "warm_start": {"steps": 5, "batch_size": 8},
}
FAKE: dict[str, Any] = {"curve": "fault", "steps": 40, "checkpoint_every": 10,
                        "step_seconds": 0.04}
RULES = {
    "embedded": {"threshold": {"metric": "val-core/arith-val/acc/mean@1", "at_least": 0.0,
                               "min_steps": FIRES_AT}},
    # The fault curve's critic/score/mean is step / 100 (seed 0).
    "fake": {"threshold": {"metric": "critic/score/mean", "at_least": 0.075}},
}


def _seeds(default: Sequence[int]) -> list[int]:
    chosen = os.environ.get("KAPPA_STOP_KILL_SEEDS")
    return [int(s) for s in chosen.split(",")] if chosen else list(default)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One warm-start cache for every scenario, and the undisturbed runs by length."""
    root = tmp_path_factory.mktemp("stop-kill-shared")
    return {"cache": root / "cache", "root": root, "references": {}}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: dict[str, Any]) -> Path:
    home = use_home(tmp_path / "home", monkeypatch, cli=True)
    monkeypatch.setenv("KAPPA_CACHE", str(shared["cache"]))
    return home


def _parallel() -> str:
    # As many slots as cores: each CPU job gets one thread, as the in-process reference.
    return str(len(os.sched_getaffinity(0)))


def _kappa(log: Path, *args: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), *args], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(os.environ), start_new_session=True)


def _stable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(VOLATILE)}


def _rows(run_dir: Path) -> list[tuple[int, dict[str, float]]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [(int(r["step"]), r["metrics"]) for r in map(json.loads, lines)]


def reference(shared: dict[str, Any], kind: str, steps: int) -> tuple[list[Any], dict[str, Any]]:
    """``metrics.jsonl`` rows and final metrics (volatile timings left out) of an
    undisturbed run of ``steps`` steps: what a run stopped at ``steps`` must have."""
    if kind == "fake":
        rows = [(s, step_metrics(0, s)) for s in range(steps + 1)]
        return [*rows, (steps, final_metrics(0))], final_metrics(0)
    known = shared["references"]
    if steps not in known:
        from orchestrator.backends.embedded.settings import EmbeddedSettings
        from orchestrator.backends.embedded.trainer import train

        out = shared["root"] / f"train-{steps}"
        os.environ.pop("MLFLOW_RUN_ID", None)
        final = train(EmbeddedSettings(**{**EMBEDDED, "max_steps": steps}), out,
                      progress=False)
        known[steps] = ([(s, _stable(m)) for s, m in _rows(out)], _stable(final))
    rows, final = known[steps]
    return rows, final




def _run_dir(home: Path) -> Path | None:
    found = [d for d in (home / "runs" / SWEEP).glob("*") if (d / "config.yaml").exists()]
    return found[0] if found else None




def kill_around_the_request(home: Path, rng: random.Random, driver: subprocess.Popen[bytes],
                            stops_within: float) -> str:
    """SIGKILL the job's process group and (mostly) the scheduler at a seeded moment:
    once the job logged a step just before or at the rule's, or a seeded delay (up to
    ``stops_within`` s, about how long a job takes to stop) after the request appears."""
    before = rng.random() < 0.25
    at_step = rng.randint(FIRES_AT - 2, FIRES_AT)
    delay = rng.uniform(0.0, 1.0) * stops_within
    only_job = rng.random() < 0.2
    deadline = time.monotonic() + SAFETY
    while True:
        if driver.poll() is not None or time.monotonic() > deadline:
            return "nothing (the sweep ended first)"
        run_dir = _run_dir(home)
        if before and progress_step(run_dir) >= at_step:
            what = f"at progress {progress_step(run_dir)}"
            break
        if not before and run_dir is not None and (run_dir / "stop-request.json").exists():
            time.sleep(delay)
            what = f"{delay:.3f} s after the stop request appeared"
            break
        time.sleep(0.002)
    if not only_job:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    for group in job_groups(home / "runs" / SWEEP):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    return ("the job" if only_job else "the scheduler and the job") + f" {what}"


def _mlflow(cell: CellRecord) -> dict[str, dict[int, list[float]]]:
    """The cell's MLflow metric histories: ``{key: {step: [values]}}``."""
    from mlflow import MlflowClient

    from orchestrator.tracking import Tracker

    client = MlflowClient(Tracker().uri)
    run_id = cell.mlflow_run_id or ""
    out: dict[str, dict[int, list[float]]] = {}
    for key in client.get_run(run_id).data.metrics:
        for m in client.get_metric_history(run_id, key):
            out.setdefault(key, {}).setdefault(m.step, []).append(m.value)
    return out


def check_stopped_like_undisturbed(shared: dict[str, Any], kind: str, cell: CellRecord,
                                   context: str) -> int:
    """The checks of the module docstring; the step the cell stopped at."""
    assert cell.state is CellState.SUCCEEDED, f"{context}: {cell.state} {cell.last_error}"
    assert (cell.stop_reason or "").startswith(f"threshold at step {FIRES_AT} "), context
    run_dir = Path(cell.run_dir or "")
    summary = json.loads((run_dir / "summary.json").read_text())
    at = int(summary["stopped"]["at_step"])
    assert FIRES_AT <= at < 40, f"{context}: stopped at {at}"
    assert summary["steps"] == at and cell.progress_step == at, f"{context}: {summary}"
    rows, final = reference(shared, kind, at)
    assert _stable(summary["final"]) == final, f"{context}: final numbers differ"
    assert _stable(cell.final_metrics or {}) == final, context
    assert any(k.startswith("eval/") for k in final), context  # the final evaluation ran
    got = _rows(run_dir)
    assert [(s, _stable(m)) for s, m in got] == rows, f"{context}: metrics.jsonl differs"
    # MLflow: every point of metrics.jsonl exactly once, and nothing else.
    want: dict[str, Counter[int]] = {}
    for step, metrics in got:
        for name in metrics:
            want.setdefault(metric_key(name), Counter())[step] += 1
    history = _mlflow(cell)
    counts = {k: Counter({s: len(v) for s, v in by_step.items()}) for k, by_step in
              history.items()}
    assert counts == want, f"{context}: MLflow {counts} != metrics.jsonl {want}"
    values: dict[tuple[str, int], list[float]] = {}
    for step, metrics in got:  # the final evaluation logs val-core again at its step
        for name, value in _stable(metrics).items():
            values.setdefault((metric_key(name), step), []).append(value)
    for (key, step), logged in values.items():
        assert sorted(history[key][step]) == sorted(logged), f"{context}: {key}@{step}"
    return at


def _spec(path: Path, kind: str) -> Path:
    base = EMBEDDED if kind == "embedded" else FAKE
    path.write_text(yaml.safe_dump({"name": SWEEP, "backend": kind, "retries": 2,
                                    "base": base, "stop": RULES[kind]}, sort_keys=False))
    return path


def scenario(home: Path, tmp_path: Path, shared: dict[str, Any], kind: str,
             seed: int) -> None:
    """Submit, kill at the seed's moment, resume, check (see the module docstring)."""
    rng = random.Random(seed)
    spec = _spec(tmp_path / "spec.yaml", kind)
    log = tmp_path / "kappa.log"
    driver = _kappa(log, "submit", str(spec), "--wait", "--max-parallel", _parallel())
    what = kill_around_the_request(home, rng, driver, 0.6 if kind == "embedded" else 0.15)
    print(f"stop-kill seed={seed} ({kind}): killed {what}")
    assert driver.wait(SAFETY) in (0, -signal.SIGKILL), log.read_text(errors="replace")
    resume(SWEEP, max_parallel=int(_parallel()))  # the user's way back (in process: quicker)
    output = log.read_text(errors="replace")
    context = f"stop-kill seed={seed} ({kind}; killed {what})"
    assert "Traceback" not in output, f"{context}\n{output}"
    with Registry.open() as registry:
        (cell,) = registry.cells(SWEEP)
        won = [a for a in registry.attempts(cell) if a.state.value == "succeeded"]
    assert len(won) == 1, context
    at = check_stopped_like_undisturbed(shared, kind, cell, context)
    print(f"stop-kill seed={seed} ({kind}): stopped at step {at}, "
          f"{cell.attempts_count} attempt(s)")


@pytest.mark.parametrize("seed", _seeds([0, 1, 7]))  # after, before, the job alone
def test_a_stop_interrupted_by_kills_ends_as_an_undisturbed_stop(
        home: Path, tmp_path: Path, shared: dict[str, Any], seed: int) -> None:
    scenario(home, tmp_path, shared, "fake", seed)


@pytest.mark.parametrize("seed", _seeds(range(1)))
def test_an_embedded_stop_interrupted_by_kills_has_the_undisturbed_numbers(
        home: Path, tmp_path: Path, shared: dict[str, Any], seed: int) -> None:
    scenario(home, tmp_path, shared, "embedded", seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", _seeds(range(1, 21)))
def test_an_embedded_stop_interrupted_at_20_more_moments(
        home: Path, tmp_path: Path, shared: dict[str, Any], seed: int) -> None:
    scenario(home, tmp_path, shared, "embedded", seed)


def test_a_diverged_cell_killed_after_the_request_is_never_run_again(
        home: Path, tmp_path: Path) -> None:
    """The job waits before step 4 (``hold_at``) after the rule fired at step 3, so it
    is alive when the scheduler and it are killed; the next scheduler fails the cell."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "name": SWEEP, "backend": "fake", "retries": 3,
        "base": {"curve": "stop", "steps": 20, "step_seconds": 0.01, "hold_at": 4,
                 "values": [0.1, 0.5, 0.6, 0.7]},
        "stop": {"diverged": [{"metric": "score", "above": 0.4, "for": 2}]}}))
    log = tmp_path / "kappa.log"
    driver = _kappa(log, "submit", str(spec), "--wait")
    deadline = time.monotonic() + SAFETY
    while (run_dir := _run_dir(home)) is None or not (run_dir / "stop-request.json").exists():
        assert driver.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.01)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    for group in job_groups(home / "runs" / SWEEP):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    (run_dir / "go").touch()  # a relaunch would run on, and diverge again
    resume(SWEEP)
    with Registry.open() as registry:
        (cell,) = registry.cells(SWEEP)
    assert (cell.state, cell.attempts_count) == (CellState.FAILED, 1), cell
    assert cell.stop_reason == "diverged at step 3 (score above 0.4 for 2 logs; last 0.6)"
    assert cell.retries_left == 0 and cell.last_error == f"stopped: {cell.stop_reason}"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["stopped"]["rule"] == "diverged"
    assert (run_dir / "launches.log").read_text().split() == ["0"]  # launched once
    from mlflow import MlflowClient

    from orchestrator.tracking import Tracker

    run = MlflowClient(Tracker().uri).get_run(cell.mlflow_run_id or "")
    assert (run.info.status, run.data.tags["kappa.stopped"]) == ("FAILED", cell.stop_reason)
