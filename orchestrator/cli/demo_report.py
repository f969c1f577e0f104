"""What ``kappa demo`` prints once its sweep has ended."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from orchestrator import paths
from orchestrator.cli.sweep_views import STATE_STYLE
from orchestrator.errors import UserInputError
from orchestrator.redact import redact

if TYPE_CHECKING:
    from orchestrator.sweeps.status import SweepStatus
    from orchestrator.sweeps.stores import Stores
    from orchestrator.sweeps.sweep import Sweep


def _cells_table(status: SweepStatus) -> Table:
    table = Table("cell", "axes", "state", Column("val acc", justify="right"),
                  title=f"{status.sweep}: final validation accuracy", title_justify="left")
    for cell in status.cells:
        acc = cell.val_accuracy
        table.add_row(cell.cell_id, Text(cell.axes_text),
                      f"[{STATE_STYLE[cell.state]}]{cell.state}[/]",
                      "" if acc is None else f"{acc:.3f}")
    return table


def print_demo_results(console: Console, sweep: Sweep, stores: Stores) -> None:
    """Per-cell accuracies, the ablation table, the report, where everything is, then the
    closing lines (:func:`~orchestrator.analysis.verdict.closing_lines`)."""
    from orchestrator.analysis.report import ablation_table, mlflow_ui_address, write_report
    from orchestrator.analysis.sources import results
    from orchestrator.analysis.verdict import closing_lines

    name = sweep.name
    status = sweep.status()
    console.print(_cells_table(status))
    frame = results(name, stores.registry_url, stores.mlflow_uri)
    spec, table, text = ablation_table(frame)
    console.print(f"\n[bold]{name}[/]: ablation table"
                  + (f" ({spec.metrics}, mean ± 95% CI over seeds)" if spec else ""))
    console.print(text, markup=False, highlight=False, soft_wrap=True)
    try:
        target = write_report(
            name, paths.kappa_home() / "reports" / f"{name}.html", registry_url=stores.registry_url,
            mlflow_uri=stores.mlflow_uri,
            tables=(("Ablation (kappa demo)", spec),) if spec is not None else ())
        console.print(f"report:    {target}")
    except (UserInputError, OSError) as exc:
        console.print(f"report:    not written ({exc})", markup=False)
    console.print(f"registry:  {sweep.registry.url}")
    console.print(f"MLflow:    {redact(paths.mlflow_uri(stores.mlflow_uri))} — browse it with "
                  f"`kappa ui {name} --open` ({mlflow_ui_address(stores.mlflow_uri)}); see "
                  "docs/mlflow-ui.md to compare runs")
    console.print(f"run folders: {sweep.folder}")
    for line in closing_lines(table, frame, status.made_by):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
