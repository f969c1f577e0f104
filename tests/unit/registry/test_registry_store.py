"""The registry API on a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import dataclasses

import pytest
from kit.cells import make_cell, make_cells
from pydantic import BaseModel, ConfigDict

from orchestrator.errors import UserInputError
from orchestrator.registry import (
    AttemptState,
    CellState,
    IllegalTransition,
    Registry,
    spec_hash,
)


def test_sweeps_upsert_get_list(registry: Registry) -> None:
    first = registry.get_sweep("toy")
    assert first.spec_hash == spec_hash("name: toy\n")
    again = registry.upsert_sweep(
        "toy",
        backend="verl",
        spec_text="name: toy\nx: 1\n",
        mlflow_experiment_id="7",
        mlflow_parent_run_id="abc",
    )
    assert again.created_at == first.created_at
    assert again.updated_at >= first.updated_at
    assert (again.backend, again.spec_hash) == ("verl", spec_hash("name: toy\nx: 1\n"))
    # MLflow ids are only overwritten when given.
    kept = registry.upsert_sweep("toy", backend="verl", spec_text="y")
    assert (kept.mlflow_experiment_id, kept.mlflow_parent_run_id) == ("7", "abc")
    registry.upsert_sweep("other", backend="embedded", spec_text="z")
    assert {s.name for s in registry.list_sweeps()} == {"toy", "other"}
    assert registry.find_sweep("nope") is None


def test_unknown_sweep_lists_known(registry: Registry) -> None:
    with pytest.raises(UserInputError) as info:
        registry.cells("tyo")
    assert "known: toy" in info.value.summary
    assert info.value.problems[0].fix == "did you mean 'toy'?"


def test_add_cells_is_idempotent(registry: Registry) -> None:
    cells = make_cells(3)
    new = registry.add_cells("toy", cells, max_retries=2)
    assert [c.cell_id for c in new] == [c.cell_id for c in cells]
    assert all(c.state is CellState.PENDING and c.max_retries == 2 for c in new)
    registry.transition(new[0], CellState.PENDING, CellState.QUEUED)
    # Adding again (plus one new cell) touches nothing that exists.
    changed = cells[0]._replace(settings={"seed": 99})
    extra = make_cells(4)[3]
    added = registry.add_cells("toy", [changed, *cells[1:], extra])
    assert [c.cell_id for c in added] == [extra.cell_id]
    stored = registry.get_cell("toy", cells[0].cell_id)
    assert stored.state is CellState.QUEUED
    assert stored.settings == cells[0].settings
    assert len(registry.cells("toy")) == 4


def test_add_cells_is_all_or_nothing(registry: Registry) -> None:
    good = make_cells(2)
    bad = make_cell(cell_id="badbadbad000", index=9, settings={"x": object()})
    with pytest.raises(TypeError, match="not JSON"):
        registry.add_cells("toy", [*good, bad])
    assert registry.cells("toy") == []


def test_pydantic_settings_are_dumped(registry: Registry) -> None:
    class Settings(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        lr: float = 1e-3
        steps: tuple[int, ...] = (1, 2)

    cell = make_cell(cell_id="aaaaaaaaaaaa", index=0)
    cell = cell._replace(settings=Settings())  # type: ignore[arg-type]
    (stored,) = registry.add_cells("toy", [cell])
    assert stored.settings == {"lr": 1e-3, "steps": [1, 2]}


def test_cells_filter_and_order(registry: Registry) -> None:
    cells = make_cells(4)
    registry.add_cells("toy", list(reversed(cells)))
    assert [c.index for c in registry.cells("toy")] == [0, 1, 2, 3]
    registry.transition(("toy", cells[2].cell_id), "pending", "queued")
    assert [c.index for c in registry.cells("toy", states=["queued"])] == [2]
    assert [c.index for c in registry.cells("toy", states=[CellState.PENDING])] == [0, 1, 3]


def test_get_cell_by_unique_prefix(registry: Registry) -> None:
    registry.add_cells("toy", [make_cell("abc111111111", 0), make_cell("abc222222222", 1)])
    assert registry.get_cell("toy", "abc1").index == 0
    assert registry.get_cell("toy", "abc222222222").index == 1
    with pytest.raises(UserInputError, match="ambiguous") as info:
        registry.get_cell("toy", "abc")
    assert "abc111111111" in (info.value.problems[0].allowed or "")
    with pytest.raises(UserInputError, match="no cell 'zzz'"):
        registry.get_cell("toy", "zzz")
    with pytest.raises(UserInputError, match="no cell"):
        registry.get_cell("toy", "a%")


def test_full_life_sets_derived_fields(registry: Registry) -> None:
    (cell,) = registry.add_cells("toy", make_cells(1))
    assert registry.transition(cell, CellState.PENDING, CellState.QUEUED)
    queued = registry.get_cell("toy", cell.cell_id)
    assert queued.queued_at is not None and queued.started_at is None
    attempt = registry.start_attempt(cell, job_id="job-1", log_path="/tmp/log")
    assert attempt is not None
    assert (attempt.number, attempt.state, attempt.job_id) == (1, AttemptState.RUNNING, "job-1")
    assert registry.update_progress(cell, 5, 10)
    running = registry.get_cell("toy", cell.cell_id)
    assert running.state is CellState.RUNNING and running.attempts_count == 1
    assert (running.progress_step, running.total_steps) == (5, 10)
    assert running.progress_updated_at is not None
    assert registry.finish_attempt(
        cell, CellState.SUCCEEDED, exit_code=0, final_metrics={"eval/math/mean@1": 0.5}
    )
    done = registry.get_cell("toy", cell.cell_id)
    assert done.state is CellState.SUCCEEDED and done.is_terminal
    assert done.finished_at is not None and done.started_at is not None
    assert done.finished_at >= done.started_at >= done.queued_at  # type: ignore[operator]
    assert done.final_metrics == {"eval/math/mean@1": 0.5}
    (closed,) = registry.attempts(cell)
    assert (closed.state, closed.exit_code, closed.log_path) == (
        AttemptState.SUCCEEDED,
        0,
        "/tmp/log",
    )
    assert closed.finished_at == done.finished_at
    assert registry.update_progress(cell, 6) is False


def test_retry_opens_a_new_attempt(registry: Registry) -> None:
    (cell,) = registry.add_cells("toy", make_cells(1), max_retries=1)
    registry.transition(cell, "pending", "queued")
    registry.start_attempt(cell, job_id="a")
    assert registry.finish_attempt(cell, "failed", exit_code=3, last_error="boom")
    failed = registry.get_cell("toy", cell.cell_id)
    assert (failed.exit_code, failed.last_error, failed.retries_left) == (3, "boom", 1)
    assert registry.transition(cell, "failed", "pending")
    reset = registry.get_cell("toy", cell.cell_id)
    assert (reset.job_id, reset.exit_code, reset.finished_at, reset.queued_at) == (
        None,
        None,
        None,
        None,
    )
    registry.transition(cell, "pending", "queued")
    second = registry.start_attempt(cell, job_id="b")
    assert second is not None and second.number == 2
    assert registry.get_cell("toy", cell.cell_id).retries_left == 0
    assert [a.state for a in registry.attempts(cell)] == [AttemptState.FAILED, AttemptState.RUNNING]


def test_cancel_running_closes_attempt(registry: Registry) -> None:
    (cell,) = registry.add_cells("toy", make_cells(1))
    registry.transition(cell, "pending", "queued")
    registry.start_attempt(cell)
    assert registry.attach_job(cell, "late-job")
    assert registry.transition(cell, ["queued", "running"], "cancelled", exit_code=-15)
    (attempt,) = registry.attempts(cell)
    assert (attempt.state, attempt.job_id, attempt.exit_code) == (
        AttemptState.CANCELLED,
        "late-job",
        -15,
    )
    assert registry.attach_job(cell, "x") is False


def test_compare_and_set_refuses_wrong_state(registry: Registry) -> None:
    (cell,) = registry.add_cells("toy", make_cells(1))
    assert registry.start_attempt(cell) is None  # still pending, not queued
    assert registry.transition(cell, "pending", "queued")
    assert not registry.transition(cell, "pending", "queued")
    assert not registry.finish_attempt(cell, "succeeded")
    stored = registry.get_cell("toy", cell.cell_id)
    assert stored.state is CellState.QUEUED and stored.attempts_count == 0
    assert registry.attempts(cell) == []


def test_illegal_transition_raises_and_writes_nothing(registry: Registry) -> None:
    (cell,) = registry.add_cells("toy", make_cells(1))
    with pytest.raises(IllegalTransition):
        registry.transition(cell, "pending", "succeeded", exit_code=0)
    with pytest.raises(IllegalTransition):
        registry.transition(cell, ["pending", "running"], "pending")
    stored = registry.get_cell("toy", cell.cell_id)
    assert stored.state is CellState.PENDING and stored.exit_code is None


def test_unknown_fields_are_refused(registry: Registry) -> None:
    (cell,) = registry.add_cells("toy", make_cells(1))
    with pytest.raises(TypeError, match="unknown field"):
        registry.transition(cell, "pending", "queued", state="running")
    with pytest.raises(TypeError, match="unknown field"):
        registry.update_cell(cell, attempts_count=5)
    assert registry.get_cell("toy", cell.cell_id).state is CellState.PENDING


def test_update_cell_and_counts(registry: Registry) -> None:
    cells = registry.add_cells("toy", make_cells(3))
    registry.update_cell(cells[0], mlflow_run_id="run0", run_dir="/scratch/toy/c0")
    stored = registry.get_cell("toy", cells[0].cell_id)
    assert (stored.mlflow_run_id, stored.run_dir) == ("run0", "/scratch/toy/c0")
    registry.transition(cells[1], "pending", "queued")
    registry.transition(cells[2], "pending", "cancelled")
    counts = registry.counts("toy")
    assert counts == {
        CellState.PENDING: 1,
        CellState.QUEUED: 1,
        CellState.RUNNING: 0,
        CellState.SUCCEEDED: 0,
        CellState.FAILED: 0,
        CellState.CANCELLED: 1,
    }


def test_snapshots_are_frozen_and_outlive_the_registry(registry_url: str) -> None:
    reg = Registry.open(registry_url)
    reg.upsert_sweep("s", backend="embedded", spec_text="")
    (cell,) = reg.add_cells("s", make_cells(1))
    reg.close()
    assert cell.axes["seed"] == 0  # no session needed any more
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.state = CellState.RUNNING  # type: ignore[misc]


def test_delete_sweep_cascades(registry: Registry) -> None:
    (cell,) = registry.add_cells("toy", make_cells(1))
    registry.transition(cell, "pending", "queued")
    registry.start_attempt(cell)
    assert registry.delete_sweep("toy")
    assert registry.find_sweep("toy") is None
    assert registry.delete_sweep("toy") is False
    # Re-creating the sweep starts from nothing: no orphan cells or attempts came back.
    registry.upsert_sweep("toy", backend="embedded", spec_text="")
    assert registry.cells("toy") == []
    assert registry.add_cells("toy", make_cells(1))[0].attempts_count == 0
