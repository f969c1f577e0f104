"""The report without a browser: what a sweep with no results yet shows, default tables,
the compared axis, its size."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from kit.svg_lines import line_colors
from kit.synthetic import synthetic_cells, write_run_folders

from orchestrator.analysis.curves import load_curves
from orchestrator.analysis.dynamics import ACCURACY_PANEL, PALETTE, PANELS
from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.analysis.report import (
    ReportInputs,
    compared_axis,
    default_tables,
    render_report,
)
from orchestrator.errors import UserInputError


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


def _curved_sweep(tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two baselines × RB × two seeds, 60 steps of the four plotted quantities."""
    cells = synthetic_cells("toy", baselines=("grpo", "dapo"), seeds=(0, 1))
    frame = frame_from_results(write_run_folders(tmp_path, cells, steps=60))
    return frame, load_curves(frame, list(PANELS.values()))


def test_the_compared_axis_is_the_main_tables_else_the_first_varying_one() -> None:
    frame = frame_from_results(synthetic_cells("toy", baselines=("grpo", "dapo")))
    assert compared_axis(frame) == "reward_budget"
    assert compared_axis(frame, requested="baseline") == "baseline"
    no_rb = frame[frame["axis.reward_budget"] == False]  # noqa: E712 (a column of booleans)
    assert compared_axis(no_rb) == "baseline"
    with pytest.raises(UserInputError) as caught:
        compared_axis(frame, requested="seed")
    text = caught.value.render()
    assert "--compare" in text and "baseline, reward_budget" in text


def test_the_report_colours_by_the_compared_axis_and_stays_small(tmp_path: Path) -> None:
    frame, curves = _curved_sweep(tmp_path)
    html = render_report(ReportInputs(sweep="toy", frame=frame, curves=curves))
    # Small and offline: inline SVG, no plotly.js (it alone is 4.6 MB).
    assert len(html.encode()) < 600_000, len(html.encode())
    assert "Plotly" not in html and "<script" not in html
    assert html.count('<div class="plot"><svg') == len(PANELS)
    assert "Compared: <b>reward_budget</b> (colour) · one plot per <b>baseline</b>" in html
    colors = line_colors(html)
    rb = {k.split("|")[2]: c for k, c in colors.items()}
    assert rb == {"False": PALETTE[0].lower(), "True": PALETTE[1].lower()}
    assert len([k for k in colors if k.startswith(f"run|{PANELS[ACCURACY_PANEL]}|")]) == 8
    # --compare baseline: the baselines get the colours, one plot per reward_budget value.
    html = render_report(ReportInputs(sweep="toy", frame=frame, curves=curves,
                                      compare="baseline"))
    assert "Compared: <b>baseline</b> (colour) · one plot per <b>reward_budget</b>" in html
    assert {k.split("|")[2] for k in line_colors(html)} == {"grpo", "dapo"}
    assert "reward_budget=True" in html


def test_the_report_says_how_to_start_the_ui_its_links_need() -> None:
    frame = frame_from_results([CellResult("s", "c1", "succeeded", {"seed": 0}, {},
                                           mlflow_run_id="r1")])
    html = render_report(ReportInputs(sweep="s", frame=frame, mlflow_ui="http://127.0.0.1:5000",
                                      mlflow_start="kappa ui s", mlflow_experiment_id="3"))
    assert "(start it with <code>kappa ui s</code>)" in html
    assert 'href="http://127.0.0.1:5000/#/experiments/3/runs/r1"' in html
