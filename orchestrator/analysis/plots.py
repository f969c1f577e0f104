"""Plots of training dynamics as inline SVG (matplotlib): one figure per quantity, one
subplot (facet) per combination of the axes that are not compared, runs coloured by the
compared axis, so each run is drawn beside its compared counterpart. Seeds are thin lines
with their mean drawn thick; with several facets a last one pools every run per compared
value (the first paper's "averaging effect"). Static SVG keeps the report small (no
plotly.js) and offline.

Every line carries an SVG id ``run|<metric>|<group>|<cell>`` or ``mean|<metric>|<group>|<facet>``
(whitespace as ``_``), so tests and readers of the file can tell which line is which.
"""

from __future__ import annotations

import io
import math
import re
from typing import Any

from orchestrator.analysis.dynamics import Curve, Panel, group_colors
from orchestrator.redact import one_line

FACET_COLUMNS = 3
# An axis value is free text, shown as written: "$\\frac$" in a title is not mathtext (it
# would stop the report), a control character is its escape.
AS_WRITTEN = {"parse_math": False}


def _marked(curve: Curve, step: float) -> float:
    """The curve's value nearest to ``step`` (where to put the convergence marker)."""
    nearest = min(range(len(curve.steps)), key=lambda i: abs(curve.steps[i] - step))
    return curve.values[nearest]


def line_id(kind: str, metric: str, group: str, name: str) -> str:
    """The SVG id of a line (see the module's docstring)."""
    return "|".join(re.sub(r"\s+", "_", part) for part in (kind, metric, group, name))


def svg(panel: Panel, compared: str | None) -> str:
    """``panel`` as one ``<svg>`` element: a subplot per facet (and a pooled one when there
    are several), lines coloured by the ``compared`` axis's value, a legend naming it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    colors = group_colors([c.group for c in panel.runs])
    facets = panel.facets
    pooled = len(facets) > 1
    n = len(facets) + pooled
    cols = min(FACET_COLUMNS, n)
    rows = math.ceil(n / cols)
    fig, grid = plt.subplots(rows, cols, figsize=(4.0 * cols, 2.6 * rows + 0.5),
                             squeeze=False, sharex=True, sharey=True, layout="constrained")
    axes = list(grid.flat)
    for ax, facet in zip(axes, facets, strict=False):
        runs = [c for c in panel.runs if c.facet == facet]
        seeds = {g: sum(c.group == g for c in runs) for g in colors}
        for curve in runs:
            several = seeds[curve.group] > 1
            ax.plot(curve.steps, curve.values, color=colors[curve.group],
                    lw=0.8 if several else 1.6, alpha=0.45 if several else 1.0,
                    gid=line_id("run", panel.metric, curve.group, curve.label))
            if curve.label in panel.convergence:
                step = panel.convergence[curve.label]
                ax.plot([step], [_marked(curve, step)], marker="v", ms=5, ls="none",
                        color=colors[curve.group], markeredgecolor="black")
        for mean in panel.group_means:
            if mean.facet == facet and seeds.get(mean.group, 0) > 1:
                ax.plot(mean.steps, mean.values, color=colors[mean.group], lw=2.0,
                        gid=line_id("mean", panel.metric, mean.group, facet))
        ax.set_title(one_line(facet) or "every run", fontsize=9, **AS_WRITTEN)
    if pooled:
        ax = axes[len(facets)]
        for mean in panel.pooled_means:
            ax.plot(mean.steps, mean.values, color=colors[mean.group], lw=2.0,
                    gid=line_id("mean", panel.metric, mean.group, "all"))
        ax.set_title("all: mean over every run", fontsize=9)
    for i, ax in enumerate(axes):
        if i >= n:
            ax.set_visible(False)
            continue
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        if i % cols == 0:
            ax.set_ylabel(one_line(panel.metric), fontsize=8, **AS_WRITTEN)
        if i + cols >= n:
            ax.set_xlabel("step", fontsize=8)
            ax.xaxis.set_tick_params(labelbottom=True)
    handles = [Line2D([], [], color=c, lw=2, label=one_line(f"{compared}={g}" if compared else g))
               for g, c in colors.items()]
    legend = fig.legend(handles=handles, loc="outside upper right", fontsize=8, frameon=False,
                        ncols=min(len(handles), 4))
    for text in legend.get_texts():
        text.set_parse_math(False)
    fig.suptitle(one_line(f"{panel.title} ({panel.metric})"), x=0.01, ha="left", fontsize=11,
                 **AS_WRITTEN)
    return figure_svg(fig)


def figure_svg(fig: Any) -> str:
    """A matplotlib figure as one inline ``<svg>`` element (no XML prolog or doctype, no
    date, text as text, stable ids: the same figure gives the same text); the figure is
    closed."""
    import matplotlib.pyplot as plt

    image = io.BytesIO()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "kappa"}):
        fig.savefig(image, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = image.getvalue().decode("utf-8")
    return text[text.index("<svg"):]
