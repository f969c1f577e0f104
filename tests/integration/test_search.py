"""Adaptive search through the real scheduler: real SQLite registry with Optuna's storage
beside it, real MLflow store, real trial processes (the fake backend's
``search`` curve, tests/kit/fake_backend.py)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kit.cli import kappa, process, run_kappa
from kit.fake_backend import SEARCH_METRIC, search_spec
from kit.home import use_home
from kit.kappa_main import KAPPA_SCRIPT

from orchestrator import api
from orchestrator.backends import get_backend
from orchestrator.grid.identity import content_id
from orchestrator.registry import CellState, Registry

SAFETY = 180  # seconds; a guard against hangs, not a speed assertion
SPACE = f"""  space:
    x: {{uniform: [0.0, 1.0]}}
    shape: {{categorical: [a, b]}}
  objective: {{metric: {SEARCH_METRIC}, direction: maximize}}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def _kappa(*args: str) -> tuple[int, str]:
    """The real CLI in a process (the fake backends registered), its code and output."""
    proc = process(*args, code=None, timeout=SAFETY)
    return proc.returncode, proc.stdout + proc.stderr


def _trials(sweep: str) -> dict[str, list[tuple[int, str, float | None]]]:
    import optuna

    from orchestrator.search.hook import open_storage

    with Registry.open() as reg:
        storage = open_storage(reg.engine)
        return {s.study_name: [(t.number, t.state.name, t.value) for t in
                               optuna.load_study(study_name=s.study_name, storage=storage)
                               .get_trials(deepcopy=False)]
                for s in optuna.get_all_study_summaries(storage)
                if s.study_name.startswith(sweep)}


def test_search_runs_trials_as_cells_one_study_per_axis_value(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = search_spec(home.parent / "s.yaml", "srch", SPACE + "  trials: 3\n  parallel: 2\n"
                       "  seed: 3\n", axes="{baseline: [grpo, dapo]}", steps=3)
    code, out = kappa(capsys, "search", str(spec), "--wait")
    assert code == 0, out
    studies = _trials("srch")
    assert set(studies) == {"srch[baseline=grpo]", "srch[baseline=dapo]"}
    with Registry.open() as reg:
        cells = reg.cells("srch")
        sweep = reg.get_sweep("srch")
    assert len(cells) == 6 and all(c.state is CellState.SUCCEEDED for c in cells)
    backend = get_backend(sweep.backend)
    for cell in cells:  # stored resolved, as the id hashes them
        assert cell.settings == backend.validate(cell.settings).model_dump(mode="json")
        assert content_id(backend.name, cell.settings, cell.labels) == cell.cell_id
    for name, trials in studies.items():
        assert sorted(n for n, _, _ in trials) == [0, 1, 2]
        assert all(state == "COMPLETE" for _, state, _ in trials)
        mine = {c.labels["kappa.trial"]: c for c in cells if c.labels["kappa.study"] == name}
        assert sorted(mine) == [0, 1, 2]
        for number, _, value in trials:  # told the cell's final objective
            cell = mine[number]
            assert value == (cell.final_metrics or {})[SEARCH_METRIC]
            assert cell.axes["baseline"] == name.split("=")[1].rstrip("]")
            assert set(cell.axes) == {"baseline", "x", "shape"}
    # Optuna's tables are beside the registry, never in it (alembic_version would clash).
    registry_tables = {r[0] for r in sqlite3.connect(home / "registry.db").execute(
        "select name from sqlite_master where type='table'")}
    assert "trials" not in registry_tables and (home / "registry.optuna.db").exists()
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    run = client.get_run(cells[0].mlflow_run_id or "")
    assert run.data.tags["kappa.study"] == "srch[baseline=grpo]"
    assert run.data.tags["kappa.trial"] == "0"
    assert sweep.mlflow_parent_run_id
    code, out = kappa(capsys, "status", "srch")
    assert code == 0 and "srch[baseline=grpo]: 3/3 trials — 3 done — best" in out, out
    code, out, _ = run_kappa(capsys, "status", "srch", "--json")
    data = json.loads(out)
    assert [s["complete"] for s in data["studies"]] == [3, 3]
    code, out = kappa(capsys, "table", "srch")
    assert code == 0 and "| study | best trial | val/score | x | shape |" in out, out
    assert "srch[baseline=dapo]" in out
    assert api.table_text("srch") == out  # the Python API prints what kappa table prints
    code, out, _ = run_kappa(capsys, "export", "srch", "-f", "json")
    rows = json.loads(out)
    assert sorted(r["trial.number"] for r in rows) == [0, 0, 1, 1, 2, 2]
    assert {r["trial.state"] for r in rows} == {"COMPLETE"}
    report = home.parent / "report.html"
    code, out = kappa(capsys, "report", "srch", "-o", str(report))
    text = report.read_text()
    assert code == 0 and "Search (Optuna)" in text and "optimization history" in text, out
    # Optuna's plots are static SVG: the report carries no plotly.js (4.6 MB alone).
    assert text.count("<svg") >= 4 and "plotly" not in text.lower(), len(text)


def _wait_for_first_trial(home: Path, sweep: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + SAFETY
    while time.monotonic() < deadline and proc.poll() is None:
        if (home / "registry.optuna.db").exists():
            with Registry.open() as reg:
                if reg.find_sweep(sweep) is not None and reg.cells(sweep):
                    return
        time.sleep(0.1)
    raise AssertionError("the search never asked its first trial")


def test_a_killed_search_resumes_without_losing_or_repeating_trials(home: Path) -> None:
    seed = random.randrange(1_000_000)
    print(f"random seed {seed}")
    rng = random.Random(seed)
    spec = search_spec(home.parent / "s.yaml", "killed", SPACE + "  trials: 7\n  parallel: 2\n"
                       "  sampler: random\n  seed: 1\n", steps=4, step_seconds=0.05)
    proc = subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), "search", str(spec), "--wait"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=os.environ.copy())
    _wait_for_first_trial(home, "killed", proc)
    time.sleep(rng.uniform(0.0, 3.0))  # a random moment of the search
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=SAFETY)
    code, out = _kappa("resume", "killed", "--wait")
    assert code == 0, out
    (trials,) = _trials("killed").values()
    assert sorted(n for n, _, _ in trials) == list(range(7))
    assert all(state == "COMPLETE" for _, state, _ in trials), trials
    with Registry.open() as reg:
        cells = reg.cells("killed")
    assert sorted(c.labels["kappa.trial"] for c in cells) == list(range(7))  # one cell each
    assert all(c.state is CellState.SUCCEEDED for c in cells)


def test_the_median_pruner_stops_poor_trials_like_a_stopping_rule(home: Path) -> None:
    spec = search_spec(home.parent / "s.yaml", "pruned", """  space:
    x: {categorical: [0.3, 0.31, 0.32, 0.95, 0.97, 1.0]}
""" + f"  objective: {{metric: {SEARCH_METRIC}}}\n  trials: 6\n  parallel: 1\n  sampler: grid\n"
                       "  seed: 0\n  pruner: median\n", steps=30, step_seconds=0.03)
    code, out = _kappa("search", str(spec), "--wait")
    assert code == 0, out
    (trials,) = _trials("pruned").values()
    states = {n: s for n, s, _ in trials}
    with Registry.open() as reg:
        cells = {c.labels["kappa.trial"]: c for c in reg.cells("pruned")}
    pruned = [n for n, s in states.items() if s == "PRUNED"]
    assert pruned, trials
    for n in pruned:
        cell = cells[n]
        assert cell.state is CellState.SUCCEEDED
        assert (cell.stop_reason or "").startswith("pruned at step"), cell.stop_reason
        assert cell.axes["x"] >= 0.95  # only the poor points are pruned
        assert (cell.progress_step or 0) < 30


def test_bad_input_exits_2_and_writes_nothing(home: Path, tmp_path: Path) -> None:
    spec = search_spec(tmp_path / "bad.yaml", "bad", """  space:
    x: {uniform: [0.9, 0.1]}
    nope: {loguniform: [0, 1]}
  objective: {metric: m}
  trials: 3
""")
    before = sorted(p.name for p in home.iterdir())
    code, out = _kappa("search", str(spec), "--wait")
    assert code == 2 and "search.space.x" in out and "low > high" in out, out
    assert "Traceback" not in out
    assert sorted(p.name for p in home.iterdir()) == before  # no registry, no studies
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: plain\nbackend: fake\nbase: {curve: search, steps: 2}\n")
    code, out = _kappa("search", str(plain))
    assert code == 2 and "no search: block" in out, out


def test_a_metric_no_trial_logs_fails_the_study(home: Path) -> None:
    spec = search_spec(home.parent / "s.yaml", "nometric",
                       SPACE.replace(SEARCH_METRIC, "val/nope") + "  trials: 6\n  parallel: 1\n",
                       steps=2)
    code, out = _kappa("search", str(spec), "--wait")
    assert code == 2 and "never logged the objective metric 'val/nope'" in out, out
    assert "val/score" in out  # what it does log
    (trials,) = _trials("nometric").values()
    assert [s for _, s, _ in trials] == ["FAIL"]  # nothing more was asked


def _by_trial(sweep: str) -> dict[int, Any]:
    with Registry.open() as reg:
        cells = reg.cells(sweep)
    numbers = [c.labels["kappa.trial"] for c in cells]
    assert len(numbers) == len(set(numbers)), numbers  # one cell per trial
    return {c.labels["kappa.trial"]: c for c in cells}


def test_objective_at_best_is_the_best_logged_value_not_the_final(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = search_spec(home.parent / "s.yaml", "atbest", """  space:
    x: {categorical: [0.3, 0.6]}
""" + f"  objective: {{metric: {SEARCH_METRIC}, at: best}}\n  trials: 2\n  sampler: grid\n"
                       "  seed: 0\n", steps=6, fall_after=3)
    code, out = kappa(capsys, "search", str(spec), "--wait")
    assert code == 0, out
    (trials,) = _trials("atbest").values()
    cells = _by_trial("atbest")
    assert sorted(n for n, _, _ in trials) == [0, 1]
    for number, state, value in trials:
        cell = cells[number]
        lines = (Path(cell.run_dir or "") / "metrics.jsonl").read_text().splitlines()
        history = [json.loads(line)["metrics"][SEARCH_METRIC] for line in lines]
        assert state == "COMPLETE" and value == max(history), (value, history)
        assert value > (cell.final_metrics or {})[SEARCH_METRIC]  # the run fell after its peak


def test_a_cancelled_search_resubmitted_continues_its_trials(home: Path) -> None:
    """`kappa cancel` stops the running trials' cells and the study asks no more; the
    trials stay open (RUNNING) in the study. Submitting the spec again requeues those
    cells, which finish the same trials, then the rest of the budget is asked: every
    trial number once, each with one cell."""
    hold = home.parent / "hold"  # the first trials cannot end before the cancel lands
    hold.touch()
    spec = search_spec(home.parent / "s.yaml", "cancelled", SPACE + "  trials: 5\n"
                       "  parallel: 2\n  sampler: random\n  seed: 1\n", steps=20,
                       step_seconds=0.05, hold_while=str(hold))
    proc = subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), "search", str(spec), "--wait"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=os.environ.copy())
    _wait_for_first_trial(home, "cancelled", proc)
    code, out = _kappa("cancel", "cancelled")
    assert code == 0, out
    proc.wait(timeout=SAFETY)
    before = _by_trial("cancelled")
    assert any(c.state is CellState.CANCELLED for c in before.values()), before
    (open_trials,) = _trials("cancelled").values()
    assert len(open_trials) < 5  # the cancel stopped the asking
    hold.unlink()
    code, out = _kappa("search", str(spec), "--wait")
    assert code == 0, out
    (trials,) = _trials("cancelled").values()
    assert sorted(n for n, _, _ in trials) == list(range(5))
    assert all(state == "COMPLETE" for _, state, _ in trials), trials
    after = _by_trial("cancelled")
    assert sorted(after) == list(range(5))
    assert all(c.state is CellState.SUCCEEDED for c in after.values())
    for number, cell in before.items():  # the cancelled trials kept their cells
        assert after[number].cell_id == cell.cell_id


def _halving_spec(home: Path, name: str, pruner: str) -> Path:
    return search_spec(home.parent / "s.yaml", name, """  space:
    x: {categorical: [0.3, 0.31, 0.32, 0.9, 0.95, 0.97, 1.0, 0.6, 0.5]}
""" + f"  objective: {{metric: {SEARCH_METRIC}}}\n  trials: 9\n  parallel: 1\n  sampler: grid\n"
                       f"  seed: 0\n  pruner: {pruner}\n", steps=12, step_seconds=0.05)


@pytest.mark.parametrize("pruner", ["successive_halving", "hyperband"])
def test_halving_pruners_stop_trials_behind_the_best(home: Path, pruner: str) -> None:
    spec = _halving_spec(home, pruner.replace("_", "-"), pruner)
    code, out = _kappa("search", str(spec), "--wait")
    assert code == 0, out
    (trials,) = _trials(pruner.replace("_", "-")).values()
    cells = _by_trial(pruner.replace("_", "-"))
    states = {n: s for n, s, _ in trials}
    assert sorted(states) == list(range(9))
    assert set(states.values()) <= {"COMPLETE", "PRUNED"}
    best = next(n for n, c in cells.items() if c.axes["x"] == 0.3)
    assert states[best] == "COMPLETE"  # the best point is never pruned
    pruned = [n for n, s in states.items() if s == "PRUNED"]
    assert pruned, trials
    for n in pruned:
        cell = cells[n]
        assert cell.state is CellState.SUCCEEDED
        assert f"({pruner} pruner)" in (cell.stop_reason or ""), cell.stop_reason
        assert cell.axes["x"] != 0.3
    # A stop request can land after a short trial ended; most land before.
    assert any((cells[n].progress_step or 0) < 12 for n in pruned)
