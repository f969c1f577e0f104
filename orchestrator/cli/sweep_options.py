"""The options and helpers the sweep commands share (submit, resume, cancel, canary,
search, smoke, doctor): where the stores are, which executor, progress, Ctrl-C."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_type_hints

import typer

from orchestrator.cli.completions import values
from orchestrator.cli.executors_cmd import executor_names
from orchestrator.limits import MAX_PARALLEL

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.cli.sweep_views import LineProgress, LiveProgress
    from orchestrator.sweeps.executor_choice import ExecutorChoice
    from orchestrator.sweeps.status import SweepStatus
    from orchestrator.sweeps.stores import Stores
    from orchestrator.sweeps.submission import PreparedSweep, SubmitResult
    from orchestrator.sweeps.sweep import SchedulerOptions


OverridesArgument = Annotated[list[str] | None, typer.Argument(
    metavar="OVERRIDE", show_default=False,
    help="Changes to the spec in Hydra's override grammar, applied before it is checked: "
         "key=value, +key=value (add), ++key=value (set or add), ~key (delete); e.g. "
         "base.max_steps=20 'axes.seed=[0,1,2]' ~exclude name=quick-check (docs/cli.md).")]
RegistryOption = Annotated[str | None, typer.Option(
    "--registry", metavar="URL",
    help="Registry database URL (default: KAPPA_REGISTRY, else .kappa/registry.db).")]
MlflowOption = Annotated[str | None, typer.Option(
    "--mlflow", metavar="URI",
    help="MLflow tracking URI (default: KAPPA_MLFLOW_URI, else .kappa/mlflow.db).")]
MaxParallelOption = Annotated[int | None, typer.Option(
    "--max-parallel", min=1, max=MAX_PARALLEL, metavar="N",
    help="Cells running at once (default: one per CPU core, or per GPU).")]
ExecutorOption = Annotated[str | None, typer.Option(
    "--executor", metavar="NAME",
    help="Where cells run: local, ray_jobs or an installed plug-in (`kappa executors` "
         "lists them and their options; default: what the sweep used last, else local). "
         "Remembered, with its options, for the sweep's later resume and cancel.",
    autocompletion=values(executor_names))]
ExecutorOptionsOption = Annotated[list[str] | None, typer.Option(
    "--executor-option", "-E", metavar="KEY=VALUE",
    help="An option of the executor (repeatable), e.g. -E max_parallel=4; a list or "
         "mapping as JSON. `kappa executors` lists each executor's options.")]
RayAddressOption = Annotated[str | None, typer.Option(
    "--ray-address", metavar="URL", envvar="RAY_ADDRESS",
    help="Ray dashboard (Jobs API) address for --executor ray_jobs, e.g. "
         "http://head:8265 (default: RAY_ADDRESS, else the sweep's last one); short for "
         "-E address=URL.")]


def stores_of(registry: str | None, mlflow: str | None) -> Stores:
    from orchestrator.sweeps.stores import Stores

    return Stores(registry_url=registry, mlflow_uri=mlflow)


@dataclass(frozen=True)
class RunOptions:
    """The options of the commands that run a sweep's cells (submit, resume, canary,
    search), last in each, in this order: :func:`run_options` declares them."""

    max_parallel: MaxParallelOption = None
    executor: ExecutorOption = None
    executor_option: ExecutorOptionsOption = None
    ray_address: RayAddressOption = None
    registry: RegistryOption = None
    mlflow: MlflowOption = None

    @property
    def stores(self) -> Stores:
        """The registry and MLflow store asked for."""
        return stores_of(self.registry, self.mlflow)

    def choice(self) -> ExecutorChoice:
        """The executor asked for: ``--executor``, ``-E`` (malformed: exit 2) and
        ``--ray-address``."""
        from orchestrator.sweeps.executor_choice import (
            ExecutorChoice,
            parse_executor_options,
            ray_shortcut,
        )

        return ExecutorChoice(self.executor, parse_executor_options(self.executor_option or ()),
                              ray_shortcut(self.ray_address))


def run_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command``, whose last parameter is ``run: RunOptions``, as a typer command that
    takes the fields of :class:`RunOptions` as options instead."""
    hints = get_type_hints(RunOptions, include_extras=True)
    shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                annotation=hint) for name, hint in hints.items()]
    own = [*inspect.signature(command, eval_str=True).parameters.values()][:-1]

    @functools.wraps(command)
    def with_run_options(**given: Any) -> None:
        run = RunOptions(**{name: given.pop(name) for name in hints})
        command(**given, run=run)

    # typer reads the parameters from the signature, their types from the annotations.
    with_run_options.__signature__ = inspect.Signature([*own, *shared])  # type: ignore[attr-defined]
    with_run_options.__annotations__ = {p.name: p.annotation for p in [*own, *shared]}
    return with_run_options


@contextmanager
def interruptible(sweep: str | Callable[[], str]) -> Iterator[None]:
    """Ctrl-C stops the scheduler, not the jobs: say how to resume or cancel ``sweep``
    (its name, or how to find it once the spec is read)."""
    try:
        yield
    except KeyboardInterrupt:
        what = sweep if isinstance(sweep, str) else sweep()
        typer.echo(f"\nscheduler stopped; running cells keep running. `kappa resume {what}` "
                   f"picks them up, `kappa cancel {what}` stops them.", err=True)
        raise typer.Exit(130) from None


@contextmanager
def sweep_progress(console: Console, quiet: bool = False) -> Iterator[SchedulerOptions | None]:
    """Scheduler options whose tick shows progress (``None`` when ``quiet``)."""
    if quiet:
        yield None
        return
    from orchestrator.cli.sweep_views import progress_display
    from orchestrator.sweeps.sweep import progress_ticks

    # Made on the first tick: errors before it (a bad spec, an unreachable cluster) leave
    # no empty bar behind.
    shown: list[LiveProgress | LineProgress] = []

    def show(status: SweepStatus) -> None:
        if not shown:
            shown.append(progress_display(console))
        shown[0].update(status)

    try:
        with progress_ticks(show) as options:
            yield options
    finally:
        for display in shown:
            display.close()


def submit_spec(console: Console, spec: Path | PreparedSweep, stores: Stores,
                quiet: bool = False, vet: Callable[[PreparedSweep], None] | None = None,
                rerun: bool = False, wait: bool = False, max_parallel: int | None = None,
                choice: ExecutorChoice | None = None,
                overrides: Sequence[str] = (), rerun_stale: bool = False) -> SubmitResult:
    """Submit ``spec`` (a path, with command-line ``overrides``, or the sweep prepared from
    it) with progress and Ctrl-C handled; ``vet`` may refuse the prepared sweep. A bad spec
    or override is exit 2, nothing written."""
    from orchestrator.sweeps.driver import submit
    from orchestrator.sweeps.submission import PreparedSweep, prepare

    prepared: PreparedSweep | None = None
    with (interruptible(lambda: prepared.name if prepared else "SWEEP"),
          sweep_progress(console, quiet) as options):
        prepared = spec if isinstance(spec, PreparedSweep) else prepare(
            spec, overrides=overrides)
        if vet is not None:
            vet(prepared)
        return submit(prepared, stores, rerun=rerun, wait=wait, max_parallel=max_parallel,
                      options=options, choice=choice, rerun_stale=rerun_stale)
