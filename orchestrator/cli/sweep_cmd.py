"""``kappa submit | status | logs | cancel | resume | demo``: running sweeps."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator import paths
from orchestrator.analysis import output as out
from orchestrator.cli.completions import cell_ids, sweep_names, sweeps_and_cells
from orchestrator.cli.console import make_console
from orchestrator.cli.sweep_options import (
    ExecutorOptionsOption,
    MaxParallelOption,
    MlflowOption,
    OverridesArgument,
    RayAddressOption,
    RegistryOption,
    RunOptions,
    interruptible,
    run_options,
    stores_of,
    submit_spec,
    sweep_progress,
)

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.sweeps.stores import Stores
    from orchestrator.sweeps.submission import PreparedSweep, SubmitResult

DEFAULT_DEMO_SPEC = Path("experiments/toy/demo.yaml")
commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


@commands.command("submit")
@run_options
def submit_cmd(
    ctx: typer.Context,
    spec: Annotated[Path, typer.Argument(help="The experiment spec (YAML).")],
    overrides: OverridesArgument = None,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Run the sweep here and return when it has ended.")] = False,
    rerun: Annotated[bool, typer.Option(
        "--rerun", help="Run succeeded cells again too (in fresh run folders).")] = False,
    rerun_stale: Annotated[bool, typer.Option(
        "--rerun-stale", help="Run again (in fresh run folders) the succeeded cells that "
                              "other numerics made than the installed ones (backend "
                              "numerics version, torch): those `kappa plan SPEC` lists as "
                              "stale. Without it they are kept.")] = False,
    canary: Annotated[bool, typer.Option(
        "--canary", help="First run every distinct cell configuration for a few steps "
                         "(`kappa canary`), here; submit only if all passed (else exit 2)."
                         )] = False,
    notify: Annotated[str | None, typer.Option(
        "--notify", metavar="URL",
        help="Post a chat message (Slack webhook JSON) to URL when the sweep ends, a cell "
             "fails for good, a canary fails or a diverged rule fires; instead of the "
             "spec's notify: URL (its events kept). `ps` shows it to every user of the "
             "machine while this runs: --notify-env keeps it off the command line.")] = None,
    notify_env: Annotated[str | None, typer.Option(
        "--notify-env", metavar="NAME",
        help="As --notify, with the URL read from the environment variable NAME (e.g. "
             "export KAPPA_SLACK_WEBHOOK=https://...; --notify-env KAPPA_SLACK_WEBHOOK).")
        ] = None,
    *, run: RunOptions,
) -> None:
    """Submit SPEC: validate it and every cell, record the sweep, and run it.

    Resubmitting adds only new cells and retries failed or cancelled ones; succeeded cells
    never run again unless --rerun, or --rerun-stale for those made by other numerics than
    the installed ones (listed as stale, and kept, without it). Without --wait a background
    scheduler runs the sweep (log: .kappa/scheduler/<sweep>.log) and this returns at once;
    follow it with `kappa status SWEEP`. With --canary the canaries run first, in the foreground.
    Cells run on --executor (`kappa executors` lists those installed and their -E options).
    OVERRIDEs change the spec as an edit of its file would (Hydra grammar, docs/cli.md); the
    sweep stores the resolved spec and the overrides (`kappa status SWEEP` shows them).
    """
    from orchestrator.sweeps.detached import scheduler_log
    from orchestrator.sweeps.driver import notify_instead
    from orchestrator.sweeps.staleness import rerun_command

    if notify is not None or notify_env is not None:  # a bad URL: exit 2 here, nothing written
        ctx.with_resource(notify_instead(notify, notify_env))  # until the command ends
    console = make_console()
    choice = run.choice()
    source: Path | PreparedSweep = spec
    if canary:
        from orchestrator.cli.canary_cmd import EXIT_CANARY_FAILED, run_and_report

        outcome = run_and_report(console, spec, run, rerun, overrides or ())
        if not outcome.passed:
            console.print(f"the grid of {outcome.plan.grid.name} was not submitted")
            raise typer.Exit(EXIT_CANARY_FAILED)
        source = outcome.plan.grid  # the spec was read and planned once, for both
    result = submit_spec(console, source, run.stores, quiet=not wait, rerun=rerun, wait=wait,
                         max_parallel=run.max_parallel, choice=choice,
                         overrides=overrides or (), rerun_stale=rerun_stale)
    console.print(f"sweep [bold]{result.sweep}[/]: {result.total_cells} cells, "
                  f"{result.new_cells} new, {result.requeued_cells} requeued")
    if not rerun:  # --rerun ran every finished cell again
        _print_stale(console, result, rerun_command(spec, overrides or ()), rerun_stale)
    if wait:
        _print_final(console, run.stores, result.sweep)
    else:
        console.print(f"running in the background (log: {scheduler_log(result.sweep)}); "
                      f"`kappa status {result.sweep}` shows progress")


def _print_stale(console: Console, result: SubmitResult, hint: str,
                 rerun_stale: bool = False) -> None:
    """The submit's stale cells: kept (and ``hint``, how to rerun them) or run again."""
    for line in result.stale.lines(hint, rerun_stale):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_final(console: Console, stores: Stores, sweep: str) -> None:
    from orchestrator.cli.sweep_views import print_status
    from orchestrator.sweeps.sweep import Sweep

    with stores.open_registry() as reg:
        status = Sweep.open(reg, sweep).status()
    print_status(console, status)
    if not status.all_succeeded:
        raise typer.Exit(1)


@commands.command("status")
def status_cmd(
    sweep: Annotated[str | None, typer.Argument(
        help="A sweep name (default: list sweeps).", autocompletion=sweep_names)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    watch: Annotated[bool, typer.Option(
        "--watch", "-w", help="Follow SWEEP live until it ends: progress bars and each "
                              "failure (exit 0 if every cell succeeded, else 1).")] = False,
    interval: Annotated[float, typer.Option(
        "--interval", metavar="SECONDS", min=0.2, max=600.0,
        help="With --watch: seconds between refreshes (one registry query each).")] = 2.0,
    registry: RegistryOption = None,
) -> None:
    """Show sweeps, or one sweep's state counts and cells (progress, attempts, val acc)."""
    from orchestrator.cli.sweep_views import print_status, sweeps_table
    from orchestrator.sweeps.sweep import Sweep

    if sweep is not None:
        paths.check_name(sweep)
    if watch:
        _watch(sweep, as_json, interval, registry)
        return
    with stores_of(registry, None).open_registry(create=False) as reg:
        handles = Sweep.every(reg) if sweep is None else [Sweep.open(reg, sweep)]
        if as_json:
            shown = [h.status().as_json() for h in handles]
            typer.echo(json.dumps(shown if sweep is None else shown[0], indent=2,
                                  default=str))
        elif sweep is None:
            statuses = []
            for handle in handles:
                statuses.append(handle.active_status())
                handle.close()
            make_console().print(sweeps_table(statuses))
        else:
            print_status(make_console(), handles[0].status())


def _watch(sweep: str | None, as_json: bool, interval: float, registry: str | None) -> None:
    """``kappa status SWEEP --watch``: exit 0 once every cell succeeded, else 1; Ctrl-C
    stops watching only (130)."""
    from orchestrator.cli.sweep_views import watch
    from orchestrator.errors import Problem, UserInputError
    from orchestrator.sweeps.sweep import Sweep

    if sweep is None or as_json:
        raise UserInputError("--watch follows one sweep on screen", [Problem(
            "--watch", "needs a sweep's name, and draws no JSON",
            found="no SWEEP" if sweep is None else "--json",
            fix="kappa status SWEEP --watch (or kappa status SWEEP --json, once)")])
    console = make_console()
    with stores_of(registry, None).open_registry(create=False) as reg:
        handle = Sweep.open(reg, sweep)  # an unknown sweep: exit 2 with the known ones
        try:
            last = watch(console, handle, interval)
        except KeyboardInterrupt:
            typer.echo(f"\nstopped watching; {sweep} goes on", err=True)
            raise typer.Exit(130) from None
    if not last.all_succeeded:
        raise typer.Exit(1)


@commands.command("logs")
def logs_cmd(
    cell: Annotated[str, typer.Argument(
        help="A cell id (or a unique prefix of one).", autocompletion=cell_ids)],
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep printing new output until the cell ends.")] = False,
    registry: RegistryOption = None,
) -> None:
    """Print a cell's training log (all its attempts, appended); exit 1 if it has none."""
    from orchestrator.sweeps.cancelling import find_cell
    from orchestrator.sweeps.sweep import Sweep

    with stores_of(registry, None).open_registry(create=False) as reg:
        record = find_cell(reg, cell)  # the log is written as it is read, flushed each time
        Sweep(reg, record.sweep_name).write_log(record, out.log_writer(sys.stdout), follow)


@commands.command("cancel")
def cancel_cmd(
    target: Annotated[str, typer.Argument(
        help="A sweep name, or one cell's id.", autocompletion=sweeps_and_cells)],
    executor_option: ExecutorOptionsOption = None,
    ray_address: RayAddressOption = None,
    registry: RegistryOption = None,
) -> None:
    """Cancel a sweep's unfinished cells (or one cell) and stop their running jobs.

    Each job is stopped by the executor that runs it (from its job id), with the options
    the sweep remembers for it (a Ray cluster's address); --ray-address and -E override
    them, for the executors that take them.
    """
    from orchestrator.sweeps.cancelling import cancel
    from orchestrator.sweeps.executor_choice import parse_executor_options, ray_shortcut

    stores = stores_of(registry, None)
    stores.open_registry(create=False).close()  # no registry: nothing to cancel, none made
    cancelled = cancel(target, stores, options=parse_executor_options(executor_option or ()),
                       shortcuts=ray_shortcut(ray_address))
    typer.echo(f"cancelled {len(cancelled)} cell(s)"
               + (": " + ", ".join(c.cell_id for c in cancelled) if cancelled else ""))


@commands.command("resume")
@run_options
def resume_cmd(
    sweep: Annotated[str, typer.Argument(
        help="The sweep to finish.", autocompletion=sweep_names)],
    wait: Annotated[bool, typer.Option(
        "--wait", help="Run here and return when the sweep has ended.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
    log_events: Annotated[bool, typer.Option(
        "--log-events", hidden=True,  # what a background scheduler writes to its log
        help="A line on stderr for each launch, retry, stop and end.")] = False,
    *, run: RunOptions,
) -> None:
    """Finish SWEEP after a crash or a stop.

    Reattaches to jobs still running, relaunches cells whose job vanished (they continue
    from their last checkpoint in the same run folder) and runs the rest. Without --wait
    a background scheduler does it.
    """
    from orchestrator.sweeps.detached import (
        log_events_to_stderr,
        scheduler_log,
        start_background,
    )
    from orchestrator.sweeps.driver import resumable, resume
    from orchestrator.sweeps.executor_choice import choose_executor

    if log_events:
        log_events_to_stderr()
    stores = run.stores
    console = make_console()
    choice = run.choice()
    paths.check_name(sweep)
    with stores.open_registry(create=False) as reg:
        resumable(reg, sweep)  # an unknown or unfinished sweep fails here, in front of the user
    if not wait:
        chosen = choose_executor(sweep, choice, stores)  # so does a bad --executor / option
        start_background(sweep, stores, run.max_parallel, chosen)
        console.print(f"resuming {sweep} in the background (log: {scheduler_log(sweep)})")
        return
    with interruptible(sweep), sweep_progress(console, quiet) as options:
        resume(sweep, stores, max_parallel=run.max_parallel, options=options, choice=choice)
    if not quiet:
        _print_final(console, stores, sweep)


@commands.command("demo")
def demo_cmd(
    spec: Annotated[Path, typer.Argument(help="The spec to run.")] = DEFAULT_DEMO_SPEC,
    max_parallel: MaxParallelOption = None,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """The main job: run SPEC (the toy demo: GRPO and Dr.GRPO ± RB, 3 seeds) here, then
    show its results."""
    from orchestrator.cli.demo_report import print_demo_results
    from orchestrator.sweeps.staleness import rerun_command
    from orchestrator.sweeps.sweep import Sweep

    console = make_console()
    stores = stores_of(registry, mlflow)
    console.print(f"[bold]kappa demo[/]: submitting {spec} and waiting for every cell")
    result = submit_spec(console, spec, stores, wait=True, max_parallel=max_parallel)
    _print_stale(console, result, rerun_command(spec))
    with stores.open_registry() as reg:
        print_demo_results(console, Sweep.open(reg, result.sweep), stores)
