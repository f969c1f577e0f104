"""``kappa status`` of a large sweep draws a bounded table: running, failed and queued
cells first, the rest counted (``--json`` lists every cell)."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console

from orchestrator.cli.sweep_views import cells_table, table_cells
from orchestrator.registry import CellRecord, CellState
from orchestrator.sweeps.status import CellStatus


def _cell(index: int, state: CellState) -> CellStatus:
    return CellStatus.of(CellRecord(
        sweep_name="s", cell_id=f"c{index:05d}", index=index, axes={"seed": index},
        labels={}, settings={}, state=state, attempts_count=0, max_retries=0, run_dir=None,
        mlflow_run_id=None, job_id=None, exit_code=None, last_error=None,
        progress_step=None, total_steps=None, progress_updated_at=None, final_metrics=None,
        stop_reason=None, created_at=datetime.now(UTC), queued_at=None, started_at=None,
        finished_at=None))


def test_a_small_sweep_shows_every_cell() -> None:
    cells = [_cell(i, CellState.PENDING) for i in range(30)]
    assert table_cells(cells, limit=30) == cells


def test_a_large_sweep_shows_the_cells_that_matter_first_in_index_order() -> None:
    states = {7: CellState.RUNNING, 900: CellState.FAILED, 500: CellState.RUNNING,
              42: CellState.QUEUED}
    cells = [_cell(i, states.get(i, CellState.SUCCEEDED if i % 2 else CellState.PENDING))
             for i in range(1000)]
    shown = table_cells(cells, limit=6)
    assert [c.index for c in shown] == [0, 1, 7, 42, 500, 900]
    out = io.StringIO()
    Console(file=out, width=120).print(cells_table(shown))
    assert "c00900" in out.getvalue() and "c00002" not in out.getvalue()
