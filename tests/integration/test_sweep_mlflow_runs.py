"""The scheduler's MLflow side on a real store: one child run per cell (never two, even
across a crash between creating and recording it), axes as tags and params, final
metrics as metrics, runs ended off the loop but always ended; cell.json in run folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit.fake_backend import write_spec
from kit.home import use_home

from orchestrator.registry import CellState, Registry
from orchestrator.runs.folder import RUN_PENDING_MARKER
from orchestrator.sweeps.driver import resume, submit
from orchestrator.sweeps.stores import Stores
from orchestrator.sweeps.submission import prepare, record
from orchestrator.tracking import Tracker


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def _children(tracker: Tracker, parent: str) -> list[str]:
    experiment = tracker.client.get_run(parent).info.experiment_id
    runs = tracker.client.search_runs([experiment],
                                      f"tags.`mlflow.parentRunId` = '{parent}'")
    return sorted(r.info.run_id for r in runs)


def test_runs_carry_axes_params_final_metrics_and_cell_json(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "mlf-basic", seeds=2, steps=2)
    submit(spec, wait=True)
    tracker = Tracker()
    with Registry.open() as reg:
        cells = reg.cells("mlf-basic")
        parent = reg.get_sweep("mlf-basic").mlflow_parent_run_id or ""
    assert _children(tracker, parent) == sorted(c.mlflow_run_id or "" for c in cells)
    for cell in cells:
        run = tracker.client.get_run(cell.mlflow_run_id or "")
        seed = str(cell.axes["seed"])
        assert run.info.status == "FINISHED"
        assert run.info.run_name == f"s{seed}"  # the one axis that varies, short
        assert run.data.tags["axis.seed"] == seed and run.data.params["axis.seed"] == seed
        assert "seed" not in run.data.params  # the axis once, not also as its setting
        assert run.data.params["steps"] == "2"
        assert run.data.tags["kappa.param_count"] == str(len(run.data.params))
        # The fake trainer logs nothing to MLflow: the scheduler logged summary's finals.
        assert run.data.metrics["eval/toy/mean_at_4"] == pytest.approx(
            cell.final_metrics["eval/toy/mean@4"])
        run_dir = Path(cell.run_dir or "")
        doc = json.loads((run_dir / "cell.json").read_text())
        assert doc == {"sweep": "mlf-basic", "cell_id": cell.cell_id, "axes": cell.axes,
                       "labels": {}, "state": "succeeded",
                       "mlflow_run_id": cell.mlflow_run_id}
        assert not (run_dir / RUN_PENDING_MARKER).exists()


def test_run_created_but_not_recorded_is_reused_not_doubled(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "mlf-crash", seeds=2, steps=1)
    tracker = Tracker()
    with Registry.open() as reg:
        result = record(prepare(spec), reg, tracker)
        first = reg.cells("mlf-crash")[0]
        pending = json.loads((Path(first.run_dir or "") / "cell.json").read_text())
        assert (pending["state"], pending["mlflow_run_id"]) == ("pending", None)
        # A scheduler died right after creating the cell's run: the marker is there,
        # the registry has no run id.
        orphan = tracker.create_cell_run(result.parent_run_id, first, "mlf-crash")
        (Path(first.run_dir or "") / RUN_PENDING_MARKER).touch()
        assert reg.get_cell("mlf-crash", first.cell_id).mlflow_run_id is None
    resume("mlf-crash", Stores())
    with Registry.open() as reg:
        cells = reg.cells("mlf-crash")
    assert {c.state for c in cells} == {CellState.SUCCEEDED}
    assert cells[0].mlflow_run_id == orphan
    assert len(_children(tracker, result.parent_run_id)) == 2  # one run per cell


def test_runs_a_killed_scheduler_left_running_are_ended_on_resume(
        home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "mlf-stale", seeds=2, steps=1)
    submit(spec, wait=True)
    tracker = Tracker()
    with Registry.open() as reg:
        run_ids = [c.mlflow_run_id or "" for c in reg.cells("mlf-stale")]
    # As if the scheduler died before its background thread ended the runs.
    for run_id in run_ids:
        tracker.client.update_run(run_id, status="RUNNING")
    resume("mlf-stale", Stores())
    assert [tracker.client.get_run(r).info.status for r in run_ids] == ["FINISHED"] * 2
