"""The Tracker against a real MLflow store (SQLite, in a tmp folder)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.cells import make_cell

from orchestrator.tracking import Tracker

pytest.importorskip("mlflow")


CELL = make_cell(
    cell_id="0123456789ab",
    index=0,
    axes={"algorithm": "grpo", "rb": True, "seed": 0},
    settings={
        "algorithm": {"name": "grpo", "clip": {"low": 0.2, "high": 0.28}},
        "seed": 0,
        "prompt": "p" * 7000,
        # 150 leaves: more than one log_batch call's worth of params.
        "extra": {f"k{i:03d}": i for i in range(150)},
    },
)

# What a launched process does: log into the pre-created run named by the environment,
# one log_batch per step, never creating or ending a run.
CHILD_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from mlflow import MlflowClient
    from mlflow.entities import Metric
    client = MlflowClient()  # MLFLOW_TRACKING_URI from the environment
    run_id = os.environ["MLFLOW_RUN_ID"]
    for step in range(3):
        now = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric("actor/entropy", 1.0 - 0.1 * step, now, step)])
    with open("note.txt", "w") as fh:
        fh.write("from the child")
    client.log_artifact(run_id, "note.txt")
    """
)


@pytest.fixture(scope="session")
def template_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An initialised MLflow SQLite store, made once (MLflow's migrations take seconds)."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def tracker(
    template_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Tracker]:
    """A Tracker on the default local store under a fresh KAPPA_HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("KAPPA_HOME", str(home))
    monkeypatch.delenv("KAPPA_MLFLOW_URI", raising=False)
    shutil.copy(template_store, home / "mlflow.db")
    yield Tracker()


def test_parent_and_child_runs(tracker: Tracker, tmp_path: Path) -> None:
    assert tracker.artifact_root == tmp_path / "home" / "mlartifacts"
    assert tracker.artifact_root is not None
    experiment_id = tracker.ensure_experiment("toy table 2")
    assert tracker.ensure_experiment("toy table 2") == experiment_id
    experiment = tracker.client.get_experiment(experiment_id)
    assert experiment.artifact_location.startswith(tracker.artifact_root.as_uri())

    parent = tracker.sweep_run(experiment_id, "toy", "name: toy\n", tags={"team": "rl"})[0]
    assert tracker.sweep_run(experiment_id, "toy", "name: toy\nv: 2\n")[0] == parent
    spec_file = tracker.client.download_artifacts(parent, "spec.yaml", str(tmp_path))
    assert Path(spec_file).read_text() == "name: toy\nv: 2\n"
    parent_run = tracker.client.get_run(parent)
    assert parent_run.data.tags["team"] == "rl"
    assert parent_run.data.tags["kappa.sweep"] == "toy"

    child = tracker.create_cell_run(parent, CELL, "toy", git_commit="deadbeef")
    run = tracker.client.get_run(child)
    assert run.info.status == "RUNNING"
    # Named by its axes (alone, nothing varies: all of them; the scheduler names it by the
    # axes that vary in its sweep).
    assert run.info.run_name == "grpo +rb s0"
    tags = run.data.tags
    assert tags["mlflow.parentRunId"] == parent
    assert (tags["axis.algorithm"], tags["axis.rb"], tags["axis.seed"]) == ("grpo", "true", "0")
    assert (tags["kappa.cell_id"], tags["kappa.sweep"], tags["kappa.git_commit"]) == (
        CELL.cell_id,
        "toy",
        "deadbeef",
    )
    params = run.data.params
    assert len(params) == 3 + 1 + 150 + 3  # algorithm.*, prompt, extra.*, axis.*
    assert params["algorithm.clip.high"] == "0.28" and params["extra.k149"] == "149"
    # The axes as params too: the UI's parallel coordinates and compare view plot params;
    # the seed, an axis that is also a setting of the same value, only once (axis.seed).
    assert (params["axis.algorithm"], params["axis.rb"], params["axis.seed"]) == (
        "grpo", "true", "0")
    assert "seed" not in params
    assert tags["kappa.param_count"] == "157"
    assert len(params["prompt"]) == 6000
    assert tracker.create_cell_run(parent, CELL, "toy") == child

    config = tmp_path / "config.yaml"
    config.write_text("seed: 0\n")
    log = tmp_path / "cell.log"
    log.write_text("step 1\n")
    skipped = tracker.finish_cell_run(child, "failed", [config, log, tmp_path / "missing.log"])
    assert skipped == [tmp_path / "missing.log"]
    finished = tracker.client.get_run(child)
    assert finished.info.status == "FAILED" and finished.info.end_time is not None
    names = {a.path for a in tracker.client.list_artifacts(child)}
    assert names == {"config.yaml", "cell.log"}
    stored = list(tracker.artifact_root.rglob("cell.log"))
    assert len(stored) == 1 and stored[0].read_text() == "step 1\n"

    # A retry logs into the same run, RUNNING again.
    assert tracker.create_cell_run(parent, CELL, "toy") == child
    assert tracker.client.get_run(child).info.status == "RUNNING"
    tracker.finish_sweep_run(parent)
    assert tracker.client.get_run(parent).info.status == "FINISHED"


def test_launched_process_logs_into_the_precreated_run(tracker: Tracker, tmp_path: Path) -> None:
    experiment_id = tracker.ensure_experiment("toy")
    parent = tracker.sweep_run(experiment_id, "toy", "")[0]
    child = tracker.create_cell_run(parent, CELL, "toy")
    env = tracker.env_for_run(child)
    assert env == {"MLFLOW_TRACKING_URI": tracker.uri, "MLFLOW_RUN_ID": child}
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    result = subprocess.run(
        [sys.executable, "-c", CHILD_SCRIPT],
        cwd=workdir,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    history = tracker.client.get_metric_history(child, "actor/entropy")
    assert [(m.step, round(m.value, 6)) for m in history] == [(0, 1.0), (1, 0.9), (2, 0.8)]
    assert tracker.client.get_run(child).info.status == "RUNNING"  # the child never ends it
    runs = tracker.client.search_runs([experiment_id])
    assert {r.info.run_id for r in runs} == {parent, child}  # and never made its own
    assert tracker.artifact_root is not None
    assert [p.read_text() for p in tracker.artifact_root.rglob("note.txt")] == ["from the child"]


def test_delete_sweep_runs_undoes_a_submit(tracker: Tracker) -> None:
    experiment_id = tracker.ensure_experiment("toy")
    parent = tracker.sweep_run(experiment_id, "toy", "")[0]
    for i in range(2):
        cell = make_cell(f"cell{i:08d}", i, {"seed": i}, {"seed": i})
        tracker.create_cell_run(parent, cell, "toy")
    children = [r.info.run_id for r in tracker.client.search_runs([experiment_id])
                if r.info.run_id != parent]
    assert tracker.delete_sweep_runs(parent) == 3
    assert tracker.client.search_runs([experiment_id]) == []
    assert all(_deleted_and_ended(tracker, run_id) for run_id in [*children, parent])
    assert tracker.sweep_run(experiment_id, "toy", "")[0] != parent


def test_half_made_child_run_is_replaced(tracker: Tracker) -> None:
    experiment_id = tracker.ensure_experiment("toy")
    parent = tracker.sweep_run(experiment_id, "toy", "")[0]
    # What a process that died inside create_cell_run leaves: tags, no params yet.
    stale = tracker.client.create_run(
        experiment_id, tags={"mlflow.parentRunId": parent, "kappa.cell_id": CELL.cell_id}
    ).info.run_id
    fresh = tracker.create_cell_run(parent, CELL, "toy")
    assert fresh != stale
    assert _deleted_and_ended(tracker, stale)
    assert len(tracker.client.get_run(fresh).data.params) > 100


def _deleted_and_ended(tracker: Tracker, run_id: str) -> bool:
    """Deleted, and not left RUNNING (issue 19, 9: one in each of two kill runs was)."""
    info = tracker.client.get_run(run_id).info
    return (info.lifecycle_stage, info.status) == ("deleted", "KILLED")


def test_bad_status_is_refused(tracker: Tracker) -> None:
    with pytest.raises(ValueError, match="FINISHED, FAILED, KILLED"):
        tracker.finish_cell_run("0" * 32, "DONE")


def test_deleted_experiment_is_restored(tracker: Tracker) -> None:
    experiment_id = tracker.ensure_experiment("gone")
    tracker.client.delete_experiment(experiment_id)
    assert tracker.ensure_experiment("gone") == experiment_id
    assert tracker.client.get_experiment(experiment_id).lifecycle_stage == "active"


def test_fresh_cell_run_without_search_and_reopen(tracker: Tracker) -> None:
    experiment_id = tracker.ensure_experiment("toy")
    parent = tracker.sweep_run(experiment_id, "toy", "")[0]
    child = tracker.create_cell_run(parent, CELL, "toy", may_exist=False,
                                    experiment_id=experiment_id)
    run = tracker.client.get_run(child)
    assert run.info.experiment_id == experiment_id
    assert run.data.tags["kappa.param_count"] == "157"
    assert len(run.data.params) == 157
    assert tracker.running_cell_runs(parent) == [child]
    tracker.finish_cell_run(child, "FINISHED", final_metrics={"eval/toy/mean@4": 0.5}, step=7)
    assert tracker.running_cell_runs(parent) == []
    (point,) = tracker.client.get_metric_history(child, "eval/toy/mean_at_4")
    assert (point.value, point.step) == (0.5, 7)
    # A retry reopens the recorded run; the search path finds the same one.
    assert tracker.reopen_cell_run(child)
    assert tracker.client.get_run(child).info.status == "RUNNING"
    assert tracker.create_cell_run(parent, CELL, "toy") == child
    # A final metric the process logged itself is not logged a second time.
    tracker.finish_cell_run(child, "FINISHED", final_metrics={"eval/toy/mean@4": 0.9}, step=7)
    assert len(tracker.client.get_metric_history(child, "eval/toy/mean_at_4")) == 1
    tracker.client.delete_run(child)
    assert not tracker.reopen_cell_run(child)  # gone: the caller makes a new one


def test_run_whose_params_never_came_is_replaced(tracker: Tracker) -> None:
    experiment_id = tracker.ensure_experiment("toy")
    parent = tracker.sweep_run(experiment_id, "toy", "")[0]
    # Created with its param count, then its creator died before logging the params.
    stale = tracker.create_cell_run(parent, CELL, "toy", may_exist=False, log_params=False)
    assert tracker.client.get_run(stale).data.params == {}
    fresh = tracker.create_cell_run(parent, CELL, "toy")
    assert fresh != stale
    assert _deleted_and_ended(tracker, stale)
    # Completing a run's params logs only the missing ones.
    assert tracker.log_cell_params(fresh, CELL, only_missing=True) == 0


def test_a_run_deleted_while_running_is_ended_when_its_cell_launches_again(
        tracker: Tracker) -> None:
    """What an earlier kappa left after a kill: a half-made child run deleted while
    RUNNING. The next launch that looks for the cell's run (after a crash) ends it."""
    experiment_id = tracker.ensure_experiment("toy")
    parent = tracker.sweep_run(experiment_id, "toy", "")[0]
    stale = tracker.create_cell_run(parent, CELL, "toy", may_exist=False, log_params=False)
    tracker.client.delete_run(stale)
    assert tracker.client.get_run(stale).info.status == "RUNNING"
    fresh = tracker.create_cell_run(parent, CELL, "toy")
    assert _deleted_and_ended(tracker, stale)
    assert tracker.client.get_run(fresh).info.status == "RUNNING"
    assert tracker.end_deleted_cell_runs(parent, CELL.cell_id) == 0  # nothing left to end
