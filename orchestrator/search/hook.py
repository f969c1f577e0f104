"""Adaptive search: Optuna proposes, kappa runs (docs/search.md).

A ``search:`` sweep has one Optuna study per axis combination (:func:`study_name`), stored beside
the registry, never in its tables (both stamp a table ``alembic_version``): SQLite, a sibling file
``registry.optuna.db``; PostgreSQL, schema ``kappa_optuna`` of the same database
(:func:`open_storage`). Each trial is an ordinary cell (labels ``kappa.study``, ``kappa.trial``);
:class:`SearchHook` tells ended trials and asks new ones every pass, reports the objective and
prunes every poll. The studies are the record, so a restart loses nothing; a study with a
cancelled cell asks no more until a resubmit requeues it."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import UserInputError
from orchestrator.grid.identity import Cell, content_id
from orchestrator.grid.plan import SweepPlan
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.runs.layout import run_folder
from orchestrator.scheduler.hooks import Ending, LoopControl, SchedulerHook
from orchestrator.search.samplers import distributions, make_pruner, make_sampler, trial_budget
from orchestrator.spec.search_block import MAX_TRIALS, SearchSpec, with_values
from orchestrator.stopping.rules import pruned

if TYPE_CHECKING:
    from orchestrator.backends import Backend
    from orchestrator.executors.base import JobHandle

LOG = logging.getLogger(__name__)

STUDY_LABEL = "kappa.study"
TRIAL_LABEL = "kappa.trial"
OPTUNA_SCHEMA = "kappa_optuna"
#: A study's user attribute holding the error that stopped it (shown by status and tables).
ERROR_ATTR = "kappa.error"


def study_name(sweep: str, axes: dict[str, Any]) -> str:
    """``sweep`` alone, or ``sweep[baseline=grpo,seed=0]`` per axis combination."""
    inner = ",".join(f"{k}={v}" for k, v in axes.items())
    return f"{sweep}[{inner}]" if inner else sweep


def optuna_storage_url(registry_engine: Any) -> tuple[str, dict[str, Any]]:
    """``(url, engine_kwargs)`` of the studies' storage for a registry's engine."""
    url = registry_engine.url
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if not database or database == ":memory:":
            raise ValueError("an adaptive search needs a registry stored in a file or server")
        path = Path(database)
        sibling = path.with_name(f"{path.stem}.optuna{path.suffix or '.db'}")
        return f"sqlite:///{sibling}", {"connect_args": {"timeout": 60}}
    if url.get_backend_name() == "postgresql":
        from sqlalchemy import text

        with registry_engine.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {OPTUNA_SCHEMA}"))
        rendered = url.render_as_string(hide_password=False)
        return rendered, {"connect_args": {"options": f"-csearch_path={OPTUNA_SCHEMA}"}}
    raise ValueError(f"no Optuna storage for a {url.get_backend_name()} registry")


def open_storage(registry_engine: Any) -> Any:
    """The ``optuna.storages.RDBStorage`` of a registry (created on first use), opened by
    one process at a time: two creating its tables at once collide."""
    import optuna

    from orchestrator.registry.sweeps import sweep_record_lock

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with sweep_record_lock(registry_engine, OPTUNA_SCHEMA):
        url, kwargs = optuna_storage_url(registry_engine)
        return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)


@dataclass
class _Study:
    index: int
    name: str
    base: Cell
    study: Any  # optuna.Study


@dataclass
class _Watched:
    trial: Any  # optuna.trial.Trial
    reported: set[int]
    cursor: Any = None


@dataclass
class SearchHook(SchedulerHook):
    """The sweep's search as a hook of the loop. Its studies are created or loaded on the
    first pass, under the scheduler's lease (so a resumed study's sampler is seeded past
    the trials asked by then)."""

    sweep: str
    plan: SweepPlan
    backend: Backend
    #: Records new cells as a submit does (the sweep's handle's ``record_cells``).
    record_cells: Callable[[Registry, Sequence[Cell], Mapping[str, Any], int],
                           list[CellRecord]]
    studies: list[_Study] | None = field(default=None, init=False)
    _watched: dict[str, _Watched] = field(default_factory=dict, init=False)
    _more: bool = field(default=True, init=False)

    @property
    def search(self) -> SearchSpec:
        """The spec's ``search:`` block, from the sweep's plan."""
        assert self.plan.search is not None
        return self.plan.search

    def _load(self, registry: Registry) -> list[_Study]:
        """The studies, created or loaded, one per starting cell of the plan."""
        import optuna

        storage = open_storage(registry.engine)
        studies = []
        for index, start in enumerate(self.plan.studies):
            base = start.cell()
            name = study_name(self.sweep, dict(base.axes))
            study = optuna.create_study(
                storage=storage, study_name=name, direction=self.search.objective.direction,
                load_if_exists=True, pruner=make_pruner(self.search, start.max_steps))
            study.sampler = make_sampler(self.search, len(study.get_trials(deepcopy=False)),
                                         index)
            studies.append(_Study(index, name, base, study))
        return studies

    # -- asking and telling -----------------------------------------------------------
    def on_pass(self, registry: Registry) -> None:
        """Tell the trials whose cells ended (a pruned cell is PRUNED, a failed one FAIL);
        ask new ones while a study has fewer than ``parallel`` running and ``trials`` in all."""
        from optuna.trial import TrialState

        if self.studies is None:
            self.studies = self._load(registry)
        cells = registry.cells(self.sweep)
        more = False
        for st in self.studies:
            mine = {c.labels.get(TRIAL_LABEL): c for c in cells
                    if c.labels.get(STUDY_LABEL) == st.name}
            for trial in st.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                cell = mine.get(trial.number)
                if cell is None:  # asked, then killed before its cell was recorded
                    self._add_cell(registry, st, trial)
                    more = True
                elif cell.state is CellState.CANCELLED:
                    continue  # open until a resubmit requeues its cell: nothing to wait for
                elif not self._tell(st, trial, cell):
                    more = True
            if st.study.user_attrs.get(ERROR_ATTR) or any(
                    c.state is CellState.CANCELLED for c in mine.values()):
                continue
            trials = st.study.get_trials(deepcopy=False)
            running = sum(t.state is TrialState.RUNNING for t in trials)
            new = max(0, min(trial_budget(self.search) - len(trials),
                             self.search.parallel - running))
            for _ in range(new):
                self._add_cell(registry, st, st.study.ask(distributions(self.search)))
            more = more or running + new > 0
        self._more = more

    def _tell(self, st: _Study, trial: Any, cell: CellRecord) -> bool:
        """Tell the trial how its cell ended, if it has; whether it is told now."""
        from optuna.trial import TrialState

        if cell.state is CellState.SUCCEEDED:
            if (cell.stop_reason or "").startswith("pruned"):
                st.study.tell(trial.number, state=TrialState.PRUNED)
            elif (value := self._objective(cell)) is not None:
                st.study.tell(trial.number, value)
            else:
                st.study.tell(trial.number, state=TrialState.FAIL)
                self._maybe_fail_study(st, cell)
            return True
        if cell.state is CellState.FAILED and cell.retries_left == 0:
            st.study.tell(trial.number, state=TrialState.FAIL)
            return True
        return False  # running, waiting, retrying, or cancelled (a resubmit reruns it)

    def _objective(self, cell: CellRecord) -> float | None:
        """The trial's objective from its cell: the final value, or the best logged."""
        obj = self.search.objective
        rows = self.backend.read_metrics(run_folder(cell), None).rows
        history = [v[obj.metric] for _, v in rows
                   if obj.metric in v and math.isfinite(v[obj.metric])]
        if obj.at == "best" and history:
            return max(history) if obj.direction == "maximize" else min(history)
        final = (cell.final_metrics or {}).get(obj.metric)
        if isinstance(final, int | float) and math.isfinite(final):
            return float(final)
        return history[-1] if history else None

    def _maybe_fail_study(self, st: _Study, cell: CellRecord) -> None:
        from optuna.trial import TrialState

        if st.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            return  # others logged it: this one run lost it
        logged = sorted((cell.final_metrics or {}).keys())
        message = (f"study {st.name}: its first finished trial (cell {cell.cell_id}) never "
                   f"logged the objective metric {self.search.objective.metric!r}; it logs: "
                   f"{', '.join(logged[:12]) or '(nothing)'}. Fix search.objective.metric "
                   f"and run `kappa search` again.")
        st.study.set_user_attr(ERROR_ATTR, message)
        LOG.error("%s", message)

    def _add_cell(self, registry: Registry, st: _Study, trial: Any) -> None:
        """Record the trial's cell (pending) with its folder, as a submit records cells."""
        settings = with_values(st.base.settings, trial.params)
        try:  # a trial's settings are new: validated and preflighted once, here
            validated = self.backend.validate(settings)
            self.backend.preflight({"": validated})
        except UserInputError as exc:  # a point the backend rejects: a failed trial
            LOG.warning("study %s trial %d: the backend rejects %s (%s)", st.name,
                        trial.number, trial.params, exc.problems[0].message
                        if exc.problems else exc)
            from optuna.trial import TrialState

            st.study.tell(trial.number, state=TrialState.FAIL)
            return
        labels = {**st.base.labels, STUDY_LABEL: st.name, TRIAL_LABEL: trial.number}
        resolved = validated.model_dump(mode="json")  # stored as its id hashes it
        cell = Cell(st.index * MAX_TRIALS + trial.number,
                    content_id(self.backend.name, resolved, labels),
                    {**st.base.axes, **trial.params}, labels, resolved)
        # What the scheduler needs of the trial, judged now from its validated settings
        # and stored with its cell: the loop validates nothing.
        demand = self.backend.demand(validated).to_json()
        self.record_cells(registry, [cell], {cell.cell_id: demand}, self.plan.retries)

    # -- intermediate values ----------------------------------------------------------
    def on_poll(self, loop: LoopControl, cell: CellRecord, run_dir: Path,
                job: JobHandle) -> None:
        """Report the objective's values logged since the last poll to the cell's trial;
        stop the cell (``pruned at step N``) through the loop if its pruner says so."""
        watched = self._watched_of(cell)
        if watched is None:
            return
        read = self.backend.read_metrics(run_dir, watched.cursor)
        watched.cursor = read.cursor
        metric = self.search.objective.metric
        for step, values in read.rows:
            value = values.get(metric)
            if value is None or not math.isfinite(value) or step in watched.reported:
                continue
            watched.trial.report(value, step)
            watched.reported.add(step)
            # Asked at every step, as in Optuna's own loop, however many steps one poll
            # brings: the halving pruners keep the value at the step a trial passed a
            # rung, and must compare trials at the same step, not at their poll's last.
            if self.search.pruner != "none" and watched.trial.should_prune():
                loop.stop_cell(cell.cell_id, pruned(step, f"{self.search.pruner} pruner"))
                return

    def _watched_of(self, cell: CellRecord) -> _Watched | None:
        if cell.cell_id in self._watched:
            return self._watched[cell.cell_id]
        name, number = cell.labels.get(STUDY_LABEL), cell.labels.get(TRIAL_LABEL)
        st = next((s for s in self.studies or () if s.name == name), None)
        if st is None or not isinstance(number, int):
            return None
        import optuna
        from optuna.trial import TrialState

        frozen = next((t for t in st.study.get_trials(deepcopy=False)
                       if t.number == number), None)
        if frozen is None or frozen.state is not TrialState.RUNNING:
            return None
        trial = optuna.trial.Trial(st.study, frozen._trial_id)
        watched = _Watched(trial, set(frozen.intermediate_values))
        self._watched[cell.cell_id] = watched
        return watched

    def on_exit(self, cell_id: str, run_dir: Path, code: int,
                summary: Mapping[str, Any] | None) -> Ending | None:
        """The trial's job ended: its next launch reads its metrics afresh."""
        self._watched.pop(cell_id, None)
        return None

    def busy(self) -> bool:
        """Trials are left to ask, or to wait for (as the last pass found)."""
        return self.studies is not None and self._more
