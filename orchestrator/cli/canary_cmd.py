"""``kappa canary SPEC``: run every distinct cell configuration for a few steps first
(``kappa submit SPEC --canary`` runs the same, :func:`run_and_report`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.console import make_console
from orchestrator.cli.sweep_options import (
    OverridesArgument,
    RunOptions,
    interruptible,
    run_options,
    sweep_progress,
)

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.sweeps.canary import CanaryOutcome, CanaryPlan

EXIT_CANARY_FAILED = 2
commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


def print_plan(console: Console, plan: CanaryPlan, detailed: bool = False) -> None:
    """How many canaries stand for how many cells (and, ``detailed``, each one)."""
    from rich.markup import escape
    from rich.table import Table

    from orchestrator.sweeps.canary import canaried_cells, cells_text, describe_changes

    free = ", ".join(sorted(plan.free_settings)) or "nothing"
    count, kinds = len(canaried_cells(plan.grid)), "studies" if plan.is_search else "cells"
    if not plan.canaries:
        console.print(f"[bold]{escape(plan.grid.name)}[/]: no canary to run: the spec has "
                      f"no {kinds}, so nothing would run")
        return
    console.print(f"[bold]{escape(plan.grid.name)}[/]: {len(plan.canaries)} canar"
                  f"{'y' if len(plan.canaries) == 1 else 'ies'} for {count} {kinds} "
                  f"({kinds} differing only in {escape(free)} share one), as sweep "
                  f"{escape(plan.name)}")
    if plan.is_search:
        console.print("  each canary runs its study's starting settings (searched settings "
                      "as base and axes give them, else their defaults), no trials")
    if not detailed:
        return
    table = Table(show_lines=False)
    for column in ("#", "canary", "cell (axes)", "stands for", "canary settings"):
        table.add_column(column, overflow="fold")
    for n, canary in enumerate(plan.canaries, 1):
        table.add_row(str(n), canary.cell.cell_id, escape(canary.cell.describe() or "(no axes)"),
                      cells_text(canary.stands_for, limit=2),
                      escape(describe_changes(canary.changes)))
    console.print(table)


def print_outcome(console: Console, outcome: CanaryOutcome) -> None:
    """Each failed canary with its axes, id, the cells it stands for and its log tail;
    then one summary line."""
    from rich.markup import escape

    from orchestrator.sweeps.canary import cells_text

    for result in outcome.failed:
        cell = result.canary.cell
        console.print(f"[bold red]canary {result.record.state.value}[/]: "
                      f"{escape(cell.describe() or '(no axes)')}  canary {cell.cell_id} "
                      f"(for {cells_text(result.canary.stands_for)})")
        code = result.record.exit_code
        console.print(f"  {'exit code ' + str(code) + ', ' if code is not None else ''}"
                      f"log: {escape(str(result.log_path))}")
        for line in (result.tail() or "(no output)").splitlines():
            console.print("  | " + line, markup=False, highlight=False)
    total = len(outcome.results)
    reused = f" ({outcome.reused} had passed before and did not run again)" \
        if outcome.reused else ""
    if not total:
        console.print("canaries: none ran (nothing to vouch for)")
    elif outcome.passed:
        console.print(f"canaries: all {total} passed{reused}")
    else:
        console.print(f"[bold red]canaries: {len(outcome.failed)} of {total} failed[/]"
                      f"{reused}; `kappa logs CANARY-ID` shows a whole log")


def run_and_report(console: Console, spec: Path, run: RunOptions, rerun: bool,
                   overrides: Sequence[str] = ()) -> CanaryOutcome:
    """Plan SPEC's canaries (``overrides`` applied; bad input: exit 2, nothing written),
    run them here with progress, and print the outcome."""
    from orchestrator.sweeps.canary import plan_canaries, run_canaries
    from orchestrator.sweeps.submission import prepare

    choice = run.choice()
    plan = plan_canaries(prepare(spec, models=True, overrides=overrides))
    print_plan(console, plan)
    with interruptible(plan.name), sweep_progress(console) as options:
        outcome = run_canaries(plan, run.stores, rerun=rerun, max_parallel=run.max_parallel,
                               options=options, choice=choice)
    print_outcome(console, outcome)
    return outcome


@commands.command("canary")
@run_options
def canary_cmd(
    spec: Annotated[Path, typer.Argument(help="The experiment spec (YAML).")],
    overrides: OverridesArgument = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List the canaries and what each changes; run nothing.")] = False,
    rerun: Annotated[bool, typer.Option(
        "--rerun", help="Run canaries that passed before again too.")] = False,
    *, run: RunOptions,
) -> None:
    """Run every distinct cell configuration of SPEC for a few steps (a canary).

    Each canary is the backend's smallest run of a cell (embedded: 2 RL steps; verl: 2
    training steps at the smallest batch, validation off, a checkpoint at step 2) on the
    executor the grid would use; cells that differ only in the seed share one. A spec with
    a search: block gets one per study configuration (its trials are not run). Canaries
    are recorded as sweep <name>.canary (registry, MLflow runs tagged kappa.canary=true),
    never in the grid's results. Exit 0 when all passed; 2 with each failed canary's
    axes, id and log tail. `kappa submit SPEC --canary` runs them before the grid.
    """
    console = make_console()
    if dry_run:
        from orchestrator.sweeps.canary import plan_canaries
        from orchestrator.sweeps.submission import prepare

        print_plan(console, plan_canaries(prepare(spec, models=True, overrides=overrides or ())),
                   detailed=True)
        return
    outcome = run_and_report(console, spec, run, rerun, overrides or ())
    if not outcome.passed:
        raise typer.Exit(EXIT_CANARY_FAILED)
