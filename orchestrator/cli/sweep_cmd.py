"""``kappa submit | status | logs | cancel | resume | demo``: running sweeps.

Heavy imports (SQLAlchemy, MLflow, rich tables) happen inside the commands.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.cli.sweep_views import LineProgress, LiveProgress
    from orchestrator.registry import Registry
    from orchestrator.scheduler.driver import ExecutorChoice, Stores
    from orchestrator.scheduler.loop import SchedulerOptions

RegistryOption = Annotated[str | None, typer.Option(
    "--registry", metavar="URL",
    help="Registry database URL (default: KAPPA_REGISTRY, else .kappa/registry.db).")]
MlflowOption = Annotated[str | None, typer.Option(
    "--mlflow", metavar="URI",
    help="MLflow tracking URI (default: KAPPA_MLFLOW_URI, else .kappa/mlflow.db).")]
MaxParallelOption = Annotated[int | None, typer.Option(
    "--max-parallel", min=1, metavar="N",
    help="Cells running at once (default: one per CPU core, or per GPU).")]
ExecutorOption = Annotated[str | None, typer.Option(
    "--executor", metavar="NAME",
    help="Where cells run: local, ray_jobs or an installed plug-in (`kappa executors` "
         "lists them and their options; default: what the sweep used last, else local). "
         "Remembered, with its options, for the sweep's later resume and cancel.")]
ExecutorOptionsOption = Annotated[list[str] | None, typer.Option(
    "--executor-option", "-E", metavar="KEY=VALUE",
    help="An option of the executor (repeatable), e.g. -E max_parallel=4; a list or "
         "mapping as JSON. `kappa executors` lists each executor's options.")]
RayAddressOption = Annotated[str | None, typer.Option(
    "--ray-address", metavar="URL", envvar="RAY_ADDRESS",
    help="Ray dashboard (Jobs API) address for --executor ray_jobs, e.g. "
         "http://head:8265 (default: RAY_ADDRESS, else the sweep's last one); short for "
         "-E address=URL.")]
DEFAULT_DEMO_SPEC = Path("experiments/toy/table2.yaml")


def stores_of(registry: str | None, mlflow: str | None) -> Stores:
    from orchestrator.scheduler.driver import Stores

    return Stores(registry_url=registry, mlflow_uri=mlflow)


@contextmanager
def interruptible(what: str) -> Iterator[None]:
    """Ctrl-C stops the scheduler, not the jobs: say how to pick them up or stop them."""
    try:
        yield
    except KeyboardInterrupt:
        typer.echo(f"\nscheduler stopped; running cells keep running. `kappa resume {what}` "
                   f"picks them up, `kappa cancel {what}` stops them.", err=True)
        raise typer.Exit(130) from None


def spec_name(spec: Path) -> str:
    """The sweep name a spec declares (for messages), or ``SWEEP`` if unreadable.

    Read with the bounded reader: this runs before the spec is validated, so it must
    not hang or crash on what validation will refuse (an alias bomb, a huge file).
    """
    from orchestrator.errors import UserInputError
    from orchestrator.spec.yaml_limits import read_yaml_file
    from orchestrator.spec.yaml_source import load_yaml

    try:
        data = load_yaml(read_yaml_file(spec), str(spec)).data
    except UserInputError:
        return "SWEEP"
    name = data.get("name") if isinstance(data, dict) else None
    return str(name) if isinstance(name, str) and name else "SWEEP"


@contextmanager
def sweep_progress(console: Console, quiet: bool = False) -> Iterator[SchedulerOptions | None]:
    """Scheduler options whose tick shows progress: live bars on a terminal, a line per
    change (or per 30 s) in a log; ``None`` (no output) when ``quiet``."""
    if quiet:
        yield None
        return
    from orchestrator.cli.sweep_views import progress_display
    from orchestrator.registry import CellState
    from orchestrator.scheduler.loop import SchedulerOptions

    shown: list[LiveProgress | LineProgress] = []  # made on the first tick: errors before
    # it (a bad spec, an unreachable cluster) leave no empty bar behind

    def tick(registry: Registry, sweep: str) -> None:
        if not shown:
            shown.append(progress_display(console))
        shown[0].update(registry.counts(sweep), registry.cells(sweep, [CellState.RUNNING]))

    try:
        yield SchedulerOptions(on_tick=tick)
    finally:
        for display in shown:
            display.close()


def executor_choice(executor: str | None, ray_address: str | None,
                    executor_option: list[str] | None = None) -> ExecutorChoice:
    """The executor the command line asks for: ``--executor``, its ``-E KEY=VALUE``
    options (over those a parent scheduler handed over in ``KAPPA_EXECUTOR_OPTIONS``)
    and the ``--ray-address`` shortcut, which only the ray_jobs executor gets."""
    from orchestrator.cli.executor_options import parse_executor_options
    from orchestrator.scheduler.driver import ExecutorChoice

    options = parse_executor_options(executor_option or ())
    return ExecutorChoice(executor, options, ray_shortcut(ray_address))


def ray_shortcut(ray_address: str | None) -> dict[str, dict[str, Any]]:
    """``--ray-address`` (or ``RAY_ADDRESS``) as a shortcut of the ray_jobs executor only:
    another executor with an ``address`` option must never get the Ray cluster's URL."""
    return {"ray_jobs": {"address": ray_address}}


def submit_cmd(
    spec: Annotated[Path, typer.Argument(help="The experiment spec (YAML).")],
    wait: Annotated[bool, typer.Option(
        "--wait", help="Run the sweep here and return when it has ended.")] = False,
    rerun: Annotated[bool, typer.Option(
        "--rerun", help="Run succeeded cells again too (in fresh run folders).")] = False,
    canary: Annotated[bool, typer.Option(
        "--canary", help="First run every distinct cell configuration for a few steps "
                         "(`kappa canary`), here; submit only if all passed (else exit 2)."
                         )] = False,
    max_parallel: MaxParallelOption = None,
    executor: ExecutorOption = None,
    executor_option: ExecutorOptionsOption = None,
    ray_address: RayAddressOption = None,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """Submit SPEC: validate it and every cell, record the sweep, and run it.

    Resubmitting adds only new cells and retries failed or cancelled ones; succeeded cells
    never run again unless --rerun. Without --wait a background scheduler runs the sweep
    (log: .kappa/scheduler/<sweep>.log) and this returns at once; follow it with
    `kappa status SWEEP`. With --canary the canaries run first, in the foreground.
    Cells run on --executor (`kappa executors` lists those installed and their -E options).
    """
    from orchestrator.cli.console import make_console
    from orchestrator.scheduler.driver import scheduler_log, submit

    console = make_console()
    choice = executor_choice(executor, ray_address, executor_option)
    if canary:
        from orchestrator.cli.canary_cmd import EXIT_CANARY_FAILED, run_and_report

        outcome = run_and_report(console, spec, stores_of(registry, mlflow), choice,
                                 max_parallel, rerun)
        if not outcome.passed:
            console.print(f"the grid of {outcome.plan.grid.name} was not submitted")
            raise typer.Exit(EXIT_CANARY_FAILED)
    with interruptible(spec_name(spec)), sweep_progress(console, quiet=not wait) as options:
        result = submit(spec, stores_of(registry, mlflow), rerun=rerun, wait=wait,
                        max_parallel=max_parallel, options=options, choice=choice)
    console.print(f"sweep [bold]{result.sweep}[/]: {result.total_cells} cells, "
                  f"{result.new_cells} new, {result.requeued_cells} requeued")
    if wait:
        _print_final(console, stores_of(registry, mlflow), result.sweep)
    else:
        console.print(f"running in the background (log: {scheduler_log(result.sweep)}); "
                      f"`kappa status {result.sweep}` shows progress")


def _print_final(console: Console, stores: Stores, sweep: str) -> None:
    from orchestrator.cli.sweep_views import print_sweep

    with stores.open_registry() as reg:
        print_sweep(console, reg, reg.get_sweep(sweep), None)
        failed = reg.counts(sweep)
    from orchestrator.registry import CellState

    if failed[CellState.FAILED] or failed[CellState.CANCELLED]:
        raise typer.Exit(1)


def status_cmd(
    sweep: Annotated[str | None, typer.Argument(help="A sweep name (default: list sweeps).")
                     ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    registry: RegistryOption = None,
) -> None:
    """Show sweeps, or one sweep's state counts and cells (progress, attempts, val acc)."""
    from orchestrator.cli.console import make_console
    from orchestrator.cli.sweep_views import print_sweep, sweep_json, sweeps_table
    from orchestrator.paths import check_name

    if sweep is not None:
        check_name(sweep)
    with stores_of(registry, None).open_registry(create=False) as reg:
        if sweep is None:
            if as_json:
                typer.echo(json.dumps([sweep_json(reg, s, reg.lease(s.name))
                                       for s in reg.list_sweeps()], indent=2, default=str))
            else:
                make_console().print(sweeps_table(reg))
            return
        record = reg.get_sweep(sweep)
        if as_json:
            typer.echo(json.dumps(sweep_json(reg, record, reg.lease(sweep)), indent=2,
                                  default=str))
        else:
            print_sweep(make_console(), reg, record, reg.lease(sweep))


def logs_cmd(
    cell: Annotated[str, typer.Argument(help="A cell id (or a unique prefix of one).")],
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep printing new output until the cell ends.")] = False,
    registry: RegistryOption = None,
) -> None:
    """Print a cell's training log (all its attempts, appended)."""
    from orchestrator.registry import TERMINAL_STATES
    from orchestrator.scheduler.driver import find_cell
    from orchestrator.scheduler.loop import LOG_NAME, cell_run_dir

    with stores_of(registry, None).open_registry(create=False) as reg:
        record = find_cell(reg, cell)
        path = cell_run_dir(record) / LOG_NAME
        offset = 0
        while True:
            if path.exists():
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                offset += len(chunk)
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()
            if not follow:
                if not path.exists():
                    typer.echo(f"(no log yet at {path}; cell is {record.state.value})", err=True)
                return
            if reg.get_cell(record.sweep_name, record.cell_id).state in TERMINAL_STATES:
                return
            time.sleep(0.5)


def cancel_cmd(
    target: Annotated[str, typer.Argument(help="A sweep name, or one cell's id.")],
    executor_option: ExecutorOptionsOption = None,
    ray_address: RayAddressOption = None,
    registry: RegistryOption = None,
) -> None:
    """Cancel a sweep's unfinished cells (or one cell) and stop their running jobs.

    Each job is stopped by the executor that runs it (from its job id), with the options
    the sweep remembers for it (a Ray cluster's address); --ray-address and -E override
    them, for the executors that take them.
    """
    from orchestrator.cli.executor_options import parse_executor_options
    from orchestrator.scheduler.driver import cancel

    stores = stores_of(registry, None)
    stores.open_registry(create=False).close()  # no registry: nothing to cancel, none made
    cancelled = cancel(target, stores, options=parse_executor_options(executor_option or ()),
                       shortcuts=ray_shortcut(ray_address))
    typer.echo(f"cancelled {len(cancelled)} cell(s)"
               + (": " + ", ".join(c.cell_id for c in cancelled) if cancelled else ""))


def resume_cmd(
    sweep: Annotated[str, typer.Argument(help="The sweep to finish.")],
    wait: Annotated[bool, typer.Option(
        "--wait", help="Run here and return when the sweep has ended.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
    max_parallel: MaxParallelOption = None,
    executor: ExecutorOption = None,
    executor_option: ExecutorOptionsOption = None,
    ray_address: RayAddressOption = None,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """Finish SWEEP after a crash or a stop.

    Reattaches to jobs still running, relaunches cells whose job vanished (they continue
    from their last checkpoint in the same run folder) and runs the rest. Without --wait
    a background scheduler does it.
    """
    from orchestrator.cli.console import make_console
    from orchestrator.paths import check_name
    from orchestrator.scheduler.driver import (
        choose_executor,
        resume,
        scheduler_log,
        start_background,
    )

    stores = stores_of(registry, mlflow)
    console = make_console()
    choice = executor_choice(executor, ray_address, executor_option)
    check_name(sweep)
    with stores.open_registry(create=False) as reg:
        reg.get_sweep(sweep)  # an unknown sweep fails here (and in front of the user)
    if not wait:
        chosen = choose_executor(sweep, choice, stores)  # so does a bad --executor / option
        start_background(sweep, stores, max_parallel, chosen)
        console.print(f"resuming {sweep} in the background (log: {scheduler_log(sweep)})")
        return
    with interruptible(sweep), sweep_progress(console, quiet) as options:
        resume(sweep, stores, max_parallel=max_parallel, options=options, choice=choice)
    if not quiet:
        _print_final(console, stores, sweep)


def demo_cmd(
    spec: Annotated[Path, typer.Argument(help="The spec to run.")] = DEFAULT_DEMO_SPEC,
    max_parallel: MaxParallelOption = None,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """The main job: run SPEC (the toy Table 2 sweep) here, then show its results."""
    from orchestrator.cli.console import make_console
    from orchestrator.cli.demo_report import print_demo_results
    from orchestrator.scheduler.driver import submit

    console = make_console()
    stores = stores_of(registry, mlflow)
    console.print(f"[bold]kappa demo[/]: submitting {spec} and waiting for every cell")
    with interruptible(spec_name(spec)), sweep_progress(console) as options:
        result = submit(spec, stores, wait=True, max_parallel=max_parallel, options=options)
    with stores.open_registry() as reg:
        print_demo_results(console, reg, result.sweep, stores)


def register(app: typer.Typer) -> None:
    """Add the sweep commands to the ``kappa`` app."""
    app.command("submit")(submit_cmd)
    app.command("status")(status_cmd)
    app.command("logs")(logs_cmd)
    app.command("cancel")(cancel_cmd)
    app.command("resume")(resume_cmd)
    app.command("demo")(demo_cmd)
