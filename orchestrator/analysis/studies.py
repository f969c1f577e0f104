"""A search sweep's studies as read-only summaries (for status, table, export, report).
Reading creates nothing: without a ``search:`` block or a studies' storage there are no
studies (and Optuna is not imported)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.registry import Registry, SweepRecord

if TYPE_CHECKING:
    from orchestrator.grid.plan import SweepPlan


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
        if not done:
            return None
        pick = max if self.direction == "maximize" else min
        return pick(done, key=lambda t: t.value if t.value is not None else 0.0)

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
    url = registry.engine.url
    if url.get_backend_name() != "sqlite":
        return True
    from orchestrator.search.hook import optuna_storage_url

    try:
        sibling = optuna_storage_url(registry.engine)[0].removeprefix("sqlite:///")
    except ValueError:
        return False
    return Path(sibling).exists()


def study_summaries(registry: Registry, sweep: SweepRecord,
                    plan: SweepPlan | None = None) -> list[StudySummary]:
    """The sweep's studies (empty for a sweep that is not a search); ``plan``: its stored
    plan, if read already."""
    from orchestrator.grid.plan import stored_plan

    search = (plan or stored_plan(sweep.name, sweep.plan)).search
    if search is None or not storage_exists(registry):
        return []
    import optuna

    from orchestrator.search.hook import ERROR_ATTR, open_storage
    from orchestrator.search.samplers import trial_budget

    storage = open_storage(registry.engine)
    names = set(optuna.study.get_all_study_names(storage))
    mine = sorted(n for n in names if n == sweep.name or n.startswith(f"{sweep.name}["))
    # Studies in grid order where the cells say it (a study's trials carry its name).
    order = {c.labels.get("kappa.study"): c.index for c in registry.cells(sweep.name)}
    mine.sort(key=lambda n: (order.get(n, 1 << 60), n))
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
