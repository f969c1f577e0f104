"""The scheduler's entry points: submit, resume, and the background scheduler (cancel:
:mod:`.cancelling`; the executor choice: :mod:`.executor_choice`; the stores:
:mod:`.stores`; all importable from here too).

* :func:`submit` validates the spec and all its cells before writing anything, records
  the sweep (see :mod:`.submission`), then drives it here (``wait=True``) or starts a
  detached background scheduler (logging to ``<KAPPA_HOME>/scheduler/<sweep>.log``).
* :func:`resume` drives an existing sweep to the end: after a crash it reattaches to
  running jobs and requeues the ones that vanished (see :mod:`.loop`).
* :func:`cancel` marks a sweep's (or one cell's) unfinished cells ``cancelled`` and stops
  their jobs; a scheduler driving the sweep notices on its next pass.

The executor a sweep runs on (:class:`ExecutorChoice`: a registered executor's name and
its options) is remembered per sweep in the registry (:mod:`.executor_memory`, passwords
masked), so ``resume`` on any machine sharing it keeps using it; ``cancel`` picks the
executor of each job from its id's prefix. Resuming with an executor other than the one
running cells' jobs belong to is refused, never silently requeued elsewhere.

Only one scheduler drives a sweep at a time, on any machine: the one holding the sweep's
lease in the registry (:mod:`.lease`); a second one says who drives it and waits for it
to finish, or for its lease to expire, then takes over.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator import paths
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors import OPTIONS_ENV, Executor, job_id_prefixes
from orchestrator.registry import CellState, Registry
from orchestrator.scheduler.cancelling import cancel, find_cell
from orchestrator.scheduler.cells import UNFINISHED
from orchestrator.scheduler.executor_choice import (
    ExecutorChoice,
    choose_executor,
    remember_executor,
    remembered_executor,
)
from orchestrator.scheduler.fit import check_fit
from orchestrator.scheduler.lease import SweepLockedError, is_driven
from orchestrator.scheduler.loop import SchedulerOptions, SweepScheduler
from orchestrator.scheduler.stores import Stores
from orchestrator.scheduler.submission import SubmitResult, prepare, record


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


def submit(
    spec_path: str | Path,
    stores: Stores = Stores(),
    rerun: bool = False,
    wait: bool = False,
    max_parallel: int | None = None,
    options: SchedulerOptions | None = None,
    executor: Executor | None = None,
    choice: ExecutorChoice | None = None,
) -> SubmitResult:
    """Validate ``spec_path`` entirely, record the sweep, then run it (here or detached).

    ``choice`` (default: the sweep's last executor, else local) is checked, and a
    ray_jobs cluster reached, before anything is written; ``executor`` overrides it.
    """
    from orchestrator.tracking import Tracker

    prepared = prepare(spec_path)  # raises UserInputError before anything is written
    chosen = choose_executor(prepared.name, choice, stores) if executor is None else None
    if chosen is not None and (wait or chosen.name != "local"):
        executor = chosen.make(max_parallel)  # an unreachable cluster fails here
    check_fit(prepared.backend, ((c.cell_id, c.settings) for c in prepared.cells),
              executor if executor is not None else ExecutorChoice().make(max_parallel),
              prepared.spec.resources)
    with stores.open_registry() as registry:
        result = record(prepared, registry, Tracker(stores.mlflow_uri), rerun=rerun)
        if chosen is not None:
            remember_executor(result.sweep, chosen, registry)
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
    """Drive ``sweep`` until no cell is unfinished; returns the final state counts.

    The executor is ``executor``, else ``choice`` completed by :func:`choose_executor`.
    If another scheduler drives the sweep, waits for it, then takes over whatever it
    left (e.g. cells submitted after it decided to stop).
    """
    from orchestrator.backends import get_backend
    from orchestrator.scheduler.mlflow_runs import MlflowRunTracker
    from orchestrator.spec.stopping import stored_stopping

    opts = options or SchedulerOptions()
    if max_parallel is not None:
        opts.max_parallel = max_parallel
    with stores.open_registry() as registry:
        record_ = registry.get_sweep(sweep)  # unknown sweep: UserInputError listing known ones
        backend = get_backend(record_.backend)
        tracker = MlflowRunTracker(stores.mlflow_uri)
        if executor is None:
            chosen = choose_executor(sweep, choice, registry)
            _check_running_jobs(registry, sweep, chosen.name or "local")
            executor = chosen.make(opts.max_parallel)
            remember_executor(sweep, chosen, registry)
        elif executor.name in job_id_prefixes().values():  # a custom one judges its own
            _check_running_jobs(registry, sweep, executor.name)
        check_fit(backend, ((c.cell_id, c.settings) for c in
                            registry.cells(sweep, [CellState.PENDING, CellState.QUEUED])),
                  executor, stored_stopping(record_.spec_text)[1])
        scheduler = SweepScheduler(registry, sweep, backend, executor, tracker, opts)
        waiting_for: str | None = None
        while True:
            try:
                return scheduler.run()
            except SweepLockedError as exc:
                if not registry.cells(sweep, UNFINISHED):
                    return registry.counts(sweep)
                holder = exc.holder.owner if exc.holder is not None else None
                if holder != waiting_for:  # say once per holder who drives it
                    waiting_for = holder
                    print(f"kappa: {exc}; this one waits, and takes over when that "
                          "scheduler ends or its lease expires", file=sys.stderr)
                if opts.on_tick is not None:
                    opts.on_tick(registry, sweep)
                time.sleep(max(opts.poll_interval, 0.5))


def scheduler_log(sweep: str) -> Path:
    """Where a background scheduler of ``sweep`` writes its output."""
    return paths.kappa_home() / "scheduler" / f"{sweep}.log"


def kappa_command() -> list[str]:
    """How to run ``kappa`` from here: ``KAPPA_CLI`` (split like a shell would), else
    ``python -m orchestrator`` with this interpreter. (``KAPPA_CLI`` lets a wrapper that
    registers extra backends start background schedulers that know them too.)"""
    custom = os.environ.get("KAPPA_CLI")
    if custom:
        return shlex.split(custom)
    return [sys.executable, "-m", "orchestrator"]


def start_background(sweep: str, stores: Stores = Stores(),
                     max_parallel: int | None = None,
                     choice: ExecutorChoice | None = None) -> int:
    """Start ``kappa resume SWEEP --wait`` detached from this process; its pid.

    The command comes from :func:`kappa_command`; it waits for (or takes over from) any
    scheduler already driving the sweep, on the executor ``choice``. URLs and options
    (the stores', an executor's, any of which may carry a password) go through its
    environment (:meth:`Stores.env`, :meth:`ExecutorChoice.env`), never its command
    line, which ``ps`` shows.
    """
    log = scheduler_log(paths.check_name(sweep))
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [*kappa_command(), "resume", sweep, "--wait", "--quiet"]
    env = {**os.environ, "KAPPA_HOME": str(paths.kappa_home()), **stores.env()}
    env.pop(OPTIONS_ENV, None)  # only this choice's options, never inherited ones
    if max_parallel is not None:
        argv += ["--max-parallel", str(max_parallel)]
    if choice is not None:
        argv += choice.cli_args()
        env.update(choice.env())
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)
    return proc.pid


ProgressCallback = Callable[[Registry, str], None]
__all__ = ["ExecutorChoice", "ProgressCallback", "Stores", "cancel",
           "choose_executor", "find_cell", "is_driven", "remember_executor",
           "remembered_executor", "resume", "scheduler_log", "start_background", "submit"]
