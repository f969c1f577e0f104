"""The scheduler's entry points: submit, resume, cancel, and the background scheduler.

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

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors import (
    OPTIONS_ENV,
    Executor,
    executor_name_for_job,
    executor_options,
    get_executor,
    job_id_prefixes,
    validate_options,
)
from orchestrator.registry import TERMINAL_STATES, CellRecord, CellState, Registry
from orchestrator.scheduler.cells import UNFINISHED
from orchestrator.scheduler.fit import check_fit
from orchestrator.scheduler.lease import SweepLockedError, holder_alive
from orchestrator.scheduler.loop import SchedulerOptions, SweepScheduler
from orchestrator.scheduler.submission import SubmitResult, prepare, record

_CANCEL_TRIES = 20


@dataclass(frozen=True)
class Stores:
    """Where a sweep's state lives: registry URL and MLflow URI (None: the defaults)."""

    registry_url: str | None = None
    mlflow_uri: str | None = None

    def open_registry(self, create: bool = True) -> Registry:
        """Open the registry: created on first use, or (``create=False``, for commands
        that only read) refused with the fix when it does not exist yet."""
        return Registry.open(self.registry_url, create=create)

    def env(self) -> dict[str, str]:
        """The same stores as ``KAPPA_REGISTRY``/``KAPPA_MLFLOW_URI``, for a process
        started from here. Never as options: a URL's password would be on its command
        line, which every user of the machine can read (``ps``, ``/proc/PID/cmdline``)."""
        from orchestrator.tracking import absolute_uri

        return {"KAPPA_REGISTRY": paths.registry_url(self.registry_url),
                "KAPPA_MLFLOW_URI": absolute_uri(paths.mlflow_uri(self.mlflow_uri))}


@dataclass(frozen=True)
class ExecutorChoice:
    """Which executor runs a sweep's cells: a registered executor's ``name`` and its
    ``options`` (validated against its ``Options`` model). A ``None`` name means "what the
    sweep used last, else local" (see :func:`choose_executor`).

    ``shortcuts`` are options given through a command-line shortcut that belongs to ONE
    executor, keyed by that executor's name (``{"ray_jobs": {"address": URL}}`` from
    ``--ray-address`` / ``RAY_ADDRESS``): used only when that executor is the one chosen,
    never handed to another executor that happens to have an option of the same name
    (a plug-in's ``address`` must not receive the Ray cluster's URL). ``None`` values
    count as not given.
    """

    name: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    shortcuts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def _all_options(self, max_parallel: int | None = None) -> dict[str, Any]:
        name = self.name or "local"
        return {**shortcut_options(name, self.shortcuts), **self.options,
                **executor_options(name, max_parallel=max_parallel)}

    def make(self, max_parallel: int | None = None) -> Executor:
        """Build the executor (a ray_jobs one connects to its cluster here);
        ``max_parallel`` (``--max-parallel``) wins over the options' own."""
        return get_executor(self.name or "local", **self._all_options(max_parallel))

    def check(self) -> ExecutorChoice:
        """This choice with its options validated and normalised (``shortcuts`` folded
        in); UserInputError for an unknown name or a bad or missing option. Connects to
        nothing."""
        name = self.name or "local"
        valid = validate_options(name, self._all_options())
        return ExecutorChoice(name, valid.model_dump(mode="json", exclude_unset=True))

    def cli_args(self) -> list[str]:
        """The choice's name as ``kappa resume`` options (its options go in :meth:`env`)."""
        return ["--executor", self.name] if self.name else []

    def env(self) -> dict[str, str]:
        """The choice's options (its executor's ``shortcuts`` included) for a
        ``kappa`` process started from here, which reads them as ``-E`` options."""
        options = self._all_options() if self.name else dict(self.options)
        return {OPTIONS_ENV: json.dumps(options)} if options else {}


def remembered_executor(sweep: str, registry: Registry | Stores | None = None) -> ExecutorChoice:
    """The executor ``sweep`` last ran on, as its registry (``registry``, else the
    default one) records it; an empty choice if none was recorded or there is no
    registry yet. A password in its options comes back masked (:mod:`.executor_memory`)."""
    from orchestrator.scheduler.executor_memory import recall

    if not isinstance(registry, Registry):
        try:
            opened = (registry or Stores()).open_registry(create=False)
        except UserInputError:  # no registry yet (or one to upgrade first): nothing known
            return ExecutorChoice()
        with opened:
            return remembered_executor(sweep, opened)
    stored = recall(registry, sweep)
    return ExecutorChoice() if stored is None else ExecutorChoice(stored[0], stored[1])


def choose_executor(sweep: str, choice: ExecutorChoice | None = None,
                    registry: Registry | Stores | None = None) -> ExecutorChoice:
    """``choice`` completed from what ``sweep`` last used (else local): the options the
    sweep last used with the same executor (from ``registry``), overridden by those
    given; checked (UserInputError, e.g. ray_jobs without an address, or a remembered
    password not given again); writes nothing."""
    from orchestrator.scheduler.executor_memory import check_unmasked

    given = choice or ExecutorChoice()
    last = remembered_executor(sweep, registry)
    name = given.name or last.name or "local"
    kept = last.options if last.name == name else {}
    options = {**kept, **shortcut_options(name, given.shortcuts), **given.options}
    check_unmasked(sweep, name, options)
    return ExecutorChoice(name, options).check()


def remember_executor(sweep: str, chosen: ExecutorChoice,
                      registry: Registry | Stores | None = None) -> None:
    """Record ``chosen`` in the sweep's registry for its next scheduler, ``resume`` and
    ``cancel``, on any machine sharing it (passwords masked: :mod:`.executor_memory`)."""
    from orchestrator.scheduler.executor_memory import remember

    if not isinstance(registry, Registry):
        with (registry or Stores()).open_registry() as opened:
            remember_executor(sweep, chosen, opened)
        return
    remember(registry, sweep, chosen.name or "local", chosen.options)


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


def cancel(target: str, stores: Stores = Stores(),
           executor: Executor | None = None,
           options: Mapping[str, Any] | None = None,
           shortcuts: Mapping[str, Mapping[str, Any]] | None = None) -> list[CellRecord]:
    """Cancel sweep ``target`` (or the cell ``target`` names: an id or unique prefix).

    Unfinished cells become ``cancelled`` (one transaction each) and their running jobs
    are stopped here, so a sweep whose scheduler died is stopped too. Each job is
    stopped by the executor its id's prefix names (``executor`` overrides), made with
    the options the sweep remembered for it, those of ``options`` (``-E``) it takes, and
    its own ``shortcuts`` (keyed by executor name, e.g. ``{"ray_jobs": {"address": ...}}``
    from ``--ray-address``; see :class:`ExecutorChoice`). Returns the cells that were
    cancelled.
    """
    with stores.open_registry() as registry:
        cells = _cells_of(registry, target)
        # Every executor is made before any cell changes, so a missing address cancels nothing.
        executors = {} if executor is None else {n: executor for n in job_id_prefixes().values()}
        offered = _Offered(dict(options or {}), dict(shortcuts or {}))
        for cell in cells:
            if cell.state is CellState.RUNNING and cell.job_id:
                _executor_of(cell.job_id, cell.sweep_name, executors, offered, registry)
        cancelled = []
        # Waiting cells first: cancelling a running one frees a slot, and a live scheduler
        # would fill it with a cell this loop had not reached yet.
        for cell in sorted(cells, key=lambda c: c.state is CellState.RUNNING):
            done = _cancel_cell(registry, cell, executors, offered)
            if done is not None:
                cancelled.append(done)
        # Cells waiting for a retry sit in ``failed`` with retries left; stop those too.
        for cell in cells:
            if cell.state is CellState.FAILED and cell.retries_left > 0 and (
                    registry.transition(cell, CellState.FAILED, CellState.PENDING)
                    and registry.transition(cell, CellState.PENDING, CellState.CANCELLED,
                                            last_error="cancelled by user")):
                cancelled.append(cell)
                _note_cancelled(cell)
        _close_undriven(registry, {c.sweep_name for c in cancelled}, stores)
        return cancelled


def _close_undriven(registry: Registry, sweeps: set[str], stores: Stores) -> None:
    """End the MLflow runs of cancelled cells, and the parent run of a sweep left with
    nothing to do, where no scheduler is there to do it (a live one does it itself)."""
    from orchestrator.scheduler.loop import close_sweep_runs
    from orchestrator.scheduler.mlflow_runs import MlflowRunTracker

    undriven = sorted(s for s in sweeps if not is_driven(s, registry))
    if not undriven:
        return
    tracker = MlflowRunTracker(stores.mlflow_uri, background=False)
    for sweep in undriven:
        try:
            close_sweep_runs(registry, registry.get_sweep(sweep), tracker)
        except Exception as exc:  # the cancel stands; the runs wait for the next scheduler
            print(f"kappa: cancelled, but could not end the MLflow runs of {sweep} "
                  f"({str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}); "
                  f"`kappa resume {sweep}` ends them", file=sys.stderr)


def _cancel_cell(registry: Registry, cell: CellRecord, executors: dict[str, Executor],
                 offered: _Offered) -> CellRecord | None:
    """Cancel one unfinished cell, whatever state a live scheduler moves it to meanwhile;
    the cell as it was cancelled, or ``None`` if it had already ended."""
    for _ in range(_CANCEL_TRIES):
        if cell.state in TERMINAL_STATES:
            return None
        if registry.transition(cell, cell.state, CellState.CANCELLED,
                               last_error="cancelled by user"):
            _note_cancelled(cell)
            if cell.state is CellState.RUNNING and cell.job_id:
                executor = _executor_of(cell.job_id, cell.sweep_name, executors, offered, registry)
                job = executor.reattach(cell.job_id)
                if job is not None:
                    job.cancel()
            return cell
        cell = registry.get_cell(cell.sweep_name, cell.cell_id)  # it moved on: look again
    raise RuntimeError(f"cell {cell.cell_id} kept changing state; cancel it again")


def _executor_of(job_id: str, sweep: str, executors: dict[str, Executor],
                 offered: _Offered, registry: Registry) -> Executor:
    """The executor that can stop ``job_id`` (made once, kept in ``executors``)."""
    name = executor_name_for_job(job_id)
    if name not in executors:
        from orchestrator.scheduler.executor_memory import check_unmasked

        last = remembered_executor(sweep, registry)
        options = {**(last.options if last.name == name else {}),
                   **shortcut_options(name, offered.shortcuts),
                   **executor_options(name, **offered.options)}
        check_unmasked(sweep, name, options)
        executors[name] = ExecutorChoice(name, options).make()
    return executors[name]


@dataclass(frozen=True)
class _Offered:
    """What ``kappa cancel`` was given for whichever executors its jobs need: ``-E``
    options (each kept by the executors that have it) and per-executor shortcuts."""

    options: Mapping[str, Any] = field(default_factory=dict)
    shortcuts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def shortcut_options(name: str, shortcuts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The options that executor ``name``'s own shortcuts give (``None`` = not given);
    shortcuts of other executors are none of its business."""
    return {k: v for k, v in shortcuts.get(name, {}).items() if v is not None}


def _note_cancelled(cell: CellRecord) -> None:
    """Let the cell's ``cell.json`` say so (a missing folder is no reason to fail)."""
    from orchestrator.scheduler.cell_file import write_cell_file
    from orchestrator.scheduler.loop import cell_run_dir

    run_dir = cell_run_dir(cell)
    if run_dir.is_dir():
        write_cell_file(run_dir, cell.sweep_name, cell, CellState.CANCELLED.value,
                        cell.mlflow_run_id)


def _cells_of(registry: Registry, target: str) -> list[CellRecord]:
    """The cells ``target`` names: a whole sweep, or one cell of any sweep."""
    if registry.find_sweep(target) is not None:
        return registry.cells(target)
    matches = []
    for sweep in registry.list_sweeps():
        try:
            matches.append(registry.get_cell(sweep.name, target))
        except Exception:  # not in this sweep
            continue
    if len(matches) == 1:
        return matches
    known = ", ".join(s.name for s in registry.list_sweeps()) or "(none)"
    if matches:
        raise UserInputError(f"'{target}' names cells in several sweeps", [Problem(
            "target", "ambiguous cell id", found=target,
            allowed=", ".join(f"{c.sweep_name}/{c.cell_id}" for c in matches),
            fix="give more characters of the cell id")])
    raise UserInputError(f"no sweep or cell '{target}'", [Problem(
        "target", "neither a sweep name nor a cell id", found=target, allowed=known,
        fix="`kappa status` lists sweeps; `kappa status SWEEP` their cells")])


def find_cell(registry: Registry, target: str) -> CellRecord:
    """The one cell ``target`` names (id or unique prefix, in any sweep)."""
    cells = _cells_of(registry, target)
    if len(cells) != 1:
        raise UserInputError(f"'{target}' is a sweep, not a cell", [Problem(
            "cell", "expected a cell id", found=target,
            fix=f"`kappa status {target}` lists its cells")])
    return cells[0]


def is_driven(sweep: str, registry: Registry | None = None) -> bool:
    """Whether a scheduler (on any machine) holds ``sweep``'s lease now: it has not
    expired, and its holder, if on this host, lives."""
    if registry is None:
        with Stores().open_registry(create=False) as opened:
            return is_driven(sweep, opened)
    lease = registry.lease(sweep)
    return lease is not None and not lease.expired and holder_alive(lease) is not False


ProgressCallback = Callable[[Registry, str], None]
__all__ = ["ExecutorChoice", "ProgressCallback", "Stores", "cancel",
           "choose_executor", "find_cell", "is_driven", "remember_executor",
           "remembered_executor", "resume", "scheduler_log", "start_background", "submit"]
