"""The scheduler's background worker and the run folder's cell.json."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from kit.cells import make_cell

from orchestrator.analysis.sources import cell_from_run_folder
from orchestrator.runs.folder import CELL_FILE, read_cell_file, write_cell_file
from orchestrator.scheduler.mlflow_runs import BackgroundWork


def test_tasks_run_in_order_and_flush_waits_for_all() -> None:
    work = BackgroundWork()
    gate = threading.Event()
    done: list[int] = []
    work.submit("a", gate.wait)
    for i in range(5):
        work.submit("b" if i % 2 else "a", lambda i=i: done.append(i))
    assert done == []  # held behind the first task
    gate.set()
    work.flush()
    assert done == [0, 1, 2, 3, 4]


def test_wait_for_one_key_and_failures_are_logged_not_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    work = BackgroundWork()
    gate = threading.Event()
    ran: list[str] = []
    work.submit("slow", gate.wait)

    def boom() -> None:
        ran.append("bad")
        raise RuntimeError("store down")

    work.submit("bad", boom)
    gate.set()
    with caplog.at_level(logging.WARNING, logger="orchestrator.scheduler.mlflow_runs"):
        work.wait_for("bad")
        assert ran == ["bad"]
        work.submit("after", lambda: ran.append("after"))  # the worker survived the failure
        work.flush()
    assert ran == ["bad", "after"]
    assert "background task for bad failed: store down" in caplog.text


def test_cell_file_is_what_analysis_reads(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "s" / "c0ffee"
    cell = make_cell("c0ffee", axes={"baseline": "grpo", "reward_budget": True},
                     labels={"baseline": "GRPO"})
    write_cell_file(run_dir, "s", cell, "running", "abc123")
    doc = json.loads((run_dir / CELL_FILE).read_text())
    assert doc == {"sweep": "s", "cell_id": "c0ffee",
                   "axes": {"baseline": "grpo", "reward_budget": True},
                   "labels": {"baseline": "GRPO"}, "state": "running",
                   "mlflow_run_id": "abc123"}
    write_cell_file(run_dir, "s", cell, "failed", None)
    assert read_cell_file(run_dir) == {**doc, "state": "failed", "mlflow_run_id": None}
    assert [p.name for p in run_dir.iterdir()] == [CELL_FILE]  # no temp file left
    result = cell_from_run_folder("s", run_dir)
    assert (result.state, result.axes) == ("failed", {"baseline": "grpo",
                                                       "reward_budget": True})
    assert read_cell_file(tmp_path) is None
