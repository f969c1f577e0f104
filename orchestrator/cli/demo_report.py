"""What ``kappa demo`` prints once its sweep has ended, and its table's layout."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from orchestrator import paths
from orchestrator.cli.sweep_views import STATE_STYLE
from orchestrator.errors import UserInputError
from orchestrator.redact import redact
from orchestrator.registry import Registry
from orchestrator.runs.atomic import write_atomic

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.analysis.tables import TableSpec
    from orchestrator.sweeps.stores import Stores

DELTA_AXIS = "reward_budget"
DELTA_BASE = "false"
SEED_AXIS = "seed"
MLFLOW_UI = "http://127.0.0.1:5000"


def report_path(sweep: str) -> Path:
    """Where ``kappa demo`` writes the sweep's HTML report."""
    return paths.kappa_home() / "reports" / f"{sweep}.html"


def demo_table_spec(axes: Sequence[str], metrics: str) -> TableSpec:
    """The demo's table: rows = every axis but ``reward_budget`` and ``seed``, ``+ RB``
    delta rows when ``reward_budget`` is an axis, no blocks."""
    from orchestrator.analysis.tables import DeltaSpec, TableSpec

    rows = tuple(a for a in axes if a not in (DELTA_AXIS, SEED_AXIS))
    delta = DeltaSpec(axis=DELTA_AXIS, base=DELTA_BASE) if DELTA_AXIS in axes else None
    if not rows:  # only reward_budget (and seeds) vary: its values are the rows
        rows, delta = ((DELTA_AXIS,) if delta else ("baseline",)), None
    return TableSpec(rows=rows, delta=delta, metrics=metrics, seed_axis=SEED_AXIS)


def _cells_table(registry: Registry, sweep: str) -> Table:
    from orchestrator.sweeps.status import CellStatus

    table = Table(title=f"{sweep}: final validation accuracy", title_justify="left")
    for column in ("cell", "axes", "state", "val acc"):
        table.add_column(column, justify="right" if column == "val acc" else "left")
    for cell in map(CellStatus.of, registry.cells(sweep)):
        acc = cell.val_accuracy
        table.add_row(cell.cell_id, cell.axes_text,
                      f"[{STATE_STYLE[cell.state]}]{cell.state}[/]",
                      "" if acc is None else f"{acc:.3f}")
    return table


def ablation_table(frame: pd.DataFrame) -> tuple[TableSpec | None, str]:
    """The sweep's ablation table as markdown (and its spec), or why there is none."""
    from orchestrator.analysis.frame import metric_names
    from orchestrator.analysis.tables import build_table, render
    from orchestrator.analysis.tables.labels import default_metric_glob

    metrics = default_metric_glob(metric_names(frame))
    if metrics is None:
        return None, "no evaluation metrics (eval/*/mean@k, val-core/*/acc/mean@1): no table"
    axes = [str(c).removeprefix("axis.") for c in frame.columns if str(c).startswith("axis.")]
    spec = demo_table_spec(axes, metrics)
    try:
        return spec, render(build_table(frame, spec), "markdown")
    except UserInputError as exc:
        return None, f"no ablation table: {exc.render()}"


def write_report(sweep: str, stores: Stores, spec: TableSpec | None) -> Path:
    """Write the sweep's HTML report (with the demo table) and return its path."""
    from orchestrator.analysis.report import build_report

    tables: tuple[tuple[str, Any], ...] = (
        (("Ablation (kappa demo)", spec),) if spec is not None else ())
    html = build_report(sweep, registry_url=stores.registry_url, mlflow_uri=stores.mlflow_uri,
                        mlflow_ui=MLFLOW_UI, tables=tables)
    target = report_path(sweep)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, html)
    return target


def print_demo_results(console: Console, registry: Registry, sweep: str,
                       stores: Stores) -> None:
    """Per-cell accuracies, the ablation table, the report, then where everything is."""
    from orchestrator.analysis.sources import results

    console.print(_cells_table(registry, sweep))
    frame = results(sweep, stores.registry_url, stores.mlflow_uri)
    spec, text = ablation_table(frame)
    console.print(f"\n[bold]{sweep}[/]: ablation table"
                  + (f" ({spec.metrics}, mean ± 95% CI over seeds)" if spec else ""))
    console.print(text, markup=False, highlight=False, soft_wrap=True)
    try:
        console.print(f"report:    {write_report(sweep, stores, spec)}")
    except (UserInputError, OSError) as exc:
        console.print(f"report:    not written ({exc})", markup=False)
    console.print(f"registry:  {registry.url}")
    console.print(f"MLflow:    {redact(paths.mlflow_uri(stores.mlflow_uri))} — browse it with "
                  f"`kappa ui {sweep} --open` ({MLFLOW_UI}); see docs/mlflow-ui.md to "
                  "compare runs")
    console.print(f"run folders: {paths.runs_root() / sweep}")
