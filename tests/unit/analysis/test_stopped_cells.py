"""Cells a stopping rule ended, in results: a stopped success is a finished cell (its
numbers count, with a note), and the report's grid shows it distinctly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.analysis.report import ReportInputs, render_report
from orchestrator.analysis.sources import cell_from_run_folder
from orchestrator.analysis.status_matrix import status_matrix
from orchestrator.analysis.tables import TableSpec, build_table, render

PLATEAU = "plateau at step 40 (val-core/x/acc/mean@1)"
DIVERGED = "diverged at step 3 (actor/entropy below 0.01 for 2 logs; last 0.001)"


def cells() -> list[CellResult]:
    out = []
    for seed in range(3):
        reason = PLATEAU if seed == 0 else None
        out.append(CellResult("s", f"grpo{seed}", "succeeded",
                              {"baseline": "grpo", "seed": seed},
                              {"eval/x/mean@8": 0.5 + seed / 100}, stop_reason=reason))
    out.append(CellResult("s", "dapo0", "failed", {"baseline": "dapo", "seed": 0}, {},
                          stop_reason=DIVERGED))
    out.append(CellResult("s", "dapo1", "succeeded", {"baseline": "dapo", "seed": 1},
                          {"eval/x/mean@8": 0.7}))
    return out


def test_a_stopped_success_counts_and_is_noted() -> None:
    frame = frame_from_results(cells())
    assert list(frame["stop_reason"])[:2] == [PLATEAU, None]
    table = build_table(frame, TableSpec(rows=("baseline",), metrics="eval/*/mean@8"))
    text = render(table, "markdown")
    grpo = next(line for line in text.splitlines() if line.startswith("| GRPO"))
    assert "| 3 |" in grpo and "51.00" in grpo  # all three seeds, the stopped one too
    dapo = next(line for line in text.splitlines() if line.startswith("| DAPO"))
    assert "| 1/2 |" in dapo  # the diverged (failed) run is not a result
    assert ("1 of 5 runs were stopped early by a stopping rule (plateau 1); a stopped run "
            "is finished") in text


def test_no_note_without_stopped_cells() -> None:
    plain = [c for c in cells() if c.stop_reason is None]
    text = render(build_table(frame_from_results(plain),
                              TableSpec(rows=("baseline",), metrics="eval/*/mean@8")),
                  "markdown")
    assert "stopped" not in text


def test_the_grid_shows_stopped_cells_distinctly() -> None:
    frame = frame_from_results(cells())
    matrix = status_matrix(frame, mlflow_ui=None)
    by_text = {c.text: c for row in matrix.rows for c in row.cells if c is not None}
    assert (by_text["grpo0"].state_class, by_text["grpo0"].state) == (
        "stopped", "stopped: plateau at step 40")
    assert PLATEAU in by_text["grpo0"].title
    assert (by_text["grpo1"].state_class, by_text["dapo0"].state_class) == ("succeeded", "failed")
    assert by_text["dapo0"].state == "failed: diverged at step 3"
    html = render_report(ReportInputs(sweep="s", frame=frame))
    assert html.count('class="cell state-stopped"') == 1 and ".state-stopped" in html
    assert '<span class="state-stopped">stopped</span>' in html  # in the legend


def test_a_run_folder_alone_says_it_was_stopped(tmp_path: Path) -> None:
    run = tmp_path / "abc"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({
        "status": "failed", "steps": 3, "final": {"a": 1.0},
        "stopped": {"rule": "diverged", "step": 3, "reason": DIVERGED, "outcome": "failed",
                    "at_step": 3}}))
    cell = cell_from_run_folder("s", run)
    assert (cell.state, cell.stop_reason) == ("failed", DIVERGED)


@pytest.mark.parametrize("reason", [None, float("nan")])
def test_frames_without_a_reason_stay_plain(reason: object) -> None:
    from orchestrator.analysis.status_matrix import stop_reason_of

    assert stop_reason_of({"stop_reason": reason}) is None
