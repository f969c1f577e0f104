"""``kappa stop-check SWEEP``: replay stopping rules on a finished full-length sweep, to
choose a rule on yesterday's sweep before spending on tomorrow's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.sweep_options import RegistryOption


def stop_check(
    sweep: Annotated[str, typer.Argument(help="A finished sweep, run to full length.")],
    rules: Annotated[Path | None, typer.Option(
        "--rules", metavar="FILE",
        help="YAML holding the stop: block to replay (plateau, threshold, diverged, "
             "together). Default: the sweep's own stop: block.")] = None,
    together: Annotated[str | None, typer.Option(
        metavar="AXES", help="Replace the rules' together: (comma-separated axes; '' for "
                             "none: every cell stops on its own).")] = None,
    metric: Annotated[str | None, typer.Option(
        help="The metric compared (default: the plateau or threshold rule's).")] = None,
    delta: Annotated[str | None, typer.Option(
        metavar="AXIS=BASE", help="The compared axis and its base value (default: the "
                                  "together axis, against its first value).")] = None,
    seed_axis: Annotated[str, typer.Option(help="Axis of replicate seeds.")] = "seed",
    json_out: Annotated[Path | None, typer.Option(
        "--json", metavar="FILE", help="Also write the figures as JSON here.")] = None,
    registry: RegistryOption = None,
) -> None:
    """Replay stopping rules on a finished sweep: for each delta, its value at full length,
    where the rules would have stopped, and the steps and hours saved.

    Example: kappa stop-check toy-table2 --rules plateau.yaml --together reward_budget
    """
    from orchestrator import paths
    from orchestrator.analysis import stop_check as report

    paths.check_name(sweep)
    plan, cells = report.load(sweep, registry)
    chosen = report.chosen_rules(sweep, plan, cells, rules, together)
    axis, base = report.compared_axis(delta, chosen, cells)
    result = report.check_sweep(plan, cells, chosen, metric, axis, base, seed_axis)
    early = sum(1 for c in cells if c.stop_reason)
    if early:
        typer.echo(f"note: {early} cell(s) of {sweep} were stopped early when it ran; the "
                   "replay judges only the steps they ran", err=True)
    typer.echo(report.render(result, report.describe(chosen)), nl=False)
    if json_out is not None:
        json_out.write_text(json.dumps(result.as_json(), indent=1), encoding="utf-8")


def register(app: typer.Typer) -> None:
    """Add ``kappa stop-check``."""
    app.command("stop-check")(stop_check)
