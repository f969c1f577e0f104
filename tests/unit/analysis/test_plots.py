"""Panels of training dynamics, the PNG and the offline plotly HTML."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from kit.synthetic import synthetic_cells, write_run_folders

from orchestrator.analysis import plots
from orchestrator.analysis.curves import load_curves
from orchestrator.analysis.dynamics import (
    ACCURACY_PANEL,
    PANELS,
    build_panels,
    convergence_frame,
    default_color_axis,
)
from orchestrator.analysis.frame import frame_from_results


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    cells = synthetic_cells(
        "toy", baselines=("grpo", "dapo"), seeds=(0, 1), failed=("tiny-dapo-rb1-s1",)
    )
    frame = frame_from_results(write_run_folders(tmp_path, cells, steps=80))
    return frame, load_curves(frame, list(PANELS.values()))


def test_panels_have_runs_group_means_and_overall_mean(
    sweep: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    frame, curves = sweep
    assert default_color_axis(curves) == "baseline"
    panels = build_panels(curves, "baseline")
    assert [p.title for p in panels] == [ACCURACY_PANEL, "Entropy", "Clip fraction", "κ_eff"]
    acc = panels[0]
    assert len(acc.runs) == len(frame)  # the failed run's partial curve is shown too
    assert {c.group for c in acc.group_means} == {"grpo", "dapo"}
    assert acc.overall_mean is not None
    # The overall mean at step 1 is the mean of every run's first value.
    first = [c.values[0] for c in acc.runs]
    assert acc.overall_mean.values[0] == pytest.approx(sum(first) / len(first))
    # Full-length saturating curves converge; marks exist only on the accuracy panel.
    assert set(acc.convergence) >= {"tiny-grpo-rb0-s0", "tiny-grpo-rb1-s1"}
    assert all(not p.convergence for p in panels[1:])


def test_convergence_frame_lists_every_cell(sweep: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    frame, curves = sweep
    conv = convergence_frame(curves, frame)
    assert list(conv["cell_id"]) == list(frame["cell_id"])
    assert (conv["points"] > 0).all()
    full = conv[conv["state"] == "succeeded"]
    assert full["convergence_step"].notna().all()


def test_png_is_drawn(sweep: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    _, curves = sweep
    assert plots.png(build_panels(curves, "baseline"), title="toy")[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_embeds_plotly_and_fetches_nothing(sweep: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    _, curves = sweep
    html = plots.to_html(build_panels(curves, "baseline"), title="toy")
    assert "Plotly.newPlot" in html
    assert len(html) > 1_000_000  # plotly.js itself is inline
    assert not re.search(r"<script[^>]+src=", html)
    assert not re.search(r"<link[^>]+href=", html)
    assert 'src="https://cdn.plot.ly' not in html
    assert "triangle-down" in html  # convergence markers
