"""Training dynamics prepared for plotting: one curve per cell and panel, group averages,
and each cell's convergence step (also ``kappa convergence``'s table). A *panel* is a
quantity over steps, a glob over metric names (several matches: their mean per step).
Averages over runs are per step over the runs that logged it (the first paper's §3.3
"averaged curve"), shown next to the individual runs, never instead of them.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator import paths
from orchestrator.algorithms.convergence import convergence_step
from orchestrator.analysis.combined import results_of
from orchestrator.analysis.curves import curve_key, load_curves
from orchestrator.analysis.frame import AXIS_PREFIX, axes_text
from orchestrator.analysis.tables.render import frame_table
from orchestrator.errors import Problem, UserInputError

if TYPE_CHECKING:
    import pandas as pd

ACCURACY_PANEL = "Validation accuracy"

# Panel title -> metric glob (verl's names; see docs/architecture.md "Metric names").
PANELS: dict[str, str] = {
    ACCURACY_PANEL: "val-core/*/acc/mean@1",
    "Entropy": "actor/entropy",
    "Clip fraction": "actor/pg_clipfrac",
    "κ_eff": "actor/kappa_eff",
}

# A colour-blind-safe qualitative palette (Okabe-Ito), shared by static and interactive plots.
PALETTE: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9",
                             "#F0E442", "#000000")


@dataclass(frozen=True)
class Curve:
    """One line: steps and values, the group it is coloured by and the facet it is drawn in."""

    label: str
    group: str
    steps: tuple[float, ...]
    values: tuple[float, ...]
    facet: str = ""


@dataclass(frozen=True)
class Panel:
    """One quantity (``metric``, a glob): its individual runs, per facet and group averages
    over runs (seeds), per group averages over every run, and convergence marks."""

    title: str
    metric: str
    runs: tuple[Curve, ...]
    group_means: tuple[Curve, ...]
    pooled_means: tuple[Curve, ...]
    convergence: Mapping[str, float]  # run label -> convergence step (accuracy panel only)

    @property
    def facets(self) -> list[str]:
        """The facets, in order of first appearance."""
        return list(dict.fromkeys(c.facet for c in self.runs))


def group_colors(groups: Sequence[str]) -> dict[str, str]:
    """A stable colour per group, in order of first appearance."""
    return {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(dict.fromkeys(groups))}


def _mean_curve(label: str, group: str, per_run: pd.DataFrame, facet: str = "") -> Curve:
    mean = per_run.groupby("step", sort=True)["value"].mean()
    return Curve(label, group, tuple(map(float, mean.index)), tuple(map(float, mean)), facet)


def build_panels(curves: pd.DataFrame, color_by: str | None = None,
                 panels: Mapping[str, str] = PANELS,
                 facet_by: Sequence[str] = ()) -> list[Panel]:
    """Panels from long-form curves (:func:`orchestrator.analysis.curves.load_curves`): runs
    grouped (coloured) by the ``color_by`` axis, in one facet per combination of the
    ``facet_by`` axes (``axis=value, ...``; ``""`` without them)."""
    out: list[Panel] = []
    for title, glob in panels.items():
        selected = curves[[fnmatch.fnmatchcase(m, glob) for m in curves["metric"]]]
        if selected.empty:
            continue
        # Several matching metrics (benchmarks) become their mean per cell and step.
        per_cell = selected.groupby(["cell_id", "step"], sort=False, as_index=False)["value"].mean()
        cells = selected.drop_duplicates("cell_id").to_dict("records")
        group_of = {r["cell_id"]: str(r[AXIS_PREFIX + color_by]) if color_by else "all"
                    for r in cells}
        facet_of = {r["cell_id"]: axes_text(r, facet_by) for r in cells}
        per_cell["group"] = per_cell["cell_id"].map(group_of)
        per_cell["facet"] = per_cell["cell_id"].map(facet_of)
        runs = []
        for cell_id, run in per_cell.groupby("cell_id", sort=False):
            run = run.sort_values("step")
            runs.append(Curve(str(cell_id), group_of[str(cell_id)], tuple(map(float, run["step"])),
                              tuple(map(float, run["value"])), facet_of[str(cell_id)]))
        marks: dict[str, float] = {} if title != ACCURACY_PANEL else {
            curve.label: step for curve in runs
            if (step := convergence_step(curve.steps, curve.values)) is not None}
        means = tuple(_mean_curve(f"mean {g}", str(g), sub, str(f))
                      for (f, g), sub in per_cell.groupby(["facet", "group"], sort=False))
        pooled = tuple(_mean_curve(f"mean {g}", str(g), sub)
                       for g, sub in per_cell.groupby("group", sort=False))
        out.append(Panel(title, glob, tuple(runs), means, pooled, marks))
    return out


def convergence_frame(curves: pd.DataFrame, frame: pd.DataFrame,
                      glob: str = PANELS[ACCURACY_PANEL]) -> pd.DataFrame:
    """Per cell: its axes, convergence step of the ``glob`` curve, and the curve's last
    value; cells of several sweeps (:mod:`orchestrator.analysis.combined`) lead with their
    sweep's name."""
    import pandas as pd

    panel = build_panels(curves, None, {ACCURACY_PANEL: glob})
    by_cell: dict[str, Curve] = {c.label: c for c in panel[0].runs} if panel else {}
    steps = panel[0].convergence if panel else {}
    axis_cols = [c for c in frame.columns if c.startswith(AXIS_PREFIX)]
    combined = "sweep" in frame.columns and frame["sweep"].nunique() > 1
    rows: list[dict[str, Any]] = []
    for record in frame.to_dict("records"):
        key = curve_key(record, combined)
        curve = by_cell.get(key)
        rows.append({**({"sweep": record["sweep"]} if combined else {}),
                     "cell_id": record["cell_id"], "state": record["state"],
                     **{c: record[c] for c in axis_cols},
                     "points": 0 if curve is None else len(curve.steps),
                     "convergence_step": steps.get(key),
                     "last_value": None if curve is None else curve.values[-1]})
    return pd.DataFrame(rows)


def convergence_text(sweeps: Sequence[str], metric: str, fmt: str,
                     registry_url: str | None = None, mlflow_uri: str | None = None) -> str:
    """Each cell's convergence step on the ``metric`` curves, as markdown or CSV;
    ``UserInputError`` when cells logged curves but none matches ``metric`` (a typo)."""
    frame = results_of(sweeps, registry_url, mlflow_uri)
    uri = paths.readable_mlflow_uri(mlflow_uri)
    curves = load_curves(frame, [metric], uri)
    if curves.empty and (logged := sorted(set(load_curves(frame, ["*"], uri)["metric"]))):
        raise UserInputError("no curve matches --metric", [Problem(
            "--metric", "no per-step metric of this sweep matches", found=metric,
            allowed=", ".join(logged), fix="use a glob such as 'val-core/*/acc/mean@1'")])
    conv = convergence_frame(curves, frame, metric)
    conv.columns = [c.removeprefix("axis.") for c in conv.columns]
    return frame_table(conv, fmt, _convergence_value, spaced_rule=True)


def _convergence_value(column: str, value: Any) -> str:
    """Steps to 0.1, values to 4 decimals, ``—`` when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if column == "convergence_step":
        return f"{float(value):.1f}"
    if column == "last_value":
        return f"{float(value):.4f}"
    return str(value)
