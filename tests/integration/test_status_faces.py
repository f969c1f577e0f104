"""One :class:`~orchestrator.sweeps.status.SweepStatus` behind every face: ``kappa status``'s
text and ``--json``, and ``orchestrator.api.status``, agree field by field on a sweep with
a stopped comparison group, a search study, an override, an executor, notifications, a
running and a failed cell (real SQLite registry, real Optuna storage, real MLflow store;
the cells' states are written through the registry as a scheduler would)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kit.cells import make_cell
from kit.cli import run_kappa
from kit.home import use_home

from orchestrator import api
from orchestrator.notify.store import effective, save_config
from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.status import number
from orchestrator.sweeps.submission import prepare, record
from orchestrator.sweeps.sweep import Sweep
from orchestrator.tracking import Tracker

S = CellState
URL = "https://hooks.example.com/services/T0/B0/s3cretpart"
HEAD = f"""backend: fake
notify: {{url: "{URL}"}}
"""
GRID = HEAD + """name: grid
base: {curve: stop, steps: 6, step_seconds: 0.01}
axes: {baseline: [grpo, dapo], seed: [0, 1]}
stop: {plateau: {metric: score, patience: 2}, together: [baseline]}
"""
SEARCH = HEAD + """name: search
base: {curve: search, steps: 6, step_seconds: 0.01}
axes: {baseline: [grpo]}
stop: {plateau: {metric: val/score, patience: 2}}
search:
  space: {x: {uniform: [0.0, 1.0]}, shape: {categorical: [a, b]}}
  objective: {metric: val/score, direction: maximize}
  trials: 4
"""
STOP = "plateau at step 3 (score), together with 1 other cell"
DEMAND = {"gpus": 0, "nodes": 1, "min_cpus": 1, "self_placing": False, "steps": 5, "env": {}}
TRIALS = [({"x": 0.3, "shape": "a"}, 0.61), ({"x": 0.3, "shape": "b"}, 0.72),
          ({"x": 0.8, "shape": "a"}, None), ({"x": 0.1, "shape": "b"}, None)]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def _made(tmp_path: Path, text: str) -> str:
    """A sweep of four cells as a scheduler would leave it mid-way: two stopped by their
    rule at step 3, one running at step 2, one failed (module docstring); its name."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    prepared = prepare(spec, overrides=["base.steps=5"])
    name = prepared.name
    with Registry.open() as reg:
        record(prepared, reg, Tracker())
        save_config(name, effective(prepared.spec.notify))
        reg.set_executor(name, "local", {"max_parallel": 2})
        if prepared.spec.search is not None:  # trials are recorded as the search adds them
            _trials(reg, name)
        cells = sorted(reg.cells(name), key=lambda c: (c.axes.get("seed", 0), c.index))
        for cell in cells:
            reg.transition(cell, S.PENDING, S.QUEUED)
            reg.start_attempt(cell, job_id=f"local:{cell.index}")
        for cell, (_, value) in zip(cells[:2], TRIALS[:2], strict=True):
            reg.update_progress(cell, 3, 5)
            reg.finish_attempt(cell, S.SUCCEEDED, exit_code=0, stop_reason=STOP,
                               final_metrics={"val-core/toy/acc/mean@1": value})
        reg.update_progress(cells[2], 2, None)
        reg.finish_attempt(cells[3], S.FAILED, exit_code=1, last_error="exit code 1\nboom")
    return name


def _trials(reg: Registry, name: str) -> None:
    """Four trial cells of one study, two of them told to Optuna."""
    import optuna

    from orchestrator.search.hook import open_storage

    cells = [make_cell(f"{n:012x}", n, {"baseline": "grpo", **params},
                       {"curve": "search", "steps": 5, **params},
                       {"kappa.study": name, "kappa.trial": n})
             for n, (params, _) in enumerate(TRIALS)]
    Sweep(reg, name).record_cells(cells, {c.cell_id: DEMAND for c in cells}, 0)
    study = optuna.create_study(study_name=name, storage=open_storage(reg.engine),
                                direction="maximize")
    space = {"x": optuna.distributions.FloatDistribution(0.0, 1.0),
             "shape": optuna.distributions.CategoricalDistribution(["a", "b"])}
    for params, value in TRIALS[:2]:
        study.add_trial(optuna.trial.create_trial(params=params, distributions=space,
                                                  value=value))


def _row(text: str, cell_id: str) -> list[str]:
    """The cells table's row of ``cell_id``, cell by cell."""
    (line,) = [line for line in text.splitlines() if cell_id in line and "│" in line]
    return [part.strip() for part in line.strip().strip("│").split("│")]


@pytest.mark.parametrize("spec", [GRID, SEARCH], ids=["groups", "search"])
def test_text_json_and_api_render_one_status(home: Path, tmp_path: Path, spec: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    name = _made(tmp_path, spec)
    shown = run_kappa(capsys, "status", name)
    as_json = run_kappa(capsys, "status", name, "--json")
    assert shown.code == as_json.code == 0, shown.output + as_json.output
    text, data = shown.out, json.loads(as_json.out)
    status = api.status(name)
    again = json.loads(json.dumps(status.as_json(), default=str))
    # A running cell's projection moves with the clock: the rest is the same value.
    def still(doc: dict[str, Any]) -> dict[str, Any]:
        return {**doc, "hours": None, "groups": [{**g, "hours": None} for g in doc["groups"]]}

    assert still(data) == still(again)
    assert data["hours"].keys() == again["hours"].keys()

    assert data["counts"] == {"pending": 0, "queued": 0, "running": 1, "succeeded": 2,
                              "failed": 1, "cancelled": 0}
    for state, n in data["counts"].items():
        assert (f"{n} {state}" in text) == bool(n), state
    assert data["driver"] == "no scheduler running" and data["driver"] in text
    assert data["scheduler_pid"] is None
    assert data["executor"] == {"name": "local", "options": {"max_parallel": 2}}
    assert "executor: local max_parallel=2" in text
    assert data["overrides"] == ["base.steps=5"] and "overrides: base.steps=5" in text
    assert data["notify"]["url"] != URL and "s3cret" not in as_json.out + text
    assert f"notifications: {data['notify']['url']} on " in text
    hours = status.hours  # --json rounds the hours to 4 places; the text shows 3 digits
    assert hours is not None and data["hours"]["used"] == round(hours.used, 4)
    assert f"{hours.unit}: used {number(hours.used)} · " in text
    assert f"saved by stopping rules {number(hours.saved)} (2 cells stopped)" in text
    if name == "grid":  # the seed-0 pair stopped together; the seed-1 pair ran on
        assert [g["steps"] for g in data["groups"]] == [[3], []]
        group = status.groups[0]
        assert data["groups"][0] == {"label": "seed=0", "cells": 2, "steps": [3],
                                     "saved": round(group.saved, 4),
                                     "hours": group.hours.as_json()}
        assert group.hours.stopped_cells == 2 and group.hours.running == 0
        assert f"{group.label}: {group.saved:.3g} at step 3" in text
        assert "seed=1: 0 (ran to full length)" in text and not data["studies"]
    else:
        (study,) = data["studies"]
        assert (study["study"], study["trials"], study["complete"]) == ("search", 2, 2)
        assert study["best"] == {"trial": 1, "value": 0.72, "params": TRIALS[1][0]}
        assert f"search: 2/{study['budget']} trials — 2 done — best 0.72 (#1)" in text
        assert not data["groups"] and "comparison group" not in text
    for cell in data["cells"]:
        index, cell_id, axes, state, progress, attempts, acc = _row(text, cell["cell_id"])
        assert (index, cell_id) == (str(cell["index"]), cell["cell_id"])
        assert axes == ", ".join(f"{k}={v}" for k, v in cell["axes"].items())
        assert state.split(" (")[0] == cell["state"] and attempts == str(cell["attempts"])
        assert acc == ("" if cell["val_accuracy"] is None else f"{cell['val_accuracy']:.3f}")
        assert ("(stopped: plateau at step 3)" in state) == bool(cell["stop_reason"])
        # the job's total, else the plan's
        assert progress == ("" if cell["progress_step"] is None else
                            f"{cell['progress_step']}/5")
    assert data["cells"][3]["last_error"].startswith("exit code 1")
    failed = data["cells"][3]["cell_id"]
    assert f"{failed}: exit code 1 (`kappa logs {failed}`)" in text


def test_api_status_refuses_what_it_cannot_read_and_creates_nothing(
        home: Path, tmp_path: Path) -> None:
    from orchestrator.errors import UserInputError
    from orchestrator.registry import RegistryMissing

    url = f"sqlite:///{tmp_path / 'none.db'}"
    with pytest.raises(RegistryMissing):
        api.status("grid", registry=url)
    assert not (tmp_path / "none.db").exists()
    name = _made(tmp_path, GRID)
    for wrong in ("gird", "../grid", "grid\u2028x"):
        with pytest.raises(UserInputError) as err:
            api.status(wrong)
        assert name in str(err.value) or "name" in str(err.value), err.value
