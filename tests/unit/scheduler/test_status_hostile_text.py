"""Text a cell carries (its axes' values, its last error: a program's output) is shown as
text by every status view, never read as rich markup: a ``[/]`` in an error used to end
``kappa status`` in a ``MarkupError``, a ``[bold]`` restyled the rest of the line."""

from __future__ import annotations

import io
import random
from datetime import UTC, datetime

import pytest
from kit.cells import status_of
from rich.console import Console

from orchestrator.cli.sweep_views import LineProgress, LiveProgress, print_status
from orchestrator.registry import CellRecord, CellState

PIECES = ["[/]", "[bold]", "[red", "]", "[link=http://x]", "\\", "[/bold]", "\u2028", "é",
          "\x1b[31m", "[[", "]]", "[dim]x[/dim]", "🙂", "\t", "%s", "{0}"]


def _cell(index: int, state: CellState, axis: str, error: str) -> CellRecord:
    return CellRecord(
        sweep_name="s", cell_id=f"c{index:05d}", index=index, axes={"dataset": axis},
        labels={}, settings={}, state=state, attempts_count=1, max_retries=0, run_dir=None,
        mlflow_run_id=None, job_id=None, exit_code=1, last_error=error,
        progress_step=3 if state is CellState.RUNNING else None, total_steps=10,
        progress_updated_at=None, final_metrics=None, created_at=datetime.now(UTC),
        queued_at=None, started_at=None, finished_at=datetime.now(UTC))


@pytest.mark.parametrize("seed", range(5))
def test_hostile_text_is_printed_as_text(seed: int) -> None:
    rng = random.Random(seed)
    print(f"seed {seed}")
    texts = ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 8))) for _ in range(6)]
    cells = [_cell(i, CellState.FAILED if i % 2 else CellState.RUNNING, texts[i],
                   f"{texts[-1 - i]}\nsecond line") for i in range(6)]
    status = status_of({CellState.FAILED: 3, CellState.RUNNING: 3}, cells)
    out = io.StringIO()
    console = Console(file=out, width=400, force_terminal=False, color_system=None)
    print_status(console, status)
    text = out.getvalue()
    for cell in status.cells:
        first = (cell.last_error or "").splitlines()[0]
        plain = not any(c in first for c in "\t\u2028\x1b")  # rich lays those out itself
        if cell.state == "failed" and first.strip() and plain:
            assert first in text, (seed, first)  # the error's own brackets, as written
    LineProgress(console).update(status)
    live = LiveProgress(Console(file=io.StringIO(), force_terminal=True, width=120))
    live.update(status)
    live.close()
