"""Panels of training dynamics and their inline SVG: colour = the compared axis, one facet
per combination of the other axes, seeds as thin lines with their mean."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from kit.svg_lines import line_colors
from kit.synthetic import synthetic_cells, write_run_folders

from orchestrator.analysis import plots
from orchestrator.analysis.curves import load_curves
from orchestrator.analysis.dynamics import (
    ACCURACY_PANEL,
    PALETTE,
    PANELS,
    build_panels,
    convergence_frame,
)
from orchestrator.analysis.frame import frame_from_results


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    cells = synthetic_cells(
        "toy", baselines=("grpo", "dapo"), seeds=(0, 1), failed=("tiny-dapo-rb1-s1",)
    )
    frame = frame_from_results(write_run_folders(tmp_path, cells, steps=80))
    return frame, load_curves(frame, list(PANELS.values()))


def test_panels_facet_by_the_other_axes_and_average_seeds(
    sweep: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    frame, curves = sweep
    panels = build_panels(curves, "reward_budget", facet_by=["baseline"])
    assert [p.title for p in panels] == [ACCURACY_PANEL, "Entropy", "Clip fraction", "κ_eff"]
    acc = panels[0]
    assert acc.metric == PANELS[ACCURACY_PANEL]
    assert len(acc.runs) == len(frame)  # the failed run's partial curve is shown too
    assert acc.facets == ["baseline=grpo", "baseline=dapo"]
    assert {(c.facet, c.group) for c in acc.group_means} == {
        (f, g) for f in acc.facets for g in ("False", "True")}
    # A facet's mean at step 1 is the mean of its seeds' first values; pooled: of every run.
    grpo_rb = [c.values[0] for c in acc.runs if c.facet == "baseline=grpo" and c.group == "True"]
    mean = next(c for c in acc.group_means if c.facet == "baseline=grpo" and c.group == "True")
    assert len(grpo_rb) == 2 and mean.values[0] == pytest.approx(sum(grpo_rb) / 2)
    every_rb = [c.values[0] for c in acc.runs if c.group == "True"]
    pooled = next(c for c in acc.pooled_means if c.group == "True")
    assert pooled.values[0] == pytest.approx(sum(every_rb) / len(every_rb))
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


def test_the_svg_colours_every_line_by_the_compared_axis(
    sweep: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    frame, curves = sweep
    acc = build_panels(curves, "reward_budget", facet_by=["baseline"])[0]
    svg = plots.svg(acc, "reward_budget")
    # Self-contained: no script, links only to its own markers.
    assert svg.startswith("<svg") and "<script" not in svg
    assert not re.search(r'href="(?!#)', svg)
    colors = line_colors(svg)
    runs = {k: c for k, c in colors.items() if k.startswith("run|")}
    assert len(runs) == len(frame)
    expected = {"False": PALETTE[0].lower(), "True": PALETTE[1].lower()}
    for key, color in colors.items():
        group = key.split("|")[2]
        assert color == expected[group], key
    # Each baseline's facet holds its own and its '+ RB' counterpart; seeds have a mean line.
    for facet in ("baseline=grpo", "baseline=dapo"):
        assert f"mean|{acc.metric}|False|{facet}" in colors
    assert "mean|val-core/*/acc/mean@1|True|all" in colors  # the pooled facet
    # The figure names its metric, the compared axis and each facet.
    for text in ("Validation accuracy (val-core/*/acc/mean@1)", "reward_budget=True",
                 "baseline=dapo", "all: mean over every run", ">step<"):
        assert text in svg, text


def test_one_facet_without_other_axes_and_the_same_file_each_time(
    sweep: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    _, curves = sweep
    acc = build_panels(curves[curves["axis.baseline"] == "grpo"], "reward_budget")[0]
    assert acc.facets == [""] and acc.pooled_means
    svg = plots.svg(acc, "reward_budget")
    assert "every run" in svg and "all: mean over every run" not in svg
    assert svg == plots.svg(acc, "reward_budget")  # no dates or random ids


@pytest.mark.parametrize("seed", range(4))
def test_an_axis_value_is_drawn_as_written_not_read_as_mathtext(
    sweep: tuple[pd.DataFrame, pd.DataFrame], seed: int,
) -> None:
    """``$\\frac$`` in a facet, a legend or a title used to stop the whole report."""
    import html
    import random

    rng = random.Random(seed)
    print(f"seed={seed}")
    pieces = ["$\\frac$", "$x^$", "$$", "a_b$", "$\\input{x}$", "<b>&", "\\", "$1 $2"]
    _, curves = sweep
    hostile = {v: "".join(rng.sample(pieces, 3)) + v for v in curves["axis.baseline"].unique()}
    curves = curves.assign(**{"axis.baseline": curves["axis.baseline"].map(hostile),
                              "axis.reward_budget": curves["axis.reward_budget"].map(
                                  lambda v: f"${v}\\frac$")})
    acc = build_panels(curves, "reward_budget", facet_by=["baseline"])[0]
    svg = plots.svg(acc, "reward_budget")
    for value in hostile.values():
        assert html.escape(f"baseline={value}", quote=False) in svg, value
    assert html.escape("reward_budget=$True\\frac$", quote=False) in svg
