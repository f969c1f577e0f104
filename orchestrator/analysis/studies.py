"""A search sweep's studies as read-only summaries, and the results that show them: the
best trial per study (``kappa table``), trial numbers and states on each cell's row
(``kappa export``), Optuna's plots (``kappa report``). Reading creates nothing: without
a ``search:`` block or a studies' storage there are no studies (and Optuna is not
imported)."""

from __future__ import annotations

import contextlib
import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.grid.plan import SweepPlan, stored_plan
from orchestrator.registry import CellRecord, Registry, SweepRecord
from orchestrator.search.hook import (
    ERROR_ATTR,
    STUDY_LABEL,
    TRIAL_LABEL,
    open_storage,
    optuna_storage_url,
)
from orchestrator.search.samplers import trial_budget


@dataclass(frozen=True)
class TrialSummary:
    """One trial: its number, Optuna state, value and params."""

    number: int
    state: str  # COMPLETE, PRUNED, FAIL, RUNNING, WAITING
    value: float | None
    params: dict[str, Any]


@dataclass(frozen=True)
class StudySummary:
    """One study: its trials by state, the best one, and an error that stopped it."""

    name: str
    direction: str
    metric: str
    budget: int
    trials: tuple[TrialSummary, ...]
    error: str | None = None
    study: Any = field(default=None, compare=False, repr=False)  # optuna.Study

    def count(self, state: str) -> int:
        """Trials in ``state``."""
        return sum(t.state == state for t in self.trials)

    @property
    def best(self) -> TrialSummary | None:
        """The best complete trial."""
        done = [t for t in self.trials if t.state == "COMPLETE" and t.value is not None]
        pick = max if self.direction == "maximize" else min
        return pick(done, key=lambda t: t.value if t.value is not None else 0.0, default=None)

    def line(self) -> str:
        """``name: 12/40 trials — 9 done · 2 pruned · 1 running — best 0.8123 (#7)``."""
        parts = [f"{n} {word}" for n, word in (
            (self.count("COMPLETE"), "done"), (self.count("PRUNED"), "pruned"),
            (self.count("FAIL"), "failed"), (self.count("RUNNING"), "running")) if n]
        best = self.best
        shown = f"best {best.value:.4g} (#{best.number})" if best and best.value is not None \
            else "no result yet"
        text = (f"{self.name}: {len(self.trials)}/{self.budget} trials — "
                f"{' · '.join(parts) or 'none yet'} — {shown}")
        return text + (f" — FAILED: {self.error}" if self.error else "")


def storage_exists(registry: Registry) -> bool:
    """Whether the studies' storage exists (never true for a SQLite file not yet made)."""
    if registry.engine.url.get_backend_name() != "sqlite":
        return True
    try:
        sibling = optuna_storage_url(registry.engine)[0].removeprefix("sqlite:///")
    except ValueError:
        return False
    return Path(sibling).exists()


def study_summaries(registry: Registry, sweep: SweepRecord,
                    plan: SweepPlan | None = None) -> list[StudySummary]:
    """The sweep's studies (empty for a sweep that is not a search); ``plan``: its stored
    plan, if read already."""
    search = (plan or stored_plan(sweep.name, sweep.plan)).search
    if search is None or not storage_exists(registry):
        return []
    import optuna

    storage = open_storage(registry.engine)
    # Studies in grid order where the cells say it (a study's trials carry its name).
    order = {c.labels.get(STUDY_LABEL): c.index for c in registry.cells(sweep.name)}
    mine = sorted((n for n in optuna.study.get_all_study_names(storage)
                   if n == sweep.name or n.startswith(f"{sweep.name}[")),
                  key=lambda n: (order.get(n, 1 << 60), n))
    out = []
    for name in mine:
        study = optuna.load_study(study_name=name, storage=storage)
        trials = tuple(TrialSummary(t.number, t.state.name, t.value, dict(t.params))
                       for t in study.get_trials(deepcopy=False))
        error = study.user_attrs.get(ERROR_ATTR)
        out.append(StudySummary(name, search.objective.direction, search.objective.metric,
                                trial_budget(search), trials,
                                str(error) if error else None, study))
    return out


def trials_left(studies: Sequence[StudySummary], planned: int,
                cancelled: Iterable[CellRecord]) -> bool:
    """Whether a search has trials left to ask or to tell, whoever drives it: fewer than
    its ``planned`` studies exist yet, or a study has a running trial whose cell is not
    cancelled, or has fewer trials than its budget and was stopped neither by an error
    nor by a cancelled cell (``cancelled``: the sweep's cancelled cells). What keeps a
    scheduler's :class:`~orchestrator.search.hook.SearchHook` busy, read from the record."""
    if len(studies) < planned:
        return True
    gone = {(c.labels.get(STUDY_LABEL), c.labels.get(TRIAL_LABEL)) for c in cancelled}
    stopped = {study for study, _ in gone}
    return any(any(t.state == "RUNNING" and (s.name, t.number) not in gone for t in s.trials)
               or (not s.error and s.name not in stopped and len(s.trials) < s.budget)
               for s in studies)


def sweep_studies(sweep: str, registry_url: str | None = None) -> list[StudySummary]:
    """The studies of ``sweep`` (empty when it is not a search or the registry lacks it)."""
    if (registry := Registry.existing(paths.registry_url(registry_url))) is None:
        return []
    with registry:
        record = registry.find_sweep(sweep)
        return [] if record is None else study_summaries(registry, record)


def best_trials(studies: list[StudySummary], fmt: str) -> str:
    """One row per study in ``fmt`` (markdown, csv, latex or html): its best trial's
    number, value and searched settings, and how many trials ended each way."""
    import pandas as pd

    from orchestrator.analysis.tables.render import frame_table  # numpy: not for `status`

    rows = []
    for study in studies:
        best = study.best
        rows.append({"study": study.name, "best trial": None if best is None else best.number,
                     study.metric: None if best is None else best.value,
                     **({} if best is None else best.params),
                     "done": study.count("COMPLETE"), "pruned": study.count("PRUNED"),
                     "failed": study.count("FAIL")})
    return frame_table(pd.DataFrame(rows), fmt, _md)


def _md(_column: str, value: Any) -> str:
    if isinstance(value, float):
        return "" if value != value else f"{value:.4g}"
    return "" if value is None else str(value)


def with_trials(frame: Any, sweeps: Sequence[str], registry_url: str | None = None) -> Any:
    """``frame`` (one row per cell) with ``study``, ``trial.number`` and ``trial.state``
    when its ``sweeps`` are one search."""
    studies = sweep_studies(sweeps[0], registry_url) if len(sweeps) == 1 else []
    if not studies or "cell_id" not in frame.columns:
        return frame
    states: dict[tuple[Any, Any], str] = {(s.name, t.number): t.state
                                          for s in studies for t in s.trials}
    with Registry.open(paths.registry_url(registry_url), create=False) as reg:
        labels = {c.cell_id: c.labels for c in reg.cells(sweeps[0])}
    study = [labels.get(c, {}).get(STUDY_LABEL) for c in frame["cell_id"]]
    number = [labels.get(c, {}).get(TRIAL_LABEL) for c in frame["cell_id"]]
    return frame.assign(**{"study": study, "trial.number": number, "trial.state": [
        states.get((s, n)) for s, n in zip(study, number, strict=True)]})


def search_section(studies: list[StudySummary]) -> str:
    """The report's search section: each study's line, then per study Optuna's optimization
    history, parameter importances (with two or more complete trials and params) and slice
    plot as inline SVG, drawn by Optuna's matplotlib backend (static, so a search's report
    stays small and offline)."""
    if not studies:
        return ""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import optuna.visualization.matplotlib as vis

    from orchestrator.analysis.plots import figure_svg

    parts = [f"<p>{html.escape(s.line())}</p>" for s in studies]

    def draw(title: str, plot: Any, study: Any) -> None:
        with warnings.catch_warnings():  # Optuna marks its matplotlib plots experimental
            warnings.simplefilter("ignore")
            axes = plot(study)
        first = axes.flat[0] if hasattr(axes, "flat") else axes
        parts.extend([f"<h3>{html.escape(title)}</h3>", figure_svg(first.figure)])

    for study in studies:
        if study.study is None or not study.count("COMPLETE"):
            continue
        draw(f"{study.name}: optimization history", vis.plot_optimization_history, study.study)
        if study.count("COMPLETE") >= 2 and study.best and len(study.best.params) >= 1:
            with contextlib.suppress(RuntimeError, ValueError):  # too few points to judge
                draw(f"{study.name}: parameter importances", vis.plot_param_importances,
                     study.study)
        draw(f"{study.name}: slice plot", vis.plot_slice, study.study)
    return "\n".join(parts)
