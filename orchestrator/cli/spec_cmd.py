"""``kappa validate | plan | schema``: check a spec, see its grid and cost, editor schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator import paths
from orchestrator.analysis import output as out
from orchestrator.cli.results_cmd import writable
from orchestrator.cli.sweep_options import OverridesArgument, RegistryOption
from orchestrator.errors import UserInputError
from orchestrator.limits import number_problem

if TYPE_CHECKING:
    from orchestrator.sweeps.spec_plan import Plan
    from orchestrator.sweeps.staleness import StaleCells

commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app
_SPEC_ARG = typer.Argument(
    ..., help="The experiment spec (YAML), e.g. experiments/toy/table2.yaml.", show_default=False)


@commands.command("validate")
def validate_command(spec_file: Path = _SPEC_ARG, overrides: OverridesArgument = None) -> None:
    """Check a spec and every cell's settings; print "ok: N cells" or every problem (exit 2).

    A file holding only a stop: block is checked as the stopping rules it is.

    Example: kappa validate experiments/toy/table2.yaml base.max_steps=20
    """
    from orchestrator.spec.block_file import rules_file
    from orchestrator.sweeps.spec_plan import load_plan_with

    if not overrides and rules_file(spec_file) is not None:
        typer.echo("ok: stopping rules (a stop: block for `kappa stop-check --rules` and "
                   "`kappa seed-check --rules`), not a spec")
        return
    typer.echo(f"ok: {load_plan_with(spec_file, overrides or ()).count} cells")


@commands.command("plan")
def plan_command(
    spec_file: Path = _SPEC_ARG,
    overrides: OverridesArgument = None,
    as_json: bool = typer.Option(
        False, "--json", help="Print the plan as JSON (every cell, with its settings)."),
    max_gpu_hours: float | None = typer.Option(
        None, "--max-gpu-hours", help="Refuse (exit 2) if the plan needs more GPU-hours."),
    rows: int = typer.Option(
        200, "--rows", min=0, help="Show at most this many cells in the table."),
    registry: RegistryOption = None,
) -> None:
    """Expand a spec into cells and show them with the total GPU-hours.

    GPU-hours = cells × resources.gpus × resources.nodes × resources.hours. If the registry
    records the spec's sweep, also lists its finished cells that other numerics made than
    the installed ones (stale: `kappa submit SPEC --rerun-stale` runs them again).

    Example: kappa plan experiments/toy/table2.yaml --max-gpu-hours 500 'axes.seed=[0]'
    """
    from orchestrator.sweeps.spec_plan import check_gpu_hours, cost_text, load_plan_with, seeds_text

    # Before the spec is read; nan or inf would be no limit.
    if max_gpu_hours is not None and (problem := number_problem(
            max_gpu_hours, "--max-gpu-hours", 0,
            fix="give GPU-hours, e.g. --max-gpu-hours 500, or leave it out for no limit")):
        raise UserInputError("bad --max-gpu-hours", [problem])
    the_plan = load_plan_with(spec_file, overrides or ())
    spec = the_plan.spec
    if max_gpu_hours is not None:
        check_gpu_hours(the_plan, max_gpu_hours)
    stale = _stale(the_plan, registry)
    if as_json:
        shown = the_plan.to_dict()
        if stale:
            shown["stale"] = stale.as_json()
        typer.echo(json.dumps(shown, indent=2))
        return
    from rich.console import Console
    from rich.table import Column, Table
    from rich.text import Text

    from orchestrator.redact import one_line

    table = Table(Column("#", justify="right"), "cell id", *spec.axis_names)
    for cell in the_plan.cells[:rows]:
        # A value is shown, never obeyed: rich markup and terminal controls as text.
        table.add_row(str(cell.index), cell.cell_id,
                      *(Text(one_line(str(v))) for v in cell.axes.values()))
    console = Console(highlight=False)
    console.print(f"{spec.name} ({spec.backend} backend)")
    console.print(table)
    if the_plan.count > rows:
        console.print(f"... and {the_plan.count - rows} more cells (--rows, or --json for all)")
    console.print(f"{cost_text(the_plan)}; retries: {spec.retries}")
    if spec.seeds is not None:
        console.print(seeds_text(the_plan), markup=False, soft_wrap=True)
    if stale:
        from orchestrator.sweeps.staleness import rerun_command

        for line in stale.lines(rerun_command(spec_file, overrides or ())):
            console.print(line, markup=False, soft_wrap=True)


def _stale(the_plan: Plan, registry: str | None) -> StaleCells | None:
    """The plan's finished cells that are stale, if the registry records its sweep; a
    registry that cannot be read is said on stderr, and the plan shown all the same."""
    url = paths.registry_url(registry)
    file = paths.local_store_path(url) if url.startswith("sqlite:///") else None
    if file is not None and not file.exists():
        return None  # no registry yet, so nothing ran (and plan stays free of SQLAlchemy)
    from orchestrator.sweeps.staleness import recorded_stale

    try:
        return recorded_stale(registry, the_plan)
    except UserInputError as exc:
        fixes = "".join(f"; {p.fix}" for p in exc.problems[:1] if p.fix)
        typer.echo(f"kappa: stale results not checked: {exc.summary}{fixes}", err=True)
        return None


@commands.command("schema")
def schema_command(
    output: Path | None = typer.Option(None, "--output", "-o",
                                       help="Write to this file instead of stdout.",
                                       callback=writable("--output")),
) -> None:
    """Print the JSON Schema of specs (with each backend's settings for base), for editors.

    Example: kappa schema -o .vscode/kappa-spec.schema.json, then in a spec:
    # yaml-language-server: $schema=../.vscode/kappa-spec.schema.json
    """
    from orchestrator.spec import spec_json_schema

    text = json.dumps(spec_json_schema(), indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        typer.echo(f"wrote {out.write(output, text, '--output')}")
