"""The sweep report: one self-contained, offline HTML file (templates under ``dashboards/``):
status matrix, ablation tables, training dynamics, convergence steps, the plan and the spec.
:func:`render_report` is pure (inputs in, HTML out); :func:`build_report` gathers the inputs
of a stored sweep. The tables' layouts (:func:`default_tables`) also serve ``kappa table``
and ``kappa demo``."""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import paths
from orchestrator.analysis import output, plots
from orchestrator.analysis.combined import results_of
from orchestrator.analysis.curves import curve_key, load_curves
from orchestrator.analysis.dynamics import PANELS, build_panels
from orchestrator.analysis.frame import axis_column, axis_names, metric_names, varying_axes
from orchestrator.analysis.seed_live import table_notes
from orchestrator.analysis.sources import registry_sweep
from orchestrator.analysis.status_matrix import KNOWN_STATES, matrix_cell, status_matrix
from orchestrator.analysis.studies import best_trials, search_section, sweep_studies
from orchestrator.analysis.tables import DeltaSpec, Table, TableSpec, build_table, render
from orchestrator.analysis.tables.labels import default_metric_glob
from orchestrator.analysis.tables.numerics import check_runs, finished_keys
from orchestrator.errors import Problem, UserInputError
from orchestrator.grid.plan import SweepPlan, stored_plan
from orchestrator.runs.atomic import write_atomic
from orchestrator.runs.layout import REPORT_FILE, sweep_folder
from orchestrator.spec.overrides import command_line
from orchestrator.tracking import ui

if TYPE_CHECKING:
    import pandas as pd

# A link to dashboards/report.html.j2 (where the project keeps its dashboards); a wheel
# carries the file itself, so an installed kappa finds it without the repository.
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE = "report.html.j2"
LOG = logging.getLogger(__name__)
DELTA_AXIS = "reward_budget"  # the axis the main table's '+ RB' rows compare


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report shows; ``curves`` is long form (``load_curves``), maybe empty."""

    sweep: str
    frame: pd.DataFrame
    curves: pd.DataFrame | None = None
    backend: str | None = None
    spec_text: str | None = None
    plan: SweepPlan | None = None  # the sweep's stored plan (its size and cost)
    mlflow_experiment_id: str | None = None
    mlflow_ui: str | None = None
    tables: tuple[tuple[str, TableSpec], ...] = field(default_factory=tuple)
    seed_axis: str = "seed"
    search_html: str = ""  # a search's Optuna plots (studies.search_section)
    compare: str | None = None  # the axis the plots colour by (default: compared_axis's)
    kept_compare: str | None = None  # what --compare last chose for the sweep (kept_compare)
    mlflow_start: str = ""  # the command that serves the UI the links point to, if any
    notes: tuple[str, ...] = ()  # under every table (how seeds on demand decided)


def default_tables(frame: pd.DataFrame, seed_axis: str = "seed") -> list[tuple[str, TableSpec]]:
    """The tables a sweep's axes suggest: the main RB table, the KL × RB crossing, or all axes."""
    glob = default_metric_glob(metric_names(frame))
    if glob is None:
        return []
    axes = axis_names(frame)
    varying = varying_axes(frame, exclude=[seed_axis])
    blocks = "model" if "model" in varying else None
    placed = [a for a in varying if a != blocks]
    common: dict[str, Any] = {"metrics": glob, "blocks": blocks, "seed_axis": seed_axis}
    specs: list[tuple[str, TableSpec]] = []
    if DELTA_AXIS in varying:
        values = [str(v).lower() for v in frame[axis_column(DELTA_AXIS)]]
        base = "false" if "false" in values else values[0]
        # With nothing else varying, the RB axis labels the rows itself (RB ✗, then + RB).
        rows = tuple(a for a in placed if a != DELTA_AXIS) or (
            ("baseline",) if "baseline" in axes else ())
        specs.append(("Main table (signed deltas vs each baseline)", TableSpec(
            rows=rows, delta=DeltaSpec(axis=DELTA_AXIS, base=base), **common)))
    if "use_kl_loss" in varying and DELTA_AXIS in varying:
        others = {a: str(frame[axis_column(a)].iloc[0]) for a in placed
                  if a not in ("use_kl_loss", DELTA_AXIS)}
        specs.append(("Crossing table (absolute scores)", TableSpec(
            cross=("use_kl_loss", DELTA_AXIS), where=others, **common)))
    if not specs and placed:
        specs.append(("Results", TableSpec(rows=tuple(placed), **common)))
    return specs


def auto_layout(frame: pd.DataFrame, spec: TableSpec) -> TableSpec:
    """``spec`` laid out as the report lays out its main table (rows, delta, crossing and
    blocks from the sweep's axes; ``spec``'s filters kept)."""
    suggested = default_tables(frame, spec.seed_axis)
    if not suggested:
        return spec
    main = suggested[0][1]
    return spec.model_copy(update={
        "rows": main.rows, "delta": main.delta, "cross": main.cross, "blocks": main.blocks,
        "where": {**main.where, **spec.where}})


def demo_table_spec(axes: Sequence[str], metrics: str) -> TableSpec:
    """``kappa demo``'s table: rows = every axis but ``reward_budget`` and ``seed``,
    ``+ RB`` delta rows when ``reward_budget`` is an axis, no blocks."""
    rows = tuple(a for a in axes if a not in ("reward_budget", "seed"))
    delta = DeltaSpec(axis="reward_budget", base="false") if "reward_budget" in axes else None
    if not rows:  # only reward_budget (and seeds) vary: its values are the rows
        rows, delta = (("reward_budget",) if delta else ("baseline",)), None
    return TableSpec(rows=rows, delta=delta, metrics=metrics, seed_axis="seed")


def ablation_table(frame: pd.DataFrame) -> tuple[TableSpec | None, Table | None, str]:
    """``kappa demo``'s ablation table: its spec, the table and its markdown, or why there
    is none (``None, None, why``)."""
    metrics = default_metric_glob(metric_names(frame))
    if metrics is None:
        return None, None, "no evaluation metrics (eval/*/mean@k, val-core/*/acc/mean@1): no table"
    spec = demo_table_spec(axis_names(frame), metrics)
    try:
        table = build_table(frame, spec)
    except UserInputError as exc:
        return None, None, f"no ablation table: {exc.render()}"
    return spec, table, render(table, "markdown")


def sweep_table(sweeps: Sequence[str], spec: TableSpec, placed: bool,
                registry_url: str | None = None, mlflow_uri: str | None = None) -> Table:
    """The ablation table of ``sweeps`` laid out by ``spec`` if it ``placed`` the axes,
    else by the sweep's axes (:func:`auto_layout`)."""
    frame = results_of(sweeps, registry_url, mlflow_uri)
    return build_table(frame, spec if placed else auto_layout(frame, spec))


def table_text(sweeps: Sequence[str], spec: TableSpec, fmt: str, placed: bool,
               registry_url: str | None = None, mlflow_uri: str | None = None) -> str:
    """``kappa table``'s text in ``fmt``. Unless options ``placed`` the axes, the table
    follows the sweep's axes (:func:`auto_layout`), and one search sweep without chosen
    metrics shows its best trial per study instead."""
    if not placed and not spec.metrics and len(sweeps) == 1:
        studies = sweep_studies(sweeps[0], registry_url)
        if studies:
            return best_trials(studies, fmt)
    table = sweep_table(sweeps, spec, placed, registry_url, mlflow_uri)
    return render(replace(table, notes=(*table.notes, *table_notes(sweeps, registry_url))), fmt)


def _tables_html(frame: pd.DataFrame, tables: tuple[tuple[str, TableSpec], ...],
                 notes: tuple[str, ...] = ()) -> list[dict[str, str]]:
    out = []
    for title, spec in tables:
        try:
            table = build_table(frame, spec)
            table = replace(table, notes=(*table.notes, *notes))
            out.append({"title": title, "html": render(table, "html"), "error": ""})
        except UserInputError as exc:
            out.append({"title": title, "html": "", "error": exc.render()})
    return out


def cell_names(frame: pd.DataFrame) -> dict[str, str]:
    """Curve key -> the cell named by its axes (``baseline=grpo, seed=1``: the ones that
    vary, and its sweep in a report of several); none when no axis varies."""
    combined = frame["sweep"].nunique() > 1
    axes = varying_axes(frame)
    out = {}
    for record in frame.to_dict("records"):
        parts = [f"{a}={record[axis_column(a)]}" for a in axes]
        if combined:
            parts.insert(0, str(record["sweep"]))
        if parts:
            out[curve_key(record, combined)] = ", ".join(parts)
    return out


def compared_axis(frame: pd.DataFrame, seed_axis: str = "seed", requested: str | None = None,
                  tables: Sequence[tuple[str, TableSpec]] = (),
                  kept: str | None = None) -> str | None:
    """The axis the report compares: ``requested`` (``--compare``), else ``kept`` (the
    sweep's last ``--compare``, :func:`kept_compare`) while it still varies, else the first
    of ``tables``' delta axes, else ``reward_budget`` (the main table's,
    :func:`default_tables`) when it varies, else the first varying axis; never the seed
    (seeds are replicates). ``UserInputError`` when ``requested`` does not vary."""
    varying = varying_axes(frame, exclude=[seed_axis])
    if requested is not None and requested not in varying:
        raise UserInputError("cannot compare on --compare", [Problem(
            "--compare", "not an axis that varies across the sweep's cells (seeds are "
            "replicates, never compared)", found=requested,
            allowed=", ".join(varying) or "none: no axis varies",
            fix="name one of the allowed axes, or leave --compare out")])
    deltas = [spec.delta.axis for _, spec in tables if spec.delta is not None]
    candidates = [requested] if requested is not None else [kept, *deltas, DELTA_AXIS, *varying]
    return next((axis for axis in candidates if axis in varying), None)


def kept_compare(sweep: str) -> str | None:
    """The axis ``kappa report --compare`` last chose for ``sweep`` (kept in its folder, so
    later reports and the summary posted to MLflow at the sweep's end compare it too)."""
    try:
        kept = json.loads((sweep_folder(sweep) / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    axis = kept.get("compare") if isinstance(kept, dict) else None
    return axis if isinstance(axis, str) else None


def keep_compare(sweep: str, axis: str) -> None:
    """Remember ``axis`` as ``sweep``'s compared axis (:func:`kept_compare`)."""
    folder = sweep_folder(sweep)
    try:
        if folder.is_dir():
            write_atomic(folder / REPORT_FILE, json.dumps({"compare": axis}) + "\n")
    except OSError as exc:  # a convenience: the report is written all the same
        LOG.warning("could not keep --compare %s for sweep %s: %s", axis, sweep, exc)


def _plots(curves: pd.DataFrame | None, frame: pd.DataFrame, compared: str | None,
           facets: list[str]) -> tuple[list[str], str]:
    """(one SVG per quantity, convergence table HTML): colour = the ``compare`` axis, one
    facet per combination of the other varying axes; nothing without curves. The
    convergence table names cells by their axes, the id in a tooltip."""
    if curves is None or curves.empty:
        return [], ""
    # Curves made by hand may lack an axis's column: it neither colours nor splits them.
    drawn = [a for a in (compared, *facets) if a and axis_column(a) in curves.columns]
    panels = build_panels(curves, compared if compared in drawn else None,
                          facet_by=[a for a in facets if a in drawn])
    if not panels:
        return [], ""
    figures = [plots.svg(p, compared) for p in panels]
    names = cell_names(frame)
    # Cell ids from bare run folders are folder names: escape them like any text.
    rows = "".join(f'<tr><td title="{html.escape(label)}">'
                   + (html.escape(names[label]) if label in names
                      else f"<code>{html.escape(label)}</code>")
                   + f"</td><td>{step:.0f}</td></tr>"
                   for p in panels for label, step in p.convergence.items())
    conv_html = f'<table class="convergence"><tr><th>cell</th><th>step</th></tr>{rows}</table>'
    return figures, conv_html if rows else ""


def _grid_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame the grid and the plan show: of several sweeps, the sweep as a first axis
    (the same axes can be in two sweeps)."""
    if frame["sweep"].nunique() < 2:
        return frame
    column = axis_column("sweep")
    rest = [c for c in frame.columns if c not in ("sweep", "cell_id", "state")]
    return frame.assign(**{column: frame["sweep"]})[["sweep", "cell_id", "state", column, *rest]]


def render_report(inputs: ReportInputs) -> str:
    """The report's HTML."""
    import jinja2

    frame = inputs.frame
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    tables = inputs.tables or tuple(default_tables(frame, inputs.seed_axis))
    compared = compared_axis(frame, inputs.seed_axis, inputs.compare, tables,
                             inputs.kept_compare)
    facets = [a for a in varying_axes(frame, exclude=[inputs.seed_axis]) if a != compared]
    figures, conv_html = _plots(inputs.curves, frame, compared, facets)
    grid = _grid_frame(frame)
    axes = axis_names(grid)
    plan_cells = []
    for r in grid.to_dict("records"):
        cell = matrix_cell(r, axes, inputs.mlflow_ui, inputs.mlflow_experiment_id)
        plan_cells.append({"cell_id": r["cell_id"], "axes": [r[axis_column(a)] for a in axes],
                           "state": cell.state, "state_class": cell.state_class,
                           "run_id": r.get("mlflow_run_id") or "", "href": cell.href})
    plan = None if inputs.plan is None else {
        "count": inputs.plan.cell_count, "resources": inputs.plan.resources.model_dump_json(),
        "gpu_hours": inputs.plan.gpu_hours, "overrides": command_line(inputs.plan.overrides)}
    return env.get_template(TEMPLATE).render(
        sweep=inputs.sweep, backend=inputs.backend, n_cells=len(frame),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), mlflow_ui=inputs.mlflow_ui,
        mlflow_start=inputs.mlflow_start, compared=compared, facets=facets,
        counts=[(str(s), int(n)) for s, n in frame["state"].value_counts().items()],
        states=KNOWN_STATES,
        matrix=status_matrix(grid, inputs.seed_axis, inputs.mlflow_ui,
                             inputs.mlflow_experiment_id),
        tables=_tables_html(frame, tables, inputs.notes), figures=figures,
        convergence_html=conv_html, plan=plan, axes=axes, plan_cells=plan_cells,
        spec_text=inputs.spec_text, search_html=inputs.search_html)


def mlflow_ui_address(mlflow_uri: str | None = None) -> str:
    """Where the MLflow UI of the store (``--mlflow``, else the configured one) is browsed
    (:func:`orchestrator.tracking.ui.ui_base`)."""
    return ui.ui_base(paths.mlflow_uri(mlflow_uri))


def build_report(sweeps: str | Sequence[str], *, registry_url: str | None = None,
                 mlflow_uri: str | None = None, mlflow_ui: str | None = None,
                 tables: tuple[tuple[str, TableSpec], ...] = (), strict: bool = False,
                 compare: str | None = None) -> str:
    """The report of one stored sweep, or of several read as one (registry, else run
    folders; curves from both stores). Several: no plan, every spec, no search plots.
    ``strict``: refused (exit 2) when its finished runs differ in numerics. ``compare``:
    the axis the plots colour by (:func:`compared_axis`). Cells link to ``mlflow_ui``,
    default the UI of the tracking store (:func:`orchestrator.tracking.ui.ui_base`)."""
    names = [sweeps] if isinstance(sweeps, str) else list(sweeps)
    frame = results_of(names, registry_url, mlflow_uri)
    check_runs(finished_keys(frame), "--strict", strict)
    url = paths.registry_url(registry_url)
    infos = [found[0] for s in names if (found := registry_sweep(s, url)) is not None]
    curves = load_curves(frame, list(PANELS.values()), paths.readable_mlflow_uri(mlflow_uri))
    several = len(names) > 1
    uri = paths.mlflow_uri(mlflow_uri)
    # A local store has no UI until `kappa ui` serves it: the report says how.
    start = "" if mlflow_ui is not None or ui.is_server(uri) else (
        "kappa ui" if several else f"kappa ui {names[0]}")
    info = infos[0] if infos and not several else None
    specs = "\n".join(f"# --- {i.name} ---\n{i.spec_text}" for i in infos) if several else ""
    studies = [] if several else sweep_studies(names[0], registry_url)
    return render_report(ReportInputs(
        sweep=" + ".join(names), frame=frame, curves=curves,
        backend=", ".join(dict.fromkeys(i.backend for i in infos)) or None,
        spec_text=info.spec_text if info else specs or None,
        plan=stored_plan(names[0], info.plan) if info else None,
        mlflow_experiment_id=info.mlflow_experiment_id if info else None,
        mlflow_ui=mlflow_ui or mlflow_ui_address(mlflow_uri), mlflow_start=start, tables=tables,
        search_html=search_section(studies), compare=compare,
        kept_compare=None if several else kept_compare(names[0]),
        notes=table_notes(names, registry_url)))


def write_report(sweeps: str | Sequence[str], target: Path, *, registry_url: str | None = None,
                 mlflow_uri: str | None = None, mlflow_ui: str | None = None,
                 tables: tuple[tuple[str, TableSpec], ...] = (), strict: bool = False,
                 compare: str | None = None) -> Path:
    """Write :func:`build_report`'s HTML to ``target`` (its folder made) and return it."""
    html_text = build_report(sweeps, registry_url=registry_url, mlflow_uri=mlflow_uri,
                             mlflow_ui=mlflow_ui, tables=tables, strict=strict, compare=compare)
    output.write(target, html_text, "--out")
    names = [sweeps] if isinstance(sweeps, str) else list(sweeps)
    if compare is not None and len(names) == 1:
        keep_compare(names[0], compare)  # valid: the report above compared it
    return target
