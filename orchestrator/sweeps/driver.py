"""Driving a sweep: :func:`submit` (validate everything, record, then drive here or in a
background scheduler) and :func:`resume` (reattach to running jobs, requeue vanished ones,
run the rest). The executor is remembered per sweep, so ``resume`` on any machine sharing
the registry keeps it; one other than the running jobs' is refused. Only the scheduler
holding the sweep's lease drives it; a second says who does, waits, then takes over.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.backends import Backend
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors import Executor, job_id_prefixes
from orchestrator.registry import CellRecord, CellState, Registry, SweepRecord
from orchestrator.scheduler.hooks import RunTracker, SchedulerHook
from orchestrator.scheduler.lease import SweepLockedError
from orchestrator.scheduler.loop import SweepScheduler
from orchestrator.scheduler.options import SchedulerOptions
from orchestrator.scheduler.order import LaunchOrder, check_fit, stored_demand
from orchestrator.sweeps.detached import start_background
from orchestrator.sweeps.executor_choice import (
    ExecutorChoice,
    choose_executor,
    remember_executor,
)
from orchestrator.sweeps.stores import Stores
from orchestrator.sweeps.submission import PreparedSweep, SubmitResult, prepare, record
from orchestrator.sweeps.sweep import Sweep

if TYPE_CHECKING:
    from orchestrator.grid.identity import Cell


def _check_running_jobs(registry: Registry, sweep: str, executor_name: str) -> None:
    """Refuse to drive ``sweep`` with an executor that cannot reattach its running jobs."""
    # Only the registered executors' prefixes: an embedding program's own executor may
    # hand out ids of its own, which only it can judge.
    foreign = sorted({name for c in registry.cells(sweep, [CellState.RUNNING]) if c.job_id
                      for prefix, name in job_id_prefixes().items()
                      if c.job_id.startswith(prefix)}
                     - {executor_name})
    if foreign:
        raise UserInputError(f"cells of {sweep} run as {', '.join(foreign)} jobs", [Problem(
            "executor", "the running cells' jobs belong to another executor",
            found=executor_name, allowed=", ".join(foreign),
            fix=f"`kappa resume {sweep} --executor {foreign[0]}` (with its options)")])


def notify_instead(url: str | None, env: str | None = None) -> AbstractContextManager[None]:
    """Within the block, the sweeps recorded post their notifications to ``url``, or to the
    URL in the environment variable ``env`` (checked now: a bad one is exit 2, nothing
    written), instead of their spec's ``notify:`` URL."""
    from orchestrator.notify.store import command_line_url, environment_url

    if env is None:
        return command_line_url(url)
    if url is not None:
        raise UserInputError("--notify and --notify-env: one URL, please", [Problem(
            "--notify-env", "given with --notify", fix="keep --notify-env (the URL stays off "
            "the command line) and drop --notify")])
    return command_line_url(environment_url(env), "--notify-env")


def submit(
    spec_path: str | Path | PreparedSweep,
    stores: Stores = Stores(),
    rerun: bool = False,
    wait: bool = False,
    max_parallel: int | None = None,
    options: SchedulerOptions | None = None,
    executor: Executor | None = None,
    choice: ExecutorChoice | None = None,
    rerun_stale: bool = False,
) -> SubmitResult:
    """Validate ``spec_path`` (or a sweep :func:`prepare` made) entirely, record the
    sweep, then run it (here or detached). ``choice`` (default: the sweep's last executor,
    else local) is checked, and a ray_jobs cluster reached, before anything is written;
    ``executor`` overrides it. ``rerun``, ``rerun_stale``: see :func:`record`."""
    from orchestrator.notify.store import effective, save_config
    from orchestrator.tracking import Tracker

    prepared = spec_path if isinstance(spec_path, PreparedSweep) else prepare(spec_path)
    chosen = choose_executor(prepared.name, choice, stores) if executor is None else None
    if chosen is not None and (wait or chosen.name != "local"):
        executor = chosen.make(max_parallel)  # an unreachable cluster fails here
    check_fit(prepared.demands.items(),
              executor if executor is not None else ExecutorChoice().make(max_parallel),
              prepared.spec.resources)
    notify = effective(prepared.spec.notify)  # an unset ${NAME}: refused, nothing written
    with stores.open_registry() as registry:
        result = record(prepared, registry, Tracker(stores.mlflow_uri), rerun=rerun,
                        rerun_stale=rerun_stale)
        if chosen is not None:
            remember_executor(result.sweep, chosen, registry)
    save_config(result.sweep, notify)  # the latest submit decides what is notified
    if wait:
        resume(result.sweep, stores, max_parallel=max_parallel, options=options,
               executor=executor)
    else:
        start_background(result.sweep, stores, max_parallel, chosen)
    return result


def resume(
    sweep: str,
    stores: Stores = Stores(),
    max_parallel: int | None = None,
    options: SchedulerOptions | None = None,
    executor: Executor | None = None,
    choice: ExecutorChoice | None = None,
) -> dict[CellState, int]:
    """Drive ``sweep`` until no cell is unfinished; the final state counts. The executor
    is ``executor``, else ``choice`` completed by :func:`choose_executor`. If another
    scheduler drives the sweep, waits for it, then takes over whatever it left."""
    from orchestrator.backends import get_backend
    from orchestrator.scheduler.mlflow_runs import MlflowRunTracker

    opts = options or SchedulerOptions()
    if max_parallel is not None:
        opts.max_parallel = max_parallel
    with stores.open_registry() as registry:
        record_ = resumable(registry, sweep)
        backend = get_backend(record_.backend)
        tracker = MlflowRunTracker(stores.mlflow_uri)
        if executor is None:
            chosen = choose_executor(sweep, choice, registry)
            _check_running_jobs(registry, sweep, chosen.name or "local")
            executor = chosen.make(opts.max_parallel)
            remember_executor(sweep, chosen, registry)
        elif executor.name in job_id_prefixes().values():  # a custom one judges its own
            _check_running_jobs(registry, sweep, executor.name)
        scheduler = build_scheduler(registry, record_, backend, executor, tracker, opts,
                                    publish_to=stores)
        check_fit(((c.cell_id, stored_demand(c)) for c in
                   registry.cells(sweep, [CellState.PENDING, CellState.QUEUED])),
                  executor, scheduler.resources)
        waiting_for: str | None = None
        while True:
            try:
                return scheduler.run()
            except SweepLockedError as exc:
                if not _work_left(registry, sweep):  # the holder did it all: nothing to wait for
                    return registry.counts(sweep)
                holder = exc.holder.owner if exc.holder is not None else None
                if holder != waiting_for:  # say once per holder who drives it
                    waiting_for = holder
                    print(f"kappa: {exc}; this one waits, and takes over when that "
                          "scheduler ends or its lease expires", file=sys.stderr)
                if opts.on_tick is not None:
                    opts.on_tick(registry, sweep)
                time.sleep(max(opts.poll_interval, 0.5))
                # The holder may have finished while this one slept: taking over a sweep
                # with nothing left would reopen runs another machine's store may hold.
                if not _work_left(registry, sweep):
                    return registry.counts(sweep)
                # The sweep as it is when this one takes over (a resubmit may change it).
                scheduler = build_scheduler(registry, registry.get_sweep(sweep), backend,
                                            executor, tracker, opts, publish_to=stores)


def _work_left(registry: Registry, sweep: str) -> bool:
    """Whether ``sweep`` has work left as it stands now (its record read afresh: a resubmit
    may have changed it), trials of a search not yet started included."""
    handle = Sweep(registry, sweep)
    try:
        return handle.active_status().work_left
    finally:
        handle.close()


def resumable(registry: Registry, sweep: str) -> SweepRecord:
    """``sweep``'s record if it can be resumed; an unknown sweep, an unreadable plan, or a
    grid recorded without its cells is a ``UserInputError`` (before anything is written)."""
    from orchestrator.grid.plan import stored_plan

    record_ = registry.get_sweep(sweep)  # an unknown sweep: the error lists the known ones
    plan = stored_plan(sweep, record_.plan)
    if plan.search is None and plan.cell_count and not registry.cell_keys(sweep):
        # A submit killed between recording the sweep and its cells (one transaction
        # each): resuming would run nothing and call the sweep done.
        raise UserInputError(f"sweep {sweep} was recorded without its cells", [Problem(
            "sweep", f"its submit was cut short before its {plan.cell_count} cells were "
                     "recorded", found=sweep,
            fix="submit its spec again (`kappa submit SPEC`): it records the cells")])
    return record_


def build_scheduler(registry: Registry, sweep: SweepRecord, backend: Backend,
                    executor: Executor, tracker: RunTracker,
                    options: SchedulerOptions | None = None,
                    order: LaunchOrder | None = None,
                    publish_to: Stores | None = None) -> SweepScheduler:
    """The loop for ``sweep`` with the hooks its stored plan asks for (an unreadable one:
    ``UserInputError``): stopping rules and GPU-hours cap (always: a pruner's stop ends
    through them), its search or seeds on demand, the notifications its latest submit
    recorded; ``resources`` size each job. ``publish_to``: the stores whose MLflow parent
    run gets the sweep's tables, report and deltas when it ends, unless
    ``KAPPA_MLFLOW_SUMMARY=0`` (:mod:`orchestrator.analysis.mlflow_summary`)."""
    from orchestrator.analysis.mlflow_summary import PublishHook, summary_on
    from orchestrator.grid.plan import stored_plan
    from orchestrator.notify.hook import NotifyHook
    from orchestrator.search.hook import SearchHook
    from orchestrator.stopping.hook import SweepStopping
    from orchestrator.sweeps.seed_hook import SeedsHook

    plan = stored_plan(sweep.name, sweep.plan)
    stopping = SweepStopping.of(plan, backend)
    hooks: list[SchedulerHook] = [stopping]

    def record(reg: Registry, cells: Sequence[Cell], demands: Mapping[str, Any],
               retries: int) -> list[CellRecord]:
        return Sweep(reg, sweep.name).record_cells(cells, demands, retries)

    if plan.search is not None:
        hooks.append(SearchHook(sweep.name, plan, backend, record))
    if plan.seeds is not None:
        hooks.append(SeedsHook(sweep.name, plan, backend, record))
    # What its latest submit asked; the end message reports the sweep's complete status.
    notify = NotifyHook.of(sweep.name, lambda reg: Sweep(reg, sweep.name).status())
    if notify is not None:
        hooks.append(notify)
    if publish_to is not None and summary_on():
        hooks.append(PublishHook(sweep.name, publish_to.registry_url, publish_to.mlflow_uri))
    return SweepScheduler(registry, sweep.name, backend, executor, tracker,
                          options or SchedulerOptions(), order=order, hooks=hooks,
                          resources=stopping.resources)
