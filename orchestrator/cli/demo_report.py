"""What ``kappa demo`` prints once its sweep has ended.

:func:`print_demo_results` is the hook for the demo's results: today each cell's final
validation accuracy and where to look next; the paper-style ablation table is to be
added here (after the per-cell list), so ``kappa demo`` ends with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from orchestrator import paths
from orchestrator.cli.sweep_views import STATE_STYLE, describe_axes, val_accuracy
from orchestrator.registry import Registry

if TYPE_CHECKING:
    from orchestrator.scheduler.driver import Stores


def print_demo_results(console: Console, registry: Registry, sweep: str,
                       stores: Stores) -> None:
    """Each cell's final validation accuracy, then where the MLflow UI and registry are."""
    table = Table(title=f"{sweep}: final validation accuracy", title_justify="left")
    table.add_column("cell")
    table.add_column("axes")
    table.add_column("state")
    table.add_column("val acc", justify="right")
    for cell in registry.cells(sweep):
        acc = val_accuracy(cell.final_metrics)
        table.add_row(cell.cell_id, describe_axes(cell),
                      f"[{STATE_STYLE[cell.state]}]{cell.state.value}[/]",
                      "" if acc is None else f"{acc:.3f}")
    console.print(table)
    # Hook: the paper-style ablation table of the sweep goes here.
    console.print(f"registry:  {registry.url}")
    console.print(f"MLflow:    {paths.mlflow_uri(stores.mlflow_uri)} — browse it with "
                  "`kappa ui` (http://127.0.0.1:5000)")
    console.print(f"run folders: {paths.runs_root() / sweep}")
