"""Plots of training dynamics, a static PNG (matplotlib) and an interactive HTML (plotly):
each panel's individual runs (convergence steps marked) beside their averages, which shows
the first paper's "averaging effect"."""

from __future__ import annotations

import io
from collections.abc import Sequence

from orchestrator.analysis.dynamics import Curve, Panel, group_colors

OVERALL_COLOR = "#000000"


def _colors(panels: Sequence[Panel]) -> dict[str, str]:
    return group_colors([c.group for p in panels for c in p.runs])


def _marked(curve: Curve, step: float) -> float:
    """The curve's value nearest to ``step`` (where to put the convergence marker)."""
    nearest = min(range(len(curve.steps)), key=lambda i: abs(curve.steps[i] - step))
    return curve.values[nearest]


def png(panels: Sequence[Panel], title: str = "") -> bytes:
    """The panels as one PNG image (rows = panels; columns = runs | averages)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = _colors(panels)
    n = max(1, len(panels))
    fig, axes = plt.subplots(n, 2, figsize=(11, 2.8 * n), squeeze=False, sharex="row")
    for row, panel in enumerate(panels):
        ax_runs, ax_mean = axes[row]
        for curve in panel.runs:
            ax_runs.plot(curve.steps, curve.values, color=colors[curve.group], lw=0.9, alpha=0.7)
            if curve.label in panel.convergence:
                step = panel.convergence[curve.label]
                ax_runs.plot([step], [_marked(curve, step)], marker="v", ms=6,
                             color=colors[curve.group], markeredgecolor="black")
        for curve in panel.group_means:
            ax_mean.plot(curve.steps, curve.values, color=colors.get(curve.group, OVERALL_COLOR),
                         lw=1.6, label=curve.group)
        if panel.overall_mean is not None:
            ax_mean.plot(panel.overall_mean.steps, panel.overall_mean.values,
                         color=OVERALL_COLOR, lw=2.2, ls="--", label="all runs")
        ax_runs.set_title(f"{panel.title}: individual runs", fontsize=9)
        ax_mean.set_title(f"{panel.title}: average over runs", fontsize=9)
        ax_mean.legend(fontsize=7, loc="best")
        for ax in (ax_runs, ax_mean):
            ax.set_xlabel("step", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    return image.getvalue()


def to_html(panels: Sequence[Panel], title: str = "") -> str:
    """The panels as an interactive plotly ``<div>``, plotly.js inline (it works offline)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    colors = _colors(panels)
    n = max(1, len(panels))
    subtitles = [f"{p.title}: {side}" for p in panels
                 for side in ("individual runs", "average over runs")]
    fig = make_subplots(rows=n, cols=2, subplot_titles=subtitles or None,
                        vertical_spacing=0.08 / n * 4)
    shown: set[str] = set()
    for row, panel in enumerate(panels, start=1):
        for curve in panel.runs:
            fig.add_trace(go.Scatter(
                x=curve.steps, y=curve.values, mode="lines", name=curve.group,
                legendgroup=curve.group, showlegend=curve.group not in shown,
                line={"color": colors[curve.group], "width": 1}, opacity=0.7,
                hovertemplate=(
                    f"{curve.label}<br>step %{{x}}<br>%{{y:.4f}}<extra>{curve.group}</extra>"),
            ), row=row, col=1)
            shown.add(curve.group)
            if curve.label in panel.convergence:
                step = panel.convergence[curve.label]
                fig.add_trace(go.Scatter(
                    x=[step], y=[_marked(curve, step)], mode="markers", showlegend=False,
                    legendgroup=curve.group,
                    marker={"symbol": "triangle-down", "size": 9, "color": colors[curve.group],
                            "line": {"color": "black", "width": 1}},
                    hovertemplate=f"{curve.label}<br>converged at step %{{x:.0f}}<extra></extra>",
                ), row=row, col=1)
        for curve in panel.group_means:
            fig.add_trace(go.Scatter(
                x=curve.steps, y=curve.values, mode="lines", name=f"mean {curve.group}",
                legendgroup=curve.group, showlegend=False,
                line={"color": colors.get(curve.group, OVERALL_COLOR), "width": 2},
            ), row=row, col=2)
        if panel.overall_mean is not None:
            fig.add_trace(go.Scatter(
                x=panel.overall_mean.steps, y=panel.overall_mean.values, mode="lines",
                name="mean of all runs", showlegend=row == 1, legendgroup="overall",
                line={"color": OVERALL_COLOR, "width": 2.5, "dash": "dash"},
            ), row=row, col=2)
    fig.update_layout(title=title or None, height=300 * n + 80, template="plotly_white",
                      margin={"l": 50, "r": 20, "t": 60, "b": 40})
    return str(fig.to_html(full_html=False, include_plotlyjs=True,
                           config={"displaylogo": False, "responsive": True}))
