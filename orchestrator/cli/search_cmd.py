"""``kappa search SPEC``: run a spec's ``search:`` block, driven like any sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.console import make_console
from orchestrator.cli.sweep_options import OverridesArgument, RunOptions, run_options, submit_spec
from orchestrator.errors import Problem, UserInputError

commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


@commands.command("search")
@run_options
def search_cmd(
    spec: Annotated[Path, typer.Argument(help="The experiment spec (YAML) with search:.")],
    overrides: OverridesArgument = None,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Run the search here and return when every study has ended.")] = False,
    *, run: RunOptions,
) -> None:
    """Run SPEC's adaptive search: one Optuna study per axis combination, each trial a cell.

    Optuna's studies live beside the registry (docs/spec.md#search), so a killed search
    continues with `kappa resume SWEEP` without losing or repeating trials. Without --wait
    a background scheduler runs it; `kappa status SWEEP` shows each study's trials and
    best value, `kappa table SWEEP` the best trial per study.
    """
    from orchestrator.sweeps.detached import scheduler_log
    from orchestrator.sweeps.submission import PreparedSweep

    console = make_console()
    result = submit_spec(console, spec, run.stores, quiet=not wait, wait=wait,
                         vet=PreparedSweep.require_search, max_parallel=run.max_parallel,
                         choice=run.choice(), overrides=overrides or ())
    if not wait:
        console.print(f"search [bold]{result.sweep}[/] running in the background (log: "
                      f"{scheduler_log(result.sweep)}); `kappa status {result.sweep}` "
                      "shows its studies")
        return
    from orchestrator.analysis.studies import study_summaries

    with run.stores.open_registry() as reg:
        studies = study_summaries(reg, reg.get_sweep(result.sweep))
    for study in studies:
        console.print(study.line(), highlight=False, markup=False)
    failed = [s for s in studies if s.error]
    if failed:
        raise UserInputError(f"{len(failed)} stud{'y' if len(failed) == 1 else 'ies'} failed",
                             [Problem("search.objective.metric", s.error or "", fix=None)
                              for s in failed])
