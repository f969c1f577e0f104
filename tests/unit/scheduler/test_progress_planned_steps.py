"""A starting cell's progress (issue 18, 7): ``submit --wait`` showed ``0/?`` for every
cell whose job had not reported yet; the plan knows its length (its stored demand)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from kit.cells import make_cell, status_of
from rich.console import Console

from orchestrator.cli.sweep_views import LiveProgress, progress_line
from orchestrator.registry import CellRecord, CellState, Registry

S = CellState
DEMAND = {"gpus": 0, "nodes": 1, "min_cpus": 1, "self_placing": False, "steps": 150,
          "env": {}}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _running(progress: dict[str, int | None], demands: dict[str, dict[str, object]]
             ) -> list[CellRecord]:
    """Real registry snapshots: one running cell per entry, at that step (of 150)."""
    with Registry.open() as reg:
        reg.upsert_sweep("p", backend="embedded", spec_text="name: p")
        cells = reg.add_cells("p", [make_cell(c, i, {"seed": i})
                                    for i, c in enumerate(progress)], demands=demands)
        for cell, step in zip(cells, progress.values(), strict=True):
            reg.transition(cell, S.PENDING, S.QUEUED)
            reg.start_attempt(cell)
            if step is not None:
                reg.update_progress(cell, step, 150)
        return reg.cells("p", [S.RUNNING])


def test_log_line_says_starting_or_the_step_of_the_planned_total() -> None:
    running = _running({"aaaaaa01": 12, "bbbbbb02": None, "cccccc03": None},
                       {"aaaaaa01": DEMAND, "bbbbbb02": DEMAND})
    line = progress_line(status_of({S.RUNNING: 3}, running))
    assert "aaaaaa:12/150" in line and "bbbbbb:starting" in line and "cccccc:starting" in line
    assert "?" not in line
    assert [c.planned_steps for c in status_of({}, running).cells] == [150, 150, None]


def test_terminal_bar_of_a_starting_cell_has_the_planned_total() -> None:
    running = _running({"dddddd01": None, "eeeeee02": 7}, {"dddddd01": DEMAND})
    display = LiveProgress(Console(file=io.StringIO(), force_terminal=True, width=120))
    display.update(status_of({S.RUNNING: 2}, running))
    tasks = {t.id: t for t in display.progress.tasks}
    assert {cid: (tasks[t].completed, tasks[t].total) for cid, t in display.cell_tasks.items()
            } == {"dddddd01": (0, 150), "eeeeee02": (7, 150)}
    display.close()


def test_the_status_table_takes_the_planned_total_when_the_job_reported_none() -> None:
    from orchestrator.cli.sweep_views import cells_table

    with Registry.open() as reg:
        reg.upsert_sweep("q", backend="embedded", spec_text="name: q")
        (cell,) = reg.add_cells("q", [make_cell("ffffff01", 0, {"seed": 0})],
                                demands={"ffffff01": DEMAND})
        reg.transition(cell, S.PENDING, S.QUEUED)
        reg.start_attempt(cell)
        reg.update_progress(cell, 9, None)
        running = reg.cells("q", [S.RUNNING])
    out = io.StringIO()
    Console(file=out, width=160).print(cells_table(status_of({}, running).cells))
    assert "9/150" in out.getvalue() and "?" not in out.getvalue()
