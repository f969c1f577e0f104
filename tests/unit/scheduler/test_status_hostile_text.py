"""Text a cell carries (its axes' values, its last error: a program's output) is shown as
text by every status view, never obeyed: not read as rich markup (a ``[/]`` in an error
used to end ``kappa status`` in a ``MarkupError``, and a label value ``[/]`` ended
``kappa plan`` in one), and not passed to the terminal as control characters (an
``ESC ] 0;`` in a label value retitled the terminal and swallowed what followed; a
program's colours reached ``kappa status`` cut into pieces)."""

from __future__ import annotations

import io
import random
import re
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kit.cells import status_of
from kit.cli import kappa
from rich.console import Console

from orchestrator.cli.demo_report import _cells_table
from orchestrator.cli.sweep_views import LineProgress, LiveProgress, print_status
from orchestrator.redact import one_line, without_escape_sequences
from orchestrator.registry import CellRecord, CellState
from orchestrator.scheduler.cell_runs import log_tail

PIECES = ["[/]", "[bold]", "[red", "]", "[link=http://x]", "\\", "[/bold]", "\u2028", "é",
          "\x1b[31m", "[[", "]]", "[dim]x[/dim]", "🙂", "\t", "%s", "{0}", "\x1b]0;title\x07",
          "\x1b]52;c;aGk=\x1b\\", "\x9b2J", "\x07", "\x08", "\r", "\x7f", "\u202e", "\x1bc"]


def _cell(index: int, state: CellState, axis: str, error: str) -> CellRecord:
    return CellRecord(
        sweep_name="s", cell_id=f"c{index:05d}", index=index, axes={"dataset": axis},
        labels={}, settings={}, state=state, attempts_count=1, max_retries=0, run_dir=None,
        mlflow_run_id=None, job_id=None, exit_code=1, last_error=error,
        progress_step=3 if state is CellState.RUNNING else None, total_steps=10,
        progress_updated_at=None, final_metrics=None, created_at=datetime.now(UTC),
        queued_at=None, started_at=None, finished_at=datetime.now(UTC))


def _controls(text: str) -> list[str]:
    """The control characters in ``text`` but its line breaks (what a terminal obeys)."""
    return [c for c in text if unicodedata.category(c) == "Cc" and c != "\n"]


def _terminal(out: io.StringIO, width: int = 400) -> Console:
    # A terminal that takes no colours: every escape in what it is given is the text's own.
    return Console(file=out, width=width, force_terminal=True, color_system=None)


@pytest.mark.parametrize("seed", range(5))
def test_hostile_text_is_printed_as_text(seed: int) -> None:
    rng = random.Random(seed)
    print(f"seed {seed}")
    texts = ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 8))) for _ in range(6)]
    cells = [_cell(i, CellState.FAILED if i % 2 else CellState.RUNNING, texts[i],
                   f"{texts[-1 - i]}\nsecond line") for i in range(6)]
    status = status_of({CellState.FAILED: 3, CellState.RUNNING: 3}, cells)
    out = io.StringIO()
    print_status(_terminal(out), status)
    _terminal(out).print(_cells_table(status))  # kappa demo's table of the same cells
    text = out.getvalue()
    assert not _controls(text), (seed, _controls(text))
    for cell in status.cells:
        first = (cell.last_error or "").splitlines()[0]
        if cell.state == "failed" and first.strip():
            assert one_line(first) in text, (seed, first)  # its own brackets, as written
        assert one_line(f"dataset={cell.axes['dataset']}") in text, seed
    bars = io.StringIO()
    LineProgress(_terminal(bars)).update(status)
    live = LiveProgress(_terminal(bars, 120))
    live.update(status)
    live.close()
    # Less the live display's own redraws (hide the cursor, up a line, clear it, \r):
    redraws = re.sub(r"\x1b\[(\?25[lh]|2K|1A)|\r", "", bars.getvalue())
    assert not _controls(redraws), (seed, _controls(redraws))


@pytest.mark.parametrize("seed", range(3))
def test_kappa_plan_shows_hostile_label_values_as_text(
        seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    print(f"seed {seed}")
    values = list(dict.fromkeys(
        "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6))) for _ in range(4)))
    quoted = ", ".join('"' + v.encode("unicode_escape").decode("ascii").replace('"', '\\"')
                       .replace("\\\\", "\\\\") + '"' for v in values)
    spec = tmp_path / "s.yaml"
    spec.write_text("name: hostile\nbackend: embedded\nbase: {max_steps: 2}\nlabels: [note]\n"
                    f"axes:\n  baseline: [grpo]\n  note: [{quoted}]\n", encoding="utf-8")
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    code, out = kappa(capsys, "plan", str(spec))
    assert code == 0, out
    assert not _controls(out), (seed, _controls(out))
    for value in values:
        assert one_line(value) in out, (seed, value)


def test_a_programs_colours_and_titles_are_not_its_error(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1\n\x1b[36m(TaskRunner pid=7)\x1b[0m \x1b[1;31mError\x1b[0m: boom\n"
                   "\x1b]0;title\x07\x1b[2K\x9b1Adone\n", encoding="utf-8")
    assert log_tail(log) == "step 1\n(TaskRunner pid=7) Error: boom\ndone"
    assert without_escape_sequences("a\x1b[5mb\x1bcc\x1b]8;;http://x\x1b\\d") == "abcd"
