"""Adaptive search: Optuna proposes, kappa runs.

A sweep whose spec has a ``search:`` block (:mod:`orchestrator.spec.search`) has one
Optuna study per axis combination (:func:`study_name`), stored beside the registry
(:mod:`.search_storage`). Each trial is an ordinary cell of the sweep: its settings are
the combination's settings with the trial's values, its labels ``kappa.study`` and
``kappa.trial`` (so its content id, registry row and MLflow child run are its own), and
it is launched, watched, stopped and retried by the ordinary loop (:mod:`.loop`), which
calls :class:`SweepSearch` at two points:

* ``sync`` — every pass, before launching: trials whose cells ended are told (the
  objective from the cell's final metrics, or the best value in its history for
  ``at: best``; a cell a pruner stopped is PRUNED, a failed one FAIL), then new trials
  are asked while the study has fewer than ``parallel`` running and ``trials`` in all;
* ``watch`` — every poll of a running trial: the objective's values logged since the
  last poll are reported to the trial, and if the pruner says so the cell is stopped
  like a stopping rule stops it (``pruned at step N``).

Nothing here is state a restart loses. The studies are the record: a trial is asked once
(a trial whose cell is in the registry is never asked again), a RUNNING trial whose cell
is missing (killed between the ask and the cell's row) gets its cell from its stored
params, and a cell that vanished with its job is relaunched by the loop's recovery.
A study stops asking while one of its cells is cancelled (``kappa cancel``, the GPU-hours
cap): the cancelled trials stay RUNNING (open) in the study and the scheduler does not
wait for them; submitting the spec again requeues their cells, which finish those same
trials, and the study asks the rest of its budget. A study fails (no more trials) when
its finished trials never logged the objective.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.grid import Cell, content_id
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.scheduler.cell_file import write_cell_file
from orchestrator.scheduler.cells import cell_run_dir
from orchestrator.scheduler.stop_rules import pruned
from orchestrator.scheduler.submission import write_run_folder
from orchestrator.spec.search import MAX_TRIALS, SearchSpec, with_values

if TYPE_CHECKING:
    from orchestrator.backends import Backend
    from orchestrator.scheduler.loop import SweepScheduler
    from orchestrator.spec import Spec

LOG = logging.getLogger(__name__)

STUDY_LABEL = "kappa.study"
TRIAL_LABEL = "kappa.trial"
ERROR_ATTR = "kappa.error"


def study_name(sweep: str, axes: dict[str, Any]) -> str:
    """``sweep`` alone, or ``sweep[baseline=grpo,seed=0]`` per axis combination."""
    inner = ",".join(f"{k}={v}" for k, v in axes.items())
    return f"{sweep}[{inner}]" if inner else sweep


def distributions(search: SearchSpec) -> dict[str, Any]:
    """Optuna distributions of the space (the grid sampler's points are categorical)."""
    import optuna.distributions as d

    out: dict[str, Any] = {}
    points = search.grid_points()
    for name, dist in search.space.items():
        if search.sampler == "grid" and dist.categorical is None:
            out[name] = d.CategoricalDistribution(dist.grid_values(points))
        elif dist.categorical is not None:
            out[name] = d.CategoricalDistribution(list(dist.categorical))
        elif dist.integer is not None:
            out[name] = d.IntDistribution(dist.integer[0], dist.integer[1])
        else:
            low, high = dist.bounds
            out[name] = d.FloatDistribution(low, high, log=dist.loguniform is not None)
    return out


def grid_size(search: SearchSpec) -> int:
    """Points in the grid sampler's grid."""
    points = search.grid_points()
    return math.prod(len(d.grid_values(points)) for d in search.space.values())


def trial_budget(search: SearchSpec) -> int:
    """Trials per study (a grid is never asked for more than its points)."""
    return min(search.trials, grid_size(search)) if search.sampler == "grid" else search.trials


def make_sampler(search: SearchSpec, offset: int, study_index: int = 0) -> Any:
    """The spec's sampler; a seeded one is re-seeded past the ``offset`` trials already
    asked, so a resumed study does not replay its first proposals (and each study of a
    sweep draws its own sequence)."""
    import optuna.samplers as s

    seed = None if search.seed is None else (
        search.seed * 100_003 + study_index * 7_919 + offset) % 2**32
    if search.sampler == "tpe":
        # Optuna's default (10 random trials before TPE models anything) would make a
        # small budget a random search; a third of the budget, 2 to 10, keeps TPE's role.
        return s.TPESampler(seed=seed, n_startup_trials=tpe_startup_trials(search))
    if search.sampler == "random":
        return s.RandomSampler(seed=seed)
    if search.sampler == "gp":
        return s.GPSampler(seed=seed)
    if search.sampler == "cmaes":
        return s.CmaEsSampler(seed=seed)
    if search.sampler == "qmc":
        return s.QMCSampler(seed=search.seed, scramble=True)  # its sequence is the record
    class _AskTellGrid(s.GridSampler):
        # Optuna's grid sampler stops ``study.optimize`` once the grid is used up; with
        # ask-and-tell there is no optimize to stop (the budget is capped at the grid).
        def after_trial(self, *args: Any, **kwargs: Any) -> None:
            return None

    points = search.grid_points()
    return _AskTellGrid({n: d.grid_values(points) for n, d in search.space.items()},
                        seed=search.seed)


def tpe_startup_trials(search: SearchSpec) -> int:
    """Random trials before TPE takes over: a third of the budget, 2 to 10."""
    return max(2, min(10, search.trials // 3))


def make_pruner(search: SearchSpec, max_steps: int | None = None) -> Any:
    """The spec's pruner. A trial's resource is its training step (values are reported
    at the steps the backend logs them), so hyperband's ``max_resource`` is the cell's
    ``max_steps`` where the backend says (Optuna's ``auto`` would take the last step of
    the first finished trial: too small if a stopping rule ended it early)."""
    import optuna.pruners as p

    if search.pruner == "median":
        return p.MedianPruner(n_startup_trials=max(2, min(5, search.trials // 4)))
    if search.pruner == "successive_halving":
        return p.SuccessiveHalvingPruner()
    if search.pruner == "hyperband":
        return p.HyperbandPruner(max_resource=max_steps if max_steps else "auto")
    return p.NopPruner()


def study_max_steps(search: SearchSpec, backend: Backend, base: Cell) -> int | None:
    """The most training steps a trial of this study can run: the base settings'
    (:meth:`Backend.max_steps`), or the top of a searched ``max_steps`` range."""
    from orchestrator.errors import UserInputError

    try:
        steps = backend.max_steps(backend.validate(base.settings))
    except UserInputError:
        return None
    for name, dist in search.space.items():
        if name.split(".")[-1] in ("max_steps", "total_training_steps"):
            tops = [v for v in dist.corners() if isinstance(v, int | float)]
            steps = int(max(tops)) if tops else steps
    return steps


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
class SweepSearch:
    """The studies of one sweep and what the loop asks of them (module docstring)."""

    sweep: str
    backend: Backend
    search: SearchSpec
    retries: int
    studies: list[_Study]
    _watched: dict[str, _Watched] = field(default_factory=dict, init=False)
    _more: bool = field(default=True, init=False)

    @classmethod
    def of(cls, registry: Registry, sweep: str, spec_text: str,
           backend: Backend) -> SweepSearch | None:
        """The sweep's search (its studies created or loaded), or ``None`` if it has none."""
        from orchestrator.spec.search import stored_search

        search = stored_search(spec_text)
        if search is None:
            return None
        import optuna

        from orchestrator.grid import expand
        from orchestrator.scheduler.search_storage import open_storage
        from orchestrator.spec.loader import parse_spec

        spec: Spec = parse_spec(spec_text, "<stored spec>")
        storage = open_storage(registry.engine)
        studies = []
        direction = search.objective.direction
        for index, base in enumerate(expand(spec).cells):
            name = study_name(sweep, dict(base.axes))
            study = optuna.create_study(storage=storage, study_name=name,
                                        direction=direction, load_if_exists=True,
                                        pruner=make_pruner(search, study_max_steps(
                                            search, backend, base)))
            study.sampler = make_sampler(search, len(study.get_trials(deepcopy=False)), index)
            studies.append(_Study(index, name, base, study))
        return cls(sweep, backend, search, spec.retries, studies)

    def exhausted(self) -> bool:
        """Whether the last :meth:`sync` found nothing left to ask or to wait for."""
        return not self._more

    # -- asking and telling -----------------------------------------------------------
    def sync(self, registry: Registry) -> None:
        """Tell the trials whose cells ended; ask new ones where there is room."""
        from optuna.trial import TrialState

        cells = registry.cells(self.sweep)
        more = False
        for st in self.studies:
            mine = {c.labels.get(TRIAL_LABEL): c for c in cells
                    if c.labels.get(STUDY_LABEL) == st.name}
            trials = st.study.get_trials(deepcopy=False)
            for trial in trials:
                if trial.state is not TrialState.RUNNING:
                    continue
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
            asked = len(trials)
            while asked < trial_budget(self.search) and running < self.search.parallel:
                trial = st.study.ask(distributions(self.search))
                self._add_cell(registry, st, trial)
                asked += 1
                running += 1
            more = more or running > 0
        self._more = more

    def _tell(self, st: _Study, trial: Any, cell: CellRecord) -> bool:
        """Tell the trial how its cell ended, if it has; whether it is told now."""
        from optuna.trial import TrialState

        if cell.state is CellState.SUCCEEDED:
            if (cell.stop_reason or "").startswith("pruned"):
                st.study.tell(trial.number, state=TrialState.PRUNED)
                return True
            value = self.objective(cell)
            if value is None:
                st.study.tell(trial.number, state=TrialState.FAIL)
                self._maybe_fail_study(st, cell)
                return True
            st.study.tell(trial.number, value)
            return True
        if cell.state is CellState.FAILED and cell.retries_left == 0:
            st.study.tell(trial.number, state=TrialState.FAIL)
            return True
        return False  # running, waiting, retrying, or cancelled (a resubmit reruns it)

    def objective(self, cell: CellRecord) -> float | None:
        """The trial's objective from its cell: the final value, or the best logged."""
        obj = self.search.objective
        history = [v for _, v in self._history(cell) if math.isfinite(v)]
        if obj.at == "best" and history:
            return max(history) if obj.direction == "maximize" else min(history)
        final = (cell.final_metrics or {}).get(obj.metric)
        if isinstance(final, int | float) and math.isfinite(final):
            return float(final)
        return history[-1] if history else None

    def _history(self, cell: CellRecord) -> list[tuple[int, float]]:
        rows = self.backend.read_metrics(cell_run_dir(cell), None).rows
        metric = self.search.objective.metric
        return [(step, values[metric]) for step, values in rows if metric in values]

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
        from orchestrator.errors import UserInputError
        from orchestrator.paths import runs_root

        settings = with_values(st.base.settings, trial.params)
        try:
            validated = self.backend.validate(settings)
        except UserInputError as exc:  # a point the backend rejects: a failed trial
            LOG.warning("study %s trial %d: the backend rejects %s (%s)", st.name,
                        trial.number, trial.params, exc.problems[0].message
                        if exc.problems else exc)
            from optuna.trial import TrialState

            st.study.tell(trial.number, state=TrialState.FAIL)
            return
        labels = {**st.base.labels, STUDY_LABEL: st.name, TRIAL_LABEL: trial.number}
        cell = Cell(st.index * MAX_TRIALS + trial.number,
                    content_id(self.backend.name, validated.model_dump(mode="json"), labels),
                    {**st.base.axes, **trial.params}, labels, settings)
        for record in registry.add_cells(self.sweep, [cell], max_retries=self.retries):
            run_dir = runs_root() / self.sweep / record.cell_id
            write_run_folder(run_dir, record.settings)
            write_cell_file(run_dir, self.sweep, record, CellState.PENDING.value, None)
            registry.update_cell(record, run_dir=str(run_dir))

    # -- intermediate values ----------------------------------------------------------
    def watch(self, scheduler: SweepScheduler, cell: CellRecord, run_dir: Path) -> None:
        """Report the objective's new values to the cell's trial; prune if told to."""
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
                scheduler.stop_cell(cell.cell_id, pruned(step, f"{self.search.pruner} pruner"))
                return

    def _watched_of(self, cell: CellRecord) -> _Watched | None:
        known = self._watched.get(cell.cell_id)
        if known is not None:
            return known
        name, number = cell.labels.get(STUDY_LABEL), cell.labels.get(TRIAL_LABEL)
        st = next((s for s in self.studies if s.name == name), None)
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

    def forget(self, cell_id: str) -> None:
        """The cell's job ended: its next launch reads its metrics afresh."""
        self._watched.pop(cell_id, None)
