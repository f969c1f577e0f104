"""``kappa smoke verl``: prove the verl path on a GPU node in minutes (docs/verl.md)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.console import make_console
from orchestrator.cli.sweep_options import (
    MaxParallelOption,
    MlflowOption,
    RegistryOption,
    stores_of,
    submit_spec,
)

EXIT_SMOKE_FAILED = 1

smoke_app = typer.Typer(
    name="smoke", no_args_is_help=True,
    help="One-command smoke tests of a backend on this machine (`kappa smoke verl`).")
commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app
commands.add_typer(smoke_app)


@smoke_app.command("verl")
def smoke_verl_cmd(
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR",
        help="Where the model, data and rendered spec go (default: $KAPPA_HOME/smoke/verl).")
    ] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Build the files, validate and preflight the 12 cells and print "
                          "their verl command lines; run nothing (no GPU needed).")] = False,
    spec: Annotated[Path | None, typer.Option(
        "--spec", metavar="YAML",
        help="The smoke spec template (default: experiments/verl/smoke.yaml).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the per-cell verdicts as JSON.")] = False,
    max_parallel: MaxParallelOption = None,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """Run every verl baseline ± RB for 2 steps on a tiny local model, on this GPU.

    The model (2-layer Qwen2, 512-token vocabulary), tokenizer and prompts are built
    here, without hub access. Each cell passes when it succeeded and logged
    actor/pg_loss, actor/grad_norm > 0 and timing_s/gen for steps 1 and 2 to its MLflow
    run. Exit 0 when all 12 passed, 1 when any failed (each failing cell and metric is
    named), 2 when this machine has no CUDA GPU or no vLLM (nothing is built or run).
    The sweep (verl-smoke-<hash of the rendered spec>) is rerun in full each time.
    """
    from orchestrator.backends.verl import smoke
    from orchestrator.backends.verl.smoke_check import check_smoke, verdict_lines, verdicts_json
    from orchestrator.sweeps.smoke import prepare_smoke, smoke_commands

    if not dry_run:
        smoke.require_gpu()
    files = prepare_smoke(out, spec or smoke.TEMPLATE)
    if dry_run:
        typer.echo(f"# smoke files in {files.out_dir}; spec {files.spec}")
        for label, argv in smoke_commands(files.spec):
            typer.echo(f"# {label}\n{shlex.join(argv)}")
        return
    stores = stores_of(registry, mlflow)
    result = submit_spec(make_console(), files.spec, stores, quiet=as_json, rerun=True,
                         wait=True, max_parallel=max_parallel)
    with stores.open_registry() as reg:
        verdicts = check_smoke(reg, stores.mlflow_client(), result.sweep)
    if as_json:
        typer.echo(json.dumps(verdicts_json(verdicts), indent=2))
    else:
        typer.echo(f"sweep {result.sweep} (`kappa status {result.sweep}`, "
                   "`kappa logs CELL-ID`):")
        for line in verdict_lines(verdicts):
            typer.echo(line)
    if not verdicts or not all(v.passed for v in verdicts):
        raise typer.Exit(EXIT_SMOKE_FAILED)
