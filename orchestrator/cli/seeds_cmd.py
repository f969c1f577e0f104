"""``kappa seed-check``: seeds on demand replayed on a finished sweep that ran every seed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from orchestrator import paths
from orchestrator.analysis import output
from orchestrator.cli.completions import sweep_names, values
from orchestrator.cli.results_cmd import JsonOption
from orchestrator.cli.sweep_options import RegistryOption
from orchestrator.errors import Problem, UserInputError, unknown_name

commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


def _spendings() -> list[str]:
    from orchestrator.analysis.seed_check import SPENDING

    return list(SPENDING)


@commands.command("seed-check")
def seed_check(
    sweep: Annotated[str, typer.Argument(
        help="A finished sweep that ran --max seeds or more.", autocompletion=sweep_names)],
    delta: Annotated[str, typer.Option(
        metavar="AXIS=BASE", help="The compared axis and its base value, e.g. "
                                  "reward_budget=false.")],
    start: Annotated[int, typer.Option(help="Seeds every comparison gets first.")] = 3,
    max_seeds: Annotated[int, typer.Option(
        "--max", help="Seeds a comparison gets at most (the fixed design's count).")] = 8,
    margin: Annotated[float, typer.Option(
        help="A difference smaller than this (in the metric's units, points for accuracies "
             "shown in points) is 'within margin': no effect worth having. 0: never.")] = 0.0,
    alpha: Annotated[float, typer.Option(
        help="Chance, over all looks, of calling a zero difference positive or negative.")
    ] = 0.05,
    spending: Annotated[str, typer.Option(
        help="How alpha is spent over the looks: obrien-fleming (little early) | pocock.",
        autocompletion=values(_spendings))] = "obrien-fleming",
    metric: Annotated[str | None, typer.Option(
        help="Glob of the final metrics compared (their mean per cell). Default: the "
             "table's eval/*/mean@k, i.e. its Average column; with --rules, the rules' metric.")
    ] = None,
    rules: Annotated[Path | None, typer.Option(
        "--rules", metavar="FILE", help="Also replay these comparison-group stopping rules "
        "(a stop: block, as kappa stop-check reads it): values and hours at their stop.")
    ] = None,
    seed_axis: Annotated[str, typer.Option(help="Axis of replicate seeds.")] = "seed",
    json_out: JsonOption = None,
    registry: RegistryOption = None,
) -> None:
    """Replay seeds on demand on a finished sweep: per comparison, the seeds the sequential
    rule would have used, its decision and interval, against the fixed design's.

    Example: kappa seed-check toy-table2-300 --delta reward_budget=false --start 3 --max 8
    """
    from orchestrator.analysis import seed_check as seeds
    from orchestrator.analysis import stop_check

    paths.check_name(sweep)
    if spending not in seeds.SPENDING:
        raise unknown_name("spending function", spending, seeds.SPENDING, "--spending")
    axis, base = stop_check.parse_delta(delta)
    rule = seeds.seed_rule(start, max_seeds, alpha, margin, spending)
    stopped = None
    if rules is not None:  # refuses an unfinished sweep itself
        plan, cells = stop_check.load(sweep, registry)
        chosen = stop_check.chosen_rules(sweep, plan, cells, rules, None)
        finished = stop_check.finished_cells(cells, plan.backend)
        stopped = {r.cell_id: r for r in stop_check.replay(finished, chosen)}
        metric = metric or sorted(chosen.group_metrics())[0]
    else:
        cells = seeds.load_cells(sweep, registry)
    if any(not c.is_terminal for c in cells):
        raise UserInputError(f"sweep {sweep} has not finished", [Problem(
            "sweep", "some cells are still pending or running",
            fix="wait for it (kappa submit --wait / kappa status), then replay")])
    found, glob = seeds.sweep_cells(cells, metric, stopped)
    scale = seeds.points_scale(found)
    # The margin is given as the table shows the metric (points for accuracies).
    result = seeds.seed_check(found, replace(rule, margin=margin / scale), axis, base, seed_axis)
    typer.echo(f"Metric: {glob}" + (" (points)" if scale == 100.0 else ""))
    typer.echo(seeds.render(result, scale), nl=False)
    if json_out is not None:
        output.write(json_out, json.dumps(result.as_json(), indent=1), "--json")
