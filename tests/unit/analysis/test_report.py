"""The report without a browser: what a sweep with no results yet shows, default tables."""

from __future__ import annotations

from kit.synthetic import synthetic_cells

from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.analysis.report import ReportInputs, default_tables, render_report


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


def test_default_main_table_without_other_axes_pairs_rb_by_seed() -> None:
    frame = frame_from_results(
        [
            CellResult(
                "s",
                f"{rb}{seed}",
                "succeeded",
                {"reward_budget": rb, "seed": seed},
                {"eval/x/mean@8": 0.5 + 0.1 * rb + 0.01 * seed},
            )
            for rb in (False, True)
            for seed in range(2)
        ]
    )
    [(title, spec)] = default_tables(frame)
    assert title.startswith("Main table") and spec.rows == ()
    html = render_report(ReportInputs(sweep="s", frame=frame))
    assert '<td class="label">+ RB</td><td class="n">2</td>' in html


def test_convergence_table_escapes_cell_ids() -> None:
    import numpy as np
    import pandas as pd

    cell_id = "<b>run&1"
    frame = frame_from_results(
        [CellResult("s", cell_id, "succeeded", {"seed": 0}, {"eval/x/mean@8": 0.5})]
    )
    steps = np.arange(1, 201)
    curves = pd.DataFrame(
        {
            "cell_id": cell_id,
            "step": steps,
            "metric": "val-core/x/acc/mean@1",
            "value": 0.2 + 0.5 * (1 - np.exp(-steps / 20)),
            "axis.seed": 0,
        }
    )
    html = render_report(ReportInputs(sweep="s", frame=frame, curves=curves))
    assert "<code>&lt;b&gt;run&amp;1</code>" in html and "<code><b>" not in html


def test_the_report_template_ships_inside_the_package() -> None:
    """The package's template is the dashboards/ file (a link the wheel resolves)."""
    from pathlib import Path

    import orchestrator
    from orchestrator.analysis.report import TEMPLATE, TEMPLATE_DIR

    package = Path(orchestrator.__file__).parent
    assert TEMPLATE_DIR.is_relative_to(package)
    dashboards = package.parent / "dashboards" / TEMPLATE
    assert (TEMPLATE_DIR / TEMPLATE).read_text() == dashboards.read_text()
