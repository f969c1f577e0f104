"""How sweeps look in the terminal: status tables, JSON, the live progress line.

Pure presentation over registry snapshots; imported by the sweep commands only when a
command runs (it imports rich).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from orchestrator.registry import CellRecord, CellState, Registry, SweepRecord

STATE_STYLE = {
    CellState.PENDING: "dim",
    CellState.QUEUED: "cyan",
    CellState.RUNNING: "bold blue",
    CellState.SUCCEEDED: "green",
    CellState.FAILED: "bold red",
    CellState.CANCELLED: "yellow",
}


def val_accuracy(final: Mapping[str, Any] | None) -> float | None:
    """The cell's final validation accuracy (``val-core/<benchmark>/acc/mean@1``), if any."""
    if not final:
        return None
    for key in sorted(final):
        if key.startswith("val-core/") and key.endswith("/acc/mean@1"):
            return float(final[key])
    return None


def describe_axes(cell: CellRecord) -> str:
    """``baseline=grpo, rb=on`` for a cell."""
    return ", ".join(f"{k}={v}" for k, v in cell.axes.items())


def cell_row(cell: CellRecord) -> dict[str, Any]:
    """A cell as plain JSON-able data (``kappa status --json``)."""
    return {
        "cell_id": cell.cell_id, "index": cell.index, "axes": dict(cell.axes),
        "state": cell.state.value, "attempts": cell.attempts_count,
        "progress_step": cell.progress_step, "total_steps": cell.total_steps,
        "exit_code": cell.exit_code, "val_accuracy": val_accuracy(cell.final_metrics),
        "final_metrics": dict(cell.final_metrics or {}), "run_dir": cell.run_dir,
        "mlflow_run_id": cell.mlflow_run_id, "last_error": cell.last_error,
    }


def sweep_json(registry: Registry, sweep: SweepRecord, driver_pid: int | None) -> dict[str, Any]:
    """A sweep, its state counts and its cells as JSON-able data."""
    counts = registry.counts(sweep.name)
    return {
        "sweep": sweep.name, "backend": sweep.backend,
        "counts": {state.value: n for state, n in counts.items()},
        "scheduler_pid": driver_pid,
        "mlflow_experiment_id": sweep.mlflow_experiment_id,
        "mlflow_parent_run_id": sweep.mlflow_parent_run_id,
        "cells": [cell_row(c) for c in registry.cells(sweep.name)],
    }


def counts_text(counts: Mapping[CellState, int]) -> str:
    """``3 succeeded · 1 running · 2 pending`` (states with cells only)."""
    parts = [f"[{STATE_STYLE[s]}]{n} {s.value}[/]" for s, n in counts.items() if n]
    return " · ".join(parts) or "no cells"


def sweeps_table(registry: Registry) -> Table:
    """Every sweep with its state counts."""
    table = Table(title="sweeps", title_justify="left")
    table.add_column("sweep")
    table.add_column("backend")
    table.add_column("cells", justify="right")
    table.add_column("states")
    table.add_column("updated")
    for sweep in registry.list_sweeps():
        counts = registry.counts(sweep.name)
        table.add_row(sweep.name, sweep.backend, str(sum(counts.values())), counts_text(counts),
                      sweep.updated_at.strftime("%Y-%m-%d %H:%M"))
    return table


def cells_table(cells: list[CellRecord]) -> Table:
    """One row per cell: state, progress, attempts, final validation accuracy."""
    table = Table(title_justify="left")
    for name, justify in (("#", "right"), ("cell", "left"), ("axes", "left"),
                          ("state", "left"), ("progress", "right"), ("attempts", "right"),
                          ("val acc", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for cell in cells:
        progress = ""
        if cell.progress_step is not None:
            progress = f"{cell.progress_step}/{cell.total_steps or '?'}"
        acc = val_accuracy(cell.final_metrics)
        table.add_row(str(cell.index), cell.cell_id, describe_axes(cell),
                      f"[{STATE_STYLE[cell.state]}]{cell.state.value}[/]", progress,
                      str(cell.attempts_count), "" if acc is None else f"{acc:.3f}")
    return table


def print_sweep(console: Console, registry: Registry, sweep: SweepRecord,
                driver_pid: int | None) -> None:
    """Counts per state, who drives the sweep, and the cells table."""
    counts = registry.counts(sweep.name)
    driver = f"scheduler pid {driver_pid}" if driver_pid else "no scheduler running"
    console.print(f"[bold]{sweep.name}[/] ({sweep.backend}): {counts_text(counts)} — {driver}")
    console.print(cells_table(registry.cells(sweep.name)))
    failed = [c for c in registry.cells(sweep.name, [CellState.FAILED]) if c.last_error]
    for cell in failed[:3]:
        first = cell.last_error.splitlines()[0] if cell.last_error else ""
        console.print(f"[red]{cell.cell_id}[/]: {first} (`kappa logs {cell.cell_id}`)")
