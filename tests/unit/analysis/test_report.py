"""The report without a browser: what a sweep with no results yet shows, default tables."""

from __future__ import annotations

from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.analysis.report import ReportInputs, default_tables, render_report
from orchestrator.analysis.synthetic import synthetic_cells


def test_a_sweep_without_results_still_reports_its_grid() -> None:
    frame = frame_from_results(
        [
            CellResult("s", "abcdef0123456789abcd", "pending", {"baseline": "grpo", "seed": 0}),
            CellResult("s", "bcdef0123456789abcde", "queued", {"baseline": "grpo", "seed": 1}),
        ]
    )
    html = render_report(ReportInputs(sweep="s", frame=frame))
    assert "No final metrics yet." in html
    assert "No per-step metrics found" in html
    assert html.count('class="cell state-pending"') == 1
    assert "abcdef0123" in html and "<a href" not in html.split('id="plan"')[0].split("<h1>")[1]


def test_default_tables_follow_the_axes() -> None:
    frame = frame_from_results(synthetic_cells("toy", baselines=("grpo", "dapo")))
    [(title, spec)] = default_tables(frame)
    assert title.startswith("Main table")
    assert spec.delta is not None and spec.delta.axis == "reward_budget"
    assert spec.delta.base == "false"
    assert spec.rows == ("baseline",) and spec.metrics == "eval/*/mean@8"
