"""A sweep's results where MLflow shows them, attached when the sweep ends
(:class:`PublishHook`) and by ``kappa report SWEEP``:

- its parent run's artifacts: ``ablation/<table>.md``, ``.html`` and ``.csv`` (the tables
  ``kappa table`` and the report show), ``report.html`` (the report) and
  ``plots/<metric>.svg`` (the report's plots);
- its parent run's metrics: each delta row of those tables, ``delta/<base>/<change>/<column>``
  (e.g. ``delta/GRPO/RB/Average``) with ``…/ci_low`` and ``…/ci_high``, in the table's units;
- its cells' runs renamed by the axes that vary (:func:`~orchestrator.tracking.naming.short_names`);
- its experiment's saved view (:func:`~orchestrator.tracking.ui.sweep_view`): every cell,
  charted, grouped by the compared axis, which ``kappa ui`` lands on.

Nothing here can fail a sweep: a store out of reach, or results without a table, is a line in
the log (:func:`publish_sweep` never raises). ``KAPPA_MLFLOW_SUMMARY=0`` turns the sweep-end
summary off (it builds the report: seconds per sweep).
"""

from __future__ import annotations

import html
import logging
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator import configuration
from orchestrator.analysis.combined import value_text
from orchestrator.errors import UserInputError
from orchestrator.paths import is_canary_sweep
from orchestrator.redact import redact
from orchestrator.registry import Registry
from orchestrator.scheduler.hooks import SchedulerHook
from orchestrator.tracking import Tracker, ui
from orchestrator.tracking.naming import metric_key, short_names
from orchestrator.tracking.retry import with_store_retries

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.analysis.tables import Table, TableSpec

LOG = logging.getLogger(__name__)
_SVG = re.compile(r"<svg\b.*?</svg>", re.S)
_PLOTTED = re.compile(r'id="(?:run|mean)\|([^|"]+)\|')
SWITCH = "KAPPA_MLFLOW_SUMMARY"


@dataclass(frozen=True)
class SweepSummary:
    """What a sweep's parent run gets, and how its saved view groups and charts."""

    files: dict[str, str]  # artifact path -> text
    metrics: dict[str, float]
    note: str  # markdown: the parent run's description (its tables)
    group_by: tuple[str, ...]  # the axes the saved view groups by
    charts: str  # the saved view's chart search (a regex over metric names)


def slug(text: str) -> str:
    """``main-table`` for ``Main table (signed deltas ...)``: a file name's stem."""
    return re.sub(r"[^a-z0-9]+", "-", text.split("(")[0].lower()).strip("-") or "table"


def _document(title: str, body: str) -> str:
    """``body`` as a page of its own (no external assets)."""
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}'
            "</title><style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:"
            "collapse}td,th{border:1px solid #ccc;padding:.2em .5em}.num{text-align:right}"
            f"</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>\n")


def delta_metrics(table: Table) -> dict[str, float]:
    """Each delta row's estimate per column, ``delta/<block>/<base row>/<change>/<column>``
    (the block only with blocks), with its interval's bounds as ``…/ci_low``, ``…/ci_high``."""
    out: dict[str, float] = {}
    for block in table.blocks:
        base: tuple[str, ...] = ()
        for row in block.rows:
            labels = tuple(map(value_text, row.labels))
            if row.kind == "absolute":
                base = tuple(x for x in labels if x)
                continue
            change = labels[0].removeprefix("+").strip().replace("=", ":")
            where = [x for x in (block.title, *base, change) if x]
            for column, cell in zip(table.columns, row.cells, strict=True):
                iv = cell.interval
                if iv is None or not math.isfinite(iv.estimate):
                    continue
                key = metric_key("/".join(["delta", *where, column]))
                out.setdefault(key, iv.estimate)
                if iv.low is not None and iv.high is not None:
                    out.setdefault(f"{key}/ci_low", iv.low)
                    out.setdefault(f"{key}/ci_high", iv.high)
    return out


def _glob_regex(glob: str) -> str:
    """A metric glob (``eval/*/mean@8``) as a regex over MLflow's names of the metrics (whose
    only character special to a regex is ``.``)."""
    return ".*".join(metric_key(part).replace(".", r"\.") for part in glob.split("*"))


def table_files(sweep: str, tables: Sequence[tuple[str, TableSpec]],
                frame: pd.DataFrame) -> tuple[dict[str, str], dict[str, float]]:
    """``ablation/<table>.md|.html|.csv`` of each table (or why there is none) and the
    delta metrics of them all."""
    from orchestrator.analysis.tables import build_table, render

    files: dict[str, str] = {}
    metrics: dict[str, float] = {}
    for title, spec in tables:
        stem = f"ablation/{slug(title)}"
        what = f"{sweep}: {title}"
        try:
            table = build_table(frame, spec)
        except UserInputError as exc:
            files[f"{stem}.md"] = f"# {what}\n\nNo table: {exc.render()}\n"
            continue
        # The table's notes name its metric and intervals.
        files[f"{stem}.md"] = f"# {what}\n\n{render(table, 'markdown')}"
        files[f"{stem}.html"] = _document(what, render(table, "html"))
        files[f"{stem}.csv"] = render(table, "csv")
        for key, value in delta_metrics(table).items():
            metrics.setdefault(key, value)
    return files, metrics


def plot_files(report_html: str) -> dict[str, str]:
    """The report's plots, one ``plots/<metric>.svg`` each."""
    files: dict[str, str] = {}
    for i, svg in enumerate(_SVG.findall(report_html), 1):
        plotted = _PLOTTED.search(svg)
        stem = slug(plotted.group(1).replace("*", "all")) if plotted else f"plot-{i}"
        files.setdefault(f"plots/{stem}.svg", svg + "\n")
    return files


def summarize(sweep: str, registry_url: str | None = None, mlflow_uri: str | None = None,
              report_html: str | None = None, compare: str | None = None) -> SweepSummary:
    """The summary of a stored sweep; ``report_html``: the report already written for it
    (default: built here, as ``kappa report`` would); ``compare``: the axis compared
    (``kappa report --compare``; default: the report's)."""
    from orchestrator.analysis import report
    from orchestrator.analysis.dynamics import PANELS
    from orchestrator.analysis.sources import results

    frame = results(sweep, registry_url, mlflow_uri)
    tables = report.default_tables(frame)
    files, metrics = table_files(sweep, tables, frame)
    page = report_html if report_html is not None else report.build_report(
        sweep, registry_url=registry_url, mlflow_uri=mlflow_uri, compare=compare)
    files["report.html"] = page
    files.update(plot_files(page))
    compared = report.compared_axis(frame, requested=compare, tables=tables,
                                    kept=report.kept_compare(sweep))
    globs = [*PANELS.values(), *dict.fromkeys(spec.metrics for _, spec in tables if spec.metrics)]
    charts = "^(" + "|".join(_glob_regex(g) for g in globs) + ")$"
    note = "\n".join(text for path, text in files.items() if path.endswith(".md")) + (
        "\nThe report, its plots and these tables (HTML, CSV) are this run's artifacts; "
        "the delta rows are its metrics `delta/...`.\n")
    return SweepSummary(files, metrics, note, (compared,) if compared else (), charts)


def publish_sweep(sweep: str, registry_url: str | None = None, mlflow_uri: str | None = None,
                  *, report_html: str | None = None, compare: str | None = None,
                  patient: bool = True) -> str:
    """Attach ``sweep``'s summary (:func:`summarize`) to its MLflow parent run, rename its
    cells' runs and save its view (module docstring); what was done, or why not, in a line.
    ``patient``: wait out a store that is away
    (:func:`~orchestrator.tracking.retry.with_store_retries`), else try once. Never raises."""
    try:
        record = None
        if (registry := Registry.existing(registry_url)) is not None:
            with registry:
                record = registry.find_sweep(sweep)
                names = short_names(registry.cells(sweep)) if record else {}
        parent = record.mlflow_parent_run_id if record else None
        if record is None or not parent or not record.mlflow_experiment_id:
            return f"MLflow: sweep {sweep} has no MLflow parent run; nothing attached"
        summary = summarize(sweep, registry_url, mlflow_uri, report_html, compare)
        view = ui.sweep_view(sweep, summary.group_by, summary.charts, int(time.time() * 1000))
        tracker = Tracker(mlflow_uri)

        def attach() -> None:
            tracker.publish_sweep(parent, files=summary.files, metrics=summary.metrics,
                                  note=summary.note, names=names,
                                  experiment_tags=dict([view]))

        if patient:
            with_store_retries(attach, f"attaching the results of {sweep} to MLflow")
        else:
            attach()
    except Exception as exc:  # a summary is never worth a failed sweep
        first = redact((str(exc).splitlines() or [""])[0][:200])  # a store URL's password
        LOG.warning("MLflow: the results of sweep %s were not attached: %s: %s", sweep,
                    type(exc).__name__, first)
        return f"MLflow: the results were not attached ({type(exc).__name__}: {first})"
    base = ui.ui_base(tracker.uri)
    return (f"MLflow: tables, report, plots and {len(summary.metrics)} delta metrics attached "
            f"to the parent run of {sweep} "
            f"({ui.artifacts_url(base, record.mlflow_experiment_id, parent)})")


def summary_on() -> bool:
    """Whether sweeps publish their summary when they end (``KAPPA_MLFLOW_SUMMARY``, default
    on); a bad value is a ``UserInputError`` (:mod:`orchestrator.configuration`)."""
    return bool(configuration.read(SWITCH))


class PublishHook(SchedulerHook):
    """Publishes the sweep's summary when the sweep ends, if a cell ended under this
    scheduler and some cell has final metrics (a canary sweep's end publishes nothing)."""

    def __init__(self, sweep: str, registry_url: str | None, mlflow_uri: str | None) -> None:
        self.sweep = sweep
        self.registry_url = registry_url
        self.mlflow_uri = mlflow_uri
        self.ended = False

    def on_cell_end(self, registry: Registry, cell_id: str, status: str) -> None:
        """A cell ended: the results changed."""
        self.ended = True

    def on_sweep_end(self, registry: Registry) -> None:
        """Publish (:func:`publish_sweep`), logged."""
        if not self.ended or is_canary_sweep(self.sweep):
            return
        try:
            scored = any(cell.final_metrics for cell in registry.cells(self.sweep))
        except Exception as exc:
            LOG.warning("MLflow: no summary of sweep %s: %s", self.sweep, exc)
            return
        if scored:
            LOG.info("%s", publish_sweep(self.sweep, self.registry_url, self.mlflow_uri))
